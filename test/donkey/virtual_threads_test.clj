(ns donkey.virtual-threads-test
  "Blocking handlers on virtual threads. On Java 21+ the tests run here; on Java 17 (the
  default JDK) this namespace checks the start-up error and re-runs itself on the Temurin 25
  JDK installed beside it, in a child JVM, and asserts that run's counts."
  (:require [clojure.java.io :as io]
            [clojure.java.shell :as sh]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.server :as server]
            [donkey.test-util :as u :refer [with-server]])
  (:import (com.fasterxml.jackson.core.util BufferRecycler)
           (donkey.codec RecyclerPools)
           (java.net URI)
           (java.net.http HttpClient HttpClient$Version HttpRequest HttpResponse HttpResponse$BodyHandlers)
           (java.time Duration)
           (java.util.concurrent CompletableFuture)))

(def ^:private jvm (.feature (Runtime/version)))

(defn- jdk25-java []
  (let [dir (io/file "/usr/lib/jvm")]
    (->> (.listFiles dir)
         (filter #(re-find #"(?i)(temurin|jdk)-?(2[1-9]|[3-9]\d)" (.getName ^java.io.File %)))
         (map #(io/file % "bin" "java"))
         (filter #(.canExecute ^java.io.File %))
         first)))

(defn- slow [ms]
  (fn [_]
    (Thread/sleep (long ms))
    {:status 200 :body (str (Thread/currentThread))}))

(deftest on-this-jvm
  (if (< jvm 21)
    (is (thrown-with-msg? IllegalArgumentException
                          #"^donkey\.server/run-server: :virtual-threads\? needs Java 21"
                          (server/run-server (slow 1) {:port 0 :join? false :virtual-threads? true})))
    (testing "200 sleeping blocking requests at once finish in about one sleep"
      (with-server (slow 1000) {:virtual-threads? true}
        (let [client (-> (HttpClient/newBuilder) (.version HttpClient$Version/HTTP_1_1)
                         (.connectTimeout (Duration/ofSeconds 10)) (.build))
              req (-> (HttpRequest/newBuilder (URI/create (u/url "/slow")))
                      (.timeout (Duration/ofSeconds 20)) (.build))
              ;; warm up the JIT and the connection machinery
              _ (.send client req (HttpResponse$BodyHandlers/ofString))
              start (System/nanoTime)
              fs (vec (repeatedly 200 #(.sendAsync client req (HttpResponse$BodyHandlers/ofString))))
              rs (mapv #(.join ^CompletableFuture %) fs)
              ms (/ (- (System/nanoTime) start) 1e6)]
          (is (every? #(= 200 (.statusCode ^HttpResponse %)) rs))
          (is (every? #(str/includes? (.body ^HttpResponse %) "VirtualThread") rs)
              "the handlers ran on virtual threads")
          (is (< ms 3000) (str "200 x 1 s sleeps took " (long ms) " ms")))))))

;; Jackson's default keeps its buffers per thread: a fresh ~16 KB set per request on a virtual
;; thread. donkey's pool shares them among virtual threads and keeps them per platform thread.
(deftest json-buffers-are-recycled-across-virtual-threads
  (let [pool (RecyclerPools/threadAware)
        cycle (fn [] (let [r (.acquireAndLinkPooled pool)]
                       (.releaseToPool ^BufferRecycler r)
                       (System/identityHashCode r)))]
    (is (= (cycle) (cycle)) "a platform thread gets its own recycler back")
    (when (>= jvm 21)
      (with-server (fn [_] {:status 200 :body (str (cycle))}) {:virtual-threads? true}
        (let [a (:body (u/GET "/"))
              b (:body (u/GET "/"))]
          (is (re-matches #"\d+" a))
          (is (= a b) "the second request's virtual thread reuses the first one's recycler")))
      (with-server (fn [_] {:status 200 :headers {"Content-Type" "application/json"}
                             :body {:n (range 100)}})
        {:virtual-threads? true}
        (is (= (str "{\"n\":[" (str/join "," (range 100)) "]}") (:body (u/GET "/"))))))))

(deftest on-a-jvm-with-virtual-threads
  (when (< jvm 21)
    (let [java (jdk25-java)]
      (is java "a Java 21+ JDK is installed under /usr/lib/jvm (the machine has Temurin 25)")
      (when java
        (let [{:keys [exit out err]} (sh/sh "lein" "run" "-m" "donkey.test-runner" "donkey.virtual-threads-test"
                                            :env (assoc (into {} (System/getenv)) "JAVA_CMD" (str java)))
              last-line (last (str/split-lines (str out)))]
          (is (zero? exit) (str "child run on " java " failed:\n" out "\n" (subs (str err) 0 (min 2000 (count (str err))))))
          (is (re-matches #"tests: [1-9]\d* passed, 0 failed" (str last-line)) (str out)))))))
