(ns donkey.http2-test
  "HTTP/2 over cleartext (h2c: prior knowledge and Upgrade) with a frame-level client
  (donkey.h2-client) and java.net.http: the Ring request and response on a stream, bodies
  with and without a length, the kernel's answers as stream resets rather than connection
  closes, the limits and timeouts per stream and per connection. TLS (ALPN) and the defences
  against abusive clients are in donkey.http2-tls-test and donkey.http2-attack-test."
  (:require [clojure.edn :as edn]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.h2-client :as h2]
            [donkey.scope :as scope]
            [donkey.server :as server])
  (:import (java.io ByteArrayInputStream File)
           (java.net URI)
           (java.net.http HttpClient HttpClient$Version HttpRequest HttpRequest$BodyPublishers
                          HttpResponse HttpResponse$BodyHandlers)
           (java.nio.charset StandardCharsets)
           (java.time Duration)
           (java.util.concurrent CountDownLatch TimeUnit)))

(set! *warn-on-reflection* true)

(defn- facts
  "What the handler saw of the request, as EDN."
  [req]
  (pr-str {:protocol (:protocol req) :scheme (:scheme req) :method (:request-method req)
           :uri (:uri req) :query (:query-string req) :server-name (:server-name req)
           :server-port (:server-port req) :host (get-in req [:headers "host"])
           :x (get-in req [:headers "x-test"])
           :body (when-let [b (:body req)] (count (.readAllBytes ^java.io.InputStream b)))}))

(defn- describe [req]
  {:status 200 :headers {"content-type" "application/edn"} :body (facts req)})

