(ns donkey.request-body-test
  "Request bodies of sync handlers stream from the socket with flow control."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.test-util :as u :refer [with-server request raw]])
  (:import (java.io InputStream OutputStream)
           (java.net Socket)
           (java.nio.charset StandardCharsets)
           (java.util.concurrent.atomic AtomicLong)))

(defn- drain ^long [^InputStream in]
  (let [buf (byte-array 65536)]
    (loop [n 0]
      (let [r (.read in buf)]
        (if (neg? r) n (recur (+ n r)))))))

(defn- send-headers [^Socket s ^String head]
  (doto (.getOutputStream s)
    (.write (.getBytes head StandardCharsets/ISO_8859_1))
    (.flush)))

(deftest the-handler-reads-while-the-body-is-still-arriving
  (let [first-bytes (promise)]
    (with-server (fn [req]
                   (let [in ^InputStream (:body req)
                         b (.read in)]
                     (deliver first-bytes b)
                     {:status 200 :body (str "read " (inc (drain in)))}))
      {}
      (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
        (.setSoTimeout s 10000)
        (let [out (send-headers s "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")]
          (.write out (.getBytes "hello"))
          (.flush out)
          (is (= (int \h) (deref first-bytes 5000 nil)) "the handler ran before the body was complete")
          (.write out (.getBytes "world"))
          (.flush out)
          (let [in (.getInputStream s) buf (byte-array 4096) n (.read in buf)]
            (is (str/includes? (String. buf 0 n StandardCharsets/ISO_8859_1) "read 10"))))))))

(deftest a-handler-that-does-not-read-holds-back-the-client
  (let [reading (promise)
        total (* 64 1024 1024)]
    (with-server (fn [req]
                   (deref reading 10000 nil)
                   {:status 200 :body (str "read " (drain (:body req)))})
      {:max-body-size (* 128 1024 1024)}
      (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
        (.setSoTimeout s 20000)
        (.setSendBufferSize s 65536)
        (let [out (send-headers s (str "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: " total "\r\n\r\n"))
              written (AtomicLong.)
              writer (future
                       (let [chunk (byte-array 65536 (byte 66))]
                         (while (< (.get written) total)
                           (.write out chunk)
                           (.addAndGet written (alength chunk)))
                         (.flush out)))]
          (Thread/sleep 1500)
          (let [while-paused (.get written)]
            (is (< while-paused (* 16 1024 1024))
                (str "the client wrote " while-paused " bytes while the handler read none")))
          (deliver reading true)
          (deref writer 20000 nil)
          (let [in (.getInputStream s) buf (byte-array 4096) n (.read in buf)]
            (is (str/includes? (String. buf 0 n StandardCharsets/ISO_8859_1) (str "read " total)))))))))

