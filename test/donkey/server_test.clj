(ns donkey.server-test
  "Life cycle: start, port, stop, with-open, join?, start-up failures, worker concurrency."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.server :as server]
            [donkey.test-util :as u :refer [with-server GET]])
  (:import (java.net ServerSocket Socket ConnectException)
           (java.util.concurrent CountDownLatch Executors TimeUnit)))

(defn- hello [_] {:status 200 :headers {"content-type" "text/plain"} :body "hi"})

(defn- donkey-threads []
  (->> (Thread/getAllStackTraces) keys
       (filter #(re-find #"vert\.x|donkey-worker" (.getName ^Thread %)))
       (filter #(.isAlive ^Thread %))))

(deftest run-port-stop
  (let [s (server/run-server hello {:port 0 :join? false})
        p (server/port s)]
    (is (< 0 p 65536))
    (binding [u/*port* p]
      (let [r (GET "/")]
        (is (= 200 (:status r)))
        (is (= "hi" (:body r)))))
    (server/stop s)
    (testing "the socket is closed when stop returns"
      (is (thrown? ConnectException (Socket. "127.0.0.1" (int p)))))
    (testing "stop is idempotent"
      (is (nil? (server/stop s)))
      (.close s))))

(deftest fixed-port-and-with-open
  (let [p (with-open [ss (ServerSocket. 0)] (.getLocalPort ss))]
    (with-open [s (server/run-server hello {:port p :join? false :event-loops 3})]
      (is (= p (server/port s)))
      (binding [u/*port* p]
        (is (every? #(= 200 (:status %)) (repeatedly 12 #(GET "/"))))))
    (is (thrown? ConnectException (Socket. "127.0.0.1" (int p))))))

(deftest join-blocks-until-stopped
  (let [started (promise)
        ret (promise)
        handler (fn [_] (deliver started true) {:status 200})
        p (with-open [ss (ServerSocket. 0)] (.getLocalPort ss))
        t (future (deliver ret (server/run-server handler {:port p})))]
    ;; wait for the socket, then check run-server has not returned
    (loop [i 0] (when (and (< i 100) (not (try (Socket. "127.0.0.1" (int p)) true (catch Exception _ false))))
                  (Thread/sleep 50) (recur (inc i))))
    (Thread/sleep 200)
    (is (not (realized? ret)) "run-server with :join? true (the default) blocks")
    (future-cancel t)))

(deftest start-up-failures
  (testing "port in use is a clear exception"
    (with-open [ss (ServerSocket. 0)]
      (let [e (try (server/run-server hello {:port (.getLocalPort ss) :host "0.0.0.0" :join? false})
                   (catch IllegalStateException e e))]
        (is (instance? IllegalStateException e))
        (is (re-find #"could not listen.*Address already in use" (ex-message e))))))
  (testing "bad options are refused before anything starts"
    (doseq [[opts re] [[{:port -1} #":port must be an integer in 0..65535"]
                       [{:port 70000} #":port"]
                       [{:port "80"} #":port"]
                       [{:port 0 :worker-threads 0} #":worker-threads"]
                       [{:port 0 :event-loops 0} #":event-loops"]
                       [{:port 0 :async? "yes"} #":async\?"]
                       [{:port 0 :ssl? true} #":ssl\? needs the server's key"]
                       [{:port 0 :http? false} #":http\? false serves nothing without TLS"]
                       [{:port 0 :h2? true} #":h2\? true offers HTTP/2 on the TLS listener"]
                       [{:port 0 :h2c? true :ssl-port 0 :keystore "x" :http? false}
                        #":h2c\? true serves HTTP/2 on the plaintext listener"]
                       [{:port 0 :host 1} #":host"]]]
      (let [e (try (server/run-server hello (assoc opts :join? false)) nil
                   (catch IllegalArgumentException e e))]
        (is (some->> e ex-message (re-find re)) (pr-str opts)))))
  (testing "a handler that is not a function"
    (is (thrown-with-msg? IllegalArgumentException #"handler must be a function"
                          (server/run-server "nope" {:port 0 :join? false}))))
  (testing "virtual threads on a JVM without them"
    (when (< (.feature (Runtime/version)) 21)
      (is (thrown-with-msg? IllegalArgumentException #"^donkey\.server/run-server: :virtual-threads\? needs Java 21"
                            (server/run-server hello {:port 0 :join? false :virtual-threads? true}))))))

(deftest ring-jetty-options-are-accepted
  (with-server hello {:max-threads 8 :min-threads 2 :max-idle-time 1000 :send-server-version? true}
    (is (= 200 (:status (GET "/"))))))

(deftest stop-releases-threads
  (let [before (count (donkey-threads))]
    (dotimes [_ 3]
      (with-server hello {}
        (dotimes [_ 5] (GET "/"))))
    (loop [i 0]
      (when (and (< i 50) (> (count (donkey-threads)) before))
        (Thread/sleep 100) (recur (inc i))))
    (is (<= (count (donkey-threads)) before)
        (str "threads left: " (mapv #(.getName ^Thread %) (donkey-threads))))))

(deftest no-global-side-effects
  (let [props (into {} (System/getProperties))]
    (with-server hello {} (GET "/"))
    (is (= props (into {} (System/getProperties))))))

(deftest workers-serve-slow-requests-in-parallel
  (testing "N worker threads serve N slow requests at once"
    (let [n 8
          in-handler (CountDownLatch. n)
          handler (fn [_]
                    (.countDown in-handler)
                    ;; every request waits until all n are inside the handler at once
                    (if (.await in-handler 5 TimeUnit/SECONDS)
                      {:status 200 :body "together"}
                      {:status 500 :body "serialised"}))]
      (with-server handler {:worker-threads n}
        (let [pool (Executors/newFixedThreadPool n)
              fs (mapv (fn [_] (.submit pool ^Callable (bound-fn [] (GET "/")))) (range n))
              rs (mapv #(.get ^java.util.concurrent.Future %) fs)]
          (.shutdown pool)
          (is (every? #(= "together" (:body %)) rs)))))))

(deftest zero-reflection-warnings
  (let [err (java.io.StringWriter.)]
    (binding [*err* err *warn-on-reflection* true]
      (doseq [ns '[donkey.server donkey.options donkey.options.spelling donkey.options.check donkey.options.doc
                   donkey.routes donkey.scope
                   donkey.stream donkey.middleware.errors donkey.middleware.options
                   donkey.middleware.params
                   donkey.middleware.json donkey.middleware.multipart donkey.example
                   donkey.static donkey.metrics donkey.metrics.prometheus]]
        (require ns :reload)))
    (is (not (re-find #"Reflection warning" (str err))) (str err))))

(deftest every-documented-var-has-a-docstring
  ;; the namespaces users read (cljdoc shows every public var not marked :no-doc); plumbing
  ;; that only donkey calls is marked :no-doc rather than left undocumented
  (doseq [ns '[donkey.server donkey.routes donkey.stream donkey.websocket donkey.scope
               donkey.middleware.errors donkey.middleware.params donkey.middleware.json
               donkey.middleware.multipart donkey.static donkey.metrics
               donkey.metrics.prometheus]]
    (require ns)
    (is (not (str/blank? (:doc (meta (find-ns ns))))) (str ns))
    (doseq [[sym v] (ns-publics ns)
            :when (not (:no-doc (meta v)))]
      (is (not (str/blank? (:doc (meta v)))) (str ns "/" sym " has no docstring")))))

(deftest stop-drains-in-flight-requests
  (let [entered (promise)
        s (server/run-server (fn [_] (deliver entered true) (Thread/sleep 1000) {:status 200 :body "finished"})
                             {:port 0 :join? false})
        p (server/port s)
        resp (binding [u/*port* p] (future (GET "/slow")))]
    (deref entered 5000 nil)
    (let [t0 (System/nanoTime)]
      (server/stop s)
      (let [ms (/ (- (System/nanoTime) t0) 1e6)
            r (deref resp 5000 nil)]
        (is (= 200 (:status r)) "the in-flight request got its complete response")
        (is (= "finished" (:body r)))
        (is (> ms 500) (str "stop waited for it (" (long ms) " ms)"))
        (is (thrown? ConnectException (Socket. "127.0.0.1" (int p))) "and the socket is closed")))))

(deftest stop-gives-up-after-the-shutdown-timeout
  (let [entered (promise)
        s (server/run-server (fn [_] (deliver entered true) (Thread/sleep 5000) {:status 200 :body "late"})
                             {:port 0 :join? false :shutdown-timeout 300})
        p (server/port s)
        resp (binding [u/*port* p] (future (try (GET "/slow") (catch Exception e e))))]
    (deref entered 5000 nil)
    (let [t0 (System/nanoTime)]
      (server/stop s)
      (let [ms (/ (- (System/nanoTime) t0) 1e6)]
        (is (< ms 3000) (str "stop returned after " (long ms) " ms"))
        (is (instance? Exception (deref resp 5000 nil)) "the unfinished request's connection was closed")))))

(deftest runs-on-the-declared-clojure
  (let [declared (second (re-find #"org.clojure/clojure \"([^\"]+)\"" (slurp "project.clj")))]
    (is (= declared (clojure-version)) "the suite runs on the Clojure project.clj declares")))
