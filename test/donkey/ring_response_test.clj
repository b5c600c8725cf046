(ns donkey.ring-response-test
  "Response writing: every Ring body type, header values, HEAD, framing, Date and Server,
  keep-alive and pipelining, over real sockets."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.test-util :as u :refer [with-server GET request raw header]]
            [ring.core.protocols :as protocols])
  (:import (donkey.ring Framing ResponseWriter ResponseWriter$LastResponse)
           (io.vertx.core MultiMap)
           (io.vertx.core.buffer Buffer)
           (io.vertx.core.http HttpHeaders HttpServerResponse)
           (java.io ByteArrayInputStream File FilterInputStream InputStream OutputStream)
           (java.net Socket)
           (java.nio.charset StandardCharsets)
           (java.util.concurrent.atomic AtomicBoolean)))

(defn- const [resp] (fn [_] resp))

(defn- tracked-stream
  "An InputStream over `bytes` that records being closed in `closed`."
  ^InputStream [^bytes bytes ^AtomicBoolean closed]
  (proxy [FilterInputStream] [(ByteArrayInputStream. bytes)]
    (close [] (.set closed true) (proxy-super close))))

(deftest string-body
  (with-server (const {:status 200 :headers {"content-type" "text/plain"} :body "héllo"}) {}
    (let [r (GET "/" {:as :bytes})]
      (is (= 200 (:status r)))
      (is (= "héllo" (String. ^bytes (:body r) StandardCharsets/UTF_8)) "UTF-8 by default")
      (is (= "6" (header r "content-length")) "Content-Length is known"))))

(deftest string-body-honours-charset
  (with-server (const {:status 200 :headers {"Content-Type" "text/plain; charset=ISO-8859-1"} :body "héllo"}) {}
    (let [r (GET "/" {:as :bytes})]
      (is (= "héllo" (String. ^bytes (:body r) StandardCharsets/ISO_8859_1)))
      (is (= "5" (header r "content-length"))))))

(deftest string-body-charset-is-the-charset-parameter
  ;; the charset is the parameter named charset, not the first text that reads "charset="
  (doseq [ct ["text/plain; xcharset=utf-16; charset=ISO-8859-1"
              "text/plain; format=\"charset=utf-16\"; charset=iso-8859-1"
              "text/plain;CHARSET=\"ISO-8859-1\""]]
    (with-server (const {:status 200 :headers {"Content-Type" ct} :body "héllo"}) {}
      (let [r (GET "/" {:as :bytes})]
        (is (= "héllo" (String. ^bytes (:body r) StandardCharsets/ISO_8859_1)) ct)
        (is (= "5" (header r "content-length")) ct))))
  (testing "an unknown or malformed charset falls back to UTF-8"
    (doseq [ct ["text/plain; charset=klingon" "text/plain; charset=\"unterminated"]]
      (with-server (const {:status 200 :headers {"Content-Type" ct} :body "héllo"}) {}
        (is (= "6" (header (GET "/" {:as :bytes}) "content-length")) ct)))))

(deftest nil-body-and-default-status
  (with-server (const {:headers {"x-a" "1"}}) {}
    (let [r (GET "/")]
      (is (= 200 (:status r)) ":status defaults to 200")
      (is (= "" (:body r)))
      (is (= "0" (header r "content-length")))))
  (with-server (const {:status 204}) {}
    (is (= 204 (:status (GET "/"))))))

(deftest byte-array-body
  (let [bs (byte-array (map unchecked-byte (range 256)))]
    (with-server (const {:status 200 :body bs}) {}
      (let [r (GET "/" {:as :bytes})]
        (is (= (seq bs) (seq (:body r))))
        (is (= "256" (header r "content-length")))))))

