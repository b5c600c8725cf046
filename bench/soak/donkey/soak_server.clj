(ns donkey.soak-server
  "The server `make soak` drives (bench/soak.sh): one sync Ring handler mixing the kinds of
  work a production service sees, so a leak or a lost request in any path shows up:

    GET  /small   13-byte text, a fixed body written from the event loop
    GET  /large   1 MiB InputStream, streamed from a worker with flow control
    GET  /fail    the handler throws: 500, logged by the kernel
    POST /upload  the body is read as it arrives and its length answered

  Prints `soak-server listening on PORT pid PID` once bound; stops on SIGTERM (shutdown hook)."
  (:require [donkey.server :as server])
  (:import (java.io ByteArrayInputStream InputStream)
           (java.lang ProcessHandle)))

(set! *warn-on-reflection* true)

(def ^:private ^bytes large-body
  (let [b (byte-array (* 1024 1024))]
    (dotimes [i (alength b)] (aset b i (unchecked-byte (+ 97 (mod i 26)))))
    b))

(defn- drain
  "Reads `in` to its end; returns the number of bytes read."
  ^long [^InputStream in]
  (if (nil? in)
    0
    (let [buf (byte-array 65536)]
      (loop [n 0]
        (let [r (.read in buf)]
          (if (neg? r) n (recur (+ n r))))))))

(defn handler [req]
  (case (:uri req)
    "/small" {:status 200 :headers {"content-type" "text/plain"} :body "Hello, World!"}
    "/large" {:status 200 :headers {"content-type" "application/octet-stream"}
              :body (ByteArrayInputStream. large-body)}
    "/fail" (throw (ex-info "soak: a deliberate failure" {:uri (:uri req)}))
    "/upload" {:status 200 :headers {"content-type" "text/plain"}
               :body (str (drain (:body req)))}
    {:status 404 :headers {"content-type" "text/plain"} :body "not found"}))

(defn- env-long [name default]
  (if-let [v (System/getenv name)] (Long/parseLong v) default))

(defn -main [& _]
  (let [s (server/run-server handler {:host "127.0.0.1"
                                      :port (env-long "SOAK_PORT" 0)
                                      :join? false
                                      :shutdown-hook? true
                                      :shutdown-timeout 10000})]
    (println "soak-server listening on" (server/port s) "pid" (.pid (ProcessHandle/current)))
    (flush)
    @(promise)))
