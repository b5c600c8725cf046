(ns donkey.routes-test
  "The kernel route table: matching, 404/405/406/415, handler modes, middleware order."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [compojure.core :as compojure]
            [donkey.routes :as routes]
            [donkey.server :as server]
            [donkey.test-util :as u :refer [with-server request raw header]]
            [ring.middleware.params :refer [wrap-params]])
  (:import (donkey.route PathMemo Route Router Router$Match)))

(defn- echo [tag]
  (fn [req] {:status 200 :headers {"content-type" "text/plain"}
             :body (str tag " " (pr-str (:path-params req)))}))

(defn- GET [path & [headers]] (request :get path {:headers headers}))

(deftest simple-and-param-paths
  (with-server {:routes [{:path "/" :handler (echo "root")}
                         {:path "/users" :handler (echo "users")}
                         {:path "/users/me" :handler (echo "me")}
                         {:path "/users/:id" :handler (echo "user")}
                         {:path "/users/:id/posts/:post" :handler (echo "post")}
                         {:path "/files/:name/raw" :handler (echo "raw")}]}
    {}
    (is (= "root {}" (:body (GET "/"))))
    (is (= "users {}" (:body (GET "/users"))))
    (is (= "me {}" (:body (GET "/users/me"))) "a literal segment wins over a parameter")
    (is (= "user {:id \"42\"}" (:body (GET "/users/42"))))
    (is (= "post {:id \"7\", :post \"x\"}" (:body (GET "/users/7/posts/x"))))
    (is (= "user {:id \"a b/é\"}" (:body (GET "/users/a%20b%2F%C3%A9"))) "params are percent-decoded")
    (is (= "raw {:name \"n\"}" (:body (GET "/files/n/raw"))))
    (is (= 404 (:status (GET "/users/7/posts"))))
    (is (= 404 (:status (GET "/users/"))) "an empty segment is not a parameter")
    (is (= 404 (:status (GET "/nope"))))
    (is (str/starts-with? (raw "GET /users/%zz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                          "HTTP/1.1 400")
        "bad percent-encoding in a path param")
    (is (= "me {}" (:body (GET "/users/me"))) "still serving")))

(deftest regex-paths
  (with-server {:routes [{:path "/v(\\d+)/items/([0-9]+)" :match-type :regex :handler (echo "item")}
                         {:path "/(?<lang>[a-z]{2})/docs/(?<page>.+)" :match-type :regex :handler (echo "doc")}
                         {:path "/static" :handler (echo "static")}]}
    {}
    (is (= "item {1 \"2\", 2 \"99\"}" (:body (GET "/v2/items/99"))) "groups by index")
    (is (= "doc {1 \"en\", 2 \"a/b\", :lang \"en\", :page \"a/b\"}" (:body (GET "/en/docs/a/b")))
        "named groups by name too")
    (is (= 404 (:status (GET "/v2/items/x"))) "regexes match the whole path")
    (is (= "static {}" (:body (GET "/static"))))))

(deftest methods-and-405
  (with-server {:routes [{:path "/r" :methods [:get] :handler (echo "get")}
                         {:path "/r" :methods [:post :put] :handler (echo "write")}
                         {:path "/any" :handler (echo "any")}]}
    {}
    (is (= "get {}" (:body (GET "/r"))))
    (is (= "write {}" (:body (request :post "/r" {:body "x"}))))
    (is (= "write {}" (:body (request :put "/r" {:body "x"}))))
    (let [r (request :delete "/r")]
      (is (= 405 (:status r)))
      (is (= "GET, POST, PUT, HEAD" (header r "allow"))))
    (testing "405 to a request with a body closes the connection (the body is not read)"
      (let [resp (raw "PATCH /r HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")]
        (is (str/starts-with? resp "HTTP/1.1 405"))
        (is (str/includes? (str/lower-case resp) "connection: close"))))
    (testing "HEAD falls back to GET"
      (let [resp (raw "HEAD /r HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")]
        (is (str/starts-with? resp "HTTP/1.1 200"))
        (is (not (str/includes? resp "get {}")))))
    (is (= "any {}" (:body (request :patch "/any" {:body "x"}))) "no :methods means any")))

(deftest literal-paths-answer-every-method-as-the-general-matcher
  ;; a literal path without media types has each common method's outcome worked out at
  ;; compile time, looked up by the method name's identity: a name that is equal but not
  ;; identical, or a method outside the table, goes through the general matcher, and all
  ;; three agree
  (let [router (routes/compile-routes [{:path "/r" :methods [:get] :handler (echo "get")}
                                       {:path "/r" :methods [:post :put] :handler (echo "write")}
                                       {:path "/any" :handler (echo "any")}
                                       {:path "/neg" :produces ["text/plain"] :handler (echo "neg")}]
                                      [])
        outcome (fn [^String method path]
                  (let [^Router$Match m (.match ^Router router method path nil nil)]
                    [(.status m) (some-> (.route m) str) (.allow m) (.pathParams m)]))]
    (doseq [path ["/r" "/any" "/neg" "/none"]
            method ["GET" "HEAD" "POST" "PUT" "DELETE" "PATCH" "OPTIONS" "TRACE" "PURGE"]]
      (let [fast (outcome method path)
            general (outcome (String. (.toCharArray ^String method)) path)]
        (is (= general fast) (str method " " path))))
    (is (= [405 nil "GET, POST, PUT, HEAD" nil] (outcome "DELETE" "/r")))
    (is (= (outcome "GET" "/r") (outcome "HEAD" "/r")) "HEAD falls back to GET")
    (is (= {} (nth (outcome "GET" "/r") 3)))
    (is (= 0 (first (outcome "TRACE" "/any"))) "a method outside the table, no :methods")
    (is (= 405 (first (outcome "TRACE" "/r")))))
  (testing "past eight literal paths they are looked up by hash instead of scanned"
    (doseq [n [8 9 20]]
      (let [paths (for [i (range n)] (str "/p" i (apply str (repeat (mod i 3) "x"))))
            ^Router router (routes/compile-routes (vec (for [p paths] {:path p :handler (echo p)})) [])]
        (doseq [p paths]
          (let [^Route r (.route (.match router "GET" ^String p nil nil))]
            (is (= (str p " nil") (:body ((.handler r) {}))) (str n " " p))))
        (is (= 404 (.status (.match router "GET" "/p0y" nil nil))))
        (is (= 404 (.status (.match router "GET" "/q0" nil nil))))))))

;; an event loop remembers the literal path it routed last, by identity: the same instance
;; with another table, another instance of another path, a parameter path and a method outside
;; the table each get their own answer
(deftest a-loop-s-path-memo-answers-as-the-table-does
  (let [a (routes/compile-routes [{:path "/a" :handler (echo "a1")}
                                  {:path "/b" :methods [:get] :handler (echo "b1")}
                                  {:path "/u/:id" :handler (echo "u1")}]
                                 [])
        b (routes/compile-routes [{:path "/a" :handler (echo "a2")}] [])
        memo (PathMemo.)
        body (fn [^Router router method ^String path]
               (let [^Router$Match m (.match router method path nil nil memo)]
                 (if (zero? (.status m))
                   (:body ((.handler ^Route (.route m)) {:path-params (.pathParams m)}))
                   (.status m))))
        path-a (String. "/a")]
    (is (= "a1 {}" (body a "GET" path-a)))
    (is (= "a1 {}" (body a "GET" path-a)) "the memo's own answer")
    (is (= "a2 {}" (body b "GET" path-a)) "the same path instance with another table")
    (is (= "a1 {}" (body a "GET" path-a)) "and back")
    (is (= "b1 {}" (body a "GET" (String. "/b"))))
    (is (= 405 (body a "POST" (String. "/b"))))
    (is (= "a1 {}" (body a "POST" path-a)))
    (is (= 404 (body b "GET" (String. "/b"))) "a path the other table lacks")
    (let [u (String. "/u/7")]
      (is (= "u1 {:id \"7\"}" (body a "GET" u)))
      (is (= "u1 {:id \"7\"}" (body a "GET" u)) "a parameter path is matched each time"))))

(deftest pipelined-targets-on-one-loop-get-their-own-path-and-query
  ;; one connection, so one event loop: each target, repeated or not, routes and maps as it
  ;; would alone
  (with-server {:routes [{:path "/r" :handler (fn [req] {:status 200
                                                         :body (str "r " (:uri req) " "
                                                                    (pr-str (:query-string req)))})}
                         {:path "/s" :methods [:get] :handler (fn [req] {:status 200
                                                                         :body (str "s " (:uri req) " "
                                                                                    (pr-str (:query-string req)))})}
                         {:path "/p/:id" :handler (fn [req] {:status 200
                                                             :body (str "p " (:uri req) " "
                                                                        (pr-str (:query-string req)))})}]}
    {}
    (let [targets ["/r?x=1" "/r" "/r" "/s" "/r?x=1" "/r?" "/nope" "/s?y=2" "/p/1" "/p/2?z"
                   "/r" "http://h.example/s?q=3" "/s"]
          data (apply str (map-indexed (fn [i t]
                                         (str "GET " t " HTTP/1.1\r\nHost: x\r\n"
                                              (when (= i (dec (count targets))) "Connection: close\r\n")
                                              "\r\n"))
                                       targets))
          resp (raw data)]
      (is (= [200 200 200 200 200 200 404 200 200 200 200 200 200] (u/statuses resp)))
      (is (= ["r /r \"x=1\"" "r /r nil" "r /r nil" "s /s nil" "r /r \"x=1\"" "r /r \"\""
              "s /s \"y=2\"" "p /p/1 nil" "p /p/2 \"z\"" "r /r nil" "s /s \"q=3\"" "s /s nil"]
             (re-seq #"(?:r|s|p) /[a-z0-9/]* (?:nil|\"[^\"]*\")" resp))))))

(deftest consumes-415
  (with-server {:routes [{:path "/in" :methods [:post] :consumes ["application/json" "text/*"]
                          :handler (echo "in")}]}
    {}
    (is (= 200 (:status (request :post "/in" {:body "{}" :headers {"Content-Type" "application/json; charset=utf-8"}}))))
    (is (= 200 (:status (request :post "/in" {:body "x" :headers {"Content-Type" "text/csv"}}))) "a range")
    (is (= 200 (:status (request :post "/in" {:body "{}" :headers {"Content-Type" "Application/JSON"}}))) "case-insensitive")
    (is (= 415 (:status (request :post "/in" {:body "<x/>" :headers {"Content-Type" "application/xml"}}))))
    (is (= 415 (:status (request :post "/in" {:body "x"}))) "no Content-Type")))

(deftest produces-406-and-negotiation
  (with-server {:routes [{:path "/out" :produces ["application/json"] :handler (echo "json")}
                         {:path "/out" :produces ["text/html"] :handler (echo "html")}
                         {:path "/only-json" :produces ["application/json"] :handler (echo "j")}]}
    {}
    (is (= "json {}" (:body (GET "/out"))) "no Accept: the first route")
    (is (= "json {}" (:body (GET "/out" {"Accept" "*/*"}))) "curl's Accept")
    (is (= "html {}" (:body (GET "/out" {"Accept" "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"})))
        "a browser's Accept")
    (is (= "html {}" (:body (GET "/out" {"Accept" "text/*"}))))
    (is (= "json {}" (:body (GET "/out" {"Accept" "application/json;q=0.5, text/html;q=0.1"}))))
    (is (= 406 (:status (GET "/only-json" {"Accept" "text/html"}))))
    (is (= 406 (:status (GET "/only-json" {"Accept" "application/json;q=0"}))) "q=0 means not acceptable")
    (is (= 200 (:status (GET "/only-json" {"Accept" "application/*"}))))))

(deftest handler-modes
  (let [thread (fn [req] {:status 200 :body (.getName (Thread/currentThread))})]
    (with-server {:routes [{:path "/b" :handler thread}
                           {:path "/nb" :handler-mode :non-blocking
                            :handler (fn [req respond _] (respond (thread req)))}]}
      {}
      (is (str/starts-with? (:body (GET "/b")) "donkey-worker"))
      (is (str/includes? (:body (GET "/nb")) "eventloop")))))

(deftest middleware-order
  (let [trace (fn [tag]
                (fn [handler]
                  (fn
                    ([req] (handler (update req :trace (fnil conj []) tag)))
                    ([req respond raise] (handler (update req :trace (fnil conj []) tag) respond raise)))))
        show (fn [req] {:status 200 :body (pr-str (:trace req))})]
    (with-server {:middleware [(trace :s1) (trace :s2)]
                  :routes [{:path "/x" :middleware [(trace :r1) (trace :r2)] :handler show}
                           {:path "/nb" :handler-mode :non-blocking :middleware [(trace :r1)]
                            :handler (fn [req respond _] (respond (show req)))}]
                  :not-found show}
      {}
      (is (= "[:s1 :s2 :r1 :r2]" (:body (GET "/x"))) "server-wide first, then the route's, in order")
      (is (= "[:s1 :s2 :r1]" (:body (GET "/nb"))) "3-arity middleware for non-blocking routes")
      (is (= "[:s1 :s2]" (:body (GET "/missing"))) "the not-found handler gets the server-wide middleware"))))

(deftest ring-middleware-in-both-places
  (with-server {:middleware [wrap-params]
                :routes [{:path "/q" :handler (fn [req] {:status 200 :body (pr-str (:params req))})}
                         {:path "/r" :middleware [wrap-params]
                          :handler (fn [req] {:status 200 :body (pr-str (:query-params req))})}]}
    {}
    (is (= "{\"a\" \"1\"}" (:body (GET "/q?a=1"))))
    (is (= "{\"b\" \"2\"}" (:body (GET "/r?b=2"))))))

(deftest compojure-as-a-catch-all-route
  (let [app (compojure/routes (compojure/GET "/c/:id" [id] (str "compojure " id)))]
    (with-server {:routes [{:path "/fast" :handler (echo "fast")}
                           {:path "/.*" :match-type :regex :handler app}]}
      {}
      (is (= "fast {}" (:body (GET "/fast"))))
      (is (= "compojure 5" (:body (GET "/c/5")))))))

(deftest not-found-and-error-handlers
  (with-server {:routes [{:path "/boom" :handler (fn [_] (throw (ex-info "kaput" {})))}]
                :not-found (fn [req] {:status 404 :body (str "no " (:uri req))})
                :error-handler (fn [req e] {:status 503 :body (str "sorry " (:uri req) " " (ex-message e))})}
    {}
    (is (= "no /x" (:body (GET "/x"))))
    (let [r (GET "/boom")]
      (is (= 503 (:status r)))
      (is (= "sorry /boom kaput" (:body r)))))
  (with-server {:routes [{:path "/boom" :handler (fn [_] (throw (Exception. "x")))}]
                :error-handler (fn [_ _] (throw (Exception. "error handler broke")))}
    {}
    (is (= 500 (:status (GET "/boom"))) "a failing error handler falls back to the plain 500")
    (is (= 404 (:status (GET "/none"))))))

(deftest a-handler-that-cannot-take-its-mode's-arguments-fails-at-start-up
  ;; a 3-arity handler left on a :blocking route (AppsFlyer Donkey's default mode was
  ;; :non-blocking), or the reverse, would fail every request with an ArityException: start-up
  ;; says so instead
  (let [sync-only (fn [_request] {:status 200 :body "s"})
        async-only (fn [_request respond _raise] (respond {:status 200 :body "a"}))
        refusal (fn [handler opts]
                  (try (server/stop (server/run-server handler (merge {:port 0 :join? false} opts)))
                       nil
                       (catch IllegalArgumentException e (ex-message e))))]
    (doseq [[handler opts re]
            [[{:routes [{:path "/a" :handler async-only}]} {}
              #"route .*/a.*takes 3 arguments.*:handler-mode :non-blocking"]
             [{:routes [{:path "/a" :handler-mode :non-blocking :handler sync-only}]} {}
              #"route .*/a.*takes 1 argument.*\(fn \[request respond raise\]\)"]
             [{:routes [{:path "/a" :handler sync-only}] :not-found async-only} {}
              #":not-found .*takes 3 arguments.*\(fn \[request\]\)"]
             [{:routes [{:path "/a" :handler sync-only}] :error-handler sync-only} {}
              #":error-handler .*takes 1 argument.*\(fn \[request throwable\]\)"]
             [async-only {} #"handler takes 3 arguments.*:async\? true"]
             [sync-only {:async? true} #"handler takes 1 argument.*\(fn \[request respond raise\]\)"]]]
      (is (some->> (refusal handler opts) (re-find re)) (str (pr-str opts) " " (refusal handler opts)))))
  (testing "handlers whose arities cannot be known, or that take both, start"
    (let [both (fn ([_] {:status 200 :body "1"}) ([_ respond _] (respond {:status 200 :body "3"})))
          variadic (fn [& _] {:status 200 :body "v"})]
      (doseq [[handler opts] [[both {}] [both {:async? true}] [variadic {}] [#'echo {}]
                              [(partial (fn [_ _] {:status 200}) :x) {}]
                              [{:routes [{:path "/a" :handler both}
                                         {:path "/b" :handler-mode :non-blocking :handler both}]
                                :not-found both} {}]]]
        (let [s (server/run-server handler (merge {:port 0 :join? false} opts))]
          (is (some? s))
          (server/stop s))))))

(deftest invalid-route-tables-fail-at-start-up
  (let [h (echo "h")]
    (doseq [[spec re] [[{:routes [{:path "/a" :handler h} {:path "/a" :handler h}]} #"duplicate route ANY /a"]
                       [{:routes [{:path "/a/:id" :methods [:get] :handler h}
                                  {:path "/a/:other" :methods [:get :post] :handler h}]} #"duplicate route .*/a/:other"]
                       [{:routes [{:path "/a/:x/:x" :handler h}]} #"parameter :x used twice"]
                       [{:routes [{:path "no-slash" :handler h}]} #"must start with /"]
                       [{:routes [{:path "/(" :match-type :regex :handler h}]} #"bad regex"]
                       [{:routes [{:path "/a" :consumes ["json"] :handler h}]} #"bad media type"]
                       [{:routes [{:path "/a" :produces ["*/json"] :handler h}]} #"bad media type \"\*/json\""]
                       [{:routes [{:path "/a" :handler-mode :sometimes :handler h}]} #":handler-mode"]
                       [{:routes [{:path "/a"}]} #":handler must be a function"]
                       [{:routes [{:path "/a" :handler h :methods :get}]} #":methods"]
                       [{:routes [{:path "/a" :handler h :colour :blue}]} #"unknown keys"]
                       [{:routes []} #":routes must be a non-empty vector"]]]
      (let [e (try (server/run-server spec {:port 0 :join? false}) nil
                   (catch IllegalArgumentException e e))]
        (is (some->> e ex-message (re-find re)) (str (pr-str (:routes spec)) " => " (some-> e ex-message))))))
  (testing "routes that differ only by method, consumes or produces are not duplicates"
    (with-server {:routes [{:path "/a" :methods [:get] :handler (echo "g")}
                           {:path "/a" :methods [:post] :consumes ["text/plain"] :handler (echo "p1")}
                           {:path "/a" :methods [:post] :consumes ["application/json"] :handler (echo "p2")}]}
      {}
      (is (= "p2 {}" (:body (request :post "/a" {:body "{}" :headers {"Content-Type" "application/json"}})))))))