(deftest seq-body
  (with-server (const {:status 200 :body (list "a" 1 :k nil "z")}) {}
    (let [r (GET "/")]
      (is (= "a1:kz" (:body r)) "each element's str, in order; nil adds nothing")))
  (testing "a lazy seq streams: each element is flushed before the next is realised"
    (let [first-seen (promise)]
      (with-server (const {:status 200
                           :body (map (fn [i] (when (= i 1) (deref first-seen 5000 nil)) (str i))
                                      (take 3 (iterate inc 0)))}) {}
        (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
          (.setSoTimeout s 5000)
          (.write (.getOutputStream s) (.getBytes "GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
          (let [in (.getInputStream s) buf (byte-array 4096)
                got (loop [acc ""]
                      (if (str/includes? acc "\r\n\r\n1\r\n0\r\n")
                        acc
                        (let [n (try (.read in buf) (catch java.net.SocketTimeoutException _ -1))]
                          (if (pos? n) (recur (str acc (String. buf 0 n StandardCharsets/ISO_8859_1))) acc))))]
            (is (str/includes? got "transfer-encoding: chunked"))
            (is (str/ends-with? got "1\r\n0\r\n") "element 0 arrived while element 1 was blocked")
            (deliver first-seen true)))))))

(deftest input-stream-body
  (let [closed (AtomicBoolean.)
        data (.getBytes (apply str (repeat 10000 "0123456789")))]
    (with-server (fn [_] {:status 200 :body (tracked-stream data closed)}) {}
      (let [r (GET "/" {:as :bytes})]
        (is (= 200 (:status r)))
        (is (java.util.Arrays/equals ^bytes data ^bytes (:body r)))
        (is (.get closed) "the InputStream is closed after sending")))))

(deftest small-input-stream-gets-content-length
  (with-server (fn [_] {:status 200 :body (ByteArrayInputStream. (.getBytes "tiny"))}) {}
    (let [r (GET "/")]
      (is (= "tiny" (:body r)))
      (is (= "4" (header r "content-length")) "a body that fits the buffer is not chunked"))))

(deftest file-body
  (let [f (File/createTempFile "donkey" ".txt")]
    (try
      (spit f (apply str (repeat 5000 "file-body ")))
      (with-server (const {:status 200 :body f}) {}
        (let [r (GET "/")]
          (is (= (slurp f) (:body r)))
          (is (= (str (.length f)) (header r "content-length")))))
      (testing "a missing file is a 500, not a hang"
        (with-server (const {:status 200 :body (File. "/nonexistent/donkey")}) {}
          (is (= 500 (:status (GET "/"))))))
      (testing "so is a directory"
        (with-server (const {:status 200 :body (File. (System/getProperty "java.io.tmpdir"))}) {}
          (is (= 500 (:status (GET "/"))))))
      (testing "the Content-Type its extension names, and HEAD's length without the body"
        (with-server (const {:status 200 :body f}) {}
          (is (str/starts-with? (header (GET "/") "content-type") "text/plain"))
          (let [r (request :head "/")]
            (is (= (str (.length f)) (header r "content-length")))
            (is (= "" (:body r))))))
      (finally (.delete f)))))

(defn- open-fds []
  (count (.list (File. "/proc/self/fd"))))

(deftest file-bodies-leave-no-descriptor-open
  ;; the kernel opens each file body itself and closes it when the send is over: after
  ;; requests answered whole, and after clients that left in the middle of a large file
  (let [small (File/createTempFile "donkey" ".txt")
        large (File/createTempFile "donkey" ".bin")]
    (try
      (spit small "small")
      (with-open [o (java.io.FileOutputStream. large)] (.write o (byte-array (* 8 1024 1024))))
      (with-server (fn [{:keys [uri]}] {:status 200 :body (if (= uri "/large") large small)}) {}
        (dotimes [_ 5] (GET "/"))
        (let [before (open-fds)]
          (dotimes [_ 200] (GET "/"))
          (dotimes [_ 20]
            (with-open [s (java.net.Socket. "127.0.0.1" (int u/*port*))]
              (.write (.getOutputStream s) (.getBytes "GET /large HTTP/1.1\r\nHost: x\r\n\r\n"))
              (.read (.getInputStream s) (byte-array 1000))))
          (let [deadline (+ (System/currentTimeMillis) 5000)]
            (while (and (> (open-fds) (+ before 5)) (< (System/currentTimeMillis) deadline))
              (Thread/sleep 50)))
          (is (<= (open-fds) (+ before 5)) "descriptors do not pile up")))
      (finally (.delete small) (.delete large)))))

(defrecord Custom [text]
  protocols/StreamableResponseBody
  (write-body-to-stream [_ _ out]
    (with-open [w (io/writer out)]
      (.write w ^String text))))

(deftest streamable-response-body
  (with-server (const {:status 200 :body (->Custom "from the protocol")}) {}
    (is (= "from the protocol" (:body (GET "/")))))
  (testing "an unknown body type is a 500"
    (with-server (const {:status 200 :body (Object.)}) {}
      (is (= 500 (:status (GET "/")))))))

(deftest header-values
  (with-server (const {:status 200
                       :headers {"Set-Cookie" ["a=1; Path=/" "b=2; Path=/"]
                                 "X-Seq" (list "p" "q")
                                 "X-Num" 42
                                 "Content-Type" "text/plain"}
                       :body "h"}) {}
    (let [r (GET "/")]
      (is (= ["a=1; Path=/" "b=2; Path=/"] (get-in r [:headers "set-cookie"]))
          "each value of a seq is its own header line")
      (is (= ["p" "q"] (get-in r [:headers "x-seq"])))
      (is (= "42" (header r "x-num")))
      (is (= "text/plain" (header r "content-type"))))))

(defn- without-date [^String raw-response]
  (str/replace raw-response #"(?i)\r\ndate: [^\r]*" ""))

(deftest constant-header-maps-are-sent-the-same-every-time
  ;; a :headers map seen again is compiled once and then written from the compiled plan; a
  ;; String body seen again is encoded once: every repeat must send the very same bytes
  (doseq [resp [{:status 200
                 :headers {"Set-Cookie" ["a=1; Path=/" "b=2"] "X-Num" 42 "X-Empty" [] "X-Nil" nil
                           "Content-Type" "text/plain; charset=ISO-8859-1"}
                 :body "héllo"}
                {:status 201 :headers {"Server" "mine" "Date" "Tue, 01 Jan 2030 00:00:00 GMT"} :body "x"}
                {:status 200 :headers {"Content-Length" "999" "Transfer-Encoding" "chunked"} :body "four"}
                {:status 200 :headers (array-map "content-type" "text/plain" "Content-Type" "text/html")
                 :body "later key wins"}
                {:status 200 :headers {"X-Latin" "café" :x-keyword "k"} :body (.getBytes "b")}
                {:status 200 :headers {"content-type" "application/vnd.api+json"} :body {:a 1}}
                {:status 404 :headers {} :body nil}
                {:status 200 :headers {"Content-Type" "text/plain"} :body (apply str (repeat 5000 "é"))}]]
    (with-server (const resp) {}
      (let [rs (vec (repeatedly 4 #(raw "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")))]
        (is (apply = (map without-date rs)) (str "same bytes each time for " (:headers resp)))
        (is (re-find #"(?i)\r\ndate: " (peek rs)) "a Date header on a repeat"))))
  (testing "what the compiled plan sends"
    (let [resp {:status 200
                :headers {"Set-Cookie" ["a=1; Path=/" "b=2"] "X-Num" 42 "X-Empty" [] "X-Nil" nil
                          "Content-Type" "text/plain; charset=ISO-8859-1"}
                :body "héllo"}]
      (with-server (const resp) {}
        (dotimes [_ 3]
          (let [r (GET "/" {:as :bytes})]
            (is (= ["a=1; Path=/" "b=2"] (get-in r [:headers "set-cookie"])))
            (is (= "42" (header r "x-num")))
            (is (nil? (header r "x-empty")))
            (is (nil? (header r "x-nil")))
            (is (= "donkey" (header r "server")))
            (is (= "héllo" (String. ^bytes (:body r) StandardCharsets/ISO_8859_1)))
            (is (= "5" (header r "content-length"))))))))
  (testing "a handler's Server, Date, framing and duplicate names, on a repeat"
    (with-server (const {:status 201 :headers {"Server" "mine" "Date" "Tue, 01 Jan 2030 00:00:00 GMT"
                                               "Content-Length" "999"} :body "x"}) {}
      (dotimes [_ 3]
        (let [r (GET "/")]
          (is (= ["mine"] (get-in r [:headers "server"])))
          (is (= ["Tue, 01 Jan 2030 00:00:00 GMT"] (get-in r [:headers "date"])))
          (is (= "1" (header r "content-length"))))))
    (with-server (const {:status 200 :headers (array-map "content-type" "text/plain" "Content-Type" "text/html")
                         :body "b"}) {}
      (dotimes [_ 3]
        (is (= ["text/html"] (get-in (GET "/") [:headers "content-type"]))))))
  (testing "a constant map whose values are not Strings is written with their current text"
    (let [n (java.util.concurrent.atomic.AtomicLong.)
          resp {:status 200 :headers {"X-Count" n "Content-Type" "text/plain"} :body "c"}]
      (with-server (fn [_] (.incrementAndGet n) resp) {}
        (dotimes [i 4]
          (is (= (str (inc i)) (header (GET "/") "x-count")))))))
  (testing "one String body under two charsets is encoded for each"
    (let [body "héllo"
          n (atom 0)
          handler (fn [_] {:status 200
                           :headers {"Content-Type" (if (even? (swap! n inc))
                                                      "text/plain; charset=UTF-8"
                                                      "text/plain; charset=ISO-8859-1")}
                           :body body})]
      (with-server handler {}
        (dotimes [i 6]
          (let [r (GET "/" {:as :bytes})
                cs (if (str/includes? (header r "content-type") "UTF-8")
                     StandardCharsets/UTF_8 StandardCharsets/ISO_8859_1)]
            (is (= "héllo" (String. ^bytes (:body r) cs)) (str "request " i))))))))

(defn- headers-only
  "A response that has nothing but a header map: all `ResponseWriter/writeFixed` and
  `ResponseWriter/clearHeaders` use."
  ^HttpServerResponse [^MultiMap m]
  (reify HttpServerResponse (headers [_] m)))

(defn- lines [^MultiMap m]
  (mapv (fn [^java.util.Map$Entry e] [(.getKey e) (.getValue e)]) (.entries m)))

(defn- write-fixed
  "The header lines and body text `ResponseWriter/writeFixed` makes of `response` on a new
  response, the header map it wrote, and how many times it said the connection closes."
  [response date server]
  (let [m (HttpHeaders/headers)
        closes (atom 0)
        b (ResponseWriter/writeFixed (headers-only m) response date server Framing/BODY
                                     (reify ResponseWriter$LastResponse
                                       (closeAfterResponse [_] (swap! closes inc))))]
    [(lines m) (when b (.toString ^Buffer b "UTF-8")) m @closes]))

(deftest a-connection-close-in-the-headers-is-told-once-per-response
  ;; whether the map is written line by line (seen once), from its compiled plan (seen twice)
  ;; or as a shared block (from the third time), and whatever the case or list around close
  (doseq [headers [{"Connection" "close"} {"connection" "Keep-Alive, CLOSE"}
                   {"Connection" ["keep-alive" " close "]} {"CONNECTION" "close" "X" "1"}]]
    (testing (pr-str headers)
      (dotimes [i 4]
        (is (= 1 (peek (write-fixed {:status 200 :headers headers :body "x"} nil nil)))
            (str "response " (inc i))))))
  (doseq [headers [{"Connection" "keep-alive"} {"Connection" "closed, x-close"} {"X-Connection" "close"}
                   {"Content-Type" "text/plain"}]]
    (testing (pr-str headers)
      (dotimes [i 4]
        (is (zero? (peek (write-fixed {:status 200 :headers headers :body "x"} nil nil)))
            (str "response " (inc i)))))))

(deftest fixed-heads-from-shared-header-blocks
  ;; from its third sight, a constant :headers map's whole head (Date, Server, its lines, the
  ;; JSON Content-Type, Content-Length) is one read-only block shared into each response's
  ;; header map: it must write exactly what the line-by-line path writes, for every Date,
  ;; Server value and body length, and an error answer must be able to clear it
  (let [d1 (HttpHeaders/createOptimized "Tue, 24 Nov 2026 16:00:00 GMT")
        d2 (HttpHeaders/createOptimized "Tue, 24 Nov 2026 16:00:01 GMT")
        donkey (HttpHeaders/createOptimized "donkey")
        other (HttpHeaders/createOptimized "other")
        constant {"Content-Type" "text/plain"}
        fresh (fn [] {"Content-Type" (str "text/" "plain")}) ; a new map each time: never compiled
        same-as-fresh (fn [body date server n]
                        (dotimes [i n]
                          (let [[want-lines want-body] (write-fixed {:status 200 :headers (fresh) :body body}
                                                                    date server)
                                [got-lines got-body] (write-fixed {:status 200 :headers constant :body body}
                                                                  date server)]
                            (is (= want-lines got-lines) (str "sight " i " of " (pr-str body) " " date " " server))
                            (is (= want-body got-body)))))]
    (testing "every sight, a new Date, another Server value and none"
      (same-as-fresh "hello" d1 donkey 6)
      (same-as-fresh "hello" d2 donkey 3)
      (same-as-fresh "hello" d2 other 4)
      (same-as-fresh "hello" d2 nil 4)
      (same-as-fresh "hello" d1 donkey 2))
    (testing "many body lengths and JSON bodies through the same map"
      (doseq [n (concat (range 0 40) [2047 2048 5000])]
        (same-as-fresh (apply str (repeat n "x")) d1 donkey 3))
      (doseq [n (range 0 20)]
        (same-as-fresh {"message" (apply str (repeat n "y"))} d1 donkey 3))
      (let [json-typed {"Content-Type" "application/vnd.api+json"}]
        (dotimes [_ 4]
          (is (= [["date" "Tue, 24 Nov 2026 16:00:00 GMT"] ["server" "donkey"]
                  ["content-type" "application/vnd.api+json"] ["content-length" "7"]]
                 (mapv (fn [[k v]] [(str/lower-case k) v])
                       (first (write-fixed {:headers json-typed :body {"a" 1}} d1 donkey))))))))
    (testing "clearHeaders empties a response that shares a block, for good"
      (dotimes [_ 3] (write-fixed {:status 200 :headers constant :body "hello"} d1 donkey))
      (let [[shared _ ^MultiMap m] (write-fixed {:status 200 :headers constant :body "hello"} d1 donkey)]
        (is (= 4 (count shared)))
        (ResponseWriter/clearHeaders (headers-only m))
        (is (.isEmpty m))
        (.add m "X-Error" "1")
        (is (= [["X-Error" "1"]] (lines m)) "the block's lines do not come back with the next add")
        (is (= shared (first (write-fixed {:status 200 :headers constant :body "hello"} d1 donkey)))
            "the block itself is untouched"))
      (let [[_ _ ^MultiMap m] (write-fixed {:status 200 :headers constant :body "hello"} d1 donkey)]
        (.clear m)
        (.add m "X-Error" "1")
        (is (= 5 (count (lines m)))
            (str "the response shared a block, which Vert.x's own clear() keeps and copies back "
                 "in on the next add; if this fails, Vert.x has fixed that (and no block was "
                 "shared, or clearHeaders is no longer needed)"))))
    (testing "on the wire: keep-alive, pipelined, and on a connection the response closes"
      (doseq [handler [(const {:status 200 :headers constant :body "hello"})
                       {:routes [{:path "/" :handler-mode :non-blocking
                                  :handler (fn [_ respond _]
                                             (respond {:status 200 :headers constant :body "hello"}))}]}]]
        (with-server handler {}
          (let [resp (raw (str (apply str (repeat 7 "GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
                               "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
                heads (mapv without-date (re-seq #"(?s)HTTP/1\.1 .*?\r\n\r\nhello" resp))]
            (is (= 8 (count heads)) resp)
            (is (apply = (butlast heads)) resp)
            (is (= "HTTP/1.1 200 OK\r\nserver: donkey\r\nContent-Type: text/plain\r\ncontent-length: 5\r\n\r\nhello"
                   (first heads)))
            (is (= (str/replace (first heads) "content-length: 5\r\n"
                                "content-length: 5\r\nconnection: close\r\n")
                   (peek heads))
                "the closing response's lines are the same, plus Connection: close")))))))

(deftest header-injection-is-refused
  (with-server (const {:status 200 :headers {"X-Evil" "a\r\nSet-Cookie: pwned=1"} :body "x"}) {}
    (dotimes [_ 3] ; the same map again: refused every time, never compiled into a plan
      (let [r (GET "/")]
        (is (= 500 (:status r)))
        (is (nil? (header r "set-cookie")))
        (is (nil? (header r "x-evil")))))))

(deftest date-and-server-headers
  (with-server (const {:status 200 :body "d"}) {}
    (let [r (GET "/")]
      (is (= "donkey" (header r "server")))
      (is (re-matches #"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT"
                      (header r "date")))
      (let [parsed (java.time.ZonedDateTime/parse (header r "date")
                                                  java.time.format.DateTimeFormatter/RFC_1123_DATE_TIME)]
        (is (< (Math/abs (- (.toEpochSecond parsed) (quot (System/currentTimeMillis) 1000))) 3)
            "the cached Date is current"))))
  (testing "the handler's own Server header wins; :server-header nil sends none"
    (with-server (const {:status 200 :headers {"Server" "mine"}}) {}
      (is (= "mine" (header (GET "/") "server"))))
    (with-server (const {:status 200}) {:server-header nil}
      (is (nil? (header (GET "/") "server"))))))

(deftest head-has-no-body
  (doseq [body ["0123456789" (.getBytes "0123456789") (list "0123456789")]]
    (with-server (const {:status 200 :body body}) {}
      (let [resp (raw "HEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            [head1 rest1] (str/split resp #"\r\n\r\n" 2)]
        (is (str/starts-with? head1 "HTTP/1.1 200"))
        (is (str/starts-with? rest1 "HTTP/1.1 200") (str "HEAD sent no body for " (class body)))
        (is (str/includes? rest1 "0123456789"))))))

(defn- length-lines
  "The Content-Length values of each response head in a raw exchange, one vector per head."
  [^String resp]
  (vec (for [head (re-seq #"(?s)HTTP/1\.1 \d{3}.*?\r\n\r\n" resp)]
         (mapv second (re-seq #"(?i)\r\ncontent-length: *([^\r]*)(?=\r\n)" head)))))

(deftest content-length-lines-on-the-wire
  ;; the kernel sets Content-Length of a fixed body itself (pre-encoded values up to 2047,
  ;; made per response above): exactly one line with the byte count (for HEAD, the count a
  ;; GET would get), none for 304,
  ;; whether the body was ended on the loop (non-blocking route) or through a worker
  (let [big (apply str (repeat 5000 "x"))
        bodies {"/s" "héllo" "/b" (.getBytes "bytes!") "/nil" nil "/big" big
                "/json" {"a" 1} "/304" nil}
        answer (fn [uri] {:status (if (= uri "/304") 304 200) :body (get bodies uri)})
        script (str (apply str (for [_ (range 2) p ["/s" "/b" "/nil" "/big" "/json" "/304"]]
                                 (str "GET " p " HTTP/1.1\r\nHost: x\r\n\r\n")))
                    "HEAD /s HTTP/1.1\r\nHost: x\r\n\r\n"
                    "HEAD /big HTTP/1.1\r\nHost: x\r\n\r\n"
                    "GET /s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        want (vec (apply concat (repeat 2 [["6"] ["6"] ["0"] ["5000"] ["7"] []])))]
    (doseq [[mode handler] [[:sync (fn [req] (answer (:uri req)))]
                            [:non-blocking
                             {:routes (vec (for [p (keys bodies)]
                                             {:path p :handler-mode :non-blocking
                                              :handler (fn [req respond _]
                                                         (respond (answer (:uri req))))}))}]]]
      (with-server handler {}
        (let [resp (raw script)]
          (is (= (into want [["6"] ["5000"] ["6"]]) (length-lines resp)) (str mode "\n" resp))
          (is (str/ends-with? resp "\r\n\r\nh\u00c3\u00a9llo") (str mode ": the last body is whole")))))))

(deftest content-length-from-handler-is-corrected
  (with-server (const {:status 200 :headers {"Content-Length" "999"} :body "four"}) {}
    (let [r (GET "/")]
      (is (= "4" (header r "content-length")))
      (is (= "four" (:body r))))))

(deftest keep-alive-and-pipelining
  (with-server (fn [req] {:status 200 :body (:uri req)}) {}
    (let [resp (raw (str (apply str (for [i (range 20)] (str "GET /p" i " HTTP/1.1\r\nHost: x\r\n\r\n")))
                         "GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
          bodies (re-seq #"/p\d+|/last" resp)]
      (is (= 21 (count (re-seq #"HTTP/1.1 200" resp))) "every pipelined request answered")
      (is (= (concat (map #(str "/p" %) (range 20)) ["/last"]) bodies) "in order"))))

(deftest status-codes
  (doseq [s [201 302 404 418 503]]
    (with-server (const {:status s :headers {"Location" "/x"}}) {}
      (is (= s (:status (GET "/")))))))

(defn- counting-stream
  "An InputStream of `total` bytes that counts how many the server has read in `served`."
  ^InputStream [^long total ^java.util.concurrent.atomic.AtomicLong served]
  (proxy [InputStream] []
    (read
      ([] (if (< (.get served) total) (do (.incrementAndGet served) 65) -1))
      ([^bytes b] (.read ^InputStream this b 0 (alength b)))
      ([^bytes b off len]
       (let [left (- total (.get served))]
         (if (<= left 0)
           -1
           (let [n (int (min left len))]
             (java.util.Arrays/fill b (int off) (int (+ off n)) (byte 65))
             (.addAndGet served n)
             n)))))))

(deftest large-stream-to-a-slow-reader-is-flow-controlled
  (let [total (* 256 1024 1024)
        served (java.util.concurrent.atomic.AtomicLong.)]
    (with-server (fn [_] {:status 200 :body (counting-stream total served)}) {}
      (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
        (.setReceiveBufferSize s 65536)
        (.setSoTimeout s 10000)
        (.write (.getOutputStream s) (.getBytes "GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
        (Thread/sleep 1500)
        (let [read-while-paused (.get served)]
          (is (< read-while-paused (* 32 1024 1024))
              (str "the server read " read-while-paused " bytes of the body while the client read none"))
          (let [in (.getInputStream s) buf (byte-array 262144)
                ;; count the body's bytes ('A'); chunk framing is hex digits and CRLF
                body-bytes (loop [as 0]
                             (if (>= as total)
                               as
                               (let [n (try (.read in buf) (catch java.net.SocketTimeoutException _ -2))]
                                 (if (pos? n)
                                   (recur (+ as (long (loop [i 0 c 0] (if (< i n) (recur (inc i) (if (= 65 (aget buf i)) (inc c) c)) c)))))
                                   as))))]
            (is (>= body-bytes total) (str "the whole body arrived: " body-bytes " of " total
                                           ", server read " (.get served)))
            (is (= total (.get served)))))))))
