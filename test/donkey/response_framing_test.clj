(ns donkey.response-framing-test
  "The kernel owns response framing: a handler's Content-Length and Transfer-Encoding never
  reach the wire when they disagree with the body sent; 1xx statuses are refused; HEAD, 204,
  205 and 304 carry no body; HTTP/1.0 streamed bodies are delimited by the close; Ring's async
  streaming (a body that hands its stream to another thread) ends when the stream is closed.
  Raw sockets: a response the server frames wrongly shows up as extra or missing bytes."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.test-util :as u :refer [with-server exchange closed? statuses]]
            [ring.core.protocols :as protocols]
            [ring.middleware.head :refer [wrap-head]]
            [ring.util.response :as response])
  (:import (java.io ByteArrayInputStream File OutputStream)))

(set! *warn-on-reflection* true)

(def ^:private smuggled "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nsmuggle")

(defn- head-lines
  "The header lines of the first response in `resp`, lower-cased names to values."
  [resp]
  (let [head (first (str/split (str resp) #"\r\n\r\n" 2))]
    (into {} (for [line (rest (str/split-lines head))
                   :let [[k v] (str/split line #":\s*" 2)]]
               [(str/lower-case k) v]))))

(defn- after-head [resp] (second (str/split (str resp) #"\r\n\r\n" 2)))

(defn- dechunk
  "The content of a chunked body `s` (chunks of ASCII text), or nil when it is not one whole
  chunked body."
  [^String s]
  (loop [s s out ""]
    (let [crlf (str/index-of s "\r\n")
          n (when crlf (try (Long/parseLong (subs s 0 crlf) 16) (catch NumberFormatException _ nil)))]
      (cond (nil? n) nil
            (zero? n) (when (= "\r\n" (subs s (+ crlf 2))) out)
            :else (let [start (+ crlf 2) end (+ start n)]
                    (when (and (<= (+ end 2) (count s)) (= "\r\n" (subs s end (+ end 2))))
                      (recur (subs s (+ end 2)) (str out (subs s start end)))))))))

(defn- reify-body
  "A StreamableResponseBody writing `text`, closing the stream when done."
  [^String text]
  (reify protocols/StreamableResponseBody
    (write-body-to-stream [_ _ out]
      (with-open [o ^OutputStream out] (.write o (.getBytes text "UTF-8"))))))

(def ^:private bodies
  "Streamed body kinds, each giving the text it is made of."
  {:input-stream #(ByteArrayInputStream. (.getBytes ^String % "UTF-8"))
   :seq #(list %)
   :streamable reify-body})

(def ^:private opts {:header-timeout 3000 :request-timeout 5000})

(deftest a-declared-length-is-enforced-on-streamed-bodies
  (doseq [[kind make] bodies]
    (testing (str kind ": a body longer than its Content-Length is cut there, and the"
                  " connection closed, so no bytes of it read as a next response")
      (with-server (fn [_] {:status 200 :headers {"content-length" "3"} :body (make (str "abc" smuggled))})
        opts
        (let [r (exchange (str "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
                               "GET /second HTTP/1.1\r\nHost: x\r\n\r\n"))]
          (is (= [200] (statuses (:resp r))) (:resp r))
          (is (= "3" (get (head-lines (:resp r)) "content-length")))
          (is (= "abc" (after-head (:resp r))))
          (is (not (str/includes? (:resp r) "smuggle")))
          (is (closed? r)))))
    (testing (str kind ": a large body longer than its Content-Length (sent as it streams)")
      (let [big (apply str (repeat 100000 "x"))]
        (with-server (fn [_] {:status 200 :headers {"content-length" "70000"} :body (make (str big smuggled))})
          opts
          (let [r (exchange "GET / HTTP/1.1\r\nHost: x\r\n\r\n" {:timeout-ms 5000})]
            (is (= 70000 (count (after-head (:resp r)))))
            (is (closed? r))))))
    (testing (str kind ": a body shorter than its Content-Length never looks complete: a 500"
                  " when nothing was sent yet (a seq flushes each element, so it has been)")
      (with-server (fn [_] {:status 200 :headers {"content-length" "100"} :body (make "short")}) opts
        (let [r (exchange "GET / HTTP/1.1\r\nHost: x\r\n\r\n")]
          (if (= kind :seq)
            (do (is (= [200] (statuses (:resp r))))
                (is (= "short" (after-head (:resp r))))
                (is (closed? r) "closed short of the 100 bytes"))
            (is (= [500] (statuses (:resp r))) (:resp r))))))
    (testing (str kind ": and cut off (the client sees it incomplete) when the head had gone")
      (let [big (apply str (repeat 100000 "x"))]
        (with-server (fn [_] {:status 200 :headers {"content-length" "200000"} :body (make big)}) opts
          (let [r (exchange "GET / HTTP/1.1\r\nHost: x\r\n\r\n" {:timeout-ms 5000})]
            (is (= [200] (statuses (:resp r))))
            (is (= "200000" (get (head-lines (:resp r)) "content-length")))
            (is (< (count (after-head (:resp r))) 200000))
            (is (closed? r))))))
    (testing (str kind ": a length that matches is sent as it is, and the connection kept")
      (with-server (fn [_] {:status 200 :headers {"Content-Length" "5"} :body (make "hello")}) opts
        (let [r (exchange (str "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
                               "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))]
          (is (= [200 200] (statuses (:resp r))))
          (is (= "5" (get (head-lines (:resp r)) "content-length")))
          (is (str/ends-with? (:resp r) "\r\n\r\nhello")))))))

(deftest handler-framing-headers-that-cannot-be-honoured
  (doseq [[kind make] bodies]
    (testing (str kind ": a Content-Length that is not one number is a 500, before anything is sent")
      (doseq [cl ["abc" "-1" "+3" "3,3" " " "1e3" ["3" "3"] ["3" "4"]]]
        (with-server (fn [_] {:status 200 :headers {"content-length" cl} :body (make (str "abc" smuggled))}) opts
          (let [r (exchange "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")]
            (is (= [500] (statuses (:resp r))) (str (pr-str cl) " " (:resp r)))
            (is (not (str/includes? (:resp r) "smuggle")))))))
    (testing (str kind ": the handler's Transfer-Encoding is never sent; the kernel frames the body")
      (doseq [te ["gzip" "chunked" "gzip, chunked" "identity"]]
        (with-server (fn [_] {:status 200 :headers {"transfer-encoding" te} :body (make "abc")}) opts
          (let [r (exchange "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                h (head-lines (:resp r))]
            (is (= [200] (statuses (:resp r))) te)
            (if (= kind :seq)
              ;; a seq is flushed element by element: chunked, by the kernel
              (do (is (= "chunked" (get h "transfer-encoding")) te)
                  (is (= "abc" (dechunk (after-head (:resp r)))) te))
              (do (is (nil? (get h "transfer-encoding")) te)
                  (is (= "3" (get h "content-length")) (str te ": a small body gets its length"))
                  (is (= "abc" (after-head (:resp r))))))))))
    (testing (str kind ": Transfer-Encoding beside a Content-Length: the length frames it")
      (with-server (fn [_] {:status 200 :headers {"transfer-encoding" "chunked" "content-length" "3"}
                            :body (make "abc")}) opts
        (let [r (exchange "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
              h (head-lines (:resp r))]
          (is (nil? (get h "transfer-encoding")))
          (is (= "3" (get h "content-length")))
          (is (= "abc" (after-head (:resp r)))))))))

(deftest interim-statuses-are-refused
  (doseq [status [100 101 102 103 199]]
    (doseq [[mode handler] [[:sync (fn [_] {:status status :body "x"})]
                            [:async (fn [_ respond _] (respond {:status status :body "x"}))]]]
      (with-server handler (assoc opts :async? (= mode :async))
        (let [r (exchange (str "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
                               "GET /next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))]
          (is (= [500 500] (statuses (:resp r))) (str mode " " status ": " (:resp r)))
          (is (not (re-find #"HTTP/1.1 1\d\d" (:resp r))) "no interim response is sent"))))))

(deftest no-body-for-head-204-205-304
  (let [f (doto (File/createTempFile "donkey-framing" ".txt") (.deleteOnExit))]
    (spit f "file content")
    (doseq [[kind make] (assoc bodies :string identity :file (fn [_] f))
            status [204 205 304]]
      (testing (str kind " " status)
        (with-server (fn [_] {:status status :body (make smuggled)}) opts
          (let [r (exchange (str "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
                                 "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))]
            (is (= [status status] (statuses (:resp r))) (:resp r))
            (is (not (str/includes? (:resp r) "smuggle")))
            (is (nil? (get (head-lines (:resp r)) "transfer-encoding")))
            (case status
              204 (is (nil? (get (head-lines (:resp r)) "content-length")))
              205 (is (= "0" (get (head-lines (:resp r)) "content-length")))
              304 (is (nil? (get (head-lines (:resp r)) "content-length"))))))))
    (testing "a 304 keeps the length of the 200 the handler declared"
      (with-server (fn [_] {:status 304 :headers {"content-length" "12" "etag" "\"x\""} :body nil}) opts
        (is (= "12" (get (head-lines (:resp (exchange "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")))
                         "content-length")))))))

(deftest head-answers-carry-the-get-length
  (let [f (doto (File/createTempFile "donkey-head" ".txt") (.deleteOnExit))]
    (spit f "twelve bytes")
    (doseq [[what handler want] [["a file" (fn [_] {:status 200 :body f}) "12"]
                                 ["Ring's wrap-head over file-response" (wrap-head (fn [_] (response/file-response (str f)))) "12"]
                                 ["a String" (fn [_] {:status 200 :body "héllo"}) "6"]
                                 ["a nil body with the handler's length" (fn [_] {:status 200 :headers {"content-length" "42"}}) "42"]
                                 ["an InputStream with the handler's length"
                                  (fn [_] {:status 200 :headers {"content-length" "5"}
                                           :body (ByteArrayInputStream. (.getBytes "hello"))}) "5"]
                                 ["a map (JSON)" (fn [_] {:status 200 :body {"a" 1}}) "7"]]]
      (testing what
        (with-server handler opts
          (let [get-r (exchange "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                r (exchange (str "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n"
                                 "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
                h (head-lines (:resp r))]
            (is (= want (get h "content-length")) (:resp r))
            (when (:body (handler {:request-method :get :uri "/" :headers {}}))
              (is (= (get (head-lines (:resp get-r)) "content-length") (get h "content-length"))
                  "the same as GET's"))
            (is (= [200 200] (statuses (:resp r))) "no body between the HEAD answer and the next")))))))

(deftest http-1-0-streamed-bodies-end-with-the-connection
  (let [big (apply str (repeat 40000 "y"))]
    (doseq [[kind make] bodies
            keep-alive? [true false]]
      (testing (str kind (when keep-alive? ", keep-alive asked"))
        (with-server (fn [_] {:status 200 :body (make big)}) opts
          (let [r (exchange (str "GET / HTTP/1.0\r\n" (when keep-alive? "Connection: keep-alive\r\n") "\r\n"
                                 "GET /pipelined HTTP/1.0\r\n\r\n")
                            {:timeout-ms 5000})
                h (head-lines (:resp r))]
            (is (re-find #"^HTTP/1\.[01] 200 " (:resp r)))
            (is (nil? (get h "transfer-encoding")) "no chunked encoding for HTTP/1.0")
            (is (nil? (get h "content-length")))
            (is (= "close" (some-> (get h "connection") str/lower-case)))
            (is (= big (after-head (:resp r))) "the body, and nothing after it")
            (is (closed? r))))))
    (testing "a small body that is not flushed still gets its length, and keep-alive"
      (with-server (fn [_] {:status 200 :body (ByteArrayInputStream. (.getBytes "small"))}) opts
        (let [r (exchange (str "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
                               "GET / HTTP/1.0\r\n\r\n"))]
          (is (= [200 200] (statuses (:resp r))))
          (is (= "5" (get (head-lines (:resp r)) "content-length"))))))))

(deftest async-streamable-bodies-end-when-the-stream-closes
  ;; Ring's contract for async handlers: write-body-to-stream may hand the stream to another
  ;; thread and return; the response ends when that thread closes the stream
  (let [handed-off (fn [chunks]
                     (reify protocols/StreamableResponseBody
                       (write-body-to-stream [_ _ out]
                         (future
                           (with-open [w (io/writer out)]
                             (doseq [c chunks]
                               (Thread/sleep 50)
                               (.write w ^String c)
                               (.flush w)))))))]
    (with-server (fn [_ respond _] (respond {:status 200 :body (handed-off ["one " "two " "three"])}))
      (assoc opts :async? true)
      (let [r (u/GET "/")]
        (is (= 200 (:status r)))
        (is (= "one two three" (:body r)))))
    (testing "on a non-blocking route too"
      (with-server {:routes [{:path "/" :handler-mode :non-blocking
                              :handler (fn [_ respond _] (respond {:status 200 :body (handed-off ["a" "b"])}))}]}
        opts
        (is (= "ab" (:body (u/GET "/"))))))
    (testing "a sync handler's body still ends when write-body-to-stream returns"
      (with-server (fn [_] {:status 200 :body (reify-body "sync")}) opts
        (is (= "sync" (:body (u/GET "/"))))))))
