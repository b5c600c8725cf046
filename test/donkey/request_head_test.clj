(ns donkey.request-head-test
  "What a request head must be to be served (RFC 9112): the Host header, the request target,
  header names, and the status line of the kernel's answers to heads it refuses. Raw sockets,
  so that nothing between the test and the server repairs the input."
  (:require [clojure.edn :as edn]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.test-util :as u :refer [with-server exchange closed? statuses]]))

(set! *warn-on-reflection* true)

(defn- echo
  "Answers with the parts of the request map these tests look at, as EDN."
  [req]
  {:status 200
   :headers {"content-type" "application/edn"}
   :body (pr-str (select-keys req [:server-name :server-port :uri :headers :protocol]))})

(defn- body-of [resp] (second (str/split (str resp) #"\r\n\r\n" 2)))

(defn- served
  "The request map parts the handler saw for the raw request `data`, or nil when it was not
  served with a 200."
  [data]
  (let [{:keys [resp]} (exchange data)]
    (when (re-find #"^HTTP/1\.[01] 200 " resp)
      (edn/read-string (body-of resp)))))

(defn- refused?
  "True when `data` gets exactly one answer, a 400 with an HTTP/1.1 status line, and the
  connection is closed."
  [data]
  (let [r (exchange data)]
    (and (= [400] (statuses (:resp r)))
         (str/starts-with? (:resp r) "HTTP/1.1 400 ")
         (closed? r))))

(def ^:private opts {:header-timeout 3000 :request-timeout 5000})

(deftest host-header
  (doseq [[mode handler] [[:sync echo] [:async (fn [req respond _] (respond (echo req)))]]]
    (with-server handler (assoc opts :async? (= mode :async))
      (testing (str mode ": HTTP/1.1 needs exactly one valid Host")
        (doseq [[what data] [["no Host" "GET / HTTP/1.1\r\n\r\n"]
                             ["two Host lines" "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"]
                             ["two Host lines, differently cased" "GET / HTTP/1.1\r\nhost: a\r\nHOST: a\r\n\r\n"]
                             ["a port that is not a number" "GET / HTTP/1.1\r\nHost: localhost:es\r\n\r\n"]
                             ["a port over 65535" "GET / HTTP/1.1\r\nHost: localhost:65536\r\n\r\n"]
                             ["a space in the host" "GET / HTTP/1.1\r\nHost: a b\r\n\r\n"]
                             ["userinfo" "GET / HTTP/1.1\r\nHost: user@a\r\n\r\n"]
                             ["a slash" "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"]
                             ["only a port" "GET / HTTP/1.1\r\nHost: :80\r\n\r\n"]
                             ["an unclosed IPv6 literal" "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n"]
                             ["a bad percent-encoding" "GET / HTTP/1.1\r\nHost: a%zz\r\n\r\n"]
                             ;; an http URI with an empty host is invalid (RFC 9110 4.2.1)
                             ["an empty Host" "GET / HTTP/1.1\r\nHost:\r\n\r\n"]
                             ["a Host of spaces" "GET / HTTP/1.1\r\nHost:   \r\n\r\n"]
                             ["an empty Host, OPTIONS *" "OPTIONS * HTTP/1.1\r\nHost:\r\n\r\n"]]]
          (is (refused? data) what)))
      (testing (str mode ": valid Hosts are served, and name the server")
        (doseq [[host name port] [["example.com" "example.com" nil]
                                  ["example.com:8443" "example.com" 8443]
                                  ["127.0.0.1:81" "127.0.0.1" 81]
                                  ["[::1]:82" "::1" 82]
                                  ["xn--bcher-kva.example" "xn--bcher-kva.example" nil]
                                  ["a-b_c~d.example" "a-b_c~d.example" nil]]]
          (let [m (served (str "GET / HTTP/1.1\r\nHost: " host "\r\n\r\n"))]
            (is (= name (:server-name m)) host)
            (when port (is (= port (:server-port m)) host))))
        (is (= u/*port* (:server-port (served "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")))
            "without a port in Host, the local port")
        (is (= "a.example" (:server-name (served "GET http://a.example/ HTTP/1.1\r\nHost:\r\n\r\n")))
            "an empty Host beside an absolute-form target, which names the host, is ignored"))
      (testing (str mode ": HTTP/1.0 may omit Host, but not send an empty one")
        (let [r (exchange "GET / HTTP/1.0\r\nHost:\r\n\r\n")]
          (is (str/starts-with? (:resp r) "HTTP/1.0 400 "))
          (is (closed? r))))
      (testing (str mode ": HTTP/1.0 may omit Host")
        (let [m (served "GET / HTTP/1.0\r\n\r\n")]
          (is (= "HTTP/1.0" (:protocol m)))
          (is (= "127.0.0.1" (:server-name m)))))
      (testing (str mode ": an absolute-form target names the server, not Host")
        (let [m (served "GET http://a.example:81/p?q=1 HTTP/1.1\r\nHost: b.example:82\r\n\r\n")]
          (is (= "a.example" (:server-name m)))
          (is (= 81 (:server-port m)))
          (is (= "/p" (:uri m))))
        (let [m (served "GET http://a.example/ HTTP/1.1\r\nHost: b.example\r\n\r\n")]
          (is (= ["a.example" 80] [(:server-name m) (:server-port m)])
              "the scheme's default port when the target names none"))
        (is (refused? "GET http://a.example:81/ HTTP/1.1\r\n\r\n")
            "an absolute-form request still needs its Host line")
        (is (refused? "GET http://user@a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n")
            "userinfo in the target")
        (is (refused? "GET http://a.example:x/ HTTP/1.1\r\nHost: a.example\r\n\r\n")
            "a bad port in the target")))))

(deftest request-target-and-header-names
  (let [calls (atom 0)]
    (with-server (fn [req] (swap! calls inc) (echo req)) opts
      (testing "a control character in the request target"
        (doseq [c [0x01 0x07 0x1b 0x7f 0x00]]
          (is (refused? (str "GET /a" (char c) "b HTTP/1.1\r\nHost: x\r\n\r\n"))
              (format "0x%02x" c))))
      (testing "a header line without a name"
        (is (refused? "GET / HTTP/1.1\r\nHost: x\r\n: value\r\n\r\n")))
      (is (zero? @calls) "none of them reached the handler")
      (testing "what is allowed still is"
        (is (= "/a%01b" (:uri (served "GET /a%01b HTTP/1.1\r\nHost: x\r\n\r\n")))
            "a percent-encoded control character is the application's business")
        (is (= {"host" "x" "x-empty" ""}
               (:headers (served "GET / HTTP/1.1\r\nHost: x\r\nX-Empty:\r\n\r\n")))
            "an empty value is fine")))))

(deftest asterisk-form-is-for-options-only
  ;; RFC 9112 3.2.4: "*" is the target of a server-wide OPTIONS and of nothing else, however
  ;; often the same connection (and so the same event loop) has just seen it valid
  (with-server echo opts
    (is (refused? "GET * HTTP/1.1\r\nHost: x\r\n\r\n"))
    (is (= [200] (statuses (:resp (exchange "OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")))))
    (let [r (exchange (str "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n"
                           "GET * HTTP/1.1\r\nHost: x\r\n\r\n"
                           "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n"))]
      (is (= [200 400] (statuses (:resp r))) "the GET behind a served OPTIONS * is refused")
      (is (closed? r)))))

(deftest the-head-check-reads-header-names-in-any-case
  ;; the head check compares names to Netty's constants; the decoder hands those out for
  ;; well-known names in their usual case, and any other casing must still be recognised
  (with-server (fn [req] {:status 200 :body (if (:body req) (slurp (:body req)) "")}) opts
    (testing "Host"
      (is (refused? "GET / HTTP/1.1\r\nHOST: a\r\nhost: b\r\n\r\n") "two Host lines, cased apart")
      (is (= [200] (statuses (:resp (exchange "GET / HTTP/1.1\r\nhOsT: x\r\n\r\n"))))))
    (testing "Content-Length and Transfer-Encoding"
      (is (str/ends-with? (:resp (exchange "POST / HTTP/1.1\r\nHost: x\r\nCONTENT-LENGTH: 5\r\n\r\nhello"))
                          "hello"))
      (is (str/ends-with? (:resp (exchange (str "POST / HTTP/1.1\r\nHost: x\r\nTRANSFER-encoding: chunked"
                                                "\r\n\r\n5\r\nhello\r\n0\r\n\r\n")))
                          "hello"))
      (is (refused? "POST / HTTP/1.1\r\nHost: x\r\nCONTENT-length: 3\r\nTransfer-ENCODING: chunked\r\n\r\n")
          "both framings, in any case"))
    (testing "Connection: close"
      (let [r (exchange "GET / HTTP/1.1\r\nHost: x\r\nCONNECTION: close\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")]
        (is (= [200] (statuses (:resp r))) "the request behind it is not served")
        (is (closed? r))))
    (testing "a connection's next request names its lines in another case"
      ;; (the names a connection's earlier request used are recognised faster; others still are)
      (let [r (exchange (str "GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n"
                             "GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n"))]
        (is (= [200 400] (statuses (:resp r))) "two Host lines on the second request")
        (is (closed? r)))
      (let [r (exchange (str "GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n"
                             "GET / HTTP/1.1\r\nHost: x\r\nconnection: Close\r\n\r\n"
                             "GET / HTTP/1.1\r\nHost: x\r\n\r\n"))]
        (is (= [200 200] (statuses (:resp r))) "no request behind the one that says close")
        (is (closed? r)))
      (let [r (exchange (str "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
                             "GET / HTTP/1.1\r\nHost: x\r\nHOST: y\r\n\r\n"))]
        (is (= [200 400] (statuses (:resp r))) "the known instance, then another casing")))))

;; the Connection value's scan: one token with nothing around it is compared whole, anything
;; else is read as a list; either way `close` matches only as a whole token, in ASCII case
(deftest connection-values-list-close-only-as-a-token
  (doseq [v ["close" "CLOSE" "Close" "keep-alive, close" "close,TE" " close" "close\t" ",close"
             "TE ,  close  ,x"]]
    (is (donkey.ring.HeaderLines/lists v "close") (pr-str v))
    (is (donkey.ring.HeaderLines/lists (io.netty.util.AsciiString. ^String v) "close") (pr-str v)))
  (doseq [v ["" "keep-alive" "closed" "clos" "xclose" "close-x" "c lose" "keep-alive, closed"
             ",," "cl\u00d6se" "CLO\u017fE"]]
    (is (not (donkey.ring.HeaderLines/lists v "close")) (pr-str v))))

(deftest refusals-answer-with-http-1-1
  (with-server echo (assoc opts :max-initial-line-length 256 :max-header-size 512)
    (doseq [[what data status] [["an unparseable request line" "GARBAGE\r\n\r\n" 400]
                                ["a bare LF request" "GET / HTTP/1.1\nHost: x\n\n" 400]
                                ["an HTTP/1.0 request with a bad header" "GET / HTTP/1.0\r\nFoo : bar\r\n\r\n" 400]
                                ["a request line over the limit"
                                 (str "GET /" (apply str (repeat 400 "a")) " HTTP/1.1\r\nHost: x\r\n\r\n") 414]
                                ["headers over the limit"
                                 (str "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " (apply str (repeat 600 "a")) "\r\n\r\n") 431]
                                ["an HTTP version from the future" "GET / HTTP/9.9\r\nHost: x\r\n\r\n" 505]
                                ["HTTP/2.0 as text" "GET / HTTP/2.0\r\nHost: x\r\n\r\n" 505]
                                ["a version that is not HTTP" "GET / FOO/1.1\r\nHost: x\r\n\r\n" 400]]]
      (testing what
        (let [r (exchange data)]
          (is (str/starts-with? (:resp r) (str "HTTP/1.1 " status " ")) (pr-str (u/status-line (:resp r))))
          (is (= [status] (statuses (:resp r))) "one answer")
          (is (str/includes? (str/lower-case (:resp r)) "connection: close"))
          (is (closed? r)))))))

(deftest junk-after-an-answer-that-closes-gets-no-second-answer
  (with-server echo opts
    (doseq [[what data] [["a bad Transfer-Encoding, then junk"
                          "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nJUNK JUNK\r\n\r\n"]
                         ["Content-Length and Transfer-Encoding, then junk"
                          "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nGARBAGE\r\n\r\n"]
                         ["no Host, then junk" "GET / HTTP/1.1\r\n\r\nJUNK\r\n\r\n"]
                         ["an unparseable line, then more" "GARBAGE\r\n\r\nGARBAGE AGAIN\r\n\r\n"]]]
      (testing what
        (let [r (exchange data)]
          (is (= [400] (statuses (:resp r))) (:resp r))
          (is (closed? r)))))))

(deftest half-closed-clients-get-their-answers
  (doseq [[mode handler opts*] [[:sync (fn [req] (Thread/sleep 300) (echo req)) {}]
                                [:async (fn [req respond _]
                                          (future (Thread/sleep 300) (respond (echo req))))
                                 {:async? true}]]]
    (with-server handler (merge opts opts*)
      (testing (str mode ": the client sends its request and shuts its side")
        (let [r (exchange "GET /half HTTP/1.1\r\nHost: x\r\n\r\n" {:then :half-close :timeout-ms 4000})]
          (is (= [200] (statuses (:resp r))) (:resp r))
          (is (= "/half" (:uri (edn/read-string (body-of (:resp r))))))
          (is (closed? r) "then the server closes its side too")))
      (testing (str mode ": pipelined requests before the shutdown are all answered")
        (let [r (exchange (str "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n"
                               "POST /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
                          {:then :half-close :timeout-ms 4000})]
          (is (= [200 200] (statuses (:resp r))) (:resp r))
          (is (closed? r))))
      (testing (str mode ": a body cut short by the shutdown is not waited for")
        (let [t0 (System/nanoTime)
              r (exchange "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc"
                          {:then :half-close :timeout-ms 4000})]
          (is (closed? r))
          (is (< (/ (- (System/nanoTime) t0) 1e6) 2500) "closed well before any timeout")))
      (testing (str mode ": an idle connection the client shuts is closed at once")
        (let [r (exchange "" {:then :half-close :timeout-ms 4000})]
          (is (= :eof (:end r)))
          (is (= "" (:resp r))))))))
