(ns donkey.faults-test
  "Faults over raw sockets: garbage, truncated and abandoned requests, broken chunked framing,
  request smuggling, header injection from handlers and misbehaving handlers. After each fault
  the next well-formed request, on a new connection, must succeed.

  RFC 9112 is the reference for framing: a request with Transfer-Encoding whose final coding is
  not chunked, or with both Transfer-Encoding and Content-Length, or with conflicting
  Content-Length values, is answered 400 and the connection closed (or, for TE + CL, handled as
  one chunked request and the connection closed); a smuggled second request must never reach
  the handler."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.test-util :as u :refer [with-server exchange closed? statuses read-all
                                            ->bytes now-ms]])
  (:import (java.io IOException InputStream)
           (java.net Socket SocketException SocketTimeoutException)
           (java.nio ByteBuffer)
           (java.nio.charset StandardCharsets)
           (java.util Random)
           (java.util.concurrent ConcurrentLinkedQueue CountDownLatch TimeUnit)
           (java.util.concurrent.atomic AtomicInteger AtomicLong)
           (java.util.logging Handler Logger LogRecord)
           (javax.net.ssl SSLContext SSLEngine)))

(set! *warn-on-reflection* true)

(def ^:private after-req "GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")

(defn- serving?
  "A well-formed request on a new connection gets its 200."
  []
  (let [{:keys [resp]} (exchange after-req {:timeout-ms 5000 :idle-ms 2000})]
    (and (str/starts-with? resp "HTTP/1.1 200") (str/ends-with? resp "ok /after"))))

(defn- eventually
  "Polls `f` every 20 ms until it returns truthy or `ms` pass; returns its last value."
  [ms f]
  (let [deadline (+ (now-ms) (long ms))]
    (loop []
      (let [v (f)]
        (if (or v (> (now-ms) deadline)) v (do (Thread/sleep 20) (recur)))))))

;; ---------------------------------------------------------------------------------------------
;; a handler that records what reached it

(defn- recorder
  "A sync handler and an async one that record every request but /after as
  {:uri :body (String, or [:error msg] when reading failed)} in `log`, and answer 200."
  []
  (let [log (atom [])
        record (fn [req body] (swap! log conj {:uri (:uri req) :body body :headers (:headers req)}))
        answer (fn [req] {:status 200 :headers {"content-type" "text/plain"} :body (str "ok " (:uri req))})]
    {:log log
     :sync (fn [req]
             (when-not (= "/after" (:uri req))
               (record req (when-let [in (:body req)]
                             (try (slurp in :encoding "ISO-8859-1")
                                  (catch IOException e [:error (ex-message e)])))))
             (answer req))
     :async (fn [req respond _]
              (when-not (= "/after" (:uri req))
                (record req (some-> ^InputStream (:body req) (slurp :encoding "ISO-8859-1"))))
              (respond (answer req)))}))

(def ^:private fault-opts
  "Bounds every wait of a fault server, so a fault the server mishandles cannot stall the run."
  {:header-timeout 3000 :body-timeout 3000 :shutdown-timeout 1000 :request-timeout 5000})

;; ---------------------------------------------------------------------------------------------
;; garbage

(defn- client-hello
  "A real TLS ClientHello record, as a TLS client sends it first."
  ^bytes []
  (let [ctx (doto (SSLContext/getInstance "TLS") (.init nil nil nil))
        ^SSLEngine eng (doto (.createSSLEngine ctx "localhost" 443) (.setUseClientMode true))
        out (ByteBuffer/allocate (.getPacketBufferSize (.getSession eng)))]
    (.beginHandshake eng)
    (.wrap eng (ByteBuffer/allocate 0) out)
    (.flip out)
    (let [b (byte-array (.remaining out))] (.get out b) b)))

(defn- random-bytes ^bytes [seed n]
  (let [b (byte-array n)] (.nextBytes (Random. (long seed)) b) b))

