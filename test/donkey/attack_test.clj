(ns donkey.attack-test
  "The server's guarantees against an attacker's requests, sent over raw sockets: each test is
  named after the guarantee it checks, and the comment inside each says what that guarantee
  defends against. Timings are loose on purpose (the suite may run on a small shared machine):
  every wait is bounded, a time limit is only asserted with seconds of slack, and a cost is the
  event loops' CPU time (not wall time) compared with a control request of the same size, with
  a 5x margin."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.test-util :as u :refer [with-server exchange closed? statuses ->bytes now-ms]])
  (:import (java.io IOException InputStream)
           (java.net Socket SocketException SocketTimeoutException)))

(set! *warn-on-reflection* true)

(def ^:private short-timeouts
  "Every timeout short, so a request that is never answered shows up within seconds."
  {:header-timeout 1000 :idle-timeout 1000 :request-timeout 1000 :body-timeout 1000
   :shutdown-timeout 500})

(defn- answered-or-closed?
  "True when `r` (an exchange) got at least one status line or saw the server close."
  [r]
  (or (seq (statuses (:resp r))) (closed? r)))

;; ---------------------------------------------------------------------------------------------
;; every request is answered

(deftest a-target-without-a-path-is-answered-not-left-hanging
  ;; A request whose target has no path (`GET ?x=1`, `GET ?`) gets an answer or a closed
  ;; connection within the configured timeouts. A connection left unanswered and untimed would
  ;; be held until the client leaves, and :max-connections such 30-byte requests would lock
  ;; every other client out.
  (with-server {:routes [{:path "/users/:id" :handler (fn [_] {:status 200 :body "user"})}]}
    short-timeouts
    (doseq [target ["?x=1" "?"]]
      (testing target
        (let [r (exchange (str "GET " target " HTTP/1.1\r\nHost: x\r\n\r\n")
                          {:timeout-ms 6000 :idle-ms 500})]
          (is (answered-or-closed? r)
              (str "with every timeout at 1 s, 6 s later the connection is still open and"
                   " unanswered: " (pr-str r))))))
    (testing "three such connections, all still pinned seconds later"
      (let [socks (vec (for [_ (range 3)]
                         (doto (Socket. "127.0.0.1" (int u/*port*))
                           (-> .getOutputStream (.write (->bytes "GET ?x HTTP/1.1\r\nHost: x\r\n\r\n"))))))]
        (try
          (Thread/sleep 4000)
          (is (every? (fn [^Socket s]
                        (.setSoTimeout s 200)
                        (try (.read (.getInputStream s)) true ; a byte or EOF
                             (catch SocketTimeoutException _ false)
                             (catch SocketException _ true)))
                      socks)
              "4 s after their requests, with every timeout at 1 s, each connection has an answer or is closed")
          (finally (run! #(.close ^Socket %) socks))))))
  (testing "at :max-connections, three 30-byte requests lock every other client out for good"
    (with-server {:routes [{:path "/users/:id" :handler (fn [_] {:status 200 :body "user"})}
                           {:path "/ok" :handler (fn [_] {:status 200 :body "ok"})}]}
      (assoc short-timeouts :max-connections 3)
      (let [socks (vec (for [_ (range 3)]
                         (doto (Socket. "127.0.0.1" (int u/*port*))
                           (-> .getOutputStream (.write (->bytes "GET ?x HTTP/1.1\r\nHost: x\r\n\r\n"))))))]
        (try
          (Thread/sleep 4000)
          (let [r (exchange "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n" {:timeout-ms 3000})]
            (is (= [200] (statuses (:resp r)))
                (str "a well-formed request 4 s later (every timeout 1 s): " (pr-str r))))
          (finally (run! #(.close ^Socket %) socks)))))))

(deftest every-uri-a-handler-sees-starts-with-a-slash
  ;; Ring SPEC: :uri starts with "/". An origin-form target must start with "/" (RFC 9112
  ;; 3.2.1), so `GET ?x=1`, `GET a` and `GET *` are malformed request lines, answered 400 before
  ;; any handler runs: handlers and middleware that match (:uri req) against prefixes (an auth
  ;; guard on "/admin") never see a uri no rule expects.
  (let [seen (atom [])]
    (with-server (fn [req] (swap! seen conj (:uri req)) {:status 200 :body "ok"}) short-timeouts
      (doseq [target ["?x=1" "a" "*" "admin/x"]]
        (reset! seen [])
        (let [r (exchange (str "GET " target " HTTP/1.1\r\nHost: x\r\n\r\n"))]
          (is (= [400] (statuses (:resp r))) (str "GET " target ": " (pr-str (u/status-line (:resp r)))))
          (is (every? #(str/starts-with? % "/") @seen)
              (str "a handler saw :uri " (pr-str @seen))))))))

;; ---------------------------------------------------------------------------------------------
;; request bodies

(defn- body-outcome
  "A sync handler that reads its whole body and delivers [:ok bytes-read] or [:error msg]."
  [outcome]
  (fn [req]
    (let [r (try [:ok (count (slurp ^InputStream (:body req) :encoding "ISO-8859-1"))]
                 (catch IOException e [:error (ex-message e)]))]
      (deliver outcome [(:content-length req) r])
      {:status 200 :body (pr-str r)})))

(deftest a-body-cut-by-a-timeout-never-reads-as-complete
  ;; A sync handler reading its body never sees a clean end of stream short of the
  ;; Content-Length, even when :request-timeout answers 503 mid-read: neither a trickled body (a
  ;; byte per :body-timeout keeps it alive) nor a slow handler's whole one is ever processed
  ;; truncated as if it were complete.
  (testing "the client trickles its body past :request-timeout"
    (let [outcome (promise)]
      (with-server (body-outcome outcome) {:request-timeout 800 :body-timeout 5000}
        (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
          (let [out (.getOutputStream s)]
            (.write out (->bytes "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"))
            (try (dotimes [_ 30] (.write out (->bytes "a")) (.flush out) (Thread/sleep 100))
                 (catch IOException _ nil))))
        (let [[declared [what n :as r]] (deref outcome 5000 [nil [:no-outcome]])]
          (is (not (and (= :ok what) (< (long n) (long declared))))
              (str "the handler read " n " of the " declared " declared bytes as a complete body: "
                   (pr-str r)))))))
  (testing "a slow handler reading a body that arrived whole"
    (let [outcome (promise)
          handler (fn [req]
                    (let [in ^InputStream (:body req) buf (byte-array 1024)
                          r (try (loop [n 0]
                                   (Thread/sleep 20)
                                   (let [k (.read in buf)] (if (neg? k) [:ok n] (recur (+ n k)))))
                                 (catch IOException e [:error (ex-message e)]))]
                      (deliver outcome [(:content-length req) r])
                      {:status 200}))]
      (with-server handler {:request-timeout 500}
        (exchange (str "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n"
                       (apply str (repeat 200000 "b")))
                  {:timeout-ms 3000})
        (let [[declared [what n :as r]] (deref outcome 10000 [nil [:no-outcome]])]
          (is (not (and (= :ok what) (< (long n) (long declared))))
              (str "the handler read " n " of the " declared " declared bytes as a complete body: "
                   (pr-str r))))))))

;; ---------------------------------------------------------------------------------------------
;; connections that should close, and requests that should not be served (RFC 9112 9.6)

(defn- recording-handler
  "A sync handler that records every :uri it serves in `seen` and answers `extra-headers`."
  [seen extra-headers]
  (fn [req]
    (swap! seen conj (:uri req))
    {:status 200 :headers (merge {"content-type" "text/plain"} extra-headers) :body (str "ok " (:uri req))}))

(deftest close-anywhere-in-connection-ends-the-connection
  ;; Connection is a list of options (RFC 9110 7.6.1); `close` anywhere in it (`TE, close`,
  ;; `keep-alive, close`, in any case) makes the request the last one: the server closes after
  ;; answering it and runs no request pipelined after it (RFC 9112 9.6), which the client
  ;; considers unsent and may retry elsewhere.
  (let [seen (atom [])]
    (with-server (recording-handler seen {}) short-timeouts
      (doseq [v ["close, TE" "TE, close" "keep-alive, close" "keep-alive,close" "Keep-Alive, Close"]]
        (reset! seen [])
        (let [r (exchange (str "GET /last HTTP/1.1\r\nHost: x\r\nConnection: " v "\r\n\r\n"
                               "GET /after-close HTTP/1.1\r\nHost: x\r\n\r\n"))]
          (Thread/sleep 100)
          (is (= ["/last"] @seen) (str "Connection: " v " -- handlers run: " (pr-str @seen)))
          (is (= [200] (statuses (:resp r))) (str "Connection: " v))
          (is (closed? r) (str "Connection: " v " -- the server kept the connection open")))))))

(deftest a-handlers-connection-close-ends-the-connection
  ;; A handler's `Connection: close` closes the connection after its response, as the kernel's
  ;; own answers do (faults-test/answers-that-say-close-do-close). RFC 9112 9.6: a server that
  ;; sends close MUST initiate closure after that response; a request pipelined after it is one
  ;; the client considers unsent and will retry, so it never runs.
  (let [seen (atom [])]
    (with-server (recording-handler seen {"Connection" "close"}) short-timeouts
      (let [r (exchange (str "GET /first HTTP/1.1\r\nHost: x\r\n\r\n"
                             "POST /second HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"))]
        (Thread/sleep 100)
        (is (str/includes? (str/lower-case (:resp r)) "connection: close") "the answer says close")
        (is (= ["/first"] @seen) (str "handlers run after an answer that said close: " (pr-str @seen)))
        (is (= [200] (statuses (:resp r))) (pr-str (statuses (:resp r))))
        (is (closed? r) "the connection is closed after the answer that said so")))))

(deftest http-1-0-clients-get-no-interim-answer
  ;; RFC 9110 10.1.1: a server that receives 100-continue in an HTTP/1.0 request MUST ignore
  ;; it, for sync and async handlers alike. HTTP/1.0 has no interim responses: a client would
  ;; read `100 Continue` as the final answer (no length: to the close), the real one as its body.
  (doseq [[mode handler opts] [[:sync (fn [req] {:status 200 :body (slurp (:body req))}) {}]
                               [:async (fn [req respond _] (respond {:status 200 :body (slurp (:body req))}))
                                {:async? true}]]]
    (with-server handler (merge short-timeouts opts)
      (let [r (exchange "POST /up HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello")]
        (is (= [200] (statuses (:resp r))) (str mode ": " (pr-str (:resp r))))
        (is (not (str/includes? (:resp r) "100 Continue")) (str mode))))))

;; ---------------------------------------------------------------------------------------------
;; methods

(deftest standard-methods-in-another-case-are-refused
  ;; Methods are case-sensitive (RFC 9110 9.1): `delete` is an unknown method, not DELETE, and
  ;; never reaches a Ring handler as :delete. A front end that filters methods (a WAF or proxy
  ;; rule refusing DELETE, as the RFC lets it) passes `delete` as unknown, so the application
  ;; must not run it as a DELETE: an unknown method stays distinguishable or is refused (501).
  (let [seen (atom [])]
    (with-server (fn [req] (swap! seen conj (:request-method req)) {:status 200 :body "done"})
      short-timeouts
      (doseq [m ["delete" "Delete" "pUt" "get"]]
        (reset! seen [])
        (let [r (exchange (str m " /resource HTTP/1.1\r\nHost: x\r\n\r\n"))]
          (is (not (#{[:delete] [:put] [:get]} @seen))
              (str m " ran the handler as " (pr-str @seen) ": " (pr-str (u/status-line (:resp r))))))))))

(deftest connect-is-refused
  ;; A 2xx to CONNECT makes the connection a tunnel from the byte after its head, and RFC 9110
  ;; 9.3.6: the server MUST NOT send Content-Length or Transfer-Encoding in it. Donkey makes no
  ;; tunnels and never answers CONNECT with a framed 2xx, so client and server never disagree on
  ;; whether what follows is tunnel bytes or HTTP requests.
  (with-server (fn [_] {:status 200 :body "hello"}) short-timeouts
    (let [r (exchange "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n")
          resp (:resp r)
          st (first (statuses resp))]
      (is (not (and st (<= 200 (long st) 299)
                    (re-find #"(?i)\r\n(content-length|transfer-encoding):" resp)))
          (str "a 2xx to CONNECT with framing headers: " (pr-str resp))))))

;; ---------------------------------------------------------------------------------------------
;; Host

(deftest invalid-ip-literals-are-refused
  ;; HTTP/1.1 with a Host that is not host[:port] is a 400. An IP literal in brackets must be an
  ;; IPv6 address or an IPvFuture (RFC 3986 3.2.2); any other is refused before it can reach
  ;; :server-name, which applications put into absolute URLs and redirects.
  (let [seen (atom [])]
    (with-server (fn [req] (swap! seen conj (:server-name req)) {:status 200 :body "ok"}) short-timeouts
      (doseq [host ["[:::]" "[1:2:3:4:5:6:7:8:9]" "[a]" "[%zz]" "[fe80::1%eth0]" "[!$&'()*+,;=]"]]
        (reset! seen [])
        (let [r (exchange (str "GET / HTTP/1.1\r\nHost: " host "\r\n\r\n"))]
          (is (= [400] (statuses (:resp r)))
              (str "Host: " host " -> " (pr-str (u/status-line (:resp r))) ", :server-name " (pr-str @seen))))))))

;; ---------------------------------------------------------------------------------------------
;; cost out of proportion to the bytes sent

(deftest a-repeated-header-costs-linear-memory
  ;; Ring's :headers joins a repeated header's values with ","; doing so allocates memory linear
  ;; in the head, not quadratic in the number of repeats (~2600 `a: b` lines fit the default
  ;; 16 KiB head). The request map is built on the event loop, so every connection on that loop
  ;; would pay for a quadratic join, whose cost grows with the square of :max-header-size.
  (with-server (fn [req respond _] (respond {:status 200 :body (str (count (:headers req)))}))
    {:async? true :event-loops 1}
    (let [head (str "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                    (apply str (repeat 2600 "a: b\r\n")) "\r\n")
          warm (exchange head)
          before (u/event-loop-allocation)
          r (exchange head)
          grown (- (u/event-loop-allocation) before)]
      (is (= [200] (statuses (:resp warm))) (pr-str (u/status-line (:resp warm))))
      (is (= [200] (statuses (:resp r))))
      (is (< grown (* 4 1024 1024))
          (str "one " (count head) "-byte request made the event loop allocate " (quot grown 1024) " KiB")))))

(defn- event-loop-cpu-ms
  "CPU time used so far by the threads of Vert.x's event loops, in ms."
  ^double []
  (let [mx (java.lang.management.ManagementFactory/getThreadMXBean)]
    (/ (reduce + 0 (for [^Thread t (keys (Thread/getAllStackTraces))
                         :when (str/includes? (.getName t) "eventloop")]
                     (max 0 (.getThreadCpuTime mx (.getId t)))))
       1e6)))

(defn- loop-cpu-per-request
  "Sends `head` `n` times on one connection, each after the previous answer; returns the
  event loops' CPU ms per request and the last answer."
  [^String head n]
  (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
    (.setSoTimeout s 10000)
    (let [out (.getOutputStream s) in (.getInputStream s) buf (byte-array 65536)
          one (fn [] (.write out (->bytes head)) (.flush out)
                (loop [acc ""]
                  (let [k (.read in buf)
                        acc (str acc (String. buf 0 (max 0 k) "ISO-8859-1"))]
                    (if (or (neg? k) (re-find #"\r\n\r\n.+" acc)) acc (recur acc)))))
          before (event-loop-cpu-ms)
          last-resp (last (repeatedly n one))]
      [(/ (- (event-loop-cpu-ms) before) n) last-resp])))

(defn- costs
  "Event-loop CPU ms per request of `control` and of `hostile`, each sent `warm` times first
  and then `n` times measured, and the last answer to `hostile`: [control-ms hostile-ms resp]."
  [control hostile warm n]
  (loop-cpu-per-request control warm)
  (loop-cpu-per-request hostile warm)
  (let [[control-ms _] (loop-cpu-per-request control n)
        [hostile-ms resp] (loop-cpu-per-request hostile n)]
    [control-ms hostile-ms resp]))

(deftest a-long-accept-header-costs-linear-time
  ;; :produces negotiation costs time linear in the Accept header whatever its shape: the cost
  ;; is measured as event-loop CPU per request against a request with a non-Accept header of the
  ;; same size. Routing runs on the event loop whatever the handler mode, so every connection on
  ;; that loop waits while a 16 KiB `Accept: ,,,,...` is negotiated.
  (with-server {:routes [{:path "/p" :produces ["application/json" "text/html" "text/plain" "application/xml"]
                          :handler-mode :non-blocking
                          :handler (fn [_ respond _] (respond {:status 200 :body "p"}))}]}
    {:event-loops 1}
    (let [hostile (str "GET /p HTTP/1.1\r\nHost: x\r\nAccept: " (apply str (repeat 16000 ",")) "\r\n\r\n")
          padded (str "GET /p HTTP/1.1\r\nHost: x\r\nX-Pad: " (apply str (repeat 16000 "a")) "\r\n\r\n")
          [normal-ms hostile-ms resp] (costs padded hostile 30 30)]
      (is (re-find #"^HTTP/1.1 406" resp) (pr-str (u/status-line resp)))
      (is (< hostile-ms (max 2.0 (* 5 normal-ms)))
          (format "a 16 KiB Accept header costs the event loop %.2f ms of CPU per request (an X-Pad header of the same size: %.2f ms)"
                  hostile-ms normal-ms)))))

(defn- multipart-request
  "A multipart/form-data POST of `parts` fields, each with a part header of `folds` pieces
  ` a`, folded onto continuation lines when `fold?`, else on one line."
  [parts folds fold?]
  (let [part (fn [i] (str "--XyZ\r\nContent-Disposition: form-data; name=\"f" i "\"\r\nX-A: b"
                          (apply str (repeat folds (if fold? "\r\n a" "   a"))) "\r\n\r\nv\r\n"))
        body (str (apply str (map part (range parts))) "--XyZ--\r\n")]
    (str "POST /up HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=XyZ\r\n"
         "Content-Length: " (count body) "\r\n\r\n" body)))

(deftest folded-part-headers-cost-linear-time
  ;; Unfolding a multipart part header's continuation lines costs time linear in its bytes, so
  ;; parts whose headers are folded over ~3900 lines each (just under the 16 KiB part-header
  ;; limit) cost the event loop about what the same bytes unfolded do (CPU per request): a
  ;; hostile upload costs no more per byte than an ordinary one.
  (require 'donkey.middleware.multipart)
  (let [wrap (resolve 'donkey.middleware.multipart/wrap-multipart-params)]
    (with-server (wrap (fn [req respond _] (respond {:status 200 :body (str (count (:multipart-params req)))})))
      {:async? true :event-loops 1}
      (let [hostile (multipart-request 50 3900 true)
            plain (multipart-request 50 3900 false) ; the same bytes, headers not folded
            [plain-ms hostile-ms resp] (costs plain hostile 3 5)]
        (is (re-find #"^HTTP/1.1 200" resp) (pr-str (u/status-line resp)))
        (is (< hostile-ms (max 20.0 (* 5 plain-ms)))
            (format "a %d-byte body of folded part headers costs the event loop %.1f ms (%d bytes of unfolded headers: %.1f ms)"
                    (count hostile) hostile-ms (count plain) plain-ms))))))

;; ---------------------------------------------------------------------------------------------
;; threads a slow client can hold

(deftest respond-never-waits-for-a-slow-client
  ;; `respond` returns without waiting for the client to read the body, whatever thread calls
  ;; it (a future, a core.async go block, an HTTP client's callback pool): bodies from blocking
  ;; code are streamed from a worker thread. A few clients that do not read must not stall an
  ;; application's small callback or go-block pool until :idle-timeout gives up on them.
  (doseq [[kind body] [[:input-stream #(java.io.ByteArrayInputStream. (byte-array (* 64 1024 1024)))]
                       [:seq #(repeat 4096 (apply str (repeat 16384 "x")))]]]
    (let [returned (promise)]
      (with-server (fn [_ respond _]
                     (future (let [t0 (now-ms)]
                               (respond {:status 200 :body (body)})
                               (deliver returned (- (now-ms) t0)))))
        {:async? true :idle-timeout 10000 :shutdown-timeout 500}
        (with-open [s (Socket.)]
          (.setReceiveBufferSize s 4096)
          (.connect s (java.net.InetSocketAddress. "127.0.0.1" (int u/*port*)))
          (doto (.getOutputStream s) (.write (->bytes "GET / HTTP/1.1\r\nHost: x\r\n\r\n")) (.flush))
          ;; the client reads nothing
          (let [ms (deref returned 3000 :still-blocked)]
            (is (not= :still-blocked ms)
                (str kind ": respond, called from a future, has not returned 3 s later: it is writing"
                     " the body to a client that does not read"))))))))

(deftest file-parts-are-written-off-the-event-loop
  ;; wrap-multipart-params (async arity) creates, writes, closes and deletes a part's temp file
  ;; off the event loop: :max-parts lets one 70 KB body carry 999 one-byte files, and a loop busy
  ;; with their file-system calls serves no other connection. The cost is event-loop CPU per
  ;; request against the same parts sent as fields.
  (require 'donkey.middleware.multipart)
  (let [wrap (resolve 'donkey.middleware.multipart/wrap-multipart-params)
        request (fn [files?]
                  (let [part (fn [i] (str "--XyZ\r\nContent-Disposition: form-data; name=\"f" i "\""
                                          (when files? "; filename=\"a\"") "\r\n\r\nx\r\n"))
                        body (str (apply str (map part (range 999))) "--XyZ--\r\n")]
                    (str "POST /up HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=XyZ\r\n"
                         "Content-Length: " (count body) "\r\n\r\n" body)))]
    (with-server (wrap (fn [req respond _] (respond {:status 200 :body (str (count (:multipart-params req)))})))
      {:async? true :event-loops 1}
      (let [files (request true)
            fields (request false)
            [fields-ms files-ms resp] (costs fields files 3 5)]
        (is (re-find #"^HTTP/1.1 200" resp) (pr-str (u/status-line resp)))
        (is (< files-ms (max 10.0 (* 5 fields-ms)))
            (format "999 one-byte file parts (%d bytes) cost the event loop %.0f ms of CPU; as fields: %.0f ms"
                    (count files) files-ms fields-ms))))))