(defmacro ^:private with-h2c
  "Runs `body` with `port` bound to the port of a server of `handler` started with h2c on and
  `opts`."
  [[port handler opts] & body]
  `(with-open [s# (server/run-server ~handler (merge {:port 0 :join? false :event-loops 1
                                                      :h2c? true}
                                                     ~opts))]
     (let [~port (server/port s#)]
       ~@body)))

(defn- read-edn [r] (edn/read-string (:body r)))

;; ---- the Ring request and response on a stream ------------------------------------------

(deftest a-stream-carries-the-ring-request-and-response
  (doseq [[mode handler opts] [["sync" describe {}]
                               ["async" (fn [req respond _] (respond (describe req))) {:async? true}]]]
    (testing mode
      (with-h2c [port handler opts]
        (let [c (h2/connect port)]
          (try
            (let [r (h2/request! c 1 "GET" "/a/b?x=1&y=2" [["x-test" "yes"]] nil)]
              (is (= 200 (:status r)))
              (is (= :done (:end r)))
              (is (= {:protocol "HTTP/2.0" :scheme :http :method :get :uri "/a/b" :query "x=1&y=2"
                      :server-name "localhost" :server-port port :host "localhost" :x "yes" :body nil}
                     (read-edn r))
                  "a GET that ends with its HEADERS has no :body; Host comes from :authority")
              (is (= "application/edn" (get-in r [:headers "content-type"])))
              (is (some? (get-in r [:headers "date"])))
              (is (= "donkey" (get-in r [:headers "server"]))))
            (testing "a body with a Content-Length"
              (let [r (h2/request! c 3 "POST" "/p" [["content-length" "5"]] "hello")]
                (is (= 5 (:body (read-edn r))))))
            (testing "a body without a length, delimited by the stream's end"
              (let [r (h2/request! c 5 "PUT" "/p" [] (byte-array 40000 (byte 7)))]
                (is (= 40000 (:body (read-edn r))))))
            (testing "HEAD: the length a GET would get, no DATA"
              (let [r (h2/request! c 7 "HEAD" "/h" [] nil)]
                (is (= 200 (:status r)))
                (is (= "" (:body r)))
                (is (not (some #{:data} (:frames r))))
                (is (pos? (parse-long (get-in r [:headers "content-length"]))))))
            (finally (h2/close! c))))))))

(deftest every-body-type-is-sent-on-a-stream
  (let [f (doto (File/createTempFile "donkey-h2" ".txt") (.deleteOnExit))
        _ (spit f "from a file")
        bodies {"/string" "a string"
                "/bytes" (.getBytes "some bytes" StandardCharsets/UTF_8)
                "/stream" (fn [] (ByteArrayInputStream. (.getBytes "an input stream" StandardCharsets/UTF_8)))
                "/seq" (fn [] (map str ["a " "lazy " "seq"]))
                "/file" f
                "/json" {:json true}
                "/nil" nil}
        handler (fn [req]
                  (let [b (get bodies (:uri req))]
                    {:status 200 :body (if (fn? b) (b) b)}))]
    (with-h2c [port handler {}]
      (let [c (h2/connect port)]
        (try
          (doseq [[[path expected] id] (map vector [["/string" "a string"] ["/bytes" "some bytes"]
                                                    ["/stream" "an input stream"] ["/seq" "a lazy seq"]
                                                    ["/file" "from a file"] ["/json" "{\"json\":true}"]
                                                    ["/nil" ""]]
                                            (iterate #(+ 2 %) 1))]
            (testing path
              (let [r (h2/request! c id "GET" path)]
                (is (= 200 (:status r)))
                (is (= expected (:body r))))))
          (finally (h2/close! c)))))))

(deftest the-head-checks-apply-to-streams
  (with-h2c [port (fn [req] {:status 200 :body (str (get-in req [:headers "host"]))}) {}]
    (let [c (h2/connect port)]
      (try
        (is (= "localhost" (:body (h2/request! c 1 "GET" "/" [["host" "localhost"]] nil))))
        (let [r (h2/request! c 3 "GET" "/" [["host" "localhost"] ["host" "localhost"]] nil)]
          (is (= 400 (:status r)))
          (is (= "Bad Request: more than one Host header" (:body r))))
        (testing "a Host that is not the :authority: Vert.x resets the stream (PROTOCOL_ERROR)"
          (is (= 1 (:reset (h2/request! c 5 "GET" "/" [["host" "other"]] nil)))))
        (testing "and the connection still serves"
          (is (= 200 (:status (h2/request! c 7 "GET" "/")))))
        (testing "without a Host line, each stream's Host is its own :authority"
          (doseq [[id authority] [[9 "a.example:8443"] [11 "b.example"] [13 "a.example:8443"]
                                  [15 "[::1]:8080"] [17 "b.example"]]]
            (let [r (h2/request! c id "GET" "/" [[":authority" authority]] nil)]
              (is (= 200 (:status r)) authority)
              (is (= authority (:body r))))))
        (testing "a Host line beside the :authority is the one seen"
          (is (= "b.example" (:body (h2/request! c 19 "GET" "/"
                                                 [[":authority" "b.example"] ["host" "b.example"]]
                                                 nil)))))
        (finally (h2/close! c))))))

(def ^:private connection-fields
  {"Connection" "close" "Keep-Alive" "timeout=5" "Transfer-Encoding" "chunked" "Upgrade" "h2c"
   "Proxy-Connection" "keep-alive" "X-Kept" "1"})

(deftest connection-specific-response-headers-are-not-sent
  ;; the same :headers map each time: from its second response on it is written from its
  ;; compiled plan, which must leave the same fields out
  (doseq [[what body] [["a fixed body" (constantly "ok")]
                       ["a streamed body" #(ByteArrayInputStream. (.getBytes "ok" StandardCharsets/UTF_8))]]
          [mode handler opts] [["sync" (fn [_] {:status 200 :headers connection-fields :body (body)}) {}]
                               ["on the loop" {:routes [{:path "/" :handler-mode :non-blocking
                                                         :handler (fn [_ respond _]
                                                                    (respond {:status 200 :headers connection-fields
                                                                              :body (body)}))}]}
                                {}]]]
    (testing (str what ", " mode)
      (with-h2c [port handler opts]
        (let [c (h2/connect port)]
          (try
            (doseq [id [1 3 5 7]]
              (let [r (h2/request! c id "GET" "/")]
                (is (= 200 (:status r)))
                (is (= "ok" (:body r)))
                (is (= "1" (get-in r [:headers "x-kept"])))
                (is (every? #(= % (str/lower-case %)) (keys (:headers r))) "names in lower case")
                (is (empty? (select-keys (:headers r) ["connection" "keep-alive" "transfer-encoding"
                                                       "upgrade" "proxy-connection"])))))
            (testing "and the connection stays open: a handler's Connection: close ends nothing"
              (is (= 200 (:status (h2/request! c 9 "GET" "/")))))
            (finally (h2/close! c))))))))

(deftest a-route-table-serves-streams
  (with-h2c [port {:routes [{:path "/users/:id" :methods [:get]
                             :handler (fn [req] {:status 200 :body (get-in req [:path-params :id])})}
                            {:path "/nb" :handler-mode :non-blocking
                             :handler (fn [_ respond _] (respond {:status 201 :body "nb"}))}]}
             {}]
    (let [c (h2/connect port)]
      (try
        (is (= ["42" 200] ((juxt :body :status) (h2/request! c 1 "GET" "/users/42"))))
        (is (= ["nb" 201] ((juxt :body :status) (h2/request! c 3 "GET" "/nb"))))
        (is (= 404 (:status (h2/request! c 5 "GET" "/nowhere"))))
        (is (= 405 (:status (h2/request! c 7 "POST" "/users/1" [["content-length" "0"]] ""))))
        (finally (h2/close! c))))))

;; ---- the kernel's answers end a stream, not the connection ------------------------------

(deftest a-body-over-the-limit-gets-413-and-a-reset-stream-only
  (with-h2c [port describe {:max-body-size 1000}]
    (let [c (h2/connect port)]
      (try
        (testing "declared too long"
          (let [r (h2/request! c 1 "POST" "/" [["content-length" "5000"]] (byte-array 5000))]
            (is (= 413 (:status r)))))
        (testing "grown too long, without a length"
          (let [r (h2/request! c 3 "POST" "/" [] (byte-array 5000))]
            (is (= 413 (:status r)))))
        (testing "the connection still serves"
          (is (= 200 (:status (h2/request! c 5 "GET" "/")))))
        (finally (h2/close! c))))))

(deftest a-handler-past-the-request-timeout-gets-503-on-its-stream
  (let [release (CountDownLatch. 1)]
    (with-h2c [port (fn [req]
                      (when (= "/slow" (:uri req)) (.await release 10 TimeUnit/SECONDS))
                      {:status 200 :body "done"})
               {:request-timeout 300}]
      (let [c (h2/connect port)]
        (try
          (h2/send! c (h2/headers-frame (:enc c) 1 (h2/request-headers "GET" "/slow" []) true))
          (testing "another stream is served meanwhile"
            (is (= "done" (:body (h2/request! c 3 "GET" "/fast")))))
          (let [r (h2/read-response c 1)]
            (is (= 503 (:status r))))
          (testing "and after"
            (is (= "done" (:body (h2/request! c 5 "GET" "/fast")))))
          (finally (.countDown release) (h2/close! c)))))))

(deftest a-stream-the-client-resets-ends-its-request
  (let [started (CountDownLatch. 1)
        over (promise)
        held (promise)]
    (with-h2c [port (fn [req respond _]
                      (if (= "/wait" (:uri req))
                        (do (scope/at-end! (fn [] (deliver over true)))
                            (deliver held respond)
                            (.countDown started))
                        (respond {:status 200 :body "ok"})))
               {:async? true}]
      (let [c (h2/connect port)]
        (try
          (h2/send! c (h2/headers-frame (:enc c) 1 (h2/request-headers "GET" "/wait" []) true))
          (is (.await started 5 TimeUnit/SECONDS))
          (h2/send! c (h2/rst-stream 1 8))
          (is (true? (deref over 5000 false)) "the request's end actions ran")
          (testing "a response after the reset is dropped, and the connection serves on"
            (@held {:status 200 :body "late"})
            (is (= "ok" (:body (h2/request! c 3 "GET" "/")))))
          (finally (h2/close! c)))))))

(deftest expect-100-continue-is-answered-on-the-stream
  (with-h2c [port describe {}]
    (let [c (h2/connect port)]
      (try
        (h2/send! c (h2/headers-frame (:enc c) 1 (h2/request-headers "POST" "/" [["content-length" "3"]
                                                                            ["expect" "100-continue"]])
                                      false))
        (h2/send! c (h2/frame :data h2/end-stream 1 (.getBytes "abc" StandardCharsets/UTF_8)))
        (let [r (h2/read-response c 1)]
          (is (= [100] (:interim r)))
          (is (= 3 (:body (read-edn r)))))
        (finally (h2/close! c))))))

;; ---- connections -------------------------------------------------------------------------

(deftest h2c-upgrade-and-java-net-http
  (with-h2c [port describe {}]
    (let [^HttpClient client (-> (HttpClient/newBuilder)
                                 (.version HttpClient$Version/HTTP_2)
                                 (.connectTimeout (Duration/ofSeconds 5))
                                 (.build))
          send (fn [^HttpRequest r] (.send client r (HttpResponse$BodyHandlers/ofString)))
          ^HttpResponse first-r (send (.build (HttpRequest/newBuilder (URI/create (str "http://127.0.0.1:" port "/up")))))]
      (is (= 200 (.statusCode first-r)))
      (is (= HttpClient$Version/HTTP_2 (.version first-r)) "upgraded with Upgrade: h2c")
      (is (= "HTTP/2.0" (:protocol (edn/read-string (.body first-r)))))
      (testing "later requests, with a body of 1 MiB (flow control)"
        (let [^HttpResponse r (send (-> (HttpRequest/newBuilder (URI/create (str "http://127.0.0.1:" port "/big")))
                                        (.POST (HttpRequest$BodyPublishers/ofByteArray (byte-array (* 1024 1024))))
                                        (.build)))]
          (is (= HttpClient$Version/HTTP_2 (.version r)))
          (is (= (* 1024 1024) (:body (edn/read-string (.body r))))))))))

(deftest many-streams-on-many-connections-each-get-their-own-answer
  ;; sync handlers get each connection's streams after its read and their answers are written
  ;; connection by connection: every stream must still get its own response, whatever the
  ;; order the workers finish in
  (with-h2c [port (fn [req]
                    (when (zero? (mod (hash (:query-string req)) 5)) (Thread/sleep 2))
                    {:status 200 :headers {"Content-Type" "text/plain"} :body (:query-string req)})
             {:worker-threads 4}]
    (let [clients (vec (repeatedly 4 #(-> (HttpClient/newBuilder)
                                          (.version HttpClient$Version/HTTP_2)
                                          (.connectTimeout (Duration/ofSeconds 5))
                                          (.build))))
          uri (fn [c i] (URI/create (str "http://127.0.0.1:" port "/n?c" c "-" i)))
          ;; one request each first, so that each client has upgraded its connection to h2c
          _ (doseq [[c ^HttpClient client] (map-indexed vector clients)]
              (.send client (.build (HttpRequest/newBuilder ^URI (uri c "up")))
                     (HttpResponse$BodyHandlers/ofString)))
          futures (vec (for [[c ^HttpClient client] (map-indexed vector clients)
                             i (range 60)]
                         [(str "c" c "-" i)
                          (.sendAsync client (.build (HttpRequest/newBuilder ^URI (uri c i)))
                                      (HttpResponse$BodyHandlers/ofString))]))]
      (doseq [[want ^java.util.concurrent.CompletableFuture f] futures]
        (let [^HttpResponse r (.get f 20 TimeUnit/SECONDS)]
          (is (= HttpClient$Version/HTTP_2 (.version r)))
          (is (= 200 (.statusCode r)))
          (is (= want (.body r))))))))

(deftest without-h2c-a-prior-knowledge-client-is-refused
  (with-open [s (server/run-server describe {:port 0 :join? false :event-loops 1})]
    (let [c (h2/connect (server/port s))]
      (try
        (is (h2/closed-within? c 5000))
        (finally (h2/close! c))))))

(deftest an-idle-h2-connection-is-closed
  (with-h2c [port describe {:idle-timeout 400 :header-timeout 400}]
    (let [c (h2/connect port)]
      (try
        (is (= 200 (:status (h2/request! c 1 "GET" "/"))))
        (is (h2/closed-within? c 3000))
        (finally (h2/close! c))))))

(deftest a-silent-connection-is-counted-and-closed-with-h2c-on
  (with-h2c [port describe {:max-connections 2 :header-timeout 500}]
    (let [silent (repeatedly 2 #(doto (java.net.Socket. "127.0.0.1" (int port)) (.setSoTimeout 3000)))]
      (try
        (Thread/sleep 200)
        (testing "the limit counts connections that have sent nothing yet"
          (with-open [third (doto (java.net.Socket. "127.0.0.1" (int port)) (.setSoTimeout 3000))]
            (is (= -1 (try (.read (.getInputStream third)) (catch java.io.IOException _ -1))))))
        (testing "and they are closed after the header timeout"
          (doseq [^java.net.Socket s silent]
            (is (= -1 (try (.read (.getInputStream s)) (catch java.io.IOException _ -1))))))
        (finally (doseq [^java.net.Socket s silent] (.close s)))))))

(deftest graceful-stop-sends-goaway-and-drains-open-streams
  (let [started (CountDownLatch. 1)
        s (server/run-server (fn [_] (.countDown started) (Thread/sleep 500) {:status 200 :body "drained"})
                             {:port 0 :join? false :event-loops 1 :h2c? true :shutdown-timeout 5000})
        c (h2/connect (server/port s))]
    (try
      (h2/send! c (h2/headers-frame (:enc c) 1 (h2/request-headers "GET" "/" []) true))
      (is (.await started 5 TimeUnit/SECONDS))
      (let [stopped (future (server/stop s))
            frames (loop [seen []]
                     (let [f (h2/read-frame c)]
                       (if (#{:eof :timeout :reset} (:type f))
                         (conj seen f)
                         (recur (conj seen f)))))
            types (map :type frames)]
        @stopped
        (is (some #{:goaway} types))
        (is (some #(and (= :data (:type %)) (= 1 (:stream %))
                        (= "drained" (String. ^bytes (:payload %) StandardCharsets/UTF_8)))
                  frames)
            "the open stream was answered"))
      (finally (h2/close! c) (server/stop s)))))

(deftest a-websocket-listener-answering-an-h2-request-gets-400
  (with-h2c [port (fn [_] {:ring.websocket/listener {:on-open (fn [_])}}) {}]
    (let [c (h2/connect port)]
      (try
        (let [r (h2/request! c 1 "GET" "/ws")]
          (is (= 400 (:status r)))
          (is (re-find #"WebSocket" (:body r))))
        (testing "an HTTP/1.1 Upgrade header is malformed on HTTP/2: the stream is refused"
          (is (= 1 (:reset (h2/request! c 3 "GET" "/ws" [["upgrade" "websocket"]] nil)))))
        (finally (h2/close! c))))))
