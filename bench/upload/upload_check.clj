;; A 1 GiB upload to a blocking handler that streams its :body to a temp file, in a JVM whose
;; heap is capped (run by bench/upload.sh with -Xmx128m): if donkey buffered the body it would
;; run out of memory. Prints the heap in use, sampled every 20 ms, before and during the upload.
(require '[donkey.server :as server]
         '[clojure.java.io :as io])
(import '(java.net URI)
        '(java.net.http HttpClient HttpClient$Version HttpRequest HttpRequest$BodyPublishers
                        HttpResponse$BodyHandlers)
        '(java.io InputStream File)
        '(java.lang.management ManagementFactory))

(def total (* 1024 1024 1024))
(def mem (ManagementFactory/getMemoryMXBean))
(defn heap-used [] (.getUsed (.getHeapMemoryUsage mem)))
(def peak (atom 0))
(def sampler (doto (Thread. (fn [] (while true (swap! peak max (heap-used)) (Thread/sleep 20))))
               (.setDaemon true)))

(defn handler [req]
  (let [f (File/createTempFile "donkey-upload" ".bin")]
    (try
      (with-open [out (io/output-stream f)]
        (io/copy (:body req) out :buffer-size 65536))
      {:status 200 :body (str (.length f))}
      (finally (.delete f)))))

(let [s (server/run-server handler {:port 0 :join? false :max-body-size (* 2 total)})
      counter (java.util.concurrent.atomic.AtomicLong.)
      limited (proxy [InputStream] []
                (read
                  ([] (throw (UnsupportedOperationException.)))
                  ([^bytes b] (.read ^InputStream this b 0 (alength b)))
                  ([^bytes b off len]
                   (let [left (- total (.get counter))]
                     (if (<= left 0) -1
                         (let [n (int (min left len))]
                           (.addAndGet counter n)
                           n))))))
      client (-> (HttpClient/newBuilder) (.version HttpClient$Version/HTTP_1_1) (.build))]
  (System/gc)
  (Thread/sleep 200)
  (let [before (heap-used)]
    (.start sampler)
    (let [t0 (System/nanoTime)
          resp (.send client (-> (HttpRequest/newBuilder (URI/create (str "http://127.0.0.1:" (server/port s) "/up")))
                                 (.POST (HttpRequest$BodyPublishers/ofInputStream (reify java.util.function.Supplier (get [_] limited))))
                                 (.build))
                      (HttpResponse$BodyHandlers/ofString))
          secs (/ (- (System/nanoTime) t0) 1e9)]
      (println (format "upload: status %d, server wrote %s bytes of %d in %.1f s (%.0f MiB/s)"
                       (.statusCode resp) (.body resp) total secs (/ total secs 1048576.0)))
      (println (format "heap: max %d MiB (-Xmx), in use before %.1f MiB, peak during %.1f MiB"
                       (quot (.maxMemory (Runtime/getRuntime)) 1048576)
                       (/ before 1048576.0) (/ @peak 1048576.0)))
      (server/stop s)
      (shutdown-agents)
      (System/exit (if (and (= 200 (.statusCode resp)) (= (str total) (.body resp))) 0 1)))))
