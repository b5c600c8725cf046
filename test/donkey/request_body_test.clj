(ns donkey.request-body-test
  "Request bodies of sync handlers stream from the socket with flow control."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.test-util :as u :refer [with-server request raw]])
  (:import (java.io InputStream OutputStream)
           (java.net Socket)
           (java.nio.charset StandardCharsets)
           (java.util.concurrent.atomic AtomicLong)))

(defn- drain ^long [^InputStream in]
  (let [buf (byte-array 65536)]
    (loop [n 0]
      (let [r (.read in buf)]
        (if (neg? r) n (recur (+ n r)))))))

(defn- send-headers [^Socket s ^String head]
  (doto (.getOutputStream s)
    (.write (.getBytes head StandardCharsets/ISO_8859_1))
    (.flush)))

(deftest the-handler-reads-while-the-body-is-still-arriving
  (let [first-bytes (promise)]
    (with-server (fn [req]
                   (let [in ^InputStream (:body req)
                         b (.read in)]
                     (deliver first-bytes b)
                     {:status 200 :body (str "read " (inc (drain in)))}))
      {}
      (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
        (.setSoTimeout s 10000)
        (let [out (send-headers s "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")]
          (.write out (.getBytes "hello"))
          (.flush out)
          (is (= (int \h) (deref first-bytes 5000 nil)) "the handler ran before the body was complete")
          (.write out (.getBytes "world"))
          (.flush out)
          (let [in (.getInputStream s) buf (byte-array 4096) n (.read in buf)]
            (is (str/includes? (String. buf 0 n StandardCharsets/ISO_8859_1) "read 10"))))))))

(deftest a-handler-that-does-not-read-holds-back-the-client
  (let [reading (promise)
        total (* 64 1024 1024)]
    (with-server (fn [req]
                   (deref reading 10000 nil)
                   {:status 200 :body (str "read " (drain (:body req)))})
      {:max-body-size (* 128 1024 1024)}
      (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
        (.setSoTimeout s 20000)
        (.setSendBufferSize s 65536)
        (let [out (send-headers s (str "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: " total "\r\n\r\n"))
              written (AtomicLong.)
              writer (future
                       (let [chunk (byte-array 65536 (byte 66))]
                         (while (< (.get written) total)
                           (.write out chunk)
                           (.addAndGet written (alength chunk)))
                         (.flush out)))]
          (Thread/sleep 1500)
          (let [while-paused (.get written)]
            (is (< while-paused (* 16 1024 1024))
                (str "the client wrote " while-paused " bytes while the handler read none")))
          (deliver reading true)
          (deref writer 20000 nil)
          (let [in (.getInputStream s) buf (byte-array 4096) n (.read in buf)]
            (is (str/includes? (String. buf 0 n StandardCharsets/ISO_8859_1) (str "read " total)))))))))

(deftest unread-body-does-not-break-the-connection
  (with-server (fn [req] {:status 200 :body (str "ignored " (:uri req))}) {}
    (let [body (apply str (repeat (* 1024 1024) "x"))
          resp (raw (str "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: " (count body) "\r\n\r\n" body
                         "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    10000)]
      (is (str/includes? resp "ignored /a"))
      (is (str/includes? resp "ignored /b") "the next request on the connection is served"))))

(deftest echo-streams-the-request-body-back
  (with-server (fn [req] {:status 200 :body (:body req)}) {:max-body-size (* 64 1024 1024)}
    (let [data (byte-array (* 8 1024 1024))
          _ (dotimes [i (alength data)] (aset data i (unchecked-byte (mod i 251))))
          r (request :post "/echo" {:body data :as :bytes :timeout 30})]
      (is (= 200 (:status r)))
      (is (java.util.Arrays/equals data ^bytes (:body r))))))

(deftest client-vanishing-mid-body
  (let [error (promise)]
    (with-server (fn [req]
                   (when-let [b (:body req)]
                     (try (drain b) (catch java.io.IOException e (deliver error (ex-message e)))))
                   {:status 200})
      {}
      (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
        (let [out (send-headers s "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")]
          (.write out (byte-array 1000))
          (.flush out)))
      (is (re-find #"request body could not be read: .*(?i)clos" (str (deref error 5000 nil)))
          "the handler's read fails instead of hanging")
      (is (= 200 (:status (request :get "/")))))))
