(ns donkey.stream-test
  "Streaming responses over time (donkey.stream): SSE, client disconnects, HEAD."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.stream :as stream]
            [donkey.test-util :as u :refer [with-server raw]])
  (:import (java.io BufferedReader InputStreamReader)
           (java.net Socket)
           (java.util.concurrent CountDownLatch TimeUnit)))

(defn- ticker
  "A handler streaming `n` SSE events `every` ms apart from a future; records closes in `closed`."
  [n every closed]
  (fn [_ respond _]
    (respond {:status 200
              :headers {"content-type" "text/event-stream"}
              :body (stream/channel
                     (fn [ch]
                       (stream/on-close ch #(deliver closed true))
                       (future
                         (loop [i 0]
                           (if (and (< i n) (stream/send! ch (stream/sse {:id i :data (str "tick " i)})))
                             (do (Thread/sleep (long every)) (recur (inc i)))
                             (stream/close! ch))))))})))

(deftest sse-events-arrive-as-they-are-sent
  (let [closed (promise)]
    (with-server (ticker 3 600 closed) {:async? true}
      (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
        (.setSoTimeout s 5000)
        (.write (.getOutputStream s) (.getBytes "GET /events HTTP/1.1\r\nHost: x\r\n\r\n"))
        (let [r (BufferedReader. (InputStreamReader. (.getInputStream s)))
              t0 (System/nanoTime)
              lines (loop [acc []]
                      (let [l (.readLine r)]
                        (if (or (nil? l) (str/includes? l "tick 0")) (conj acc l) (recur (conj acc l)))))
              first-ms (/ (- (System/nanoTime) t0) 1e6)]
          (is (some #(= "transfer-encoding: chunked" (str/lower-case (str %))) lines))
          (is (some #(= "content-type: text/event-stream" (str/lower-case (str %))) lines))
          (is (< first-ms 1000) "the first event arrives before the stream is done (1.2 s)")
          (let [rest-lines (doall (take-while some? (repeatedly #(try (.readLine r) (catch Exception _ nil)))))]
            (is (some #(str/includes? (str %) "data: tick 2") rest-lines))
            (is (some #(= "0" %) rest-lines) "the last chunk ends the response")))
        (is (deref closed 2000 false) "on-close runs when the stream is closed")))))

(deftest client-going-away-stops-the-producer
  (let [closed (promise)
        sent (atom 0)
        handler (fn [_ respond _]
                  (respond {:status 200 :headers {"content-type" "text/event-stream"}
                            :body (stream/channel
                                   (fn [ch]
                                     (stream/on-close ch #(deliver closed true))
                                     (future
                                       (loop []
                                         (when (and (< @sent 1000) (stream/send! ch (stream/sse {:data "x"})))
                                           (swap! sent inc)
                                           (Thread/sleep 20)
                                           (recur))))))}))]
    (with-server handler {:async? true}
      (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
        (.write (.getOutputStream s) (.getBytes "GET /events HTTP/1.1\r\nHost: x\r\n\r\n"))
        (.read (.getInputStream s) (byte-array 1024)))
      (is (deref closed 3000 false) "on-close ran after the client disconnected")
      (Thread/sleep 200)
      (let [n @sent]
        (Thread/sleep 300)
        (is (= n @sent) "send! returned false and the producer stopped")
        (is (< n 1000))))))

(deftest sync-handlers-and-head
  (with-server (fn [_] {:status 200 :body (stream/channel (fn [ch] (stream/send! ch "hello ") (stream/send! ch (.getBytes "world")) (stream/close! ch)))}) {}
    (is (= "hello world" (:body (u/GET "/"))))
    (let [resp (raw "HEAD / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")]
      (is (str/starts-with? resp "HTTP/1.1 200"))
      (is (not (str/includes? resp "hello"))))))

(deftest sse-format
  (is (= "id: 1\ndata: a\ndata: b\n\n" (stream/sse {:id 1 :data "a\nb"})))
  (is (= "event: up\nretry: 100\ndata: {}\n\n" (stream/sse {:event "up" :retry 100 :data {}})))
  (is (= ": ping\n\n" (stream/sse {:comment "ping"}))))

(deftest a-client-that-stops-reading-is-cut-off
  ;; a producer that ignores writable? would queue without bound for a client that does not
  ;; read; past :max-queued-bytes its connection is closed and send! says so
  (let [result (promise)
        closed (promise)
        chunk (apply str (repeat 8192 "x"))]
    (with-server (fn [_ respond _]
                   (respond {:status 200
                             :body (stream/channel
                                    (fn [ch]
                                      (stream/on-close ch #(deliver closed true))
                                      (future
                                        (deliver result
                                                 (loop [sent 0]
                                                   (cond (not (stream/send! ch chunk)) [:refused sent]
                                                         (> sent (* 64 1024 1024)) [:sent sent]
                                                         :else (recur (+ sent (count chunk))))))))
                             {:max-queued-bytes (* 1024 1024)})}))
      {:async? true}
      (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
        (.setReceiveBufferSize s 4096)
        (doto (.getOutputStream s) (.write (.getBytes "GET / HTTP/1.1\r\nHost: x\r\n\r\n")) (.flush))
        ;; never read
        (let [[what sent] (deref result 10000 [:timeout])]
          (is (= :refused what))
          (is (< sent (* 8 1024 1024)) (str sent " bytes were accepted")))
        (is (true? (deref closed 2000 false)) "the on-close fns ran")))
    (testing "the option is checked"
      (is (thrown? IllegalArgumentException (stream/channel identity {:max-queued-bytes 0}))))))
