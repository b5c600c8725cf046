;; The testee of conformance/h2spec.sh: a donkey server with HTTP/2 on both listeners, cleartext
;; h2c on the plain one and h2 (ALPN) on the TLS one, for h2spec.
;; Usage: clojure.main conformance/h2_server.clj sync|async CERT.pem KEY.pem
;;
;; GET (and HEAD) answers a short text; a request with a body gets its body back. h2spec's
;; flow-control cases need a response with a body and its DATA-frame cases send one, so both
;; go through the handler; everything else h2spec checks (frames, streams, HPACK, SETTINGS) is
;; the server's, not this script's.
(ns donkey.conformance.h2-server
  (:require [donkey.server :as server])
  (:import (donkey.kernel Server)
           (java.io InputStream)))

(set! *warn-on-reflection* true)

(def ^:private text-plain {"content-type" "text/plain"})

(defn- sync-handler [request]
  (let [^InputStream body (:body request)
        bytes (when body (.readAllBytes body))]
    (if (and bytes (pos? (alength ^bytes bytes)))
      {:status 200 :headers {"content-type" "application/octet-stream"} :body bytes}
      {:status 200 :headers text-plain :body "Hello, World! This is donkey over HTTP/2.\n"})))

(defn- async-handler [request respond raise]
  (try
    (respond (sync-handler request))
    (catch Throwable t (raise t))))

(defn -main [mode cert key]
  (let [async? (case mode "sync" false "async" true)
        srv (server/run-server
             (if async? async-handler sync-handler)
             {:host "127.0.0.1"
              :port 0
              :ssl-port 0
              :ssl-cert cert
              :ssl-key key
              :h2? true
              :h2c? true
              :async? async?
              ;; returns once bound, so the line below can tell h2spec.sh it may start
              :join? false})]
    ;; h2spec.sh waits for this line before it starts h2spec
    (println (str "h2 server (" mode ") listening on h2c port " (server/port srv)
                  " and h2 port " (server/ssl-port srv)))
    (flush)
    (.await ^Server srv)))

(apply -main *command-line-args*)
