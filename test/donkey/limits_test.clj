(ns donkey.limits-test
  "Connection limits, slow clients, the blocked-loop warning and the SIGTERM shutdown hook."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.test-util :as u :refer [with-server GET raw]])
  (:import (java.io InputStream)
           (java.net Socket SocketException SocketTimeoutException)
           (java.nio.charset StandardCharsets)
           (java.util.logging Handler Level Logger LogRecord)))

(defn- ok [req] {:status 200 :body (str "ok " (:uri req))})

(defn- closed-by-server?
  "True when the server closes `s` (read returns -1 or the connection is reset) within `ms`."
  [^Socket s ms]
  (.setSoTimeout s (int ms))
  (try (= -1 (.read (.getInputStream s)))
       (catch SocketTimeoutException _ false)
       (catch SocketException _ true)))

(deftest max-connections-refuses-the-excess
  (with-server ok {:max-connections 3}
    (let [held (vec (repeatedly 3 #(Socket. "127.0.0.1" (int u/*port*))))]
      (try
        (Thread/sleep 200)
        (with-open [extra (Socket. "127.0.0.1" (int u/*port*))]
          (is (closed-by-server? extra 3000) "the fourth connection is closed at once"))
        (finally (run! #(.close ^Socket %) held)))
      (Thread/sleep 300)
      (is (= "ok /again" (:body (GET "/again"))) "capacity comes back when connections close"))))

(deftest slowloris-headers-are-cut-off
  (with-server ok {:header-timeout 1000}
    (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
      (let [out (.getOutputStream s)
            t0 (System/nanoTime)
            closed (loop [i 0]
                     (cond (>= i 40) false
                           (try (.write out (int (.charAt "GET / HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" (mod i 40))))
                                (.flush out) false
                                (catch SocketException _ true)) true
                           (closed-by-server? s 200) true
                           :else (recur (inc i))))
            ms (/ (- (System/nanoTime) t0) 1e6)]
        (is closed "a connection trickling its headers is closed")
        (is (< ms 4000) (str "after " (long ms) " ms")))))
  (testing "a normal client on the same server is unaffected"
    (with-server ok {:header-timeout 1000}
      (is (= "ok /" (:body (GET "/")))))))

(defn- send-raw ^Socket [^String data]
  (let [s (Socket. "127.0.0.1" (int u/*port*))]
    (doto (.getOutputStream s) (.write (.getBytes data StandardCharsets/ISO_8859_1)) (.flush))
    s))

(defn- read-until
  "Reads from `s` until what arrived contains `needle`; returns it (nil after `ms`)."
  [^Socket s ^String needle ms]
  (.setSoTimeout s (int ms))
  (let [in (.getInputStream s) buf (byte-array 8192) sb (StringBuilder.)]
    (try (loop []
           (let [n (.read in buf)]
             (when (pos? n)
               (.append sb (String. buf 0 n StandardCharsets/ISO_8859_1))
               (if (str/includes? (str sb) needle) (str sb) (recur)))))
         (catch SocketTimeoutException _ nil))))

(deftest idle-timeout
  (testing "a keep-alive connection with nothing to do is closed after :idle-timeout"
    (with-server ok {:idle-timeout 600 :header-timeout 60000}
      (with-open [s (send-raw "GET / HTTP/1.1\r\nHost: x\r\n\r\n")]
        (is (read-until s "ok /" 3000))
        (let [t0 (System/nanoTime)
              closed (closed-by-server? s 4000)
              ms (/ (- (System/nanoTime) t0) 1e6)]
          (is closed "closed while idle")
          (is (< 450 ms 2500) (str "after " (long ms) " ms"))))))
  (testing "a keep-alive connection idle longer than :header-timeout, shorter than :idle-timeout, serves its next request"
    ;; a load balancer keeps idle connections for its own timeout and sends on them: a close
    ;; that its request crosses is a 502 for its client
    (with-server ok {:idle-timeout 60000 :header-timeout 400}
      (with-open [s (send-raw "GET / HTTP/1.1\r\nHost: x\r\n\r\n")]
        (is (read-until s "ok /" 3000))
        (is (not (closed-by-server? s 1500)) "still open after almost four header timeouts")
        (doto (.getOutputStream s)
          (.write (.getBytes "GET /next HTTP/1.1\r\nHost: x\r\n\r\n" StandardCharsets/ISO_8859_1))
          (.flush))
        (is (read-until s "ok /next" 3000) "the next request is served"))))
  (testing "after a keep-alive wait, a head trickled slower than :header-timeout is still cut"
    (with-server ok {:idle-timeout 60000 :header-timeout 600}
      (with-open [s (send-raw "GET / HTTP/1.1\r\nHost: x\r\n\r\n")]
        (is (read-until s "ok /" 3000))
        (Thread/sleep 900)
        (let [out (.getOutputStream s)
              t0 (System/nanoTime)
              closed (loop [i 0]
                       (cond (>= i 60) false
                             (try (.write out (int (.charAt "GET /slow HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" i)))
                                  (.flush out) false
                                  (catch SocketException _ true)) true
                             (closed-by-server? s 100) true
                             :else (recur (inc i))))
              ms (/ (- (System/nanoTime) t0) 1e6)]
          (is closed "the trickling connection is closed")
          (is (< 400 ms 3000) (str "after " (long ms) " ms from its first byte"))))))
  (testing "a new connection that sends nothing waits :header-timeout, not :idle-timeout"
    (with-server ok {:idle-timeout 60000 :header-timeout 600}
      (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
        (let [t0 (System/nanoTime)
              closed (closed-by-server? s 4000)
              ms (/ (- (System/nanoTime) t0) 1e6)]
          (is closed "closed before its first request")
          (is (< 450 ms 2500) (str "after " (long ms) " ms"))))))
  (testing "a response stuck on a client that stopped reading is closed, and its stream freed"
    (let [closed (promise)
          endless (proxy [InputStream] []
                    (read
                      ([] 120)
                      ([^bytes b] (java.util.Arrays/fill b (byte 120)) (alength b))
                      ([^bytes b off len] (java.util.Arrays/fill b (int off) (int (+ off len)) (byte 120)) len))
                    (close [] (deliver closed true)))]
      (with-server (fn [req] (if (= "/stuck" (:uri req)) {:status 200 :body endless} (ok req)))
        {:idle-timeout 600}
        (with-open [s (send-raw "GET /stuck HTTP/1.1\r\nHost: x\r\n\r\n")]
          ;; never read: the socket buffers fill, then the server's writes stall
          (is (true? (deref closed 10000 false)) "the body stream was closed")
          (is (= "ok /" (:body (GET "/"))) "the server still serves")))))
  (testing "a slow but steady download outlives the idle timeout"
    (let [body (map (fn [i] (Thread/sleep 150) (str "chunk" i ";")) (take 10 (iterate inc 0)))]
      (with-server (fn [_] {:status 200 :body body}) {:idle-timeout 500}
        (is (= (apply str (map #(str "chunk" % ";") (range 10))) (:body (GET "/")))))))
  (testing "a slow but steady upload outlives the idle timeout"
    (with-server (fn [req] {:status 200 :body (str (count (slurp (:body req))))})
      {:idle-timeout 500 :body-timeout 5000}
      (with-open [s (send-raw "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")]
        (let [out (.getOutputStream s)]
          (dotimes [_ 10]
            (Thread/sleep 150)
            (.write out (.getBytes "5\r\nabcde\r\n" StandardCharsets/ISO_8859_1))
            (.flush out))
          (.write out (.getBytes "0\r\n\r\n" StandardCharsets/ISO_8859_1))
          (.flush out)
          (is (some? (read-until s "\r\n\r\n50" 3000)) "all 50 bytes read"))))))

(defn- read-fully
  "Reads `s` to EOF, pausing `pause-ms` after every `chunk` bytes; returns the byte count."
  [^Socket s chunk pause-ms]
  (.setSoTimeout s 10000)
  (let [in (.getInputStream s) buf (byte-array 65536)]
    (loop [total 0 since 0]
      (let [n (try (.read in buf) (catch SocketException _ -1))]
        (if (neg? n)
          total
          (let [since (+ since n)]
            (if (>= since chunk)
              (do (Thread/sleep (long pause-ms)) (recur (+ total n) 0))
              (recur (+ total n) since))))))))

(deftest idle-timeout-and-responses-still-flushing
  (let [big (byte-array (* 32 1024 1024) (byte 97))
        head-bytes 200]
    (testing "a fixed body still flushing to a client that reads late is not cut by :header-timeout"
      (with-server (fn [_] {:status 200 :body big}) {:header-timeout 500 :idle-timeout 10000}
        (with-open [s (send-raw "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")]
          (Thread/sleep 1500) ; the response has ended for Vert.x; its bytes wait in buffers
          (is (< (alength big) (read-fully s Long/MAX_VALUE 0) (+ (alength big) head-bytes))
              "the whole body arrived"))))
    (testing "a fixed body stuck on a client that never reads is closed after :idle-timeout"
      (with-server (fn [req] (if (= "/big" (:uri req)) {:status 200 :body big} (ok req)))
        {:idle-timeout 600}
        (with-open [s (send-raw "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")]
          (Thread/sleep 3000)
          (is (< (read-fully s Long/MAX_VALUE 0) (alength big)) "cut short: the server closed it")
          (is (= "ok /" (:body (GET "/")))))))
    (testing "a file read slowly but steadily outlives :idle-timeout"
      (let [f (doto (java.io.File/createTempFile "donkey-idle" ".bin") (.deleteOnExit))]
        (with-open [o (java.io.FileOutputStream. f)] (.write o big))
        (with-server (fn [_] {:status 200 :body f}) {:idle-timeout 600}
          (with-open [s (send-raw "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")]
            ;; 1 MiB every 150 ms: about 5 s in all, far over the idle timeout
            (is (< (alength big) (read-fully s (* 1024 1024) 150) (+ (alength big) head-bytes))
                "the whole file arrived")))))))

(defn- read-to-end
  "Everything the server sends on `s` until it closes the connection; nil when it has not
  closed it within `ms`."
  [^Socket s ms]
  (.setSoTimeout s (int ms))
  (let [in (.getInputStream s) buf (byte-array 8192) sb (StringBuilder.)]
    (try (loop []
           (let [n (.read in buf)]
             (if (neg? n)
               (str sb)
               (do (.append sb (String. buf 0 n StandardCharsets/ISO_8859_1)) (recur)))))
         (catch SocketTimeoutException _ nil)
         (catch SocketException _ (str sb)))))

(deftest a-stalled-body-read-before-an-async-handler-gets-408
  (doseq [[what opts] [["the idle timeout, when shorter" {:idle-timeout 600 :body-timeout 60000}]
                       ["the body timeout, when shorter" {:idle-timeout 60000 :body-timeout 600}]]]
    (testing what
      (let [called (atom false)]
        (with-server {:routes [{:path "/" :methods [:post] :handler-mode :non-blocking
                                :handler (fn [_ respond _] (reset! called true)
                                           (respond {:status 200 :body "never"}))}]}
          (merge {:header-timeout 60000} opts)
          (with-open [s (send-raw "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789")]
            (let [t0 (System/nanoTime)
                  resp (read-to-end s 5000)
                  ms (/ (- (System/nanoTime) t0) 1e6)]
              (is (some? resp) "a body that stopped arriving ends in a close")
              (is (str/starts-with? (str resp) "HTTP/1.1 408 ") (pr-str resp))
              (is (< 450 ms 3000) (str "after " (long ms) " ms"))
              (is (not @called) "the handler never ran"))))))))

(deftest a-trickling-body-read-before-an-async-handler
  (testing "bytes that keep arriving within :body-timeout keep the request alive"
    (with-server {:routes [{:path "/" :methods [:post] :handler-mode :non-blocking
                            :handler (fn [req respond _]
                                       (respond {:status 200 :body (str "got " (count (slurp (:body req))))}))}]}
      {:body-timeout 800 :idle-timeout 800}
      (with-open [s (send-raw "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\nConnection: close\r\n\r\n")]
        (let [out (.getOutputStream s)]
          (dotimes [_ 8] (Thread/sleep 300) (.write out (int \a)) (.flush out))
          (is (str/ends-with? (str (read-to-end s 5000)) "got 8")))))))

(deftest slow-body-fails-the-handler-read
  (let [error (promise)]
    (with-server (fn [req]
                   (if-let [b ^InputStream (:body req)]
                     (try (slurp b) (catch java.io.IOException e (deliver error (ex-message e)) (throw e)))
                     (ok req)))
      {:body-timeout 500}
      (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
        (.setSoTimeout s 5000)
        (doto (.getOutputStream s)
          (.write (.getBytes "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly ten.."))
          (.flush))
        (is (re-find #"no request body arrived for 500 ms" (str (deref error 5000 nil))))
        (let [buf (byte-array 1024) n (.read (.getInputStream s) buf)]
          (is (str/starts-with? (String. buf 0 (max 0 n) StandardCharsets/ISO_8859_1) "HTTP/1.1 408"))))
      (is (= "ok /" (:body (GET "/")))))))

(defn- capture-log
  "Runs `f` while collecting the messages logged to the `donkey` logger."
  [f]
  (let [records (atom [])
        logger (Logger/getLogger "donkey")
        h (proxy [Handler] []
            (publish [^LogRecord r] (swap! records conj (.getMessage r)))
            (flush [])
            (close []))]
    (.addHandler logger h)
    (try (f) (finally (.removeHandler logger h)))
    @records))

(deftest huge-timeouts-do-not-wrap
  ;; ms multiplied into ns past 2^64 wrap; this one wraps to under half a millisecond
  (let [huge 18446744073710]
    ;; (the sweep runs at most once a second: the handler outlasts two of them)
    (with-server (fn [req]
                   (let [n (count (slurp (:body req)))]
                     (Thread/sleep 2500)
                     {:status 200 :body (str "read " n)}))
      {:request-timeout huge :header-timeout huge :idle-timeout Integer/MAX_VALUE :body-timeout huge
       :async-timeout huge :blocked-warning huge}
      (with-open [s (send-raw "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n")]
        (Thread/sleep 300)
        (doto (.getOutputStream s) (.write (.getBytes "ab" StandardCharsets/ISO_8859_1)) (.flush))
        (is (read-until s "read 2" 8000) "a slow handler reading a slow body is served")
        (is (not (closed-by-server? s 800)) "and the idle connection stays open")))))

(deftest blocked-event-loop-warning-names-the-route
  (let [logs (capture-log
              #(with-server {:routes [{:path "/block/:n" :handler-mode :non-blocking
                                       :handler (fn [_ respond _] (Thread/sleep 700) (respond {:status 200}))}
                                      {:path "/fine" :handler ok}]}
                 {:blocked-warning 200 :event-loops 2}
                 (let [slow (future (GET "/block/1"))]
                   (Thread/sleep 100)
                   (is (= "ok /fine" (:body (GET "/fine"))) "the other loop still serves")
                   (is (= 200 (:status @slow))))))]
    (is (some #(re-find #"blocked for at least \d+ ms by the non-blocking handler of route GET,?.*/block/:n serving GET /block/1|blocked for at least \d+ ms by the non-blocking handler of route ANY /block/:n serving GET /block/1" %) logs)
        (pr-str logs))))

(deftest sigterm-drains-with-the-shutdown-hook
  (let [cp (System/getProperty "java.class.path")
        java (str (System/getProperty "java.home") "/bin/java")
        code (str "(require 'donkey.server)"
                  "(def s (donkey.server/run-server (fn [_] (Thread/sleep 1500) {:status 200 :body \"drained\"})"
                  "  {:port 0 :join? false :shutdown-hook? true}))"
                  "(println \"PORT\" (donkey.server/port s)) (flush)"
                  "@(promise)")
        p (.start (doto (ProcessBuilder. [java "-cp" cp "clojure.main" "-e" code])
                    (.redirectErrorStream true)))
        rdr (java.io.BufferedReader. (java.io.InputStreamReader. (.getInputStream p)))
        port (loop [i 0]
               (when (< i 200)
                 (let [line (.readLine rdr)]
                   (cond (nil? line) nil
                         (str/starts-with? line "PORT ") (Integer/parseInt (subs line 5))
                         :else (recur (inc i))))))]
    (try
      (is port "the child server started")
      (when port
        (binding [u/*port* port]
          (let [resp (future (GET "/slow"))]
            (Thread/sleep 400)
            (.destroy p)                          ; SIGTERM
            (is (= "drained" (:body (deref resp 10000 nil))) "the in-flight request completed")
            (is (.waitFor p 10 java.util.concurrent.TimeUnit/SECONDS) "the JVM exited"))))
      (finally (.destroyForcibly p)))))
