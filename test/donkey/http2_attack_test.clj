(ns donkey.http2-attack-test
  "HTTP/2 clients that abuse the protocol: rapid reset (CVE-2023-44487), streams the server is
  made to reset (CVE-2025-55163), CONTINUATION floods, SETTINGS and PING floods from a client
  that does not read, HPACK bombs, too many streams, oversized frames and header lists. Each
  is bounded: the abusive stream or connection is ended quickly, and the server goes on
  serving everyone else."
  (:require [clojure.test :refer [deftest is testing]]
            [donkey.h2-client :as h2]
            [donkey.server :as server])
  (:import (io.netty.handler.codec.http2 DefaultHttp2Headers)
           (java.net InetSocketAddress Socket)
           (java.io DataInputStream)))

(set! *warn-on-reflection* true)

(defn- hello [_] {:status 200 :headers {"content-type" "text/plain"} :body "hello"})

(defmacro ^:private with-h2c
  "Runs `body` with `port` bound to the port of an h2c server of `hello` started with `opts`."
  [[port opts] & body]
  `(with-open [s# (server/run-server hello (merge {:port 0 :join? false :event-loops 1 :h2c? true}
                                                  ~opts))]
     (let [~port (server/port s#)]
       ~@body)))

(defn- still-serves?
  "True when a fresh connection to `port` gets its GET answered (within 20 s: the server may
  still be finishing the abusive connection's work on a loaded machine)."
  [port]
  (let [c (h2/connect port {} 20000)]
    (try (= "hello" (:body (h2/request! c 1 "GET" "/")))
         (finally (h2/close! c)))))

(defn- ended-with
  "Reads `c` until the server ends it (or `ms` pass): {:goaway code-or-nil :closed? bool}."
  [c ms]
  (let [deadline (+ (System/currentTimeMillis) ms)]
    (loop [goaway nil]
      (if (> (System/currentTimeMillis) deadline)
        {:goaway goaway :closed? false}
        (let [f (h2/read-frame c)]
          (case (:type f)
            (:eof :reset) {:goaway goaway :closed? true}
            :goaway (recur (h2/code f))
            (recur goaway)))))))

(defn- quiet-sender
  "A connection whose socket has a small receive buffer, for clients that do not read."
  [port]
  (let [s (doto (Socket.) (.setReceiveBufferSize 4096))]
    (.connect s (InetSocketAddress. "127.0.0.1" (int port)) 5000)
    (.setSoTimeout s 5000)
    (let [out (.getOutputStream s)]
      (.write out ^bytes h2/preface)
      (.write out (h2/settings {}))
      (.flush out)
      {:socket s :out out :in (DataInputStream. (.getInputStream s)) :enc (h2/encoder)
       :dec (io.netty.handler.codec.http2.DefaultHttp2HeadersDecoder. false)})))

(defn- send-until-refused
  "Sends `frame` on `c` `n` times in batches, without reading; the number sent before a write
  failed (the server closed the connection), or n."
  [c ^bytes frame n]
  (let [batch (byte-array (* 100 (alength frame)))]
    (dotimes [i 100] (System/arraycopy frame 0 batch (* i (alength frame)) (alength frame)))
    (loop [sent 0]
      (if (>= sent n)
        sent
        (if (try (h2/send! c batch) true (catch java.io.IOException _ false))
          (recur (+ sent 100))
          sent)))))

(deftest rapid-reset-closes-the-connection
  (with-h2c [port {:h2-max-resets 50 :h2-reset-window 30}]
    (let [c (h2/connect port)]
      (try
        (let [frames (for [id (range 1 401 2)]
                       [(h2/headers-frame (:enc c) id (h2/request-headers "GET" "/" []) true)
                        (h2/rst-stream id 8)])]
          (try (doseq [[h r] frames] (h2/send! c h r)) (catch java.io.IOException _))
          (let [{:keys [goaway closed?]} (ended-with c 5000)]
            (is closed? "the connection is closed")
            (is (= 0xb goaway) "with ENHANCE_YOUR_CALM")))
        (finally (h2/close! c)))
      (is (still-serves? port)))))

(deftest streams-the-server-is-made-to-reset-are-bounded-too
  ;; a WINDOW_UPDATE of 0 on an open stream is a stream error: the server resets the stream
  (with-h2c [port {}]
    (let [c (h2/connect port)]
      (try
        (try
          (doseq [id (range 1 4001 2)]
            (h2/send! c (h2/headers-frame (:enc c) id (h2/request-headers "POST" "/" []) false)
                      (h2/window-update id 0)))
          (catch java.io.IOException _))
        (let [{:keys [closed?]} (ended-with c 10000)]
          (is closed? "a client that has the server reset 2000 streams loses its connection"))
        (finally (h2/close! c)))
      (is (still-serves? port)))))

(deftest continuation-floods-are-cut-short
  (with-h2c [port {}]
    (testing "empty CONTINUATION frames"
      (let [c (h2/connect port)
            enc (:enc c)
            block (h2/header-block enc 1 (h2/request-headers "GET" "/" []))]
        (try
          (h2/send! c (h2/frame :headers h2/end-stream 1 block))
          (let [sent (send-until-refused c (h2/frame :continuation 0 1 (byte-array 0)) 2000000)]
            (is (< sent 2000000) "the connection is closed long before the flood ends")
            (is (:closed? (ended-with c 5000))))
          (finally (h2/close! c)))))
    (testing "CONTINUATION frames that grow the header list past its limit"
      (let [c (h2/connect port)
            enc (:enc c)
            block (h2/header-block enc 1 (h2/request-headers "GET" "/" []))
            chunk (h2/header-block enc 1 (doto (DefaultHttp2Headers. false)
                                           (.add "x-filler" (apply str (repeat 1000 "a")))))]
        (try
          (h2/send! c (h2/frame :headers h2/end-stream 1 block))
          (let [sent (send-until-refused c (h2/frame :continuation 0 1 chunk) 20000)]
            (is (< sent 20000))
            (is (:closed? (ended-with c 5000))))
          (finally (h2/close! c)))))
    (is (still-serves? port))))

(deftest control-frame-floods-from-a-client-that-does-not-read-are-cut
  (with-h2c [port {}]
    (doseq [[what frame] [["PING" (h2/frame :ping 0 0 (byte-array 8))]
                          ["SETTINGS" (h2/settings {})]]]
      (testing what
        (let [c (quiet-sender port)]
          (try
            (let [sent (send-until-refused c frame 2000000)]
              (is (< sent 2000000) "the server closes the connection instead of queueing answers"))
            (finally (h2/close! c))))))
    (is (still-serves? port))))

(deftest an-hpack-bomb-is-refused-without-decoding-it-whole
  (with-h2c [port {:max-header-size 16384}]
    (let [c (h2/connect port)
          big (apply str (repeat 4000 "b"))
          ;; the first request puts a 4000-byte field in the connection's table...
          first-block (h2/request-headers "GET" "/" [["x-big" big]])
          ;; ...which the second names 1000 times, one byte each: 4 MB of headers
          bomb (h2/request-headers "GET" "/" (repeat 1000 ["x-big" big]))]
      (try
        (is (= 200 (:status (h2/request! c 1 "GET" "/" [["x-big" big]] nil))))
        (let [block (h2/header-block (:enc c) 3 bomb)]
          (is (< (alength block) 5000) "the block is small on the wire")
          (h2/send! c (h2/frame :headers (bit-or h2/end-headers h2/end-stream) 3 block))
          (let [r (h2/read-response c 3)]
            (is (not= 200 (:status r)) "refused")
            (is (or (= 431 (:status r)) (:reset r) (#{:goaway :eof :reset} (:end r))) (pr-str (dissoc r :body)))))
        (finally (h2/close! c)))
      (is (still-serves? port)))))

(deftest a-header-list-over-the-limit-is-refused
  (with-h2c [port {:max-header-size 8192}]
    (let [c (h2/connect port)]
      (try
        (let [r (h2/request! c 1 "GET" "/" [["x-long" (apply str (repeat 10000 "x"))]] nil)]
          (is (not= 200 (:status r)))
          (is (or (= 431 (:status r)) (:reset r) (#{:goaway :eof :reset} (:end r))) (pr-str (dissoc r :body))))
        (finally (h2/close! c)))
      (is (still-serves? port)))))

(deftest streams-past-the-concurrency-limit-are-refused
  (with-h2c [port {:h2-max-concurrent-streams 4}]
    (let [c (h2/connect port)]
      (try
        ;; five streams that wait for their bodies
        (doseq [id [1 3 5 7 9]]
          (h2/send! c (h2/headers-frame (:enc c) id (h2/request-headers "POST" "/" []) false)))
        (let [r (h2/read-response c 9)]
          (is (= 7 (:reset r)) "REFUSED_STREAM"))
        (finally (h2/close! c)))
      (is (still-serves? port)))))

(deftest a-frame-over-the-size-limit-ends-the-connection
  (with-h2c [port {}]
    (let [c (h2/connect port)]
      (try
        (h2/send! c (h2/headers-frame (:enc c) 1 (h2/request-headers "POST" "/" []) false)
                  (h2/frame :data h2/end-stream 1 (byte-array 20000)))
        (let [{:keys [goaway closed?]} (ended-with c 5000)]
          (is closed?)
          (is (= 0x6 goaway) "FRAME_SIZE_ERROR"))
        (finally (h2/close! c)))
      (is (still-serves? port)))))

(deftest data-past-the-flow-control-window-is-refused
  ;; the handler does not read: the kernel queues 256 KiB of its body, then stops taking more,
  ;; and the client may send one window beyond that
  (with-open [s (server/run-server (fn [_] (Thread/sleep 3000) {:status 200 :body "late"})
                                   {:port 0 :join? false :event-loops 1 :h2c? true})]
    (let [port (server/port s)
          c (h2/connect port)]
      (try
        (h2/send! c (h2/headers-frame (:enc c) 1 (h2/request-headers "POST" "/" []) false))
        (try
          (dotimes [_ 64] (h2/send! c (h2/frame :data 0 1 (byte-array 16384))))
          (catch java.io.IOException _))
        (let [r (h2/read-response c 1)]
          (is (or (= 0x3 (:reset r)) (= 0x3 (:goaway r))) (str "FLOW_CONTROL_ERROR: " (pr-str (dissoc r :body)))))
        (finally (h2/close! c)))
      (is (= "late" (let [c (h2/connect port)]
                      (try (:body (h2/request! c 1 "GET" "/")) (finally (h2/close! c)))))))))

(deftest empty-data-frame-floods-are-cut
  (with-h2c [port {}]
    (let [c (h2/connect port)]
      (try
        (h2/send! c (h2/headers-frame (:enc c) 1 (h2/request-headers "POST" "/" []) false))
        (let [sent (send-until-refused c (h2/frame :data 0 1 (byte-array 0)) 2000000)]
          (is (< sent 2000000))
          (is (:closed? (ended-with c 5000))))
        (finally (h2/close! c)))
      (is (still-serves? port)))))
