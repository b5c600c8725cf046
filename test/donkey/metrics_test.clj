(ns donkey.metrics-test
  "Metrics (:metrics, a Micrometer MeterRegistry): the meters a server reports while real
  clients talk to it over sockets, their bounded tags, their removal at stop, the Prometheus
  scrape handler, the option checks, and a JVM without Micrometer."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.h2-client :as h2]
            [donkey.metrics.prometheus :as prometheus]
            [donkey.server :as server]
            [donkey.test-util :as u :refer [with-server]])
  (:import (io.micrometer.core.instrument FunctionCounter Gauge Meter MeterRegistry Timer)
           (io.micrometer.core.instrument.search Search)
           (io.micrometer.core.instrument.simple SimpleMeterRegistry)
           (java.io InputStream OutputStream)
           (java.net Socket URI)
           (java.net.http HttpClient WebSocket WebSocket$Listener)
           (java.nio.charset StandardCharsets)
           (java.util.concurrent CountDownLatch TimeUnit)))

(set! *warn-on-reflection* true)

(defn- search ^Search [^MeterRegistry r ^String name tags]
  (reduce (fn [^Search s [k v]] (.tag s (str k) (str v))) (.find r name) tags))

(defn- timer-count
  "The count of the timer `name` with `tags`, or nil when there is none."
  [r tags]
  (some-> ^Timer (.timer (search r "donkey.requests" tags)) .count))

(defn- counted
  "The count of the function counter `name` with `tags` (0 when not registered)."
  [r name tags]
  (if-let [^FunctionCounter c (.functionCounter (search r name tags))] (long (.count c)) 0))

(defn- gauge
  [r name tags]
  (some-> ^Gauge (.gauge (search r name tags)) .value long))

(defn- eventually
  "Polls `f` until it returns `expected` or 3 s pass; returns the last value."
  [expected f]
  (let [deadline (+ (System/currentTimeMillis) 3000)]
    (loop []
      (let [v (f)]
        (if (or (= expected v) (> (System/currentTimeMillis) deadline)) v
            (do (Thread/sleep 20) (recur)))))))

