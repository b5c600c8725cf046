(ns donkey.access-log-test
  "The access log (:access-log): a line per request, in both formats, for handlers' answers and
  the kernel's own, written through System.Logger \"donkey.access\"."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.server :as server]
            [donkey.test-util :as u :refer [with-server]])
  (:import (com.fasterxml.jackson.databind ObjectMapper)
           (java.util Map)
           (java.util.logging Handler Level LogRecord Logger)))

(set! *warn-on-reflection* true)

(defn- capture
  "Runs `f` while collecting the lines logged to \"donkey.access\"; waits until `n` have come
  (the log writes from a thread of its own), at most 5 s."
  [n f]
  (let [records (atom [])
        logger (Logger/getLogger "donkey.access")
        h (proxy [Handler] []
            (publish [^LogRecord r] (swap! records conj [(.getLevel r) (.getMessage r)]))
            (flush [])
            (close []))]
    (.addHandler logger h)
    (try
      (f)
      (let [deadline (+ (System/currentTimeMillis) 5000)]
        (while (and (< (count @records) n) (< (System/currentTimeMillis) deadline))
          (Thread/sleep 20)))
      (finally (.removeHandler logger h)))
    @records))

(def ^:private routes
  {:routes [{:path "/users/:id" :handler (fn [_] {:status 200 :body "user"})}
            {:path "/boom" :handler (fn [_] (throw (ex-info "boom" {})))}]})

(deftest common-log-format
  (let [lines (capture 4 #(with-server routes {:access-log :common}
                            (u/GET "/users/7?x=1")
                            (u/GET "/nowhere")
                            (u/GET "/boom")
                            (u/exchange "GET /users/\"quoted\" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")))
        msgs (map second lines)]
    (is (= 4 (count msgs)) (pr-str msgs))
    (is (every? #(= Level/INFO (first %)) lines))
    (is (re-matches #"127\.0\.0\.1 - - \[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d \+0000\] \"GET /users/7\?x=1 HTTP/1\.1\" 200 4 \d+\.\d{3} \"ANY /users/:id\""
                    (first msgs))
        (first msgs))
    (testing "the kernel's 404 and a failure's 500 are logged, without a route for the 404"
      (is (some #(re-find #"\"GET /nowhere HTTP/1\.1\" 404 \d+ [\d.]+ \"-\"" %) msgs))
      (is (some #(re-find #"\"GET /boom HTTP/1\.1\" 500 " %) msgs)))
    (testing "quotes in the target are escaped"
      (is (some #(str/includes? % "/users/\\\"quoted\\\"") msgs)))))

(deftest json-lines
  (let [lines (capture 2 #(with-server routes {:access-log :json}
                            (u/GET "/users/7")
                            (u/exchange "GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")))
        maps (map #(into {} ^Map (.readValue (ObjectMapper.) ^String (second %) Map)) lines)
        ok (first (filter #(= 200 (get % "status")) maps))]
    (is (= 2 (count maps)) (pr-str lines))
    (is (= {"remote" "127.0.0.1" "method" "GET" "target" "/users/7" "protocol" "HTTP/1.1"
            "status" 200 "bytes" 4 "route" "ANY /users/:id"}
           (dissoc ok "time" "duration_ms")))
    (is (re-matches #"\d{4}-\d\d-\d\dT.*Z" (get ok "time")))
    (is (number? (get ok "duration_ms")))
    (testing "a request Vert.x could not parse is logged with the kernel's 400"
      (is (some #(= 400 (get % "status")) maps)))))

(deftest off-by-default
  (is (empty? (capture 0 #(with-server routes {} (u/GET "/users/7") (Thread/sleep 300))))))

(deftest the-option-is-checked
  (is (thrown-with-msg? IllegalArgumentException #":access-log must be one of nil, :common, :json"
                        (server/run-server (fn [_] {:status 200}) {:port 0 :join? false :access-log :apache}))))

(deftest answers-outside-the-request-path-are-logged
  ;; a version the server does not speak is answered before a request exists, and a
  ;; WebSocket's 101 is written without an HTTP response end: both still get their line
  (let [lines (capture 2 #(with-server (fn [_] {:ring.websocket/listener {:on-message (fn [_ _])}})
                            {:access-log :common}
                            (u/exchange "GET / HTTP/9.9\r\nHost: x\r\n\r\n")
                            (let [ws (.get (.buildAsync (.newWebSocketBuilder
                                                         (java.net.http.HttpClient/newHttpClient))
                                                        (java.net.URI/create
                                                         (str "ws://127.0.0.1:" u/*port* "/chat"))
                                                        (reify java.net.http.WebSocket$Listener))
                                           5 java.util.concurrent.TimeUnit/SECONDS)]
                              (Thread/sleep 200)
                              (.abort ^java.net.http.WebSocket ws))))
        msgs (map second lines)]
    (is (some #(re-find #"\"GET / HTTP/9\.9\" 505 " %) msgs) (pr-str msgs))
    (is (some #(re-find #"\"GET /chat HTTP/1\.1\" 101 " %) msgs) (pr-str msgs))))
