(ns donkey.request-scope-test
  "donkey.scope (on donkey.kernel.RequestScope): work tied to a request served by a
  non-blocking handler, on real servers."
  (:require [clojure.test :refer [deftest is testing]]
            [donkey.scope :as scope]
            [donkey.test-util :as u :refer [with-server]]))

(set! *warn-on-reflection* true)

(defn- thread-name [] (.getName (Thread/currentThread)))

(deftest outside-a-non-blocking-handler-nothing-is-registered
  (let [ran (atom 0)]
    (is (false? (scope/at-end! #(swap! ran inc))))
    (is (false? (scope/offload! #(swap! ran inc) #(swap! ran inc))))
    (is (false? (scope/over?)))
    (with-server (fn [_]
                   {:status 200
                    :body (pr-str [(scope/at-end! #(swap! ran inc))
                                   (scope/offload! #(swap! ran inc) #(swap! ran inc))])})
      {}
      (is (= "[false false]" (:body (u/GET "/"))) "a sync handler runs on a worker: declined"))
    (is (zero? @ran))))

(deftest at-end-runs-once-the-response-is-sent
  (let [ran (promise)]
    (with-server (fn [_ respond _]
                   (respond {:status 200 :body (str (scope/at-end! #(deliver ran (thread-name))))}))
      {:async? true}
      (is (= "true" (:body (u/GET "/"))))
      (is (re-find #"eventloop" (str (deref ran 2000 :not-run)))))))

(deftest offload-runs-blocking-work-on-a-worker-then-resumes-on-the-loop
  (with-server (fn [_ respond _]
                 (let [loop-thread (thread-name)
                       worker (volatile! nil)]
                   (scope/offload!
                    #(vreset! worker (thread-name))
                    #(respond {:status 200
                               :body (pr-str [loop-thread @worker (thread-name) (scope/over?)])}))))
    {:async? true}
    (let [[loop-thread worker resumed over?] (read-string (:body (u/GET "/")))]
      (is (re-find #"eventloop" loop-thread))
      (is (re-find #"donkey-worker" worker) "the blocking part runs on a pool worker")
      (is (= loop-thread resumed) "the rest runs on the request's own event loop")
      (is (false? over?)))))

(deftest offload-failures-are-raised
  (testing "blocking throws: then is skipped, the request gets 500"
    (let [then-ran (atom false)]
      (with-server (fn [_ _ _]
                     (scope/offload! #(throw (ex-info "disk full" {})) #(reset! then-ran true)))
        {:async? true}
        (is (= 500 (:status (u/GET "/"))))
        (is (false? @then-ran)))))
  (testing "then throws: 500"
    (with-server (fn [_ _ _]
                   (scope/offload! #(do) #(throw (ex-info "bad" {}))))
      {:async? true}
      (is (= 500 (:status (u/GET "/")))))))

(deftest a-request-that-ends-while-offloaded-is-over-when-it-resumes
  ;; the handler's work outlives the request (here, a timeout): `then` still runs, so what
  ;; the blocking part made can be released, and an action registered then runs at once
  (let [seen (promise)
        released (promise)]
    (with-server (fn [_ respond _]
                   (scope/offload!
                    #(Thread/sleep 600)
                    (fn []
                      (let [over? (scope/over?)]
                        (scope/at-end! #(deliver released true))
                        (deliver seen over?)
                        (when-not over? (respond {:status 200 :body "late"}))))))
      {:async? true :request-timeout 200}
      (is (= 503 (:status (u/GET "/"))))
      (is (true? (deref seen 3000 :not-resumed)))
      (is (true? (deref released 1000 :not-released))))))

(deftest at-end-on-worker-runs-off-the-loop
  ;; for end-of-request work that blocks (deleting an upload's temp files)
  (let [ran (promise)]
    (with-server (fn [_ respond _]
                   (respond {:status 200 :body (str (scope/at-end-on-worker! #(deliver ran (thread-name))))}))
      {:async? true}
      (is (= "true" (:body (u/GET "/"))))
      (is (re-find #"donkey-worker" (str (deref ran 2000 :not-run)))))))