(defn- donkey-meters [^MeterRegistry r]
  (filter #(str/starts-with? (.getName (.getId ^Meter %)) "donkey.") (.getMeters r)))

(def ^:private latches
  "Latches the /slow handler waits on, by its query string."
  (atom {}))

(def ^:private routes
  {:routes [{:path "/users/:id" :methods [:get :post] :handler (fn [_] {:status 200 :body "user"})}
            {:path "/boom" :handler (fn [_] (throw (ex-info "boom" {})))}
            {:path "/slow" :handler (fn [{:keys [query-string]}]
                                      (.await ^CountDownLatch (get @latches query-string)
                                              5 TimeUnit/SECONDS)
                                      {:status 200 :body "slow"})}]})

(deftest requests-by-route-method-and-status
  (let [r (SimpleMeterRegistry.)]
    (with-server routes {:metrics r :metrics-tags {:server "api"}}
      (dotimes [_ 3] (is (= 200 (:status (u/GET "/users/1")))))
      (is (= 200 (:status (u/request :post "/users/2" {:body "x"}))))
      (dotimes [i 40] (is (= 404 (:status (u/GET (str "/nowhere/" i))))))
      (is (= 405 (:status (u/request :delete "/users/1"))))
      (is (str/starts-with? (:resp (u/exchange "FROB /users/1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
                            "HTTP/1.1 405"))
      (is (= 500 (:status (u/GET "/boom"))))
      (testing "a timer per route, method and status class, with the common tags"
        (is (= 3 (eventually 3 #(timer-count r {"route" "/users/:id" "method" "GET"
                                                 "status" "2xx" "server" "api"}))))
        (is (= 1 (timer-count r {"route" "/users/:id" "method" "POST" "status" "2xx"})))
        (is (= 1 (eventually 1 #(timer-count r {"route" "/boom" "method" "GET" "status" "5xx"})))))
      (testing "unmatched paths and unknown methods are one tag value each"
        (is (= 40 (timer-count r {"route" "unmatched" "method" "GET" "status" "4xx"})))
        (is (= 1 (timer-count r {"route" "unmatched" "method" "DELETE" "status" "4xx"})))
        (is (= 1 (timer-count r {"route" "unmatched" "method" "other" "status" "4xx"})))
        (is (= #{"/users/:id" "/boom" "unmatched"}
               (set (map #(.getTag (.getId ^Meter %) "route")
                         (.meters (.find r "donkey.requests")))))))
      (testing "the kernel's own answers, by status"
        (is (= 40 (counted r "donkey.kernel.answers" {"status" "404"})))
        (is (= 2 (counted r "donkey.kernel.answers" {"status" "405"})))
        (is (= 1 (counted r "donkey.kernel.answers" {"status" "500"})))
        (is (= 0 (counted r "donkey.kernel.answers" {"status" "200"}))))
      (testing "a request the decoder could not parse is a kernel answer"
        (is (str/starts-with? (u/raw "GET / HTTP/1.1\r\nBad Header\r\n\r\n") "HTTP/1.1 400"))
        (is (= 1 (eventually 1 #(counted r "donkey.kernel.answers" {"status" "400"})))))
      (testing "bytes both ways, counted at the socket"
        (let [in (counted r "donkey.bytes.read" {})
              out (counted r "donkey.bytes.written" {})
              req (str "GET /users/1 HTTP/1.1\r\nHost: x\r\nX-Pad: " (apply str (repeat 1000 "p"))
                       "\r\nConnection: close\r\n\r\n")]
          (u/exchange req)
          (is (<= (+ in (count req)) (eventually -1 #(counted r "donkey.bytes.read" {})))
              "the whole request head")
          (is (< out (counted r "donkey.bytes.written" {})))))
      (is (zero? (eventually 0 #(gauge r "donkey.requests.active" {})))
          "no request in flight once all are answered"))))

(deftest in-flight-requests-connections-and-workers
  (let [r (SimpleMeterRegistry.)
        latch (CountDownLatch. 1)]
    (swap! latches assoc "a" latch)
    (with-server routes {:metrics r}
      (let [slow (future (u/GET "/slow?a"))]
        (is (= 1 (eventually 1 #(gauge r "donkey.requests.active" {}))))
        ;; the request is active from admission, before a worker has taken it off the queue
        (is (= 1 (eventually 1 #(gauge r "donkey.workers.busy" {}))) "a worker runs the slow handler")
        (is (= 0 (eventually 0 #(gauge r "donkey.workers.queued" {}))))
        (is (pos? (gauge r "donkey.workers.threads" {})))
        (.countDown latch)
        (is (= 200 (:status @slow))))
      (is (= 0 (eventually 0 #(gauge r "donkey.requests.active" {}))))
      (testing "an open keep-alive connection, by protocol, until it closes"
        (let [before (gauge r "donkey.connections" {"protocol" "http1"})]
          (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
            (.write (.getOutputStream s) (.getBytes "GET /users/1 HTTP/1.1\r\nHost: x\r\n\r\n"))
            (.read (.getInputStream s))
            (is (= (inc before) (eventually (inc before)
                                            #(gauge r "donkey.connections" {"protocol" "http1"})))))
          (is (= before (eventually before #(gauge r "donkey.connections" {"protocol" "http1"}))))))
      (testing "a client that leaves before its answer: status none, nothing left in flight"
        (let [latch (CountDownLatch. 1)]
          (swap! latches assoc "b" latch)
          (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
            (.write (.getOutputStream s) (.getBytes "GET /slow?b HTTP/1.1\r\nHost: x\r\n\r\n"))
            (eventually 1 #(gauge r "donkey.requests.active" {}))
            ;; a reset, not a FIN: a half-closed connection still gets its answer
            (.setSoLinger s true 0))
          (is (= 1 (eventually 1 #(timer-count r {"route" "/slow" "status" "none"}))))
          (.countDown latch)
          (is (= 0 (eventually 0 #(gauge r "donkey.requests.active" {})))))))))

(deftest refused-connections
  (let [r (SimpleMeterRegistry.)]
    (with-server routes {:metrics r :max-connections 1}
      (with-open [held (Socket. "127.0.0.1" (int u/*port*))]
        (.write (.getOutputStream held) (.getBytes "GET /users/1 HTTP/1.1\r\nHost: x\r\n\r\n"))
        (.read (.getInputStream held))
        (with-open [extra (Socket. "127.0.0.1" (int u/*port*))]
          (.setSoTimeout extra 3000)
          (is (= -1 (try (.read (.getInputStream extra)) (catch java.io.IOException _ -1))))))
      (is (= 1 (eventually 1 #(counted r "donkey.connections.refused" {})))))))

(deftest websocket-sessions
  (let [r (SimpleMeterRegistry.)
        closed (promise)]
    (with-server (fn [_] {:ring.websocket/listener {:on-message (fn [sock msg] nil)}})
      {:metrics r}
      (let [ws (.get (.buildAsync (.newWebSocketBuilder (HttpClient/newHttpClient))
                                  (URI/create (str "ws://127.0.0.1:" u/*port* "/"))
                                  (reify WebSocket$Listener
                                    (onClose [_ _ _ _] (deliver closed true) nil)))
                     5 TimeUnit/SECONDS)]
        (is (= 1 (eventually 1 #(gauge r "donkey.connections" {"protocol" "websocket"}))))
        (is (= 0 (gauge r "donkey.connections" {"protocol" "http1"}))
            "the upgraded connection no longer counts as HTTP/1")
        ;; the client sees the 101 before the server has recorded it
        (is (= 1 (eventually 1 #(timer-count r {"route" "*" "status" "1xx"}))) "the handshake's 101")
        (is (= 0 (eventually 0 #(gauge r "donkey.requests.active" {}))) "the upgrade request is over")
        (.get (.sendClose ^WebSocket ws WebSocket/NORMAL_CLOSURE "bye") 5 TimeUnit/SECONDS)
        (deref closed 5000 nil)
        (is (= 0 (eventually 0 #(gauge r "donkey.connections" {"protocol" "websocket"}))))))))

(deftest http2-connections-and-resets
  (let [r (SimpleMeterRegistry.)]
    (with-server routes {:metrics r :h2c? true :max-body-size 10}
      (let [c (h2/connect u/*port*)]
        (try
          (is (= 200 (:status (h2/request! c 1 "GET" "/users/1"))))
          (is (= 1 (gauge r "donkey.connections" {"protocol" "h2c"})))
          (testing "a body over :max-body-size still arriving: 413, then the stream reset"
            (h2/send! c (h2/headers-frame (:enc c) 3
                                          (h2/request-headers "POST" "/users/1"
                                                              [["content-length" "100"]])
                                          false))
            (let [resp (h2/read-response c 3)]
              (is (= 413 (:status resp))))
            (is (= 1 (eventually 1 #(counted r "donkey.http2.resets" {}))))
            (is (= 1 (counted r "donkey.kernel.answers" {"status" "413"}))))
          (testing "a stream the client resets before its answer: status none, not in flight"
            (let [latch (CountDownLatch. 1)]
              (swap! latches assoc "h2" latch)
              (h2/send! c (h2/headers-frame (:enc c) 5 (h2/request-headers "GET" "/slow?h2" []) true))
              (is (= 1 (eventually 1 #(gauge r "donkey.requests.active" {}))))
              (h2/send! c (h2/rst-stream 5 8))
              (is (= 1 (eventually 1 #(timer-count r {"route" "/slow" "status" "none"}))))
              (is (= 0 (eventually 0 #(gauge r "donkey.requests.active" {}))))
              (.countDown latch)))
          (finally (h2/close! c))))
      (is (= 0 (eventually 0 #(gauge r "donkey.connections" {"protocol" "h2c"})))))))

(deftest a-single-handler-is-one-route-and-stop-removes-the-meters
  (let [r (SimpleMeterRegistry.)]
    (with-server (fn [_] {:status 200 :body "ok"}) {:metrics r}
      (u/GET "/a") (u/GET "/b")
      (is (= 2 (eventually 2 #(timer-count r {"route" "*" "status" "2xx"})))))
    (is (empty? (donkey-meters r)) "a stopped server leaves no meter behind")
    (testing "a server started again on the registry counts from zero"
      (with-server (fn [_] {:status 200 :body "ok"}) {:metrics r}
        (u/GET "/a")
        (is (= 1 (eventually 1 #(timer-count r {"route" "*" "status" "2xx"}))))
        (is (some? (gauge r "donkey.connections" {"protocol" "http1"})))))
    (testing "two servers on one registry, told apart by their tags"
      (with-server (fn [_] {:status 200 :body "a"}) {:metrics r :metrics-tags {"server" "a"}}
        (let [a u/*port*]
          (with-server (fn [_] {:status 200 :body "b"}) {:metrics r :metrics-tags {"server" "b"}}
            (u/GET "/")
            (binding [u/*port* a] (u/GET "/") (u/GET "/"))
            (is (= 2 (eventually 2 #(timer-count r {"server" "a" "route" "*"}))))
            (is (= 1 (timer-count r {"server" "b" "route" "*"})))))))))

(deftest prometheus-scrape
  (let [reg (prometheus/registry)]
    (with-server {:routes [{:path "/users/:id" :handler (fn [_] {:status 200 :body "u"})}
                           {:path "/metrics" :methods [:get] :handler (prometheus/scrape-handler reg)}]}
      {:metrics reg}
      (u/GET "/users/1")
      (eventually 1 #(timer-count reg {"route" "/users/:id"}))
      (let [resp (u/GET "/metrics")]
        (is (= 200 (:status resp)))
        (is (str/starts-with? (u/header resp "content-type") "text/plain; version=0.0.4"))
        (is (re-find #"(?m)^donkey_requests_seconds_count\{[^}]*route=\"/users/:id\"[^}]*\} 1" (:body resp))
            (:body resp))
        (is (re-find #"(?m)^donkey_connections\{protocol=\"http1\"\} \d" (:body resp))))
      (let [resp (u/GET "/metrics" {:headers {"Accept" "application/openmetrics-text; version=1.0.0"}})]
        (is (str/starts-with? (u/header resp "content-type") "application/openmetrics-text"))
        (is (str/ends-with? (:body resp) "# EOF\n"))))))

(deftest the-options-are-checked
  (is (thrown-with-msg? IllegalArgumentException #":metrics must be a Micrometer MeterRegistry"
                        (server/run-server (fn [_] {:status 200}) {:port 0 :join? false :metrics {}})))
  (is (thrown-with-msg? IllegalArgumentException #":metrics-tags has no effect without :metrics"
                        (server/run-server (fn [_] {:status 200}) {:port 0 :join? false
                                                                   :metrics-tags {:a "b"}})))
  (is (thrown-with-msg? IllegalArgumentException #":metrics-tags must be a map of tag names"
                        (server/run-server (fn [_] {:status 200})
                                           {:port 0 :join? false :metrics (SimpleMeterRegistry.)
                                            :metrics-tags {:a nil}})))
  (is (thrown-with-msg? IllegalArgumentException #":metric-registry is not supported: .*Micrometer"
                        (server/run-server (fn [_] {:status 200})
                                           {:port 0 :join? false :metric-registry (Object.)}))))

(deftest without-micrometer
  ;; a JVM whose classpath lacks Micrometer: a server without :metrics starts and serves, and
  ;; :metrics is refused with a reason
  (let [script (str "(require '[donkey.server :as s])"
                    "(with-open [srv (s/run-server (fn [_] {:status 200 :body \"fine\"})"
                    "                              {:port 0 :join? false})]"
                    "  (let [c (java.net.http.HttpClient/newHttpClient)"
                    "        r (.send c (.build (java.net.http.HttpRequest/newBuilder"
                    "                    (java.net.URI. (str \"http://127.0.0.1:\" (s/port srv) \"/\"))))"
                    "                 (java.net.http.HttpResponse$BodyHandlers/ofString))]"
                    "    (println \"BODY\" (.body r))))"
                    "(println \"REFUSED\" (try (s/run-server (fn [_] {}) {:port 0 :join? false :metrics (Object.)})"
                    "                        (catch IllegalArgumentException e (.getMessage e))))"
                    "(println \"MICROMETER\" (try (Class/forName \"io.micrometer.core.instrument.MeterRegistry\") true"
                    "                           (catch ClassNotFoundException _ false)))"
                    "(shutdown-agents)")
        {:keys [exit out]} (u/run-clojure-without #"micrometer|prometheus|HdrHistogram|LatencyUtils" script)]
    (is (zero? exit) out)
    (is (str/includes? out "BODY fine") out)
    (is (re-find #"REFUSED .*:metrics must be a Micrometer MeterRegistry" out) out)
    (is (str/includes? out "MICROMETER false") out)))
