(ns donkey.bench.ws-app
  "The WebSocket app bench/websocket.sh measures, against donkey.bench.RawVertxWebSocket (the
  same endpoints on Vert.x's own WebSocket server), in two variants:

    nb    a route table whose `:handler-mode :non-blocking` handlers answer the upgrade: the
          listener runs on the event loop
    sync  a plain sync Ring handler through `run-server`: the listener runs on the worker
          pool, one callback at a time per socket

  Endpoints (map listeners, Ring 1.11's API through donkey.websocket):
    /echo       every text message is sent back
    /broadcast  a text message starting with `broadcast` is sent to every socket open on this
                endpoint, the sender included
    /idle       a socket that does nothing
    /plaintext  `Hello, World!`, for the bench scripts' readiness check

  Every variant runs with `:event-loops 1`, and with `:max-connections` raised past the
  10,000 sockets the broadcast and memory runs open.

  Usage: java -cp ... clojure.main -m donkey.bench.ws-app nb|sync PORT"
  (:require [donkey.server :as server]
            [donkey.websocket :as ws])
  (:import (java.util Set)
           (java.util.concurrent ConcurrentHashMap)))

(set! *warn-on-reflection* true)

(def ^:private echo-listener
  {:on-message (fn [socket message] (ws/send socket message))})

(def ^:private ^Set broadcast-sockets (ConcurrentHashMap/newKeySet))

(def ^:private broadcast-listener
  {:on-open (fn [socket] (.add broadcast-sockets socket))
   :on-close (fn [socket _code _reason] (.remove broadcast-sockets socket))
   :on-message (fn [_socket message]
                 (when (.startsWith (str message) "broadcast")
                   ;; never waits: a socket over its send bound drops the message
                   (doseq [s broadcast-sockets] (ws/send s message nil nil))))})

(def ^:private idle-listener {})

(def ^:private plaintext {:status 200 :headers {"Content-Type" "text/plain"} :body "Hello, World!"})

(def ^:private not-found {:status 404 :headers {"Content-Type" "text/plain"} :body "Not Found"})

(defn- answer
  "The response to `request`: a listener for the WebSocket paths, else plaintext or 404."
  [request]
  (case (:uri request)
    "/echo" {:ring.websocket/listener echo-listener}
    "/broadcast" {:ring.websocket/listener broadcast-listener}
    "/idle" {:ring.websocket/listener idle-listener}
    "/plaintext" plaintext
    not-found))

(defn- route-table []
  {:routes (vec (for [path ["/echo" "/broadcast" "/idle" "/plaintext"]]
                  {:path path :methods [:get] :handler-mode :non-blocking
                   :handler (fn [request respond _raise] (respond (answer request)))}))})

(def ^:private opts {:host "127.0.0.1" :event-loops 1 :join? true :max-connections 25000})

(defn -main [& [variant port]]
  (let [port (some-> port Integer/parseInt)
        handler (case variant "nb" (route-table) "sync" answer nil)]
    (when-not (and handler port)
      (binding [*out* *err*] (println "usage: donkey.bench.ws-app nb|sync PORT"))
      (System/exit 2))
    (println (str "bench ws-app " variant " on 127.0.0.1:" port " (Java "
                  (System/getProperty "java.version") ", Clojure " (clojure-version) ")"))
    (server/run-server handler (assoc opts :port port))))
