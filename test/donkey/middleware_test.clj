(ns donkey.middleware-test
  "Real Ring 1.8.2 middleware from ring-core, and a compojure app, running on donkey."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [compojure.core :refer [routes GET POST context]]
            [compojure.route :as route]
            [donkey.test-util :as u :refer [with-server request header]]
            [ring.middleware.cookies :refer [wrap-cookies]]
            [ring.middleware.keyword-params :refer [wrap-keyword-params]]
            [ring.middleware.multipart-params :refer [wrap-multipart-params]]
            [ring.middleware.params :refer [wrap-params]]
            [ring.middleware.resource :refer [wrap-resource]]
            [ring.middleware.session :refer [wrap-session]]
            [ring.middleware.session.memory :refer [memory-store]])
  (:import (java.io File)))

(deftest wrap-params-on-query-and-form
  (let [seen (promise)
        h (-> (fn [req] (deliver seen (select-keys req [:query-params :form-params :params]))
                {:status 200 :body "ok"})
              wrap-keyword-params
              wrap-params)]
    (with-server h {}
      (request :post "/p?a=1&b=x%20y&a=2"
               {:headers {"Content-Type" "application/x-www-form-urlencoded"}
                :body "c=%C3%A9t%C3%A9&d=4"})
      (let [{:keys [query-params form-params params]} (deref seen 5000 nil)]
        (is (= {"a" ["1" "2"] "b" "x y"} query-params))
        (is (= {"c" "été" "d" "4"} form-params))
        (is (= {:a ["1" "2"] :b "x y" :c "été" :d "4"} params))))))

(deftest wrap-cookies-both-ways
  (let [h (wrap-cookies (fn [req]
                          {:status 200
                           :cookies {"seen" {:value (get-in req [:cookies "in" :value] "none")}
                                     "second" {:value "2" :path "/"}}
                           :body "c"}))]
    (with-server h {}
      (let [r (request :get "/" {:headers {"Cookie" "in=hello; other=x"}})
            set-cookies (get-in r [:headers "set-cookie"])]
        (is (= 2 (count set-cookies)) "two Set-Cookie lines survive")
        (is (some #{"seen=hello"} set-cookies))
        (is (some #(str/starts-with? % "second=2") set-cookies))))))

(deftest wrap-multipart-params-with-a-file
  (let [seen (promise)
        h (wrap-multipart-params
           (fn [req]
             (let [{:strs [title upload]} (:multipart-params req)]
               (deliver seen {:title title
                              :filename (:filename upload)
                              :content-type (:content-type upload)
                              :size (:size upload)
                              :content (slurp (:tempfile upload))})
               {:status 200 :body "uploaded"})))
        boundary "----donkeyBoundary42"
        body (str "--" boundary "\r\n"
                  "Content-Disposition: form-data; name=\"title\"\r\n\r\n"
                  "My file\r\n"
                  "--" boundary "\r\n"
                  "Content-Disposition: form-data; name=\"upload\"; filename=\"notes.txt\"\r\n"
                  "Content-Type: text/plain\r\n\r\n"
                  "line one\nline two\n\r\n"
                  "--" boundary "--\r\n")]
    (with-server h {}
      (let [r (request :post "/up" {:headers {"Content-Type" (str "multipart/form-data; boundary=" boundary)}
                                    :body body})]
        (is (= 200 (:status r)))
        (is (= {:title "My file" :filename "notes.txt" :content-type "text/plain"
                :size 18 :content "line one\nline two\n"}
               (deref seen 5000 nil)))))))

(deftest wrap-session-round-trip
  (let [h (wrap-session
           (fn [req]
             (let [n (inc (get-in req [:session :n] 0))]
               {:status 200 :session {:n n} :body (str n)}))
           {:store (memory-store)})]
    (with-server h {}
      (let [r1 (request :get "/")
            cookie (first (str/split (header r1 "set-cookie") #";"))
            r2 (request :get "/" {:headers {"Cookie" cookie}})
            r3 (request :get "/" {:headers {"Cookie" cookie}})]
        (is (= ["1" "2" "3"] (map :body [r1 r2 r3])))))))

(deftest wrap-resource-from-a-jar
  (let [h (wrap-resource (fn [_] {:status 404 :body "nope"}) "clojure")]
    (with-server h {}
      (let [r (request :get "/core_print.clj")]
        (is (= 200 (:status r)))
        (is (str/includes? (:body r) "print-method")))
      (is (= 404 (:status (request :get "/missing.clj")))))))

(deftest compojure-app-as-the-handler
  (let [app (routes
             (GET "/users/:id" [id] {:status 200 :headers {"content-type" "text/plain"} :body (str "user " id)})
             (POST "/users" req {:status 201 :body (slurp (:body req))})
             (context "/api" []
               (GET "/ping" [] "pong"))
             (route/not-found "not here"))]
    (with-server app {}
      (is (= "user 42" (:body (request :get "/users/42"))))
      (let [r (request :post "/users" {:body "{\"name\":\"ann\"}"})]
        (is (= 201 (:status r)))
        (is (= "{\"name\":\"ann\"}" (:body r))))
      (is (= "pong" (:body (request :get "/api/ping"))))
      (let [r (request :get "/nowhere")]
        (is (= 404 (:status r)))
        (is (= "not here" (:body r)))))))
