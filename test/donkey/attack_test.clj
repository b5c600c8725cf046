(ns donkey.attack-test
  "An outsider's attacks on the server, over raw sockets, each test named after the guarantee
  that closes one; the comment inside each says what the attack was. Timings are loose on
  purpose (shared 2-core machine): every wait is bounded, a time limit is only asserted with
  seconds of slack, and a cost is the event loops' CPU time (not wall time) compared with a
  control request of the same size, with a 5x margin."
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
;; a request the kernel never answers holds its connection forever

(deftest a-target-without-a-path-is-answered-not-left-hanging
  ;; `GET ?x=1` has an empty path: the route trie's walk takes substring(1, 0) and throws on
  ;; the event loop (logged SEVERE by Vert.x). The exchange is neither answered nor dispatched,
  ;; so no timeout looks at it: :request-timeout counts from dispatch, :idle-timeout and
  ;; :header-timeout skip a connection that is owed an answer. One 30-byte request per
  ;; connection pins it until the client leaves: :max-connections of them lock everyone out.
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
  ;; 3.2.1); `GET ?x=1`, `GET a` and `GET *` are not valid request targets for GET and should be
  ;; a 400, as the README promises for a malformed request line. Handlers and middleware that
  ;; match (:uri req) against prefixes (an auth guard on "/admin") see a uri no rule expects.
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
  ;; When :request-timeout answers 503 while a sync handler still reads its body, the
  ;; response's end discards the body stream (BodyInputStream.discardRest): the handler's next
  ;; read returns -1, a clean end of stream, short of the Content-Length. An attacker who
  ;; trickles a body (a byte per :body-timeout keeps it alive) gets a truncated upload
  ;; processed as a whole one; a slow handler of a body that did arrive whole loses its tail.
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
  ;; Connection is a list of options (RFC 9110 7.6.1); `close` anywhere in it means the
  ;; request is the last one: the server MUST close after answering it and MUST NOT process
  ;; further requests (RFC 9112 9.6). A lone `close` is honoured; in a list (`TE, close`, as
  ;; some clients send, or `keep-alive, close`) it is ignored, and requests pipelined after it,
  ;; which the client considers unsent (and may retry elsewhere), run their handlers.
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
  ;; A handler's `Connection: close` reaches the client, but the connection stays open and the
  ;; next pipelined request is served on it: the answer said close, so that request runs
  ;; unseen by a client that will retry it (RFC 9112 9.6: a server that sends close MUST
  ;; initiate closure after that response). The kernel does this for its own answers
  ;; (faults-test/answers-that-say-close-do-close); a handler's goes through unheeded.
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
  ;; it. HTTP/1.0 has no interim responses: the client reads `HTTP/1.1 100 Continue` as the
  ;; final answer (no length: to the close), so the real answer lands in its body.
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
  ;; Methods are case-sensitive (RFC 9110 9.1): `delete` is not DELETE but an unknown method.
  ;; The kernel's own router agrees (405 for `get /x` on a GET route), but the Ring request map
  ;; lower-cases whatever the client sent, so `delete` reaches a plain Ring handler (compojure,
  ;; reitit, ...) as :delete. A front end that filters methods (a WAF or proxy rule refusing
  ;; DELETE, as the RFC lets it) passes `delete` as an unknown method, and the application runs
  ;; it as a DELETE. An unknown method should stay distinguishable, or be refused (501).
  (let [seen (atom [])]
    (with-server (fn [req] (swap! seen conj (:request-method req)) {:status 200 :body "done"})
      short-timeouts
      (doseq [m ["delete" "Delete" "pUt" "get"]]
        (reset! seen [])
        (let [r (exchange (str m " /resource HTTP/1.1\r\nHost: x\r\n\r\n"))]
          (is (not (#{[:delete] [:put] [:get]} @seen))
              (str m " ran the handler as " (pr-str @seen) ": " (pr-str (u/status-line (:resp r))))))))))

(deftest connect-is-refused
  ;; A 2xx to CONNECT turns the connection into a tunnel from the byte after its head; RFC 9110
  ;; 9.3.6: the server MUST NOT send Content-Length or Transfer-Encoding in it. Donkey makes no
  ;; tunnels but hands CONNECT to the handler and frames its 200 like any other, body and all,
  ;; then reads what the client sends into its "tunnel" as HTTP requests: client and server
  ;; disagree on what the connection is. The kernel owns framing: refuse CONNECT (405/501) or
  ;; frame a 2xx to it without a body and close after it.
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
  ;; README: HTTP/1.1 with a Host that is not host[:port] is a 400. Inside brackets the check
  ;; takes any run of unreserved characters, sub-delims, colons and percent signs, so IP
  ;; literals that are neither IPv6 nor IPvFuture (RFC 3986 3.2.2) are served, and reach
  ;; :server-name (which applications put into absolute URLs and redirects) as sent.
  (let [seen (atom [])]
    (with-server (fn [req] (swap! seen conj (:server-name req)) {:status 200 :body "ok"}) short-timeouts
      (doseq [host ["[:::]" "[1:2:3:4:5:6:7:8:9]" "[a]" "[%zz]" "[fe80::1%eth0]" "[!$&'()*+,;=]"]]
        (reset! seen [])
        (let [r (exchange (str "GET / HTTP/1.1\r\nHost: " host "\r\n\r\n"))]
          (is (= [400] (statuses (:resp r)))
              (str "Host: " host " -> " (pr-str (u/status-line (:resp r))) ", :server-name " (pr-str @seen))))))))

;; ---------------------------------------------------------------------------------------------
;; cost out of proportion to the bytes sent

(defn- event-loop-allocation
  "Bytes allocated so far by the threads of Vert.x's event loops."
  ^long []
  (let [^com.sun.management.ThreadMXBean mx (java.lang.management.ManagementFactory/getThreadMXBean)]
    (reduce + 0 (for [^Thread t (keys (Thread/getAllStackTraces))
                      :when (str/includes? (.getName t) "eventloop")]
                  (max 0 (.getThreadAllocatedBytes mx (.getId t)))))))

(deftest a-repeated-header-costs-linear-memory
  ;; Ring's :headers joins a repeated header's values with ",": RequestMap.Head.accept does it
  ;; as `old + "," + value` per line, so n lines of one name copy O(n^2) chars. The default
  ;; 16 KiB head holds ~2600 `a: b` lines: one such request makes the loop allocate ~7 MB
  ;; (460x its size; 1200 distinct names in a 13 KiB head: 390 KiB), and the cost grows with
  ;; the square of :max-header-size (64 KiB: ~30 ms of loop time per request, measured). It is
  ;; paid on the event loop for async handlers and whenever the request has a body.
  (with-server (fn [req respond _] (respond {:status 200 :body (str (count (:headers req)))}))
    {:async? true :event-loops 1}
    (let [head (str "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                    (apply str (repeat 2600 "a: b\r\n")) "\r\n")
          warm (exchange head)
          before (event-loop-allocation)
          r (exchange head)
          grown (- (event-loop-allocation) before)]
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

(deftest a-long-accept-header-costs-linear-time
  ;; :produces negotiation (MediaTypes.quality) walks the Accept list and, for each entry,
  ;; looks for its parameters with accept.indexOf(';', i): with no ';' ahead (or only one at
  ;; the end) every entry scans to the end of the header, O(n^2) per produced type. A 16 KiB
  ;; `Accept: ,,,,...` costs the event loop ~10 ms per request with four :produces types
  ;; (a normal request: ~0.1 ms). Routing runs on the event loop whatever the handler mode,
  ;; so every connection on that loop waits meanwhile; with a larger :max-header-size the
  ;; cost grows with its square.
  (with-server {:routes [{:path "/p" :produces ["application/json" "text/html" "text/plain" "application/xml"]
                          :handler-mode :non-blocking
                          :handler (fn [_ respond _] (respond {:status 200 :body "p"}))}]}
    {:event-loops 1}
    (let [hostile (str "GET /p HTTP/1.1\r\nHost: x\r\nAccept: " (apply str (repeat 16000 ",")) "\r\n\r\n")
          padded (str "GET /p HTTP/1.1\r\nHost: x\r\nX-Pad: " (apply str (repeat 16000 "a")) "\r\n\r\n")
          _ (loop-cpu-per-request padded 30)
          _ (loop-cpu-per-request hostile 30)
          [normal-ms _] (loop-cpu-per-request padded 30)
          [hostile-ms resp] (loop-cpu-per-request hostile 30)]
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
  ;; MultipartReader.headerLines unfolds a continuation line with `last + line`: a part header
  ;; folded over ~3900 lines (16 KiB, under the 16 KiB part-header limit) copies ~16M chars.
  ;; 50 such parts (780 KB) cost 120-300 ms of CPU against ~15 ms for the same bytes unfolded,
  ;; and a 16 MiB body seconds; for an async handler the parse runs on the event loop, which
  ;; serves nothing else meanwhile.
  (require 'donkey.middleware.multipart)
  (let [wrap (resolve 'donkey.middleware.multipart/wrap-multipart-params)]
    (with-server (wrap (fn [req respond _] (respond {:status 200 :body (str (count (:multipart-params req)))})))
      {:async? true :event-loops 1}
      (let [hostile (multipart-request 50 3900 true)
            plain (multipart-request 50 3900 false) ; the same bytes, headers not folded
            _ (loop-cpu-per-request plain 3)
            _ (loop-cpu-per-request hostile 3)
            [plain-ms _] (loop-cpu-per-request plain 5)
            [hostile-ms resp] (loop-cpu-per-request hostile 5)]
        (is (re-find #"^HTTP/1.1 200" resp) (pr-str (u/status-line resp)))
        (is (< hostile-ms (max 20.0 (* 5 plain-ms)))
            (format "a %d-byte body of folded part headers costs the event loop %.1f ms (%d bytes of unfolded headers: %.1f ms)"
                    (count hostile) hostile-ms (count plain) plain-ms))))))

;; ---------------------------------------------------------------------------------------------
;; threads a slow client can hold

(deftest respond-never-waits-for-a-slow-client
  ;; README (Threading): bodies produced by blocking code are streamed from a worker thread
  ;; that waits while the client does not read. That holds when respond is called on the event
  ;; loop; called from any other thread (a future, a core.async go block, an HTTP client's
  ;; callback pool), Exchange.complete streams the body right there, so `respond` blocks its
  ;; caller until the client has read everything, or until :idle-timeout gives up on it. A few
  ;; clients that do not read stall an application's callback or go-block pool (8 threads)
  ;; for two minutes each, with the default :idle-timeout.
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
  ;; wrap-multipart-params, async arity, parses on the event loop (the body is in memory), and
  ;; a part with a filename becomes a temp file: created (owner-only permissions), written,
  ;; closed, and deleted at the end of the request, each a file-system call on the loop.
  ;; :max-parts (1000) lets one 70 KB body carry 999 one-byte files: ~110 ms of event-loop CPU
  ;; (200-600 ms of wall time) on this machine, against ~3 ms for the same parts as fields. An attacker
  ;; sending ~150 KB/s keeps an event loop blocked; every connection on it waits.
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
            _ (loop-cpu-per-request fields 3)
            _ (loop-cpu-per-request files 2)
            [fields-ms _] (loop-cpu-per-request fields 5)
            [files-ms resp] (loop-cpu-per-request files 5)]
        (is (re-find #"^HTTP/1.1 200" resp) (pr-str (u/status-line resp)))
        (is (< files-ms (max 50.0 (* 5 fields-ms)))
            (format "999 one-byte file parts (%d bytes) cost the event loop %.0f ms of CPU; as fields: %.0f ms"
                    (count files) files-ms fields-ms))))))
