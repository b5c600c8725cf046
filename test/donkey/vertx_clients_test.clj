(ns donkey.vertx-clients-test
  "Vert.x clients on the server's own event loops: `donkey.server/vertx` and
  `donkey.scope/context`. Vert.x's HTTP client stands for any client made from the instance
  (PostgreSQL's, Redis's): made at start-up, called from a non-blocking handler, it answers
  on the request's event loop; once the server has stopped, its calls fail rather than hang."
  (:require [clojure.test :refer [deftest is testing]]
            [donkey.scope :as scope]
            [donkey.server :as server]
            [donkey.test-util :as u])
  (:import (io.vertx.core Context Future Handler Vertx)
           (io.vertx.core.buffer Buffer)
           (io.vertx.core.http HttpClient HttpClientRequest HttpClientResponse HttpMethod)
           (java.util.concurrent ExecutionException TimeUnit TimeoutException)
           (java.util.function Function)))

(set! *warn-on-reflection* true)

(defn- get-body
  "A Future of the body of GET `path` on 127.0.0.1:`port` through `client`."
  ^Future [^HttpClient client port path]
  (-> (.request client HttpMethod/GET (int port) "127.0.0.1" ^String path)
      (.compose (reify Function (apply [_ req] (.send ^HttpClientRequest req))))
      (.compose (reify Function (apply [_ resp] (.body ^HttpClientResponse resp))))))

(defn- settle
  "[:ok value] or [:failed throwable] of the Future `(f)` returns within 5 s (a throw from
  `f` itself is a failure), or [:timeout]."
  [f]
  (try
    (let [^Future fut (f)]
      [:ok (.get (.toCompletableFuture (.toCompletionStage fut)) 5 TimeUnit/SECONDS)])
    (catch ExecutionException e [:failed (.getCause e)])
    (catch TimeoutException _ [:timeout])
    (catch Exception e [:failed e])))

(deftest a-client-made-from-the-servers-vertx-answers-on-the-requests-loop
  (let [client (promise)
        port (promise)
        seen (atom {})
        srv (server/run-server
             {:routes [{:path "/upstream" :handler (fn [_] {:status 200 :body "from upstream"})}
                       {:path "/sync" :handler (fn [_]
                                                 (swap! seen assoc :sync-context (scope/context))
                                                 {:status 200 :body "sync"})}
                       {:path "/proxy" :handler-mode :non-blocking
                        :handler (fn [_ respond raise]
                                   (let [handler-thread (Thread/currentThread)
                                         ^Context ctx (scope/context)]
                                     (swap! seen assoc :context ctx
                                            :on-context-loop? (.isEventLoopContext ctx))
                                     (-> (get-body @client @port "/upstream")
                                         (.onSuccess (reify Handler
                                                       (handle [_ body]
                                                         (swap! seen assoc :same-thread?
                                                                (identical? handler-thread
                                                                            (Thread/currentThread)))
                                                         (respond {:status 200
                                                                   :body (str "proxied "
                                                                              (.toString ^Buffer body))}))))
                                         (.onFailure (reify Handler (handle [_ t] (raise t)))))))}]}
             {:port 0 :join? false :event-loops 2})]
    (try
      (deliver port (server/port srv))
      (is (instance? Vertx (server/vertx srv)))
      (deliver client (.createHttpClient ^Vertx (server/vertx srv)))
      (binding [u/*port* (server/port srv)]
        (dotimes [_ 4]
          (is (= "proxied from upstream" (:body (u/GET "/proxy"))))
          (is (true? (:same-thread? @seen)) "the client's answer came on the handler's loop")
          (is (true? (:on-context-loop? @seen))))
        (testing "no context outside a non-blocking handler"
          (is (= "sync" (:body (u/GET "/sync"))))
          (is (nil? (:sync-context @seen)))
          (is (nil? (scope/context)))))
      (finally (server/stop srv)))
    (testing "after stop the client's calls fail, without a hang"
      (is (= :failed (first (settle #(get-body @client @port "/upstream"))))))))
