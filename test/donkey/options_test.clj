(ns donkey.options-test
  "ring-jetty's and http-kit's options: supported, aliases, refused, and the ones that change the
  worker pool, the Server header, the response buffer and the server's threads; and the option
  table, against ServerConfig, the docstring and the README. Real servers on :port 0."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.options :as options]
            [donkey.options.check :as check]
            [donkey.options.doc :as options-doc]
            [donkey.server :as server]
            [donkey.test-util :as u :refer [with-server GET raw]])
  (:import (donkey.kernel Server)
           (donkey.kernel.config ServerConfig)
           (io.vertx.core Vertx)
           (java.io ByteArrayInputStream InputStream)
           (java.net Socket)
           (java.util.concurrent CountDownLatch Executors Future TimeUnit)))

(defn- hello [_] {:status 200 :headers {"content-type" "text/plain"} :body "hi"})

(defn- either-mode
  "A handler of both arities, which any :async? setting accepts."
  ([request] (hello request))
  ([request respond _raise] (respond (hello request))))

(defn- cfg
  "The kernel configuration run-server would start with for `opts`."
  ^ServerConfig [opts]
  (#'server/config either-mode opts))

(defn- refusal
  "The message of the IllegalArgumentException run-server throws for `opts`, or nil."
  [opts]
  (try (server/stop (server/run-server hello (merge {:port 0 :join? false} opts)))
       nil
       (catch IllegalArgumentException e (ex-message e))))

(defn- header-names [^String raw-response]
  (set (map #(.toLowerCase ^String (second %)) (re-seq #"(?m)^([A-Za-z-]+):" raw-response))))

(def ^:private get-close "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")

;; ---- the Server and Date headers ---------------------------------------------------------

(deftest send-server-version-false-drops-the-server-header
  (testing "on a handler's response and on the kernel's own answers"
    (with-server hello {:send-server-version? false}
      (let [ok (raw get-close)
            bad (raw "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n")]
        (is (re-find #"^HTTP/1.1 200" ok))
        (is (not (contains? (header-names ok) "server")) ok)
        (is (re-find #"^HTTP/1.1 400" bad))
        (is (not (contains? (header-names bad) "server")) bad))))
  (testing "true (ring-jetty's default) leaves :server-header in charge"
    (with-server hello {:send-server-version? true}
      (is (.contains ^String (raw get-close) "\r\nserver: donkey\r\n")))
    (with-server hello {:send-server-version? true :server-header "edge"}
      (is (.contains ^String (raw get-close) "\r\nserver: edge\r\n"))))
  (testing "false beside a :server-header that names one is a contradiction"
    (is (re-find #"disagree: .*:server-header \"x\".*:send-server-version\? false"
                 (refusal {:send-server-version? false :server-header "x"})))
    (is (nil? (refusal {:send-server-version? false :server-header nil})) "agreeing is fine")))

(deftest send-date-header-and-async-timeouts-are-validated-and-configured
  (let [c (cfg {})]
    (is (true? (.sendDateHeader c)))
    (is (= -1 (.asyncTimeoutMs c)) "the default: as :request-timeout")
    (is (nil? (.asyncTimeoutHandler c))))
  (let [h (fn [_ respond _] (respond {:status 504}))
        c (cfg {:send-date-header? false :async-timeout 250 :async-timeout-handler h})]
    (is (false? (.sendDateHeader c)))
    (is (= 250 (.asyncTimeoutMs c)))
    (is (identical? h (.asyncTimeoutHandler c))))
  (is (= 0 (.asyncTimeoutMs (cfg {:async-timeout 0}))) "0: no limit")
  (is (= -1 (.asyncTimeoutMs (cfg {:async-timeout nil}))) "nil: the default")
  (doseq [[opts re] [[{:send-date-header? "no"} #":send-date-header\? must be true or false"]
                     [{:async-timeout -2} #":async-timeout must be an integer in -1\.\."]
                     [{:async-timeout 1.5} #":async-timeout must be an integer"]
                     [{:async-timeout-handler "fn"} #":async-timeout-handler must be a function"]]]
    (is (re-find re (str (refusal opts))) (pr-str opts))))

;; ---- aliases ------------------------------------------------------------------------------

;; ---- the kernel honours them -------------------------------------------------------------

(deftest send-date-header-false-drops-the-date-header
  (let [f (doto (java.io.File/createTempFile "donkey-date" ".txt") (.deleteOnExit))]
    (spit f "file")
    (doseq [[what handler request]
            [["a fixed body, twice (a cached header block)" hello get-close]
             ["a constant header map, many times" hello (apply str (concat (repeat 5 "GET / HTTP/1.1\r\nHost: x\r\n\r\n") [get-close]))]
             ["a streamed body" (fn [_] {:status 200 :body (ByteArrayInputStream. (.getBytes "streamed"))}) get-close]
             ["a file" (fn [_] {:status 200 :body f}) get-close]
             ["the kernel's 400" hello "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n"]
             ["the kernel's answer to an unparseable head" hello "GARBAGE\r\n\r\n"]]]
      (testing what
        (with-server handler {:send-date-header? false}
          (let [resp (raw request)]
            (is (re-find #"^HTTP/1.1 " resp) resp)
            (is (not (contains? (header-names resp) "date")) resp)
            (is (contains? (header-names resp) "server"))))))
    (with-server hello {}
      (is (contains? (header-names (raw get-close)) "date") "sent by default"))))

(deftest async-timeout-applies-to-async-handlers
  (testing "an async handler gets :async-timeout, a sync one :request-timeout"
    (with-server {:routes [{:path "/async" :handler-mode :non-blocking :handler (fn [_ _ _])}
                           {:path "/sync" :handler (fn [_] (Thread/sleep 1500) {:status 200 :body "late"})}]}
      {:async-timeout 300 :request-timeout 1000}
      (let [t0 (System/nanoTime)
            r (GET "/async")
            ms (/ (- (System/nanoTime) t0) 1e6)]
        (is (= 503 (:status r)))
        (is (< 250 ms 900) (str "after " (long ms) " ms")))
      (let [t0 (System/nanoTime)
            r (GET "/sync")
            ms (/ (- (System/nanoTime) t0) 1e6)]
        (is (= 503 (:status r)))
        (is (< 950 ms 1450) (str "after " (long ms) " ms")))))
  (testing ":async-timeout 0: no limit for async handlers"
    (with-server (fn [_ respond _] (future (Thread/sleep 600) (respond {:status 200 :body "late"})))
      {:async? true :async-timeout 0 :request-timeout 200}
      (is (= "late" (:body (GET "/")))))))

(deftest async-timeout-handler-answers-in-place-of-the-503
  (let [seen (promise)]
    (with-server (fn [_ _ _])
      {:async? true :async-timeout 200
       :async-timeout-handler (fn [req respond _]
                                (deliver seen (:uri req))
                                (respond {:status 504 :headers {"x-timeout" "yes"} :body "gave up"}))}
      (let [r (GET "/slow")]
        (is (= 504 (:status r)))
        (is (= "gave up" (:body r)))
        (is (= "yes" (u/header r "x-timeout")))
        (is (= "/slow" (deref seen 1000 nil)) "called with the request"))))
  (testing "its raise answers 500; a handler that throws does too"
    (doseq [h [(fn [_ _ raise] (raise (ex-info "no" {})))
               (fn [_ _ _] (throw (ex-info "boom" {})))]]
      (with-server (fn [_ _ _]) {:async? true :async-timeout 200 :async-timeout-handler h}
        (is (= 500 (:status (GET "/")))))))
  (testing "it may answer later, from another thread; the handler's own late answer is dropped"
    (with-server (fn [_ respond _] (future (Thread/sleep 800) (respond {:status 200 :body "too late"})))
      {:async? true :async-timeout 200
       :async-timeout-handler (fn [_ respond _] (future (Thread/sleep 100) (respond {:status 503 :body "busy"})))}
      (let [r (GET "/")]
        (is (= [503 "busy"] [(:status r) (:body r)])))))
  (testing "sync handlers never call it"
    (let [called (atom false)]
      (with-server (fn [_] (Thread/sleep 600) {:status 200})
        {:request-timeout 200 :async-timeout-handler (fn [_ respond _] (reset! called true) (respond {:status 200}))}
        (is (= 503 (:status (GET "/"))))
        (is (not @called))))))

(deftest aliases-set-the-donkey-option
  (doseq [[opts field expected]
          [[{:max-threads 7} #(.workerThreads ^ServerConfig %) 7]
           [{:max-idle-time 4000} #(.idleTimeoutMs ^ServerConfig %) 4000]
           [{:request-header-size 4096} #(.maxHeaderSize ^ServerConfig %) 4096]
           [{:selector-threads 3} #(.eventLoops ^ServerConfig %) 3]
           [{:selector-threads -1} #(.eventLoops ^ServerConfig %) (.availableProcessors (Runtime/getRuntime))]
           [{:ip "127.0.0.1"} #(.host ^ServerConfig %) "127.0.0.1"]
           [{:thread 6} #(.workerThreads ^ServerConfig %) 6]
           [{:n-threads 6} #(.workerThreads ^ServerConfig %) 6]
           [{:n-max-threads 9} #(.workerThreads ^ServerConfig %) 9]
           [{:n-min-threads 2} #(.minThreads ^ServerConfig %) 2]
           [{:pool-opts {:n-threads 5 :queue-size 11}} #(vector (.workerThreads ^ServerConfig %) (.maxQueuedRequests ^ServerConfig %)) [5 11]]
           [{:thread 3 :pool-opts {:n-threads 5}} #(.workerThreads ^ServerConfig %) 5]
           [{:queue-size 20480} #(.maxQueuedRequests ^ServerConfig %) 20480]
           [{:max-body 1000} #(.maxBodySize ^ServerConfig %) 1000]
           [{:max-line 4096} #(.maxInitialLineLength ^ServerConfig %) 4096]
           [{:ring-async? true} #(.async ^ServerConfig %) true]
           [{:legacy-unsafe-remote-addr? true} #(.trustForwardedFor ^ServerConfig %) true]
           [{:legacy-unsafe-remote-addr? false} #(.trustForwardedFor ^ServerConfig %) false]
           [{:allow-virtual? false} #(.virtualThreads ^ServerConfig %) false]
           [{:allow-virtual? true} #(.virtualThreads ^ServerConfig %) (>= (.feature (Runtime/version)) 21)]
           [{:send-server-version? false} #(.serverHeader ^ServerConfig %) nil]
           [{:send-server-version? true} #(.serverHeader ^ServerConfig %) "donkey"]
           [{:max-ws 4096} #(vector (.wsMaxTextSize ^ServerConfig %) (.wsMaxBinarySize ^ServerConfig %)) [4096 4096]]
           [{:max-ws 4096 :ws-max-text-size 4096 :ws-max-binary-size 4096}
            #(vector (.wsMaxTextSize ^ServerConfig %) (.wsMaxBinarySize ^ServerConfig %)) [4096 4096]]
           [{:ws-max-text-size Long/MAX_VALUE} #(.wsMaxTextSize ^ServerConfig %) Long/MAX_VALUE]]]
    (is (= expected (field (cfg opts))) (pr-str opts))))

(deftest aliases-work-on-the-wire
  (testing ":request-header-size is the header section's limit (431 over it)"
    (with-server hello {:request-header-size 512}
      (is (re-find #"^HTTP/1.1 431" (raw (str "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " (apply str (repeat 600 "a"))
                                               "\r\nConnection: close\r\n\r\n"))))
      (is (re-find #"^HTTP/1.1 200" (raw get-close)))))
  (testing ":max-line is the request line's limit (414 over it)"
    (with-server hello {:max-line 300}
      (is (re-find #"^HTTP/1.[01] 414" (raw (str "GET /" (apply str (repeat 400 "a")) " HTTP/1.1\r\nHost: x\r\n\r\n"))))))
  (testing ":max-body is the body limit (413 over it)"
    (with-server hello {:max-body 10}
      (is (= 413 (:status (u/request :post "/" {:body "more than ten bytes"}))))
      (is (= 200 (:status (u/request :post "/" {:body "short"}))))))
  (testing ":max-idle-time closes an idle keep-alive connection"
    (with-server hello {:max-idle-time 300}
      (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
        (.setSoTimeout s 5000)
        (let [out (.getOutputStream s) in (.getInputStream s) buf (byte-array 4096)]
          (.write out (.getBytes "GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
          (.flush out)
          (is (pos? (.read in buf)) "the response")
          (let [t0 (System/nanoTime)
                n (try (.read in buf) (catch java.net.SocketException _ -1))]
            (is (= -1 n) "then the server closes the idle connection")
            (is (< (/ (- (System/nanoTime) t0) 1e6) 3000)))))))
  (testing ":ip is the address bound"
    (let [msg (try (server/stop (server/run-server hello {:port 0 :join? false :ip "203.0.113.7"})) nil
                   (catch IllegalStateException e (ex-message e)))]
      (is (re-find #"could not listen on 203\.0\.113\.7" (str msg)) "not 0.0.0.0: the address given")))
  (testing ":ring-async? true calls the handler with respond and raise"
    (with-server (fn [_ respond _] (respond {:status 200 :body "async"})) {:ring-async? true}
      (is (= "async" (:body (GET "/"))))))
  (testing ":legacy-unsafe-remote-addr? true takes :remote-addr from X-Forwarded-For"
    (with-server (fn [req] {:status 200 :body (:remote-addr req)}) {:legacy-unsafe-remote-addr? true}
      (is (= "10.1.1.1" (:body (GET "/" {:headers {"X-Forwarded-For" "10.1.1.1"}})))))))

(deftest two-names-of-one-setting-must-agree
  (doseq [[opts names] [[{:max-threads 8 :worker-threads 16} [":worker-threads 16" ":max-threads 8"]]
                        [{:thread 4 :max-threads 8} [":max-threads 8" ":thread 4"]]
                        [{:ip "127.0.0.1" :host "0.0.0.0"} [":host \"0.0.0.0\"" ":ip \"127.0.0.1\""]]
                        [{:max-idle-time 1000 :idle-timeout 2000} [":idle-timeout 2000" ":max-idle-time 1000"]]
                        [{:queue-size 5 :max-queued-requests 6} [":max-queued-requests 6" ":queue-size 5"]]
                        [{:ring-async? true :async? false} [":async? false" ":ring-async? true"]]
                        [{:max-ws 10 :ws-max-text-size 20} [":ws-max-text-size 20" ":max-ws 10"]]]]
    (let [msg (str (refusal opts))]
      (is (re-find #"options naming one setting disagree" msg) (pr-str opts))
      (is (every? #(.contains msg ^String %) names) msg)))
  (is (nil? (refusal {:max-threads 8 :worker-threads 8})) "the same value twice is fine")
  (is (nil? (refusal {:max-threads nil :worker-threads 8})) "nil means not given")
  (testing "an alias's bad value is reported under the alias's name"
    (is (re-find #":thread must be an integer" (str (refusal {:thread 0}))))
    (is (re-find #":max-idle-time must be an integer" (str (refusal {:max-idle-time "1s"}))))))

;; ---- refused -----------------------------------------------------------------------------

(deftest options-donkey-cannot-honour-are-refused
  (doseq [[opts what] [[{:sni-host-check? true} #"SNI name"]
                       [{:unix-socket "/tmp/s"} #"Unix domain"] [{:address-finder (fn [])} #"Unix domain"]
                       [{:channel-factory (fn [_])} #"Unix domain"]
                       [{:configurator identity} #"Jetty Server"]
                       [{:thread-pool :pool} #"pool of its own"] [{:worker-pool :pool} #"pool of its own"]
                       [{:websockets {"/ws" {}}} #":ring.websocket/listener"]
                       [{:proxy-protocol :enable} #"PROXY"] [{:proxy-protocol :optional} #"PROXY"]
                       [{:error-logger prn} #"System.Logger"] [{:warn-logger prn} #"System.Logger"]
                       [{:event-logger prn} #"System.Logger"] [{:event-names {}} #"System.Logger"]]]
    (let [k (key (first opts))
          msg (str (refusal opts))]
      (is (.contains msg (str k " is not supported")) (pr-str opts))
      (is (re-find what msg) msg)))
  (testing "the same options saying \"not wanted\" are accepted"
    (doseq [opts [{:ssl? false} {:http? true} {:h2? false} {:proxy-protocol :disable}
                  {:keystore nil} {:configurator nil} {:sni-host-check? false}]]
      (is (nil? (refusal opts)) (pr-str opts)))))

(deftest options-without-effect-are-accepted
  (is (nil? (refusal {:acceptor-threads 2 :response-header-size 8192 :legacy-return-value? false
                      :worker-name-prefix "w-" :prefix "w-" :queue-type :linked
                      :allow-virtual? false :join? false
                      :legacy-content-length? true})))
  (is (nil? (refusal {:legacy-content-length? false}))
      "donkey keeps a handler's Content-Length where it agrees with the body, as false asks"))

;; ---- AppsFlyer Donkey ---------------------------------------------------------------------

(deftest appsflyer-donkey-options-are-honoured-or-refused
  ;; com.appsflyer/donkey's server and create-donkey options, as a team moving from it leaves
  ;; them in the map: each means here what it meant there, or start-up fails saying why
  (testing "mapped to donkey's options"
    (doseq [[opts field expected]
            [[{:instances 3} #(.eventLoops ^ServerConfig %) 3]
             [{:idle-timeout-seconds 45} #(.idleTimeoutMs ^ServerConfig %) 45000]
             [{:idle-timeout-seconds 0} #(.idleTimeoutMs ^ServerConfig %) 0]
             [{:date-header false} #(.sendDateHeader ^ServerConfig %) false]
             [{:date-header true} #(.sendDateHeader ^ServerConfig %) true]
             [{:server-header false} #(.serverHeader ^ServerConfig %) nil]
             [{:server-header true} #(.serverHeader ^ServerConfig %) "donkey"]
             [{:server-header "edge"} #(.serverHeader ^ServerConfig %) "edge"]
             [{:compression true} #(.compression ^ServerConfig %) true]
             [{:compression false} #(.compression ^ServerConfig %) false]]]
      (is (= expected (field (cfg opts))) (pr-str opts))))
  (testing "a bad value is refused under its own name and unit"
    (is (re-find #":idle-timeout-seconds must be an integer in 0\.\.2147483\b"
                 (str (refusal {:idle-timeout-seconds -1}))))
    (is (re-find #":idle-timeout-seconds must be" (str (refusal {:idle-timeout-seconds "60"}))))
    (is (re-find #":instances must be an integer" (str (refusal {:instances 0}))))
    (is (re-find #"disagree" (str (refusal {:instances 2 :event-loops 4})))))
  (testing "what donkey does not do is refused"
    (doseq [[opts what] [[{:debug true} #"System.Logger"]
                         [{:content-type-header true} #"Content-Type"]
                         [{:routes [{:handler identity}]} #"first argument"]
                         [{:middleware [identity]} #"route table"]
                         [{:metrics-enabled true} #"metrics"]
                         [{:metric-registry (Object.)} #"metrics"]
                         [{:metrics-registry (Object.)} #"metrics"]
                         [{:metrics-prefix "api"} #"metrics"]]]
      (let [k (key (first opts))
            msg (str (refusal opts))]
        (is (.contains msg (str k " is not supported")) (pr-str opts))
        (is (re-find what msg) msg))))
  (testing "and accepted when it asks for nothing"
    (is (nil? (refusal {:compression false :debug false :content-type-header false
                        :metrics-enabled false :instances 1 :idle-timeout-seconds 30}))))
  (testing "on the wire"
    (with-server hello {:date-header false :server-header false :idle-timeout-seconds 60}
      (let [names (header-names (raw get-close))]
        (is (contains? names "content-length") "a response was read")
        (is (not (contains? names "date")))
        (is (not (contains? names "server")))))))

;; ---- the worker pool ---------------------------------------------------------------------

(defn- concurrently
  "Sends `n` GETs at once, each on its own connection; returns their futures."
  [n path]
  (let [pool (Executors/newFixedThreadPool n)
        fs (mapv (fn [_] (.submit pool ^Callable (bound-fn [] (GET path)))) (range n))]
    (.shutdown pool)
    fs))

(deftest max-queued-requests-answers-503-over-the-bound
  (doseq [opts [{:worker-threads 2 :max-queued-requests 2} {:thread 2 :queue-size 2}]]
    (testing (pr-str opts)
      (let [release (CountDownLatch. 1)
            handler (fn [_] (.await release 10 TimeUnit/SECONDS) {:status 200 :body "done"})]
        (with-server handler opts
          (let [t0 (System/nanoTime)
                fs (concurrently 7 "/")
                ;; the 3 over 2 running + 2 queued are answered while the others still wait
                early (loop [i 0]
                        (let [done (filterv #(.isDone ^Future %) fs)]
                          (if (or (>= (count done) 3) (> i 100)) done (do (Thread/sleep 50) (recur (inc i))))))
                early-ms (/ (- (System/nanoTime) t0) 1e6)]
            (is (= 3 (count early)) "three requests answered before any handler finished")
            (is (every? #(= 503 (:status (.get ^Future %))) early))
            (is (< early-ms 3000) (str "quickly: " (long early-ms) " ms"))
            (.countDown release)
            (let [statuses (frequencies (map #(:status (.get ^Future % 10 TimeUnit/SECONDS)) fs))]
              (is (= {200 4 503 3} statuses)))
            (testing "and the pool takes requests again once it has room"
              (is (= 200 (:status (GET "/")))))))))))

(deftest without-max-queued-requests-every-request-waits
  (let [release (CountDownLatch. 1)
        handler (fn [_] (.await release 10 TimeUnit/SECONDS) {:status 200})]
    (with-server handler {:worker-threads 2}
      (let [fs (concurrently 7 "/")]
        (Thread/sleep 300)
        (is (not-any? #(.isDone ^Future %) fs))
        (.countDown release)
        (is (every? #(= 200 (:status (.get ^Future % 10 TimeUnit/SECONDS))) fs))))))

(defn- served-threads
  "Runs `n` requests at once through a server started with `opts`, each holding its worker
  until all `n` are in; then, after `wait-ms` of idleness and while the server still runs,
  returns how many worker threads served them and how many of those are alive."
  [opts n wait-ms]
  (let [inside (CountDownLatch. n)
        seen (java.util.concurrent.ConcurrentHashMap/newKeySet)
        handler (fn [_]
                  (.add seen (Thread/currentThread))
                  (.countDown inside)
                  (.await inside 5 TimeUnit/SECONDS)
                  {:status 200})]
    (with-server handler (merge {:worker-threads 8} opts)
      (let [fs (concurrently n "/")]
        (doseq [f fs] (.get ^Future f 10 TimeUnit/SECONDS))
        (Thread/sleep wait-ms)
        {:served (count seen) :alive (count (filter #(.isAlive ^Thread %) seen))}))))

(deftest thread-idle-timeout-and-min-threads
  (testing ":thread-idle-timeout: idle workers exit after it"
    (is (= {:served 4 :alive 0} (served-threads {:thread-idle-timeout 200} 4 1200))
        "one thread per blocked request, all gone after the idle timeout"))
  (testing ":min-threads: that many stay however long they idle"
    (is (= {:served 4 :alive 2} (served-threads {:thread-idle-timeout 200 :min-threads 2} 4 1200))
        "two kept, two gone"))
  (testing "the default keeps idle workers for a minute"
    (is (= {:served 3 :alive 3} (served-threads {} 3 600))))
  (testing ":min-threads threads are started with the server"
    (let [before (set (filter #(re-find #"^donkey-worker-\d" (.getName ^Thread %)) (keys (Thread/getAllStackTraces))))]
      (with-server hello {:min-threads 3}
        (let [now (set (filter #(re-find #"^donkey-worker-\d" (.getName ^Thread %)) (keys (Thread/getAllStackTraces))))]
          (is (<= 3 (count (remove before now))))))))
  (testing "bad values"
    (is (re-find #":min-threads must be an integer in 0\.\.4" (str (refusal {:worker-threads 4 :min-threads 5}))))
    (is (re-find #":thread-idle-timeout must be an integer" (str (refusal {:thread-idle-timeout 0}))))
    (is (re-find #":max-queued-requests must be an integer" (str (refusal {:max-queued-requests -1}))))))

;; ---- daemon threads ----------------------------------------------------------------------

(defn- event-loop-thread
  "A thread of `s`'s event loops."
  ^Thread [^Server s]
  (let [p (promise)
        ^Vertx v (.vertx s)]
    (.runOnContext (.getOrCreateContext v) (reify io.vertx.core.Handler
                                             (handle [_ _] (deliver p (Thread/currentThread)))))
    (deref p 5000 nil)))

(deftest daemon-threads
  (with-open [s (server/run-server hello {:port 0 :join? false})]
    (is (false? (.isDaemon (event-loop-thread s))) "by default a running server keeps the JVM alive"))
  (with-open [s (server/run-server hello {:port 0 :join? false :daemon? true})]
    (is (true? (.isDaemon (event-loop-thread s))) ":daemon? true: it does not")
    (binding [u/*port* (server/port s)]
      (is (= 200 (:status (GET "/"))))))
  (is (re-find #":daemon\? must be true or false" (str (refusal {:daemon? 1})))))

;; ---- the response buffer -----------------------------------------------------------------

(deftest output-buffer-size-decides-the-framing-of-streamed-bodies
  (let [handler (fn [req]
                  (let [n (Long/parseLong (subs (:uri req) 1))]
                    {:status 200 :body (ByteArrayInputStream. (byte-array n (byte 97)))}))
        framing (fn [resp] (cond (re-find #"(?mi)^transfer-encoding: chunked" resp) :chunked
                                 (re-find #"(?mi)^content-length: \d+" resp) :length))]
    (with-server handler {}
      (is (= :length (framing (raw "GET /16000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))))
      (is (= :chunked (framing (raw "GET /20000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")))
          "over the default 16 KiB"))
    (with-server handler {:output-buffer-size 32768}
      (let [resp (raw "GET /20000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")]
        (is (= :length (framing resp)))
        (is (re-find #"(?mi)^content-length: 20000" resp))
        (is (.endsWith ^String resp (apply str (repeat 100 "a"))))))
    (with-server handler {:output-buffer-size 1024}
      (let [resp (raw "GET /2000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")]
        (is (= :chunked (framing resp)))
        (is (= 2000 (count (re-seq #"a" (second (.split ^String resp "\r\n\r\n" 2))))) "the whole body")))))

;; ---- the server value as http-kit's stop function ----------------------------------------

(deftest the-server-is-a-stop-function
  (testing "(server)"
    (let [s (server/run-server hello {:port 0 :join? false})]
      (is (= :running (server/status s)))
      (is (nil? (s)))
      (is (= :stopped (server/status s)))
      (is (nil? (s)) "idempotent")))
  (testing "(server :timeout ms) waits at most that long for in-flight requests"
    (let [entered (promise)
          s (server/run-server (fn [_] (deliver entered true) (Thread/sleep 3000) {:status 200})
                               {:port 0 :join? false})
          resp (binding [u/*port* (server/port s)] (future (try (GET "/") (catch Exception e e))))]
      (deref entered 5000 nil)
      (let [t0 (System/nanoTime)]
        (s :timeout 100)
        (is (< (/ (- (System/nanoTime) t0) 1e6) 2500) "did not wait for the 3 s handler")
        (is (= :stopped (server/status s))))
      (deref resp 5000 nil)))
  (testing "(server {:timeout ms}) and (stop server {:timeout ms})"
    (let [s (server/run-server hello {:port 0 :join? false})]
      (is (nil? (s {:timeout 50})))
      (is (= :stopped (server/status s))))
    (let [s (server/run-server hello {:port 0 :join? false})]
      (is (nil? (server/stop s {:timeout 50})))
      (is (= :stopped (server/status s)))))
  (testing "bad arguments are refused, and the server keeps running"
    (with-open [s (server/run-server hello {:port 0 :join? false})]
      (is (thrown-with-msg? IllegalArgumentException #":timeout" (s :wait 10)))
      (is (thrown-with-msg? IllegalArgumentException #":timeout must be a whole number" (s :timeout "1s")))
      (is (thrown-with-msg? IllegalArgumentException #":timeout must be >= 0" (s :timeout -1)))
      (is (thrown-with-msg? IllegalArgumentException #"takes \{:timeout ms\}" (s 100)))
      (is (= :running (server/status s)))
      (binding [u/*port* (server/port s)]
        (is (= 200 (:status (GET "/"))))))))

;; ---- the option table --------------------------------------------------------------------

(def ^:private non-options
  "ServerConfig's fields that no option sets: run-server fills them from its handler argument,
  from ring-core (its StreamableResponseBody and WebSocket protocols) and from :metrics."
  #{"handler" "router" "notFound" "errorHandler" "streamableWriter" "streamablePred"
    "wsListenerAdapter" "metrics"})

(defn- field-values
  "The value of every public field of `c`."
  [^ServerConfig c]
  (into {} (for [^java.lang.reflect.Field f (.getFields ServerConfig)]
             [(.getName f) (.get f c)])))

(defn- option-values
  "The value of every field of `c` an option sets."
  [^ServerConfig c]
  (apply dissoc (field-values c) non-options))

(def ^:private no-default
  "The options whose default is none (nil)."
  #{:async-timeout-handler :keystore :keystore-type :key-password :ssl-cert :ssl-key :ssl-context
    :truststore :trust-password :exclude-ciphers :exclude-protocols :ws-allowed-origins
    :compression-types :access-log :metrics :metrics-tags :trusted-proxies})

(deftest every-option-has-a-default-a-check-and-a-place
  (let [fresh (ServerConfig.)]
    (doseq [{k :key :keys [check to doc] :as e} options/table]
      (testing k
        (is (some? check) "a check")
        (is (or (some? to) (= :join? k)) "a field, but for :join?, which run-server reads")
        (is (not (str/blank? doc)) "a meaning")
        (let [v (options/default-of e fresh)]
          (is (or (some? v) (no-default k)) "a default")
          (is (nil? (#'check/problem check v {:worker-threads (.workerThreads fresh)}))
              (str "the default " (pr-str v) " passes the check")))))
    (testing "an :int bound naming an option names one checked before it"
      (doseq [[i {:keys [check]}] (map-indexed vector options/table)
              :let [[kind _ hi] (when (vector? check) check)]
              :when (and (= :int kind) (keyword? hi))]
        (is (< -1 (.indexOf ^java.util.List (mapv :key options/table) hi) i))))
    (testing "each option once, each field once"
      (is (apply distinct? (map :key options/table)))
      (is (apply distinct? (keep (comp :field :to) options/table))))
    (testing "every field of ServerConfig is an option's, or filled from the handler"
      (is (= (set (keys (field-values fresh)))
             (into non-options (keep (comp :field :to) options/table)))))
    (testing "the event-loop default is the docs' one per core"
      (is (= (.availableProcessors (Runtime/getRuntime)) (.eventLoops fresh))))))

(deftest no-options-leave-the-defaults-as-they-are
  (let [defaults (option-values (ServerConfig.))]
    (is (= defaults (option-values (cfg {}))))
    (is (= defaults (option-values (cfg nil))))
    (is (= defaults (option-values (cfg (zipmap (remove #{:server-header} (map :key options/table))
                                                (repeat nil)))))
        "nil is the default")
    (is (= (assoc defaults "serverHeader" nil) (option-values (cfg {:server-header nil})))
        "but for :server-header, where nil is the value")))

(deftest unknown-options-are-ignored
  (is (= (option-values (cfg {})) (option-values (cfg {:no-such-option 1 "port" 8080 :pool-opts nil}))))
  (is (nil? (refusal {:no-such-option 1})))
  (testing "as are the ones accepted without effect, whatever their value"
    (is (= (option-values (cfg {})) (option-values (cfg (zipmap options/without-effect (repeat "x"))))))))

(deftest misspelt-options-are-refused-naming-the-option
  (doseq [[typo meant] [[:max-body-szie :max-body-size]
                        [:max-body-sise :max-body-size]
                        [:idle-timout :idle-timeout]
                        [:header-timeuot :header-timeout]
                        [:ssl :ssl?]
                        [:join :join?]
                        [:Port :port]
                        [:maxBodySize :max-body-size]
                        [:max_body_size :max-body-size]
                        [:worker-thread :worker-threads]
                        [:max-idle-tme :max-idle-time]      ; ring-jetty's name
                        [:queue-sise :queue-size]           ; http-kit's
                        [:unix-sockets :unix-socket]]]      ; refused, misspelt
    (testing typo
      (is (= (str "donkey.server/run-server: unknown option " typo "; did you mean " meant
                  "? (other unknown keys are ignored; this one looks like a misspelling)")
             (refusal {typo 1})))))
  (testing "in :pool-opts too"
    (is (re-find #"unknown option :n-treads in :pool-opts; did you mean :n-threads\?"
                 (str (refusal {:pool-opts {:n-treads 4}})))))
  (testing "an application's own keys, far from every option, and namespaced keys pass"
    (doseq [k [:db :env :id :name :version :app-name :database-url :jwt-secret :redis
               :portal? :hosts :my.app/port :log-level :features]]
      (is (nil? (refusal {k 1})) k))))

(deftest run-server-takes-the-defaults-without-options
  (is (= '([handler] [handler opts]) (:arglists (meta #'server/run-server))))
  ;; (the defaults bind port 80 and block: a handler that is not one fails before either)
  (let [message (fn [f] (try (f) nil (catch IllegalArgumentException e (ex-message e))))]
    (is (some? (message #(server/run-server 42))))
    (is (= (message #(server/run-server 42 {})) (message #(server/run-server 42))))))

(deftest every-option-refuses-a-bad-value-naming-itself
  (doseq [{k :key [kind lo] :check} (map #(update % :check (fn [c] (if (vector? c) c [c]))) options/table)
          :when (not= :any kind)
          :let [bad (case kind :int "1" :boolean "yes" (:string :string-or-nil) 1 :fn-or-nil "fn"
                      :keystore 1 :paths [] :strings "x" :ssl-context "ctx" :one-of :other
                      :strings-or-nil "https://a.example" :meter-registry {} :tags [:a :b] :proxies ["10.0.0.0/33"])]]
    (testing k
      (is (re-find (re-pattern (str "^donkey\\.server/run-server: " (java.util.regex.Pattern/quote (str k))
                                    " must be .*, got " (java.util.regex.Pattern/quote (pr-str bad)) "$"))
                   (str (refusal {k bad}))))
      (when (and (= :int kind) (> lo Long/MIN_VALUE))
        (is (re-find (re-pattern (str (java.util.regex.Pattern/quote (str k)) " must be an integer in "
                                      lo "\\.\\."))
                     (str (refusal {k (dec lo)}))))))))

(deftest every-name-has-one-role
  ;; an alias may name several options (http-kit's :max-ws bounds text and binary messages),
  ;; but no name is both an alias and something else
  (let [option-keys (map :key options/table)
        alias-keys (distinct (map first (mapcat :aliases options/table)))
        all (concat option-keys alias-keys (keys options/refused) options/without-effect)]
    (is (apply distinct? all)
        (str "named twice: " (vec (for [[k n] (frequencies all) :when (< 1 n)] k))))))

(deftest the-docstring-lists-the-table
  (let [docstring (:doc (meta #'server/run-server))
        lines (str/split-lines docstring)
        entries (keep #(re-find #"^    (:\S+) +(.*)$" %) lines)]
    (is (= (map :key options/table) (map (comp keyword #(subs % 1) second) entries)))
    (doseq [{k :key :as e} options/table]
      (is (str/includes? (str/join " " (map str/trim lines))
                         (str "(default " (options-doc/default-text e) ")"))
          (str k)))
    ;; written out in donkey.server, so that run-server's namespace loads without the code
    ;; that generates it: it must be what the table generates, word for word
    (is (str/includes? docstring (str "same):\n" (options-doc/doc) "\n\n"))
        "run-server's options text is (donkey.options.doc/doc)'s output")
    (is (every? #(<= (count %) 96) lines) "lines fit (doc run-server)")))

(defn- readme-section [title]
  (let [readme (slurp "README.md")
        start (str/index-of readme (str "\n## " title "\n"))
        end (str/index-of readme "\n## " (inc start))]
    (subs readme start end)))

(deftest the-readme-options-table-lists-the-table
  (let [rows (re-seq #"(?m)^\| `(:[^`]+)` \| ([^|]+) \|" (readme-section "Options"))]
    (is (= (map :key options/table) (map (comp keyword #(subs % 1) second) rows)))
    (doseq [[[_ _ cell] e] (map vector rows options/table)
            :let [cell (str/replace (str/trim cell) "`" "")
                  default (options-doc/default-text e)]]
      (is (or (= cell default) (str/starts-with? cell (str default " ")))
          (str (:key e) ": the README says " cell ", the table " default)))))

(deftest the-readme-migration-tables-know-every-other-name
  (let [rows (filter #(str/starts-with? % "|")
                     (str/split-lines (str (readme-section "Migrating from ring-jetty")
                                           (readme-section "Migrating from http-kit")
                                           (readme-section "Migrating from AppsFlyer Donkey"))))
        row-of (fn [k] (first (filter #(str/includes? % (str "`" k "`")) rows)))]
    (doseq [{k :key as :aliases} options/table
            [alias] as]
      (is (some-> (row-of alias) (str/includes? (str "`" k))) (str alias " is given as " k)))
    (doseq [k (keys options/refused)]
      (is (some-> (row-of k) (str/includes? "refused")) (str k " is given as refused")))
    (doseq [k options/without-effect]
      (is (some-> (row-of k) (str/includes? "no effect")) (str k " is given as without effect")))))

(deftest the-options-namespace-has-no-reflection
  (let [err (java.io.StringWriter.)]
    (binding [*err* err *warn-on-reflection* true]
      (doseq [ns '[donkey.options donkey.options.check donkey.options.doc]]
        (require ns :reload)))
    (is (not (re-find #"Reflection warning" (str err))) (str err))))
