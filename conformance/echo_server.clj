;; The testee of conformance/websocket.sh: a donkey WebSocket echo server for Autobahn's
;; fuzzing client. Usage: clojure.main conformance/echo_server.clj PORT sync|async
;;
;; Every text or binary message comes back as it was received, which is what the fuzzing
;; client's cases check. Pings, pongs and the close handshake are left to the kernel, so
;; those cases test donkey itself, not this script.
(ns donkey.conformance.echo-server
  (:require [donkey.server :as server]
            [donkey.websocket :as ws])
  (:import (donkey.kernel Server)))

(set! *warn-on-reflection* true)

(def ^:private mib (* 1024 1024))

(def ^:private listener
  {:on-message (fn [socket message] (ws/send socket message))})

(defn- not-websocket [_]
  {:status 426 :headers {"upgrade" "websocket" "content-type" "text/plain"}
   :body "a WebSocket echo server: connect with Upgrade: websocket\n"})

(defn- sync-handler [request]
  (if (ws/upgrade-request? request)
    {:ring.websocket/listener listener}
    (not-websocket request)))

(defn- async-handler [request respond _raise]
  (respond (sync-handler request)))

(defn -main [port mode]
  (let [async? (case mode "sync" false "async" true)
        srv (server/run-server
             (if async? async-handler sync-handler)
             {:host "127.0.0.1"
              :port (Integer/parseInt port)
              :async? async?
              ;; Autobahn's 9.x cases send messages and frames of up to 16 MiB, which the
              ;; defaults refuse with 1009.
              :ws-max-frame-size (* 16 mib)
              :ws-max-text-size (* 16 mib)
              :ws-max-binary-size (* 16 mib)
              ;; An async listener's two-argument send runs on the event loop, where it throws
              ;; rather than wait once the queue is over its bound; 9.x echoes several 16 MiB
              ;; messages back to back, so the bound leaves room for a few of them.
              :ws-max-queued-bytes (* 128 mib)
              ;; the 12.x and 13.x cases test permessage-deflate
              :ws-compression? true
              ;; returns once bound, so the line below can tell websocket.sh it may start
              :join? false})]
    ;; websocket.sh waits for this line before it starts the fuzzing client
    (println (str "echo server (" mode ") listening on ws://127.0.0.1:" (server/port srv) "/"))
    (flush)
    (.await ^Server srv)))

(apply -main *command-line-args*)