(deftest garbage-bytes
  (let [{:keys [log sync]} (recorder)]
    (with-server sync fault-opts
      (doseq [[what data] [["4 KiB of random binary" (random-bytes 1 4096)]
                           ["random binary ending in CRLF CRLF"
                            (byte-array (concat (random-bytes 2 2048) (->bytes "\r\n\r\n")))]
                           ["64 KiB of random binary (past the request-line limit)" (random-bytes 3 65536)]
                           ["a TLS ClientHello on the plaintext port" (client-hello)]
                           ["a TLS ClientHello, then nothing (the client waits for a ServerHello)" (client-hello)]]]
        (testing what
          (let [r (exchange data {:then (if (str/includes? what "then nothing") :read :half-close)
                                  :timeout-ms 5000})]
            (is (closed? r) (str "the server closed the connection: " (pr-str (:end r))))
            (is (every? #(<= 400 (long %) 499) (statuses (:resp r)))
                (str "only a 4xx, if anything, is answered: " (pr-str (u/status-line (:resp r)))))
            (is (empty? @log) "the handler never ran")
            (is (serving?))))))))

;; ---------------------------------------------------------------------------------------------
;; truncated requests

(deftest truncated-requests
  (let [{:keys [log sync async]} (recorder)]
    (doseq [[mode handler opts] [["sync" sync {}] ["async" async {:async? true}]]]
      (with-server handler (merge fault-opts opts)
        (doseq [[what data] [["request line only" "GET /t1 HTTP/1.1\r\n"]
                             ["request line cut mid-way" "GET /t2 HTT"]
                             ["headers cut mid-line" "GET /t3 HTTP/1.1\r\nHost: x\r\nX-Partial: abc"]
                             ["headers cut before the blank line" "GET /t4 HTTP/1.1\r\nHost: x\r\n"]]
                then [:close :half-close]]
          (testing (str mode ", " what ", then " (name then))
            (reset! log [])
            (let [r (exchange data {:then then})]
              (is (every? #(<= 400 (long %) 499) (statuses (:resp r))) (pr-str (:resp r))))
            (Thread/sleep 50)
            (is (empty? @log) "no handler ran for an incomplete head")
            (is (serving?))))
        (testing (str mode ", Content-Length 100 with 10 bytes, then close")
          (doseq [then [:close :half-close]]
            (reset! log [])
            (exchange "POST /short HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789" {:then then})
            (if (= mode "sync")
              (let [entry (eventually 2500 #(first @log))]
                (is (= "/short" (:uri entry)) "a sync handler starts with the head")
                (is (= :error (first (:body entry)))
                    (str "its body read fails (well before :body-timeout), not a short body: "
                         (pr-str (:body entry)))))
              (do (Thread/sleep 200)
                  (is (empty? @log) "an async handler never runs for an incomplete body")))
            (is (serving?))))))))

;; ---------------------------------------------------------------------------------------------
;; clients that go away mid-body and mid-response

(defn- abandon-upload
  "Sends the head of a POST (`framing` :length or :chunked) announcing 8 MiB, 256 KiB of the
  body, then closes the socket."
  [framing]
  (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
    (let [out (.getOutputStream s)
          chunk (byte-array 16384 (byte 97))]
      (.write out (->bytes (str "POST /upload HTTP/1.1\r\nHost: x\r\n"
                                (if (= framing :chunked)
                                  "Transfer-Encoding: chunked\r\n"
                                  (str "Content-Length: " (* 8 1024 1024) "\r\n"))
                                "\r\n")))
      (dotimes [_ 16]
        (when (= framing :chunked) (.write out (->bytes "4000\r\n")))
        (.write out chunk)
        (when (= framing :chunked) (.write out (->bytes "\r\n"))))
      (.flush out)
      (Thread/sleep 100))))

(deftest client-disconnects-mid-body
  (doseq [framing [:length :chunked]]
    (testing (str "sync handler, " (name framing) " body: the read fails at once, not after :body-timeout")
      (let [outcome (promise)]
        (with-server (fn [req]
                       (if (= "/after" (:uri req))
                         {:status 200 :body "ok /after"}
                         (let [in ^InputStream (:body req) buf (byte-array 8192) t0 (now-ms)]
                           (deliver outcome
                                    (try (loop [n 0]
                                           (let [r (.read in buf)] (if (neg? r) [:eof n] (recur (+ n r)))))
                                         (catch IOException e [:error (- (now-ms) t0) (ex-message e)])))
                           {:status 200 :body "done"})))
          (assoc fault-opts :body-timeout 20000)
          (abandon-upload framing)
          (let [o (deref outcome 5000 :no-outcome)]
            (is (= :error (first o)) (str "the handler's read failed: " (pr-str o)))
            (is (and (vector? o) (number? (second o)) (< (long (second o)) 5000))
                "within 5 s, far below :body-timeout"))
          (is (serving?))))))
  (testing "async handler: never called for a body that never completes"
    (let [{:keys [log async]} (recorder)]
      (with-server async (assoc fault-opts :async? true)
        (abandon-upload :length)
        (abandon-upload :chunked)
        (Thread/sleep 200)
        (is (empty? @log))
        (is (serving?))))))

(defn- endless-stream
  "An InputStream of up to `limit` bytes that counts what it produced and delivers `closed`
  when closed."
  ^InputStream [^AtomicLong produced limit closed]
  (let [limit (long limit)]
    (proxy [InputStream] []
      (read
        ([] (if (< (.get produced) limit) (do (.incrementAndGet produced) 120) -1))
        ([b] (let [^bytes b b] (.read ^InputStream this b 0 (alength b))))
        ([b off len]
         (let [^bytes b b
               off (int off)
               left (- limit (.get produced))
               n (int (min (long len) left))]
           (if (<= n 0)
             -1
             (do (java.util.Arrays/fill b off (+ off n) (byte 120))
                 (.addAndGet produced n)
                 n)))))
      (close [] (deliver closed true)))))

(defn- read-some-then-close
  "GETs `path`, reads at least `n` bytes of the answer, then closes the connection; returns
  what was read."
  [path n]
  (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
    (.setSoTimeout s 5000)
    (.setReceiveBufferSize s 16384)
    (let [out (.getOutputStream s) in (.getInputStream s) buf (byte-array 4096)]
      (.write out (->bytes (str "GET " path " HTTP/1.1\r\nHost: x\r\n\r\n")))
      (.flush out)
      (let [sb (StringBuilder.)]
        (loop []
          (when (< (.length sb) (long n))
            (let [r (.read in buf)]
              (when (pos? r)
                (.append sb (String. buf 0 r StandardCharsets/ISO_8859_1))
                (recur)))))
        (str sb)))))

(defn- stalls?
  "True when the counter stays put over 300 ms, checked within `ms`."
  [^AtomicLong counter ms]
  (eventually ms (fn [] (let [a (.get counter)] (Thread/sleep 300) (= a (.get counter))))))

(deftest client-disconnects-mid-response
  (doseq [[mode wrap opts] [["sync" (fn [h] h) {}]
                            ["async" (fn [h] (fn [req respond _] (respond (h req)))) {:async? true}]]]
    (let [produced (AtomicLong.)
          realized (AtomicLong.)
          closed (atom (promise))
          gib (* 1024 1024 1024)
          chunk (apply str (repeat 1024 "s"))
          handler (fn [req]
                    (case (:uri req)
                      "/after" {:status 200 :body "ok /after"}
                      "/stream" {:status 200 :body (endless-stream produced gib @closed)}
                      "/seq" {:status 200 :body (map (fn [_] (.incrementAndGet realized) chunk)
                                                     (range (* 1024 1024)))}))]
      (with-server (wrap handler) (merge fault-opts opts)
        (testing (str mode ", a 1 GiB InputStream body, the client reads 8 KiB and closes")
          (let [got (read-some-then-close "/stream" 8192)]
            (is (str/starts-with? got "HTTP/1.1 200"))
            (is (true? (deref @closed 5000 false)) "the body's InputStream is closed within 5 s")
            (is (stalls? produced 5000) "and no longer read")
            (is (< (.get produced) (* 64 1024 1024))
                (str "the server stopped producing early: " (.get produced) " bytes read"))
            (is (serving?))))
        (testing (str mode ", a lazy seq of 1 M elements, the client reads 8 KiB and closes")
          (let [got (read-some-then-close "/seq" 8192)]
            (is (str/starts-with? got "HTTP/1.1 200"))
            (is (stalls? realized 5000) "the seq stops being realised within 5 s")
            (is (< (.get realized) (* 64 1024)) (str "elements realised: " (.get realized)))
            (is (serving?))))))))

;; ---------------------------------------------------------------------------------------------
;; broken chunked framing

(def ^:private chunked-head "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")

(deftest invalid-chunked-encoding
  ;; RFC 9112 does not require a status for broken chunk framing. What donkey does today: the
  ;; connection is closed without an answer, a sync handler's read fails (its message says the
  ;; client closed the connection), an async handler never runs. A 400 before the close would
  ;; be friendlier (see DESIGN.md section 5); it is not asserted here.
  (let [{:keys [log sync async]} (recorder)]
    (doseq [[mode handler opts] [["sync" sync {}] ["async" async {:async? true}]]]
      (with-server handler (merge fault-opts opts)
        (doseq [[what body] [["bad hex size" "zz\r\nhello\r\n0\r\n\r\n"]
                             ["negative size" "-5\r\nhello\r\n0\r\n\r\n"]
                             ["no CRLF after the chunk data" "5\r\nhelloXX0\r\n\r\n"]
                             ["chunk data longer than its size" "3\r\nhello\r\n0\r\n\r\n"]
                             ["size overflows 64 bits" "FFFFFFFFFFFFFFFFFFFF\r\nhello\r\n0\r\n\r\n"]
                             ["size 2^64 + 5 (wraps to 5)" "10000000000000005\r\nhello\r\n0\r\n\r\n"]
                             ["bare LF line endings" "5\nhello\n0\n\n"]]]
          (testing (str mode ", " what)
            (reset! log [])
            (let [r (exchange (str chunked-head body "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
                              {:timeout-ms 4000})
                  sts (statuses (:resp r))]
              (is (closed? r) "the connection is closed")
              (is (every? #(<= 400 (long %) 499) sts) (str "no success is answered: " sts " " (pr-str @log) " " (pr-str (:resp r))))
              (Thread/sleep 50)
              (is (not-any? #(= "/smuggled" (:uri %)) @log) "nothing after the broken body runs")
              (if (= mode "sync")
                (is (every? #(vector? (:body %)) @log) (str "the handler's read failed: " (pr-str (map :body @log))))
                (is (empty? @log) "an async handler never runs")))
            (is (serving?))))))))

;; ---------------------------------------------------------------------------------------------
;; framing conflicts and smuggling

(def ^:private smuggled "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")

(defn- framing-case
  "Sends `req` (which may carry a smuggled request) to a recording server and returns
  {:statuses :end :uris :bodies}."
  [log req]
  (reset! log [])
  (let [r (exchange req {:timeout-ms 3000 :idle-ms 400})]
    (Thread/sleep 100)
    {:statuses (statuses (:resp r)) :end (:end r) :resp (:resp r)
     :uris (mapv :uri @log) :bodies (mapv :body @log)}))

(defn- rejected?
  "400, the connection closed, no handler run."
  [{:keys [statuses end uris]}]
  (and (= [400] statuses) (contains? #{:eof :reset} end) (empty? uris)))

(defn- one-chunked-request?
  "Handled as exactly one request with the chunked body `body`, and the connection closed
  (RFC 9112 section 6.3, for a request with both Transfer-Encoding and Content-Length)."
  [{:keys [statuses end uris bodies]} body]
  (and (= 1 (count statuses)) (contains? #{:eof :reset} end) (= 1 (count uris)) (= [body] bodies)))

(deftest conflicting-content-length
  (let [{:keys [log sync]} (recorder)]
    (with-server sync fault-opts
      (doseq [[what req] [["two different Content-Length headers"
                           "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"]
                          ["Content-Length: 5, 6" "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 6\r\n\r\nhello!"]
                          ["Content-Length: 6, 5 with a smuggled request after 5 bytes"
                           (str "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 6, 5\r\n\r\nhello" smuggled)]
                          ["Content-Length: +5" "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nhello"]
                          ["Content-Length: -5" "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\nhello"]
                          ["Content-Length: 0x5" "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 0x5\r\n\r\nhello"]
                          ["Content-Length over 2^63"
                           "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\nhello"]
                          ["empty Content-Length" "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: \r\n\r\nhello"]]]
        (testing what
          (let [r (framing-case log req)]
            (is (rejected? r) (pr-str (dissoc r :resp)))
            (is (not-any? #{"/smuggled"} (:uris r)))
            (is (serving?))))))))

(deftest request-smuggling
  (let [{:keys [log sync async]} (recorder)]
    (doseq [[mode handler opts] [["sync" sync {}] ["async" async {:async? true}]]]
      (with-server handler (merge fault-opts opts)
        (testing (str mode ": CL.TE, Content-Length and Transfer-Encoding: chunked")
          ;; a front end that frames by Content-Length (35) passes the whole thing as one request;
          ;; the back end must not read a second one out of it
          (let [r (framing-case log (str "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 35\r\n"
                                         "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" smuggled))]
            (is (not-any? #{"/smuggled"} (:uris r)) "the smuggled request never runs")
            (is (or (rejected? r) (one-chunked-request? r ""))
                (str "400, or one chunked request and the connection closed: " (pr-str (dissoc r :resp))))))
        (testing (str mode ": TE.CL, Transfer-Encoding: chunked then Content-Length")
          (let [r (framing-case log (str "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                                         "Content-Length: 4\r\n\r\n22\r\n" smuggled "\r\n0\r\n\r\n"))]
            (is (not-any? #{"/smuggled"} (:uris r)))
            (is (or (rejected? r) (one-chunked-request? r smuggled))
                (pr-str (dissoc r :resp)))))
        ;; RFC 9112 section 6.3: Transfer-Encoding whose final coding is not chunked -> the
        ;; length cannot be determined: 400 and close. Content-Length must not be used instead.
        (doseq [[what req]
                [["Transfer-Encoding: xchunked"
                  (str "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n" smuggled)]
                 ["Transfer-Encoding: xchunked with Content-Length"
                  (str "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: xchunked\r\n\r\nhello"
                       smuggled)]
                 ["Transfer-Encoding: chunked, identity"
                  (str "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" smuggled)]
                 ["Transfer-Encoding: chunked, identity with Content-Length"
                  (str "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked, identity\r\n\r\n"
                       "0\r\n\r\n" smuggled)]
                 ["two Transfer-Encoding lines: chunked, then identity"
                  (str "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n"
                       "0\r\n\r\n" smuggled)]
                 ["Transfer-Encoding: chunked;x=1 (chunked takes no parameters)"
                  (str "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked;x=1\r\n\r\n" smuggled)]
                 ["an empty Transfer-Encoding with Content-Length"
                  (str "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: \r\nContent-Length: 5\r\n\r\nhello" smuggled)]
                 ["Transfer-Encoding folded onto a continuation line, with Content-Length"
                  (str "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding:\r\n chunked\r\n\r\n"
                       "0\r\n\r\n" smuggled)]
                 ["Transfer-Encoding with a space before the colon, with Content-Length"
                  (str "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\nContent-Length: 5\r\n\r\n"
                       "0\r\n\r\n" smuggled)]
                 ["Content-Length with a space before the colon"
                  (str "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length : 5\r\n\r\nhello" smuggled)]]]
          (testing (str mode ": " what)
            (let [r (framing-case log req)]
              (is (not-any? #{"/smuggled"} (:uris r)) (str "the smuggled request never runs: " (pr-str (:uris r))))
              (is (rejected? r) (str "400 and close, no handler: " (pr-str (dissoc r :resp))))
              (is (serving?)))))
        (testing (str mode ": valid framings that look odd are one request each")
          (doseq [[what req body] [["Transfer-Encoding: Chunked (case-insensitive)"
                                    "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" "hello"]
                                   ["a chunk extension" "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\n\r\n" "hello"]
                                   ["a trailer section" "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n" "hello"]]]
            (let [r (framing-case log (str req after-req))]
              (is (= ["/a"] (:uris r)) what)
              (is (= [body] (:bodies r)) what)
              (is (= [200 200] (:statuses r)) (str what " and the next request on the connection")))))
        (testing (str mode ": header lines")
          (testing "a space before the colon is a 400 (RFC 9112 section 5.1: MUST)"
            (is (rejected? (framing-case log "GET /a HTTP/1.1\r\nHost: x\r\nX-Foo : bar\r\n\r\n")))
            (is (rejected? (framing-case log "GET /a HTTP/1.1\r\nHost: x\r\nX-Foo\t: bar\r\n\r\n"))))
          (testing "obs-fold is either refused or unfolded to one space (RFC 9112 section 5.2)"
            (let [r (framing-case log (str "GET /a HTTP/1.1\r\nHost: x\r\nX-Foo: bar\r\n baz\r\n\r\n"))]
              (is (or (rejected? r)
                      (and (= [200] (:statuses r)) (= "bar baz" (get-in (first @log) [:headers "x-foo"]))))
                  (pr-str (dissoc r :resp)))))
          (testing "a continuation line before any header is a 400"
            (is (rejected? (framing-case log "GET /a HTTP/1.1\r\n X-Foo: bar\r\nHost: x\r\n\r\n"))))
          (testing "CR, LF or NUL inside a header value is a 400"
            (is (rejected? (framing-case log "GET /a HTTP/1.1\r\nHost: x\r\nX-A: b\rc\r\n\r\n")))
            (is (rejected? (framing-case log "GET /a HTTP/1.1\r\nHost: x\r\nX-A: b\u0000c\r\n\r\n")))))
        (is (serving?))))))

;; ---------------------------------------------------------------------------------------------
;; header injection by the handler

(defn- weird-str [^String s] (reify Object (toString [_] s)))

(deftest header-injection-from-the-handler
  (let [cases [["CRLF in a value" {"X-Evil" "a\r\nSet-Cookie: pwned=1"}]
               ["bare LF in a value" {"X-Evil" "a\nSet-Cookie: pwned=1"}]
               ["bare CR in a value" {"X-Evil" "a\rSet-Cookie: pwned=1"}]
               ["NUL in a value" {"X-Evil" "a\u0000pwned"}]
               ["CRLF in the second value of a vector" {"Set-Cookie" ["a=1" "b=2\r\nX-Pwned: pwned"]}]
               ["CRLF in a lazy seq value" {"X-Seq" (map identity ["ok" "b\r\n\r\npwned"])}]
               ["CRLF in a list value" {"X-Seq" '("ok" "b\r\nX-Pwned: pwned")}]
               ["CRLF in a non-String value's toString" {"X-Obj" (weird-str "a\r\nX-Pwned: pwned")}]
               ["CRLF in a name" {"X-A\r\nSet-Cookie: pwned=1\r\nX-B" "v"}]
               ["CRLF in a keyword name" {(keyword "x-a\r\nx-pwned") "pwned"}]
               ["bare LF in a name" {"X-A\nX-Pwned" "pwned"}]
               ["NUL in a name" {"X-A\u0000pwned" "v"}]
               ["a colon in a name" {"X-A: pwned" "v"}]
               ["a space in a name" {"X pwned" "v"}]
               ["an empty name" {"" "pwned"}]]
        check (fn [what]
                (let [{:keys [resp]} (exchange (str "GET /evil HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))]
                  (is (str/starts-with? resp "HTTP/1.1 500") (str what ": " (pr-str (u/status-line resp))))
                  (is (not (str/includes? (str/lower-case resp) "pwned")) (str what ": nothing injected reaches the client"))
                  (is (not (str/includes? resp "should-not-be-sent")) (str what ": no part of the response is sent"))))]
    (doseq [[what headers] cases]
      (let [resp-map {:status 200 :headers (merge {"X-Fine" "fine"} headers) :body "should-not-be-sent"}]
        (with-server (fn [req] (if (= "/after" (:uri req)) {:status 200 :body "ok /after"} resp-map)) fault-opts
          (testing (str "sync, " what) (check what)
            (is (serving?))))))
    (testing "async handler and streamed bodies"
      (doseq [[what headers] (take 2 cases)
              [mode wrap opts] [["async" (fn [h] (fn [req respond _] (respond (h req)))) {:async? true}]
                                ["sync, InputStream body" identity {}]]]
        (let [h (fn [req]
                  (if (= "/after" (:uri req))
                    {:status 200 :body "ok /after"}
                    {:status 200 :headers headers
                     :body (if (:async? opts) "should-not-be-sent"
                               (java.io.ByteArrayInputStream. (->bytes "should-not-be-sent")))}))]
          (with-server (wrap h) (merge fault-opts opts)
            (testing (str mode ", " what) (check what) (is (serving?)))))))
    (testing "an :error-handler whose response injects a header gets the plain 500"
      (with-server {:routes [{:path "/evil" :handler (fn [_] (throw (Exception. "boom")))}
                             {:path "/after" :handler (fn [_] {:status 200 :body "ok /after"})}]
                    :error-handler (fn [_ _] {:status 500 :headers {"X-Evil" "a\r\nX-Pwned: pwned"}
                                              :body "should-not-be-sent"})}
        fault-opts
        (check "error-handler")
        (is (serving?))))))

;; ---------------------------------------------------------------------------------------------
;; misbehaving handlers

(defn- get-raw [path] (exchange (str "GET " path " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")))

(deftest handlers-that-throw-or-return-nonsense
  (with-server (fn [req]
                 (case (:uri req)
                   "/after" {:status 200 :body "ok /after"}
                   "/throw" (throw (ex-info "secret" {}))
                   "/error" (throw (AssertionError. "secret"))
                   "/nil" nil
                   "/throw-after-reading" (do (slurp (:body req)) (throw (IllegalStateException. "secret")))
                   "/body-fails-mid-stream"
                   {:status 200
                    :body (let [n (AtomicLong.)]
                            (proxy [InputStream] []
                              (read
                                ([] 120)
                                ([b] (.read ^InputStream this ^bytes b 0 (alength ^bytes b)))
                                ([b off len]
                                 (if (> (.addAndGet n (long len)) (* 256 1024))
                                   (throw (IOException. "disk on fire"))
                                   (do (java.util.Arrays/fill ^bytes b (int off) (int (+ (int off) (int len))) (byte 120))
                                       len))))))}))
    fault-opts
    (doseq [path ["/throw" "/error" "/nil"]]
      (testing path
        (let [{:keys [resp]} (get-raw path)]
          (is (str/starts-with? resp "HTTP/1.1 500") (pr-str (u/status-line resp)))
          (is (not (str/includes? resp "secret"))))
        (is (serving?))))
    (testing "a throw after reading the body"
      (let [{:keys [resp]} (exchange "POST /throw-after-reading HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")]
        (is (str/starts-with? resp "HTTP/1.1 500")))
      (is (serving?)))
    (testing "a streamed body that fails after its head was sent: the response is cut, the connection closed"
      (let [r (exchange "GET /body-fails-mid-stream HTTP/1.1\r\nHost: x\r\n\r\n" {:timeout-ms 5000 :idle-ms 2000})]
        (is (str/starts-with? (:resp r) "HTTP/1.1 200"))
        (is (closed? r) "the connection is closed, not left hanging")
        (is (not (str/ends-with? (:resp r) "0\r\n\r\n")) "no terminating chunk: the client can tell it was cut"))
      (is (serving?)))))

(deftest async-respond-twice-or-raise-late
  (with-server (fn [req respond raise]
                 (case (:uri req)
                   "/after" (respond {:status 200 :body "ok /after"})
                   "/race" (let [go (CountDownLatch. 1)]
                             (dotimes [i 2]
                               (future (.await go 2 TimeUnit/SECONDS)
                                       (respond {:status (+ 200 i) :body (str "r" i)})))
                             (.countDown go))
                   "/respond-raise" (do (respond {:status 200 :body "first"}) (raise (Exception. "late")))
                   "/raise-respond" (do (raise (Exception. "first")) (respond {:status 200 :body "late"}))))
    (merge fault-opts {:async? true})
    (testing "respond from two threads at once: one answer, and the connection stays consistent"
      (dotimes [_ 10]
        (let [r (exchange (str "GET /race HTTP/1.1\r\nHost: x\r\n\r\n" after-req) {:timeout-ms 3000})
              sts (statuses (:resp r))]
          (is (and (= 2 (count sts)) (#{200 201} (first sts)) (= 200 (second sts))) (pr-str sts))
          (is (str/ends-with? (:resp r) "ok /after")))))
    (testing "respond then raise: the response stands"
      (let [r (exchange (str "GET /respond-raise HTTP/1.1\r\nHost: x\r\n\r\n" after-req))]
        (is (= [200 200] (statuses (:resp r))))
        (is (str/includes? (:resp r) "first"))))
    (testing "raise then respond: 500 stands"
      (let [r (exchange (str "GET /raise-respond HTTP/1.1\r\nHost: x\r\n\r\n" after-req))]
        (is (= [500 200] (statuses (:resp r))))
        (is (not (str/includes? (:resp r) "late")))))
    (is (serving?))))

(deftest handlers-that-never-respond
  (let [release (CountDownLatch. 1)]
    (try
      (testing "sync: 503 after :request-timeout, with the worker still stuck"
        (with-server (fn [req] (if (= "/after" (:uri req))
                                 {:status 200 :body "ok /after"}
                                 (do (.await release 10 TimeUnit/SECONDS) {:status 200 :body "late"})))
          (merge fault-opts {:request-timeout 300})
          (let [t0 (now-ms)
                r (exchange (str "GET /stuck HTTP/1.1\r\nHost: x\r\n\r\n") {:timeout-ms 3000})]
            (is (= [503] (statuses (:resp r))))
            (is (< (- (now-ms) t0) 2500)))
          (is (serving?))
          (.countDown release)))
      (testing "async: 503 after :request-timeout, and the connection serves the next request"
        (with-server (fn [req respond _] (when (= "/after" (:uri req)) (respond {:status 200 :body "ok /after"})))
          (merge fault-opts {:async? true :request-timeout 300})
          (let [t0 (now-ms)
                r (exchange (str "GET /never HTTP/1.1\r\nHost: x\r\n\r\n" after-req) {:timeout-ms 3000})
                ms (- (now-ms) t0)]
            (is (= [503 200] (statuses (:resp r))))
            ;; the non-blocking path reads no clock per request: the sweep (every 75 ms here)
            ;; stamps the request when it first sees it, so the 503 is never early and at most
            ;; two sweep periods late
            (is (<= 300 ms 2500) (str "503 after " ms " ms")))
          (is (serving?))))
      (finally (.countDown release)))))

(defn- capture-donkey-log
  "Runs `f` with a handler on the `donkey` JUL logger (where System.Logger lands by default);
  returns [f's value, the messages logged]."
  [f]
  (let [logger (Logger/getLogger "donkey")
        msgs (ConcurrentLinkedQueue.)
        h (proxy [Handler] []
            (publish [^LogRecord r] (.add msgs (str (.getMessage r))))
            (flush [])
            (close []))]
    (.addHandler logger h)
    (try [(f) (vec msgs)]
         (finally (.removeHandler logger ^Handler h)))))

(deftest answers-for-connections-that-closed-meanwhile
  ;; the event loop checks its own record of the connection's close (no lock) before it writes
  ;; an answer a worker prepared: the client left while the handler ran
  (doseq [[mode opts] [["sync" {}] ["sync, 4 worker threads" {:worker-threads 4}]]]
    (let [done (AtomicLong.)]
      (with-server (fn [req]
                     (if (= "/after" (:uri req))
                       {:status 200 :body "ok /after"}
                       (do (Thread/sleep 300) (.incrementAndGet done)
                           {:status 200 :headers {"content-type" "text/plain"} :body "too late"})))
        (merge fault-opts opts)
        (let [[_ logged] (capture-donkey-log
                           (fn []
                             (dotimes [_ 4]
                               (exchange "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n" {:then :close}))
                             (is (eventually 5000 #(= 4 (.get done))) (str mode ": every handler ran"))
                             (Thread/sleep 100)))]
          (is (serving?) (str mode ": the server still serves"))
          (is (empty? (filter #(re-find #"(?i)fail|error" %) logged))
              (str mode ": nothing failed: " (pr-str logged))))))))

(deftest non-blocking-handler-that-blocks-its-event-loop
  ;; Vert.x's own blocked-thread checker warns after 2 s by default, checked each second: too
  ;; slow for a unit test. donkey's :blocked-warning watchdog names the route; it is tested here
  ;; with a 300 ms threshold, and the other event loop must keep serving meanwhile.
  (let [started (promise)
        block-ms 1500]
    (with-server {:routes [{:path "/block" :handler-mode :non-blocking
                            :handler (fn [_ respond _]
                                       (deliver started true)
                                       (Thread/sleep (long block-ms))
                                       (respond {:status 200 :body "unblocked"}))}
                           {:path "/after" :handler-mode :non-blocking
                            :handler (fn [_ respond _] (respond {:status 200 :body "ok /after"}))}]}
      (merge fault-opts {:event-loops 2 :blocked-warning 300})
      (let [[[blocked probes] logged]
            (capture-donkey-log
              (fn []
                (let [blocked (future (exchange "GET /block HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                                                {:timeout-ms 5000 :idle-ms 1000}))
                      _ (deref started 3000 nil)
                      t0 (now-ms)
                      ;; Vert.x spreads new connections over the loops: some probes land on the
                      ;; free one
                      probes (mapv deref (doall (for [_ (range 4)]
                                                  (future (let [ok (serving?)] [ok (- (now-ms) t0)])))))]
                  [@blocked probes])))]
        (is (str/ends-with? (:resp blocked) "unblocked"))
        (is (every? first probes) (str "every probe was answered in the end: " probes))
        (is (some (fn [[ok ms]] (and ok (< (long ms) (- block-ms 500)))) probes)
            (str "the other event loop answered while one was blocked: " probes))
        (is (some #(and (str/includes? % "blocked") (str/includes? % "/block")) logged)
            (str "the watchdog named the route: " (pr-str logged)))))))

;; ---------------------------------------------------------------------------------------------
;; answers that say `Connection: close` must close (RFC 9112 section 9.6)

(deftest answers-that-say-close-do-close
  (testing "a 404 for a request with a body (route table): closed, the pipelined request not run"
    (let [ran (AtomicInteger.)]
      (with-server {:routes [{:path "/after" :handler (fn [_] (.incrementAndGet ran) {:status 200 :body "ok /after"})}]}
        fault-opts
        (let [r (exchange (str "POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" after-req))]
          (is (= 404 (first (statuses (:resp r)))))
          (is (str/includes? (str/lower-case (:resp r)) "connection: close"))
          (is (= [404] (statuses (:resp r))) "nothing is answered after a response that said close")
          (is (closed? r) (str "the server closed the connection: " (:end r)))
          (is (zero? (.get ran)) "the request pipelined after it never ran"))
        (is (serving?)))))
  (testing "a 413 for a declared body far over :max-body-size: closed, the body not swallowed"
    (with-server (fn [req] {:status 200 :body (str "ok " (:uri req))}) (merge fault-opts {:max-body-size 10})
      (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
        (let [out (.getOutputStream s)
              total (* 64 1024 1024)
              chunk (byte-array 65536)]
          (.write out (->bytes (str "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: " total "\r\n\r\n")))
          (.flush out)
          (let [head (read-all s 2000 300)
                sent (try (loop [n 0]
                            (if (>= n total) n (do (.write out chunk) (recur (+ n (alength chunk))))))
                          (catch IOException _ :refused))]
            (is (str/starts-with? (:resp head) "HTTP/1.1 413"))
            (is (or (closed? head) (= :refused sent))
                (str "the server closed instead of reading the " total "-byte body: sent " sent
                     ", then " (:end (read-all s 1000 300)))))))
      (is (serving?)))))
