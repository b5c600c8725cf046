(ns donkey.middleware-errors-test
  "The kernel middleware's shared shape: each request function beside its wrap-x, bad input
  thrown as one kind of exception, and one :error-handler convention for params, json and
  multipart, as pure functions and on real servers, in both arities."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.middleware.errors :as errors]
            [donkey.middleware.json :as json]
            [donkey.middleware.multipart :as mp]
            [donkey.middleware.params :as params]
            [donkey.test-util :as u :refer [with-server request]])
  (:import (clojure.lang ExceptionInfo)
           (donkey.codec JsonException MalformedInputException MultipartException)
           (java.io ByteArrayInputStream File InputStream IOException UncheckedIOException)
           (java.nio.charset StandardCharsets UnsupportedCharsetException)
           (java.nio.file Files)
           (java.nio.file.attribute FileAttribute)))

(set! *warn-on-reflection* true)

;; ---------------------------------------------------------------------------------------------
;; helpers

(def ^:private form-ct "application/x-www-form-urlencoded")
(def ^:private boundary "xYzZY")
(def ^:private mp-ct (str "multipart/form-data; boundary=" boundary))

(defn- utf8 ^bytes [^String s] (.getBytes s StandardCharsets/UTF_8))

(defn- stream ^InputStream [s] (ByteArrayInputStream. (if (bytes? s) s (utf8 s))))

(defn- multipart-body
  "A multipart body of `parts`, each [name content] or [name filename content]."
  ^String [parts]
  (str (apply str (for [[n a b] parts]
                    (str "--" boundary "\r\n"
                         "Content-Disposition: form-data; name=\"" n "\""
                         (when b (str "; filename=\"" a "\""))
                         "\r\n\r\n" (or b a) "\r\n")))
       "--" boundary "--\r\n"))

(defn- temp-dir ^File []
  (doto (.toFile (Files/createTempDirectory "donkey-errors-test" (make-array FileAttribute 0)))
    (.deleteOnExit)))

(defn- thrown
  "What `f` throws, or ::returned."
  [f]
  (try (f) ::returned (catch Throwable t t)))

(defn- bad-input
  "[status message cause-class] of the bad-input exception `f` throws."
  [f]
  (let [e (thrown f)]
    (is (errors/bad-input? e) (str "a bad-input exception, not " (pr-str e)))
    (when (instance? ExceptionInfo e)
      (is (= :donkey.middleware/bad-input (:type (ex-data e))))
      [(:status (ex-data e)) (ex-message e) (class (ex-cause e))])))

;; ---------------------------------------------------------------------------------------------
;; the request functions

(deftest every-codec-refusal-is-one-kind
  ;; the codecs' exceptions share donkey.codec.BadInput, which errors/refusal turns into the
  ;; bad-input exception the middleware answers
  (doseq [[^Exception e status text]
          [[(MalformedInputException. "malformed percent-encoding in query string" 6)
            400 "Bad Request: malformed percent-encoding in query string"]
           [(MalformedInputException. "more than 3 parameters in form body" -1 413)
            413 "Payload Too Large: more than 3 parameters in form body"]
           [(JsonException. "unexpected end of input" 1 14 nil)
            400 "Bad Request: malformed JSON: unexpected end of input at line 1, column 14"]
           [(JsonException. "more than 2 keys in an object" -1 -1 nil 413)
            413 "Payload Too Large: more than 2 keys in an object"]
           [(MultipartException. 413 "multipart body has more than 2 files")
            413 "multipart body has more than 2 files"]]]
    (is (instance? donkey.codec.BadInput e))
    (let [r (errors/refusal e)]
      (is (errors/bad-input? r))
      (is (= status (:status (ex-data r))))
      (is (= text (ex-message r)))
      (is (identical? e (ex-cause r)))))
  (testing "refusing passes other exceptions through as they are"
    (let [e (IllegalStateException. "a bug")]
      (is (identical? e (try (errors/refusing (throw e)) (catch Exception x x)))))
    (let [e (errors/refusal (MultipartException. 400 "malformed multipart body: x"))]
      (is (= "malformed multipart body: x"
             (ex-message (try (errors/refusing (throw (MultipartException. 400 "malformed multipart body: x")))
                              (catch ExceptionInfo x x)))))
      (is (errors/bad-input? e)))))