(deftest unread-body-does-not-break-the-connection
  (with-server (fn [req] {:status 200 :body (str "ignored " (:uri req))}) {}
    (let [body (apply str (repeat (* 1024 1024) "x"))
          resp (raw (str "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: " (count body) "\r\n\r\n" body
                         "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    10000)]
      (is (str/includes? resp "ignored /a"))
      (is (str/includes? resp "ignored /b") "the next request on the connection is served"))))

(defn- read-head
  "Reads a response head byte by byte; returns it as a String (without the blank line)."
  ^String [^InputStream in]
  (let [sb (StringBuilder.)]
    (loop []
      (let [b (.read in)]
        (when (neg? b) (throw (java.io.EOFException. (str "connection closed in the head: " sb))))
        (.append sb (char b))
        (if (.endsWith (.toString sb) "\r\n\r\n")
          (subs (.toString sb) 0 (- (.length sb) 4))
          (recur))))))

(defn- read-chunked
  "Reads a chunked body from `in` to its last chunk and returns the bytes."
  ^bytes [^InputStream in]
  (let [out (java.io.ByteArrayOutputStream.)
        line (fn [] (let [sb (StringBuilder.)]
                      (loop []
                        (let [b (.read in)]
                          (cond (neg? b) (throw (java.io.EOFException. "connection closed in a chunk"))
                                (= b 10) (str/trim (.toString sb))
                                :else (do (.append sb (char b)) (recur)))))))]
    (loop []
      (let [size (Long/parseLong (first (str/split (line) #";")) 16)]
        (if (zero? size)
          (do (line) (.toByteArray out))
          (let [chunk (byte-array size)]
            (loop [off 0]
              (when (< off size)
                (let [n (.read in chunk off (- size off))]
                  (when (neg? n) (throw (java.io.EOFException. "connection closed in a chunk")))
                  (recur (+ off n)))))
            (.write out chunk)
            (line)
            (recur)))))))

(deftest echo-streams-the-request-body-back
  ;; The handler answers with the request's own InputStream, so the response goes out while
  ;; the request is still arriving: the client has to read while it writes. (java.net.http
  ;; does not, for HTTP/1.1: it reads the response once the body is sent, so an echo larger
  ;; than what the sockets and queues in between hold, about 8-16 MiB on loopback, stalls both
  ;; ends with any server.) 32 MiB is more than all of them hold, so this passes only if the
  ;; body streams both ways with flow control.
  (with-server (fn [req] {:status 200 :body (:body req)}) {:max-body-size (* 64 1024 1024)}
    (let [total (* 32 1024 1024)
          data (byte-array total)
          _ (dotimes [i total] (aset data i (unchecked-byte (mod i 251))))]
      (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
        (.setSoTimeout s 20000)
        (let [out (send-headers s (str "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " total
                                       "\r\nConnection: close\r\n\r\n"))
              writer (future
                       (loop [off 0]
                         (when (< off total)
                           (let [n (min 65536 (- total off))]
                             (.write out data off n)
                             (recur (+ off n)))))
                       (.flush out)
                       :sent)
              in (java.io.BufferedInputStream. (.getInputStream s) 65536)
              head (read-head in)
              body (read-chunked in)]
          (is (str/starts-with? head "HTTP/1.1 200"))
          (is (= :sent (deref writer 20000 :stuck)) "the whole request body was taken")
          (is (= total (alength body)))
          (is (java.util.Arrays/equals data body) "the echo is the request body, byte for byte"))))))

(deftest client-vanishing-mid-body
  (let [error (promise)]
    (with-server (fn [req]
                   (when-let [b (:body req)]
                     (try (drain b) (catch java.io.IOException e (deliver error (ex-message e)))))
                   {:status 200})
      {}
      (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
        (let [out (send-headers s "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")]
          (.write out (byte-array 1000))
          (.flush out)))
      (is (re-find #"request body could not be read: .*(?i)clos" (str (deref error 5000 nil)))
          "the handler's read fails instead of hanging")
      (is (= 200 (:status (request :get "/")))))))

;; ---------------------------------------------------------------------------------------------
;; bodies read whole before an async handler runs

(deftest a-declared-length-reserves-nothing
  ;; memory grows with the bytes that arrive: heads that announce 16 MiB each and send
  ;; nothing more cost the server next to nothing
  (doseq [[what handler] [["async handler" {:async? true}]
                          ["non-blocking route" {:routes true}]]]
    (testing what
      (let [h (fn [req respond _] (respond {:status 200 :body (str (count (slurp (:body req))))}))]
        (with-server (if (:routes handler)
                       {:routes [{:path "/" :methods [:post] :handler-mode :non-blocking :handler h}]}
                       h)
          (merge {:event-loops 1 :body-timeout 30000} (dissoc handler :routes))
          (let [before (u/event-loop-allocation)
                socks (vec (for [_ (range 20)]
                             (doto (Socket. "127.0.0.1" (int u/*port*))
                               (send-headers (str "POST / HTTP/1.1\r\nHost: x\r\n"
                                                  "Content-Length: 16777216\r\n\r\n"
                                                  "a few bytes")))))]
            (try
              (Thread/sleep 500)
              (let [grown (- (u/event-loop-allocation) before)]
                (is (< grown (* 8 1024 1024))
                    (str "20 heads declaring 16 MiB each made the event loop allocate "
                         (quot grown 1024) " KiB")))
              (finally (run! #(.close ^Socket %) socks))))
          (testing "and a body that does arrive is whole"
            (let [body (apply str (repeat 300000 "z"))]
              (is (= (str (count body)) (:body (request :post "/" {:body body})))))))))))

(deftest a-length-over-2-gib-is-answered
  ;; a buffered body lives in one array, so one over 2 GiB is refused before it is read,
  ;; whatever :max-body-size allows
  (with-server (fn [req respond _] (respond {:status 200 :body "read"}))
    {:async? true :max-body-size (* 5 1024 1024 1024)}
    (doseq [length ["2147483648" "3000000000" "4294967295" "4294967296"]]
      (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
        (.setSoTimeout s 3000)
        (send-headers s (str "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: " length "\r\n\r\nabc"))
        (let [buf (byte-array 4096)
              n (try (.read (.getInputStream s) buf) (catch java.net.SocketTimeoutException _ -1))]
          (is (str/starts-with? (String. buf 0 (max 0 n) StandardCharsets/ISO_8859_1) "HTTP/1.1 413")
              length))))
    (is (= "read" (:body (request :post "/" {:body "small"}))))))

(defn- chunks-until-paused
  "Offers `chunk-size`-byte chunks to a BodyInputStream over a request that records pauses,
  until it pauses the request (or `limit` chunks); returns [chunks offered, the stream]."
  [chunk-size limit]
  (let [paused (atom 0)
        req (reify io.vertx.core.http.HttpServerRequest
              (pause [this] (swap! paused inc) this)
              (resume [this] this))
        in (donkey.ring.BodyInputStream. req nil 0 nil)
        chunk (io.vertx.core.buffer.Buffer/buffer (byte-array chunk-size))]
    [(loop [n 0]
       (if (or (pos? @paused) (> n limit)) n (do (.offer in chunk) (recur (inc n)))))
     in]))

(deftest tiny-chunks-pause-the-connection-early
  ;; a body in one-byte chunks: each chunk's objects cost far more than its byte, so the queue
  ;; counts them and the connection stops reading long before 256 KiB of such chunks queue
  (let [[offered ^java.io.InputStream in] (chunks-until-paused 1 300000)]
    (is (< offered 3000) (str "paused after " offered " one-byte chunks"))
    (is (= offered (.available in)) "available counts bytes, not the chunks' cost"))
  (testing "big chunks still pause at 256 KiB of bytes"
    (let [[offered] (chunks-until-paused 8192 1000)]
      (is (<= 31 offered 33) (str "paused after " offered " 8 KiB chunks")))))

(deftest a-route-has-a-body-limit-of-its-own
  (with-server {:routes [{:path "/small" :methods [:post] :max-body-size 10
                          :handler (fn [r] {:status 200 :body (slurp (:body r))})}
                         {:path "/small-async" :methods [:post] :max-body-size 10
                          :handler-mode :non-blocking
                          :handler (fn [r respond _] (respond {:status 200 :body (slurp (:body r))}))}
                         {:path "/big" :methods [:post]
                          :handler (fn [r] {:status 200 :body (str (count (slurp (:body r))))})}]}
    {:max-body-size 100}
    (doseq [p ["/small" "/small-async"]]
      (is (= "0123456789" (:body (u/request :post p {:body "0123456789"}))) p)
      (is (= 413 (:status (u/request :post p {:body "01234567890"}))) p))
    (is (= "100" (:body (u/request :post "/big" {:body (apply str (repeat 100 "x"))}))))
    (is (= 413 (:status (u/request :post "/big" {:body (apply str (repeat 101 "x"))})))))
  (is (thrown-with-msg? IllegalArgumentException #":max-body-size must be an integer"
                        (u/with-server {:routes [{:path "/" :max-body-size -1 :handler identity}]} {}))))
