(ns donkey.deploy-test
  "Deploys without lost requests: :shutdown-delay with the readiness and liveness handlers, and
  a client load that runs across a stop, steered by the readiness probe as a load balancer is."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.server :as server]
            [donkey.test-util :as u])
  (:import (java.io IOException)
           (java.net Socket)
           (java.net.http HttpClient HttpClient$Version HttpRequest HttpResponse$BodyHandlers)
           (java.net URI)
           (java.time Duration)
           (java.util.concurrent CountDownLatch TimeUnit)
           (java.util.concurrent.atomic AtomicBoolean AtomicInteger)))

(set! *warn-on-reflection* true)

(defn- app [^AtomicInteger in-flight]
  {:routes [{:path "/ready" :handler (server/readiness-handler)}
            {:path "/live" :handler (server/liveness-handler)}
            {:path "/work" :handler (fn [_]
                                      (.incrementAndGet in-flight)
                                      (try (Thread/sleep 20) {:status 200 :body "done"}
                                           (finally (.decrementAndGet in-flight))))}
            {:path "/slow" :handler (fn [_] (Thread/sleep 600) {:status 200 :body "slow"})}]})

(defn- get-status [^HttpClient c port path]
  (.statusCode (.send c (-> (HttpRequest/newBuilder (URI. (str "http://127.0.0.1:" port path)))
                            (.timeout (Duration/ofSeconds 5))
                            (.build))
                      (HttpResponse$BodyHandlers/discarding))))

(defn- client ^HttpClient []
  (-> (HttpClient/newBuilder) (.version HttpClient$Version/HTTP_1_1)
      (.connectTimeout (Duration/ofSeconds 2)) (.build)))

(deftest readiness-turns-503-while-the-server-still-serves
  (let [s (server/run-server (app (AtomicInteger.)) {:port 0 :join? false :shutdown-delay 1500})
        port (server/port s)
        c (client)]
    (try
      (is (server/ready?))
      (is (= 200 (get-status c port "/ready")))
      (let [stopping (future (server/stop s))]
        (Thread/sleep 300)
        (testing "during the delay: not ready, alive, and serving"
          (is (not (server/ready?)))
          (is (= :stopping (server/status s)))
          (is (= 503 (get-status c port "/ready")))
          (is (= 200 (get-status c port "/live")))
          (is (= 200 (get-status c port "/work")))
          (is (= 200 (get-status (client) port "/work")) "a new connection is still accepted"))
        (is (not= ::timeout (deref stopping 10000 ::timeout)))
        (is (= :stopped (server/status s)))
        (is (thrown? IOException (get-status (client) port "/work")) "no longer accepting"))
      (finally (server/stop s)))))

(deftest an-in-flight-request-is-answered-and-its-connection-closed
  (let [s (server/run-server (app (AtomicInteger.)) {:port 0 :join? false})
        port (server/port s)]
    (try
      (with-open [sock (Socket. "127.0.0.1" (int port))]
        (.write (.getOutputStream sock) (.getBytes "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"))
        (Thread/sleep 150)
        (let [stopping (future (server/stop s))
              r (u/read-all sock 5000 1000)]
          (is (str/starts-with? (:resp r) "HTTP/1.1 200"))
          (is (str/includes? (:resp r) "slow"))
          (is (re-find #"(?i)\r\nconnection: close\r\n" (:resp r)) "told the connection ends")
          (is (u/closed? r))
          (deref stopping 10000 nil)))
      (finally (server/stop s)))))

(deftest a-load-across-a-stop-loses-no-request
  ;; clients send while the balancer (a poller of /ready) sends them here; the stop begins
  ;; mid-load; every request sent must get its 200
  (let [in-flight (AtomicInteger.)
        s (server/run-server (app in-flight) {:port 0 :join? false :shutdown-delay 800
                                              :shutdown-timeout 5000 :worker-threads 16})
        port (server/port s)
        routed (AtomicBoolean. true)
        ok (AtomicInteger.)
        failed (atom [])
        done (CountDownLatch. 9)
        balancer (future
                   (try
                     (let [c (client)]
                       (while (.get routed)
                         (when (not= 200 (try (get-status c port "/ready") (catch Exception _ 0)))
                           (.set routed false))
                         (Thread/sleep 50)))
                     (finally (.countDown done))))
        workers (doall
                 (for [_ (range 8)]
                   (future
                     (try
                       (let [c (client)]
                         (while (.get routed)
                           (try
                             (if (= 200 (get-status c port "/work"))
                               (.incrementAndGet ok)
                               (swap! failed conj :status))
                             (catch Exception e (swap! failed conj (str e))))))
                       (finally (.countDown done))))))]
    (try
      (Thread/sleep 700)
      (let [stopping (future (server/stop s))]
        (is (.await done 10 TimeUnit/SECONDS) "the clients stopped once the probe failed")
        (is (not= ::timeout (deref stopping 10000 ::timeout))))
      (is (empty? @failed) (pr-str (take 5 @failed)))
      (is (< 50 (.get ok)) "the load ran")
      (is (zero? (.get in-flight)))
      (finally
        (.set routed false)
        (server/stop s)))))

(deftest the-option-is-checked
  (is (thrown-with-msg? IllegalArgumentException #":shutdown-delay"
                        (server/run-server (fn [_] {:status 200}) {:port 0 :join? false
                                                                   :shutdown-delay -1}))))