(deftest params-request-functions-throw-bad-input
  (is (= [400 "Bad Request: malformed percent-encoding in query string at index 2"
          MalformedInputException]
         (bad-input #(params/query-params-request {:query-string "a=%zz"}))))
  (is (= [413 "Payload Too Large: more than 1 parameters in form body" MalformedInputException]
         (bad-input #(params/form-params-request {:headers {"content-type" form-ct} :body "a=1&b=2"}
                                                 {:max-params 1}))))
  (is (= [415 "Unsupported Media Type: unknown charset in Content-Type" UnsupportedCharsetException]
         (bad-input #(params/params-request {:query-string "a=1"
                                             :headers {"content-type" (str form-ct "; charset=x-no-such")}}))))
  (testing "good input, both arities"
    (is (= {"a" "1"} (:query-params (params/query-params-request {:query-string "a=1"}))))
    (is (= {:a "1"} (:params (params/params-request {:query-string "a=1"} {:keywords? true}))))))

(deftest json-request-functions
  (testing "json-body-request: the body decoded, other requests untouched, both arities"
    (is (= {"a" 1} (:body (json/json-body-request {:headers {"content-type" "application/json"}
                                                   :body (stream "{\"a\":1}")}))))
    (is (= {:a 1.5M} (:body (json/json-body-request {:headers {"content-type" "application/json"}
                                                     :body "{\"a\":1.5}"}
                                                    {:keywords? true :bigdecimals? true}))))
    (is (nil? (:body (json/json-body-request {:headers {"content-type" "application/json"}
                                              :body (stream "")})))
        "an empty body is nil")
    (let [req {:headers {"content-type" "text/plain"} :body "{\"a\":1}"}]
      (is (identical? req (json/json-body-request req)))))
  (testing "json-body-request: refused bodies throw, where ring-json returns nil"
    (let [[status msg cause] (bad-input #(json/json-body-request
                                          {:headers {"content-type" "application/json"} :body "{\"a\":"}))]
      (is (= [400 JsonException] [status cause]))
      (is (str/starts-with? msg "Bad Request: malformed JSON: ")))
    (is (= [413 "Payload Too Large: JSON object with more than 1 keys at line 1, column 8" JsonException]
           (bad-input #(json/json-body-request {:headers {"content-type" "application/json"}
                                                :body "{\"a\":1,\"b\":2}"}
                                               {:max-keys 1}))))
    (let [e (thrown #(json/json-body-request {:headers {"content-type" "application/json"}
                                              :body "[1,\n ]"}))
          ^JsonException cause (ex-cause e)]
      (is (= [2 2] [(.line cause) (.column cause)]) "the codec's exception, with its position")))
  (testing "json-params-request: an object into :json-params and :params, the body readable again"
    (let [r (json/json-params-request {:headers {"content-type" "application/json"}
                                       :params {"q" "1"}
                                       :body (proxy [InputStream] []
                                               (read ([] -1) ([_ _ _] -1)))})]
      (is (nil? (:json-params r)) "an empty body has no parameters"))
    (let [r (json/json-params-request {:headers {"content-type" "application/json"} :params {"q" "1"}
                                       :body (stream "{\"a\":[1]}")}
                                      {:keywords? true})]
      (is (= {:a [1]} (:json-params r)))
      (is (= {"q" "1" :a [1]} (:params r)))
      (is (= "{\"a\":[1]}" (slurp (:body r)))))
    (let [r (json/json-params-request {:headers {"content-type" "application/json"} :body "[1]"})]
      (is (= [nil nil "[1]"] [(:json-params r) (:params r) (:body r)]) "not an object: unchanged"))
    (is (= 400 (first (bad-input #(json/json-params-request {:headers {"content-type" "application/json"}
                                                             :body (stream "nul")}))))))
  (testing "json-response, both arities"
    (is (= {:status 200 :headers {"Content-Type" "application/json; charset=utf-8"} :body "{\"a\":[1]}"}
           (json/json-response {:status 200 :body {:a [1]}})))
    (is (= {:body "[ 1 ]" :headers {"content-type" "application/x+json"}}
           (json/json-response {:body '(1) :headers {"content-type" "application/x+json"}} {:pretty? true})))
    (is (= {:body "[\"\\u00E9\"]"} (dissoc (json/json-response {:body #{"é"}} {:escape-non-ascii true}) :headers))
        "ring-json's option names")
    (is (= {:body "text"} (json/json-response {:body "text"})))
    (is (thrown? IllegalArgumentException (json/json-response {:body [(Object.)]})))
    (is (= "{\"A\":1}" (:body (json/json-response {:body {:a 1}} {:key-fn #(.toUpperCase (name %))}))))
    (is (thrown? IllegalArgumentException (json/json-response {:body []} {:ex (Exception.)})))))

(deftest multipart-request-function
  (let [dir (temp-dir)
        req (fn [body] {:headers {"content-type" mp-ct} :body (stream body)})]
    (testing "a multipart body parsed; the temp files are the caller's"
      (let [r (mp/multipart-params-request (req (multipart-body [["a" "1"] ["f" "f.txt" "hello"]]))
                                           {:temp-dir dir :keywords? true})
            f (get-in r [:multipart-params :f])]
        (is (= "1" (get-in r [:params :a])))
        (is (= {:filename "f.txt" :content-type nil :size 5} (dissoc f :tempfile)))
        (is (= "hello" (slurp (:tempfile f))))
        (.delete ^File (:tempfile f))))
    (testing "any other request gets empty maps, 1-arity"
      (is (= {:multipart-params {} :params {"x" "1"}}
             (select-keys (mp/multipart-params-request {:headers {"content-type" "text/plain"} :params {"x" "1"}})
                          [:multipart-params :params]))))
    (testing "refused bodies throw, and leave no temp file behind"
      (is (= [400 "malformed multipart body: no closing boundary" MultipartException]
             (bad-input #(mp/multipart-params-request
                          (req (str "--" boundary "\r\nContent-Disposition: form-data; name=\"f\"; "
                                    "filename=\"f\"\r\n\r\ntruncated"))
                          {:temp-dir dir}))))
      (is (= [413 "file 'f' is larger than 3 bytes" MultipartException]
             (bad-input #(mp/multipart-params-request (req (multipart-body [["f" "f.txt" "hello"]]))
                                                      {:temp-dir dir :max-file-size 3}))))
      (is (empty? (.listFiles dir))))
    (testing "options are checked"
      (is (thrown-with-msg? IllegalArgumentException #"multipart-params-request: :max-parts"
                            (mp/multipart-params-request (req "") {:max-parts 0}))))))

;; ---------------------------------------------------------------------------------------------
;; the convention, as plain functions

(defn- json-error
  "An error handler rendering the refusal as a JSON map, with what it was given."
  [request]
  (let [e (:donkey.middleware/error request)]
    {:status (:status (ex-data e))
     :headers {"content-type" "application/json"}
     :body {:error (ex-message e) :uri (:uri request) :cause (.getSimpleName ^Class (class (ex-cause e)))}}))

(def ^:private json-error-handler
  (fn ([request] (json-error request))
      ([request respond _] (future (respond (json-error request))))))

(def ^:private refusals
  "[label wrap bad-request expected-status expected-default-body] for each middleware."
  [["params" params/wrap-params {:uri "/p" :query-string "a=%zz" :headers {}}
    400 "Bad Request: malformed percent-encoding in query string at index 2"]
   ["form params" params/wrap-form-params {:uri "/f" :headers {"content-type" form-ct} :body "a=%C3%28"}
    400 "Bad Request: invalid UTF-8 in form body at index 2"]
   ["json body" json/wrap-json-body {:uri "/j" :headers {"content-type" "application/json"} :body "{\"a\" 1}"}
    400 nil]
   ["json params" json/wrap-json-params {:uri "/jp" :headers {"content-type" "application/json"} :body (stream "[")}
    400 nil]
   ["multipart" mp/wrap-multipart-params {:uri "/m" :headers {"content-type" "multipart/form-data"} :body (stream "x")}
    400 "multipart/form-data request without a boundary"]])

(defn- call-async
  "Calls the 3-arity `h` and returns what it responded or raised, within 5 s."
  [h request]
  (let [p (promise)]
    (h request #(deliver p [:respond %]) #(deliver p [:raise %]))
    (deref p 5000 [:timeout])))

(deftest default-and-custom-error-handlers-as-functions
  (doseq [[label wrap bad status body] refusals]
    (testing label
      (let [called (atom 0)
            sync-h (fn [_] (swap! called inc) {:status 200})
            async-h (fn [_ respond _] (swap! called inc) (respond {:status 200}))
            fresh #(cond-> bad (instance? InputStream (:body bad)) (update :body (fn [^InputStream in] (.reset in) in)))]
        (testing "default: the text answer, both arities"
          (let [r ((wrap sync-h) (fresh))]
            (is (= status (:status r)))
            (is (= {"content-type" "text/plain; charset=utf-8"} (:headers r)))
            (if body (is (= body (:body r))) (is (str/starts-with? (:body r) "Bad Request: malformed JSON: "))))
          (let [[how r] (call-async (wrap async-h) (fresh))]
            (is (= :respond how))
            (is (= status (:status r)))))
        (testing "a custom Ring handler of both arities, given the request and the exception"
          (let [r ((wrap sync-h {:error-handler json-error-handler}) (fresh))]
            (is (= status (:status r)))
            (is (= (:uri bad) (get-in r [:body :uri])) "the request the middleware was given")
            (is (= (or body (get-in r [:body :error])) (get-in r [:body :error])))
            (is (#{"MalformedInputException" "JsonException" "MultipartException"} (get-in r [:body :cause]))))
          (let [[how r] (call-async (wrap async-h {:error-handler json-error-handler}) (fresh))]
            (is (= :respond how))
            (is (= [status (:uri bad)] [(:status r) (get-in r [:body :uri])]))))
        (is (zero? @called) "the handler was never called")))))

(deftest error-handler-option-is-checked
  (doseq [wrap [params/wrap-params params/wrap-query-params params/wrap-form-params json/wrap-json-body
                json/wrap-json-params mp/wrap-multipart-params]]
    (is (thrown-with-msg? IllegalArgumentException #":error-handler must be a Ring handler"
                          (wrap identity {:error-handler 42}))
        (str wrap)))
  (is (thrown-with-msg? IllegalArgumentException #"not both"
                        (json/wrap-json-body identity {:error-handler errors/default-error-handler
                                                       :malformed-response {:status 400}}))))

(deftest a-misspelt-middleware-option-fails-naming-the-option
  ;; {:keyword? true} would otherwise give string keys without a word; other keys (a map of
  ;; the application's own) are ignored, as Ring's middleware ignores them
  (doseq [[wrap opts meant] [[params/wrap-params {:keyword? true} ":keywords?"]
                             [params/wrap-query-params {:max-param 5} ":max-params"]
                             [params/wrap-form-params {:Encoding "UTF-8"} ":encoding"]
                             [json/wrap-json-body {:keyword? true} ":keywords?"]
                             [json/wrap-json-params {:big-decimals? true} ":bigdecimals?"]
                             [json/wrap-json-response {:escape-non-asci true} ":escape-non-ascii"]
                             [mp/wrap-multipart-params {:max-file-szie 10} ":max-file-size"]
                             [mp/wrap-multipart-params {:progress_fn prn} ":progress-fn"]]]
    (let [msg (try (wrap identity opts) nil (catch IllegalArgumentException e (ex-message e)))]
      (is (str/includes? (str msg) (str "did you mean " meant)) (str (pr-str opts) " => " msg))))
  (testing "the request functions check as their middleware does"
    (is (thrown-with-msg? IllegalArgumentException #"did you mean :keywords\?"
                          (params/params-request {:query-string "a=1"} {:keyword? true}))))
  (testing "keys that look like no option are ignored"
    (doseq [wrap [params/wrap-params json/wrap-json-body json/wrap-json-response
                  mp/wrap-multipart-params]]
      (is (fn? (wrap identity {:db {:url "x"} :id 7 :env :prod})) (str wrap)))))

(deftest other-failures-are-not-bad-input
  (let [failing {:headers {"content-type" form-ct}
                 :body (proxy [InputStream] []
                         (read ([] (throw (IOException. "reset")))
                           ([_ _ _] (throw (IOException. "reset")))))}
        h (params/wrap-form-params (fn [_] {:status 200}) {:error-handler (fn [_] {:status 599})})]
    (is (instance? UncheckedIOException (thrown #(h failing))) "sync: thrown")
    (let [[how e] (call-async h failing)]
      (is (= :raise how) "async: raised")
      (is (instance? UncheckedIOException e))))
  (testing "a handler's own ex-info is not caught as bad input"
    (let [h (params/wrap-params (fn [_] (throw (errors/bad-input 400 "mine" nil))))]
      (is (= "mine" (ex-message (thrown #(h {:query-string "a=1"}))))))))

(deftest the-default-handler-and-the-exception
  (let [e (errors/bad-input 413 "Payload Too Large: x" (MalformedInputException. "x" 0 413))
        req {:donkey.middleware/error e}]
    (is (errors/bad-input? e))
    (is (not (errors/bad-input? (ex-info "other" {:status 400}))))
    (is (not (errors/bad-input? nil)))
    (is (= {:status 413 :headers {"content-type" "text/plain; charset=utf-8"} :body "Payload Too Large: x"}
           (errors/default-error-handler req)))
    (let [p (promise)]
      (errors/default-error-handler req #(deliver p %) identity)
      (is (= 413 (:status @p))))))

;; ---------------------------------------------------------------------------------------------
;; the convention on real servers

(def ^:private json-error-text
  "An error handler answering text of its own, so the test can read it back from the wire."
  (fn ([request] (let [e (:donkey.middleware/error request)]
                   {:status (:status (ex-data e))
                    :headers {"content-type" "application/problem+json"}
                    :body (str "{\"title\":\"refused\",\"status\":" (:status (ex-data e)) "}")}))
      ([request respond _] (respond (json-error-text request)))))

(deftest error-handlers-on-a-server
  (doseq [async? [false true]
          [label wrap send status]
          [["params" params/wrap-params #(request :get "/p?a=%C3%28") 400]
           ["form over :max-params" #(params/wrap-form-params %1 (assoc %2 :max-params 1))
            #(request :post "/p" {:headers {"Content-Type" form-ct} :body "a=1&b=2"}) 413]
           ["json" json/wrap-json-body
            #(request :post "/j" {:headers {"Content-Type" "application/json"} :body "{"}) 400]
           ["json over :max-keys" #(json/wrap-json-params %1 (assoc %2 :max-keys 1))
            #(request :post "/j" {:headers {"Content-Type" "application/json"} :body "{\"a\":1,\"b\":2}"}) 413]
           ["multipart over :max-parts" #(mp/wrap-multipart-params %1 (assoc %2 :max-parts 1))
            #(request :post "/m" {:headers {"Content-Type" mp-ct} :body (multipart-body [["a" "1"] ["b" "2"]])})
            413]]]
    (testing (str label (if async? ", async" ", sync"))
      (let [calls (atom 0)
            h (if async?
                (fn [_ respond _] (swap! calls inc) (respond {:status 200}))
                (fn [_] (swap! calls inc) {:status 200}))]
        (with-server (wrap h {}) {:async? async?}
          (let [r (send)]
            (is (= status (:status r)))
            (is (= "text/plain; charset=utf-8" (u/header r "content-type")))))
        (with-server (wrap h {:error-handler json-error-text}) {:async? async?}
          (let [r (send)]
            (is (= status (:status r)))
            (is (= "application/problem+json" (u/header r "content-type")))
            (is (= (str "{\"title\":\"refused\",\"status\":" status "}") (:body r)))))
        (is (zero? @calls))))))
