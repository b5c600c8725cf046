(ns donkey.errors-test
  "Bad input and misbehaving handlers (DESIGN.md section 5, the foundation's rows): each ends
  in a clear status and a server that keeps serving."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.test-util :as u :refer [with-server GET request raw status-line header]])
  (:import (java.io BufferedReader InputStreamReader OutputStream)
           (java.net Socket)
           (java.nio.charset StandardCharsets)
           (java.util.concurrent CountDownLatch Executors TimeUnit)
           (java.util.concurrent.atomic AtomicInteger)))

(defn- ok [req] {:status 200 :headers {"content-type" "text/plain"} :body (str "ok " (:uri req))})

(defn- still-serving? [] (= "ok /after" (:body (GET "/after"))))

(deftest malformed-requests-get-400
  (with-server ok {}
    (doseq [bad ["GARBAGE\r\n\r\n"
                 "GET\r\n\r\n"
                 "GET / HTTP/1.1\r\nHost: x\r\nBad Header Without Colon\r\n\r\n"
                 "\u0000\u0001\u0002\u0003 / HTTP/1.1\r\n\r\n"]]
      (let [resp (raw bad)]
        (is (re-find #"^HTTP/1\.[01] 400" resp) (str (pr-str bad) " => " (pr-str (status-line resp))))
        (is (str/includes? resp "Bad Request"))
        (is (still-serving?))))
    (testing "an unknown HTTP version is refused with 505 and the connection closed"
      (doseq [bad ["GET / HTTP/9.9\r\nHost: x\r\n\r\n"
                   ;; pipelined behind it: never served
                   "GET / HTTP/2.0\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n"]]
        (let [resp (raw bad)]
          (is (re-find #"^HTTP/\S+ 505 " resp) (pr-str resp))
          (is (re-find #"(?i)\r\nconnection: close\r\n" resp) (pr-str resp))
          (is (str/includes? resp "HTTP Version Not Supported"))
          (is (not (str/includes? resp "/next")) (pr-str resp))
          (is (still-serving?)))))))

(deftest too-long-request-line-and-headers
  (with-server ok {:max-initial-line-length 1024 :max-header-size 2048}
    (is (re-find #"^HTTP/1\.[01] 414" (raw (str "GET /" (apply str (repeat 2000 "a")) " HTTP/1.1\r\nHost: x\r\n\r\n"))))
    (is (re-find #"^HTTP/1\.[01] 431" (raw (str "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " (apply str (repeat 4000 "b")) "\r\n\r\n"))))
    (is (still-serving?))))

(deftest body-over-the-limit-gets-413
  (let [called (AtomicInteger.)]
    (with-server (fn [r] (.incrementAndGet called) (ok r)) {:max-body-size 1000}
      (testing "declared Content-Length over the limit"
        (let [resp (raw (str "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n"))]
          (is (str/starts-with? resp "HTTP/1.1 413"))))
      (testing "invalid Content-Length"
        (is (str/starts-with? (raw "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n") "HTTP/1.1 400")))
      (is (zero? (.get called)) "the handler never ran")
      (testing "a body under the limit is fine"
        (is (= 200 (:status (request :post "/small" {:body (apply str (repeat 999 "x"))}))))))))

(deftest chunked-body-that-grows-past-the-limit
  (let [chunk (apply str (repeat 600 "c"))
        req (str "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "258\r\n" chunk "\r\n258\r\n" chunk "\r\n0\r\n\r\n")]
    (testing "a sync handler reads its body as it arrives: its read fails, the client gets 413"
      (let [read-error (promise)]
        (with-server (fn [r] (if (= "/after" (:uri r))
                               (ok r)
                               (do (try (slurp (:body r)) (catch java.io.IOException e (deliver read-error (ex-message e))))
                                   {:status 200 :body "handler answer"})))
          {:max-body-size 1000}
          (is (str/starts-with? (raw req) "HTTP/1.1 413"))
          (is (re-find #"larger than :max-body-size" (str (deref read-error 5000 nil))))
          (is (still-serving?)))))
    (testing "an async handler is not called"
      (let [called (AtomicInteger.)]
        (with-server (fn [r respond _] (.incrementAndGet called) (respond (ok r))) {:max-body-size 1000 :async? true}
          (is (str/starts-with? (raw req) "HTTP/1.1 413"))
          (is (zero? (.get called))))))))

(deftest request-timeout
  (testing "a sync handler that takes too long gets 503 and its late answer is dropped"
    (let [done (promise)]
      (with-server (fn [r] (if (= "/slow" (:uri r))
                             (do (Thread/sleep 2500) (deliver done true) {:status 200 :body "late"})
                             (ok r)))
        {:request-timeout 200}
        (let [t0 (System/nanoTime)
              r (GET "/slow")]
          (is (= 503 (:status r)))
          (is (< (/ (- (System/nanoTime) t0) 1e6) 2000) "answered at the timeout, not when the handler finished"))
        (deref done 5000 nil)
        (is (still-serving?)))))
  (testing "an async handler that never responds gets 503 on a connection that stays usable"
    (with-server (fn [r respond _] (when-not (= "/never" (:uri r)) (respond (ok r))))
      {:async? true :request-timeout 200}
      (let [resp (raw (str "GET /never HTTP/1.1\r\nHost: x\r\n\r\n"
                           "GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))]
        (is (str/starts-with? resp "HTTP/1.1 503"))
        (is (str/includes? resp "ok /after")))))
  (testing "an :idle-timeout shorter than the handler does not cut the connection it owes an answer"
    (doseq [[mode handler opts] [[:sync (fn [_] (Thread/sleep 2000) {:status 200 :body "late"}) {}]
                                 [:async (fn [_ respond _] (future (Thread/sleep 2000) (respond {:status 200})))
                                  {:async? true}]]]
      (with-server handler (merge {:idle-timeout 500 :request-timeout 700} opts)
        (let [t0 (System/nanoTime)
              resp (raw "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" 5000)
              ms (/ (- (System/nanoTime) t0) 1e6)]
          (is (str/starts-with? resp "HTTP/1.1 503") (str mode ": " (pr-str resp)))
          (is (< 650 ms 1900) (str mode ": after " (long ms) " ms"))))))
  (testing ":request-timeout 0 means no limit"
    (with-server (fn [_] (Thread/sleep 300) {:status 200 :body "fine"}) {:request-timeout 0}
      (is (= "fine" (:body (GET "/")))))))

(deftest throwing-handler-gets-500-and-the-next-request-succeeds
  (with-server (fn [req] (if (= "/boom" (:uri req)) (throw (ex-info "secret detail" {})) (ok req))) {}
    (let [r (GET "/boom")]
      (is (= 500 (:status r)))
      (is (not (str/includes? (:body r) "secret detail")) "no exception text to the client")
      (is (not (str/includes? (:body r) "at donkey")) "no stack trace to the client"))
    (is (still-serving?))))

(deftest non-response-gets-500
  (doseq [bad [nil "a string" 42 [:vector] {:status "two hundred"} {:status 200 :headers "x"}]]
    (with-server (fn [req] (if (= "/after" (:uri req)) (ok req) bad)) {}
      (is (= 500 (:status (GET "/"))) (pr-str bad))
      (is (still-serving?)))))

(deftest async-handlers
  (testing "respond on the event loop"
    (with-server (fn [req respond _] (respond (ok req))) {:async? true}
      (is (= "ok /a" (:body (GET "/a"))))))
  (testing "respond from another thread, later"
    (let [pool (Executors/newScheduledThreadPool 2)]
      (try
        (with-server (fn [req respond _]
                       (.schedule pool ^Runnable #(respond (ok req)) 50 TimeUnit/MILLISECONDS))
          {:async? true}
          (is (every? #(= 200 (:status %)) (doall (repeatedly 5 #(GET "/later"))))))
        (finally (.shutdown pool)))))
  (testing "raise gives 500"
    (with-server (fn [req respond raise]
                   (if (= "/after" (:uri req)) (respond (ok req)) (raise (Exception. "nope"))))
      {:async? true}
      (is (= 500 (:status (GET "/"))))
      (is (still-serving?))))
  (testing "an async handler that throws gives 500"
    (with-server (fn [req respond _]
                   (if (= "/after" (:uri req)) (respond (ok req)) (throw (Exception. "sync throw"))))
      {:async? true}
      (is (= 500 (:status (GET "/"))))
      (is (still-serving?))))
  (testing "a second respond or raise is ignored"
    (with-server (fn [req respond raise]
                   (respond {:status 201 :body "first"})
                   (respond {:status 202 :body "second"})
                   (raise (Exception. "late")))
      {:async? true}
      (let [r (GET "/")]
        (is (= 201 (:status r)))
        (is (= "first" (:body r))))
      (is (= 201 (:status (GET "/again"))) "the connection stayed consistent")))
  (testing "a response given inside the handler on the loop is written once it returns"
    ;; (the kernel keeps a respond made on the loop while the handler runs and writes it when
    ;; the handler returns: what the handler does after respond must not change the answer)
    (with-server (fn [req respond _]
                   (respond {:status 200 :body (str "answered " (:uri req))})
                   (when (= "/then-throw" (:uri req)) (throw (Exception. "after respond"))))
      {:async? true}
      (is (= [200 "answered /then-throw"] ((juxt :status :body) (GET "/then-throw"))))
      (is (= "answered /again" (:body (GET "/again")))))
    (with-server (fn [req respond _] (respond (when (= "/after" (:uri req)) (ok req)))) {:async? true}
      (is (= 500 (:status (GET "/nil"))) "respond with nil is answered 500, as a returned nil")
      (is (still-serving?)))
    (with-server (fn [req respond _] (respond {:status 200 :body (subs (:uri req) 1)}))
      {:async? true :event-loops 1}
      (let [resp (raw (str "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                           "GET /b HTTP/1.1\r\nHost: x\r\n\r\n"
                           "GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))]
        (is (= 3 (count (re-seq #"HTTP/1\.1 200 OK\r\n" resp))) resp)
        (is (= ["a" "b" "c"] (map second (re-seq #"\r\n\r\n([abc])" resp)))
            "pipelined answers in order"))))
  (testing "a respond held from an earlier request, called inside another request's handler"
    ;; both connections on one loop: the held respond belongs to a request whose handler
    ;; returned long ago, so it is written at once, and the caller's own answer after it
    (let [held (promise)]
      (with-server {:routes [{:path "/hold" :handler-mode :non-blocking
                              :handler (fn [_ respond _] (deliver held respond))}
                             {:path "/release" :handler-mode :non-blocking
                              :handler (fn [_ respond _]
                                         (@held {:status 200 :body "released"})
                                         (respond {:status 200 :body "releaser"}))}]}
        {:event-loops 1}
        (let [waiting (future (GET "/hold"))]
          (deref held 5000 nil)
          (is (= "releaser" (:body (GET "/release"))))
          (is (= "released" (:body (deref waiting 5000 nil))))))))
  (testing "async streaming body is sent from a worker, not the event loop"
    (with-server (fn [_ respond _]
                   (respond {:status 200 :body (java.io.ByteArrayInputStream. (.getBytes "streamed"))}))
      {:async? true}
      (is (= "streamed" (:body (GET "/")))))))

(defn- read-response
  "Reads one HTTP/1.1 response with a Content-Length from `in`; returns [status body]."
  [^java.io.InputStream in]
  (let [line (fn [] (let [sb (StringBuilder.)]
                      (loop []
                        (let [c (.read in)]
                          (cond (neg? c) (str sb)
                                (= c 10) (str/trimr (str sb))
                                :else (do (.append sb (char c)) (recur)))))))
        status (line)
        headers (loop [hs {}]
                  (let [l (line)]
                    (if (str/blank? l) hs
                        (let [[k v] (str/split l #":\s*" 2)] (recur (assoc hs (str/lower-case k) v))))))
        n (Long/parseLong (get headers "content-length" "0"))
        body (byte-array n)]
    (loop [off 0] (when (< off n) (let [r (.read in body off (- n off))] (when (pos? r) (recur (+ off r))))))
    [status (String. body StandardCharsets/UTF_8)]))

(deftest thousand-requests-on-fifty-keep-alive-connections
  (with-server (fn [req] {:status 200 :body (str (:query-string req))}) {}
    (let [conns 50 per 20
          port u/*port*
          pool (Executors/newFixedThreadPool conns)
          tasks (for [c (range conns)]
                  (fn []
                    (with-open [s (Socket. "127.0.0.1" (int port))]
                      (.setSoTimeout s 10000)
                      (let [out (.getOutputStream s) in (java.io.BufferedInputStream. (.getInputStream s))]
                        (vec (for [i (range per)]
                               (do (.write out (.getBytes (str "GET /k?c" c "r" i " HTTP/1.1\r\nHost: x\r\n\r\n")))
                                   (.flush out)
                                   (let [[status body] (read-response in)]
                                     (and (= status "HTTP/1.1 200 OK") (= body (str "c" c "r" i)))))))))))
          results (mapcat deref (.invokeAll pool ^java.util.Collection (vec tasks)))]
      (.shutdown pool)
      (is (= (* conns per) (count results)))
      (is (every? true? results) "every request answered correctly on its own connection"))))
