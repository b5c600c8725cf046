(ns ring.websocket
  "Test-only stand-in for the user-facing functions of ring-core 1.11+'s `ring.websocket`,
  written over the SPEC's protocols (see ring/websocket/protocols.clj here): what a Ring
  application calls on the socket it is given. Not part of donkey's jar."
  (:refer-clojure :exclude [send])
  (:require [ring.websocket.protocols :as p])
  (:import (java.nio ByteBuffer)))

(defn- message [m]
  (cond (instance? CharSequence m) m
        (instance? ByteBuffer m) m
        (bytes? m) (ByteBuffer/wrap ^bytes m)
        :else (throw (IllegalArgumentException. (str "not a WebSocket message: " (type m))))))

(defn open? [socket] (boolean (p/-open? socket)))

(defn send
  ([socket m] (p/-send socket (message m)))
  ([socket m succeed fail] (p/-send-async socket (message m) succeed fail)))

(defn ping
  ([socket] (p/-ping socket (ByteBuffer/allocate 0)))
  ([socket data] (p/-ping socket (message data))))

(defn pong
  ([socket] (p/-pong socket (ByteBuffer/allocate 0)))
  ([socket data] (p/-pong socket (message data))))

(defn close
  ([socket] (p/-close socket 1000 "Normal Closure"))
  ([socket code reason] (p/-close socket code reason)))
