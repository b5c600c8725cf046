(ns donkey.params-test
  "Query-string and form-body parsing: the kernel codec (donkey.codec.FormCodec) on its own,
  and donkey.middleware.params on real servers, checked against Ring 1.8.2's own wrap-params
  and wrap-keyword-params on the same input."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.middleware.params :as p]
            [donkey.test-util :as u :refer [with-server request raw status-line]]
            [ring.middleware.keyword-params :as ring-kw]
            [ring.middleware.params :as ring-params]
            [ring.util.codec :as codec])
  (:import (clojure.lang ExceptionInfo)
           (donkey.codec FormCodec MalformedInputException)
           (java.io ByteArrayInputStream)
           (java.nio.charset Charset StandardCharsets)
           (java.util Random)
           (java.util.concurrent.atomic AtomicInteger)))

(set! *warn-on-reflection* true)

(def ^:private ^Charset utf-8 StandardCharsets/UTF_8)
(def ^:private ^Charset latin-1 StandardCharsets/ISO_8859_1)

(defn- decode
  ([s] (FormCodec/decode ^String s))
  ([s cs] (FormCodec/decode ^String s ^Charset cs false))
  ([s cs kw?] (FormCodec/decode ^String s ^Charset cs (boolean kw?) "query string")))

(defn- failure
  "The message of the MalformedInputException that decoding `s` throws, or :no-exception."
  ([s] (failure s utf-8))
  ([s cs]
   (try (decode s cs true) :no-exception
        (catch MalformedInputException e (.getMessage e)))))

(defn- ring-decode
  "What Ring 1.8.2's params middleware makes of `s`."
  ([s] (ring-decode s "UTF-8"))
  ([s enc] (let [m (codec/form-decode s enc)] (if (map? m) m {}))))

(defn- ring-keyify [m] (:params (ring-kw/keyword-params-request {:params m})))

;; ---------------------------------------------------------------------------------------------
;; FormCodec

(deftest codec-basics
  (testing "nothing"
    (is (= {} (decode "")))
    (is (= {} (decode nil)))
    (is (= {} (decode "&&&"))))
  (testing "pairs and their edges"
    (is (= {"a" ""} (decode "a=")))
    (is (= {"" "b"} (decode "=b")))
    (is (= {"" ""} (decode "=")))
    (is (= {"a" "1=2"} (decode "a=1=2")))
    (is (= {"a" "1" "b" "2"} (decode "&&a=1&&b=2&")))
    (is (= {"a;b" "1"} (decode "a;b=1")) "; is not a separator"))
  (testing "a key without = maps to \"\""
    (is (= {"a" "" "b" "1"} (decode "a&b=1")))
    (is (= {"a" ""} (decode "a")) "Ring 1.8.2 gives {} when the whole input has no =")
    (is (= {"a" "" "b" ""} (decode "a&b"))))
  (testing "repeated keys become a vector, in order"
    (let [m (decode "a=1&a=2&b=x&a=3")]
      (is (= {"a" ["1" "2" "3"] "b" "x"} m))
      (is (vector? (get m "a")))))
  (testing "+ and percent-encoding"
    (is (= {" " ""} (decode "+")))
    (is (= {" " ""} (decode "%20")))
    (is (= {"a b" "c d+e"} (decode "a+b=c%20d%2Be")))
    (is (= {"q" "été"} (decode "q=%C3%A9t%C3%A9")))
    (is (= {"q" "é"} (decode "q=%c3%a9")) "lower-case hex")
    (is (= {"€" "😀"} (decode "%E2%82%AC=%F0%9F%98%80")) "3- and 4-byte sequences")
    (is (= {"q" "&=%"} (decode "q=%26%3D%25")))
    (is (= {"q" "é"} (decode "q=é")) "unencoded characters are kept as they are"))
  (testing "charsets"
    (is (= {"q" "é"} (decode "q=%E9" latin-1)))
    (is (= {"q" "Ã©"} (decode "q=%C3%A9" latin-1)))
    (is (= {"q" "é"} (decode "q=%FE%FF%00%E9" StandardCharsets/UTF_16)) "a charset with no fast path")
    (is (= {"q" "A"} (decode "q=%41" StandardCharsets/US_ASCII)))))

(deftest codec-keywords
  (let [m (decode (str "a=1&b-c=2&1a=3&a.b=4&a/b=5&%C3%A9=6&=7&x+y=8&*%3F!=9&a1=10&_=11"
                       "&-=12&%F0%9D%92%9C=13&a%D9%A1=14")
                  utf-8 true)]
    (is (= {:a "1" :b-c "2" "1a" "3" "a.b" "4" "a/b" "5" (keyword "é") "6" "" "7" "x y" "8"
            (keyword "*?!") "9" :a1 "10" :_ "11" :- "12" (keyword "𝒜") "13" "a١" "14"}
           m))
    (is (every? (fn [[k v]] (= (ring-keyify {(name k) v}) {k v})) m)
        "the same keys as Ring's wrap-keyword-params"))
  (testing "Ring's keyword rule, on random strings"
    (let [rnd (Random. 42)
          pool (vec (str "abcXYZé𝒜09١*+!_?-./ :#%'\"" (char 0xD800)))
          keyword-syntax? #'ring.middleware.keyword-params/keyword-syntax?
          strings (repeatedly 3000 #(apply str (repeatedly (.nextInt rnd 4) (fn [] (pool (.nextInt rnd (count pool)))))))
          disagree (remove #(= (FormCodec/isKeywordSyntax ^String %) (boolean (keyword-syntax? % false))) strings)]
      (is (empty? disagree) (pr-str (take 5 disagree))))))

(deftest codec-big-maps
  (let [s (str/join "&" (for [i (range 1000)] (str "k" (mod i 300) "=" i)))
        m (decode s)]
    (is (= 300 (count m)))
    (is (= (ring-decode s) m))
    (is (= ["7" "307" "607" "907"] (get m "k7")))
    (is (= (ring-keyify (ring-decode s)) (decode s utf-8 true))))
  (testing "just over the array-map size"
    (let [s (str/join "&" (for [i (range 9)] (str "k" i "=" i)))]
      (is (= (ring-decode s) (decode s))))))

(deftest codec-agrees-with-ring-on-valid-input
  (doseq [s ["a=1" "a=1&b=2&a=3" "=b" "a=" "=" "a=1=2" "&&a=1&&" "a&b=1" "a+b=c+d" "x=%20%2B%26"
             "q=%C3%A9t%C3%A9&r=%E2%82%AC" "k=%F0%9F%98%80" "q=é&r=ü" "a=1&A=2" "a.b=1&c/d=2&1e=3"
             "+=+" "%3D=%3D" "a=%7e%7E" (str/join "&" (for [i (range 20)] (str "p" i "=v" i)))]]
    (is (= (ring-decode s) (decode s)) s)
    (is (= (ring-keyify (ring-decode s)) (decode s utf-8 true)) s))
  (doseq [s ["q=%E9" "a=%FC%E9&b=x+y"]]
    (is (= (ring-decode s "ISO-8859-1") (decode s latin-1)) s)))

(deftest codec-malformed-input
  (testing "bad percent-encoding, with where it starts"
    (is (= "malformed percent-encoding in query string at index 2" (failure "a=%zz")))
    (is (= "malformed percent-encoding in query string at index 2" (failure "a=%4")))
    (is (= "malformed percent-encoding in query string at index 1" (failure "a%")))
    (is (= "malformed percent-encoding in query string at index 0" (failure "%4=1")) "a key ends at =")
    (is (= "malformed percent-encoding in query string at index 6" (failure "a=1&b=%g0&c=3")))
    (is (= "malformed percent-encoding in query string at index 5" (failure "a=%41%-1")) "no sign in hex")
    (is (= "malformed percent-encoding in query string at index 2" (failure "a=%+f"))))
  (testing "bytes that are not UTF-8: strict, never U+FFFD"
    (is (= "invalid UTF-8 in query string at index 2" (failure "a=%C3")) "truncated")
    (is (= "invalid UTF-8 in query string at index 5" (failure "a=%41%C3%28")) "bad continuation")
    (is (= "invalid UTF-8 in query string at index 2" (failure "a=%80")) "stray continuation")
    (is (= "invalid UTF-8 in query string at index 2" (failure "a=%C0%AF")) "overlong")
    (is (= "invalid UTF-8 in query string at index 2" (failure "a=%E0%80%AF")) "overlong")
    (is (= "invalid UTF-8 in query string at index 2" (failure "a=%ED%A0%80")) "surrogate")
    (is (= "invalid UTF-8 in query string at index 2" (failure "a=%F4%90%80%80")) "over U+10FFFF")
    (is (= "invalid UTF-8 in query string at index 0" (failure "%FF=1")))
    (is (= "invalid UTF-8 in query string at index 2" (failure "a=%E2%82+%AC")) "a run ends at +"))
  (testing "other charsets"
    (is (= "invalid US-ASCII in query string at index 2" (failure "a=%80" StandardCharsets/US_ASCII)))
    (is (= :no-exception (failure "a=%80%FF" latin-1)) "every byte is Latin-1"))
  (testing "the exception"
    (let [e (try (decode "ab=%z") (catch MalformedInputException e e))]
      (is (instance? IllegalArgumentException e))
      (is (= 3 (.index ^MalformedInputException e)))
      (is (= "malformed percent-encoding in form data at index 3" (.getMessage ^Exception e))))))

(deftest codec-body-and-content-type
  (testing "readBody decodes strictly and closes the stream"
    (is (= "a=été" (FormCodec/readBody (ByteArrayInputStream. (.getBytes "a=été" utf-8)) nil)))
    (is (= "a=é" (FormCodec/readBody (ByteArrayInputStream. (.getBytes "a=é" latin-1)) latin-1)))
    (is (= "invalid UTF-8 in form body at byte 2"
           (try (FormCodec/readBody (ByteArrayInputStream. (byte-array [97 61 -23 120])) utf-8)
                (catch MalformedInputException e (.getMessage e)))))
    (is (= {:a "été" :b ["1" "2"]}
           (FormCodec/decodeBody (ByteArrayInputStream. (.getBytes "a=%C3%A9t%C3%A9&b=1&b=2" utf-8)) utf-8 true)))))

;; ---------------------------------------------------------------------------------------------
;; the middleware, as functions

(deftest params-request-matches-ring
  (doseq [req [{:query-string "a=1&b=2" :headers {}}
               {:query-string "a=1" :params {"id" "7" "a" "0" :kw 1 "n" {"x.y" [{"z" 1}] "w" 2}} :headers {}}
               {:query-string nil :headers {}}
               {:query-string "a=1" :query-params {"pre" "set"} :headers {}}
               {:query-string "q=%E9" :headers {"content-type" "application/x-www-form-urlencoded; charset=ISO-8859-1"}
                :body-bytes (.getBytes "f=%E9&x=1" latin-1)}
               {:query-string "x=q" :headers {"content-type" "application/x-www-form-urlencoded"}
                :body-bytes (.getBytes "x=f&y=2" utf-8)}
               {:query-string "x=q" :form-params {"pre" "set"} :headers {"content-type" "application/x-www-form-urlencoded"}
                :body-bytes (.getBytes "x=f" utf-8)}]
          kw? [false true]]
    (let [mk #(cond-> (dissoc req :body-bytes)
                (:body-bytes req) (assoc :body (ByteArrayInputStream. (:body-bytes req))))
          ours (select-keys (p/params-request (mk) {:keywords? kw?}) [:query-params :form-params :params])
          ring (cond-> (ring-params/params-request (mk)) kw? ring-kw/keyword-params-request)
          ring (cond-> (select-keys ring [:query-params :form-params :params])
                 ;; donkey keywordizes the maps it parses; Ring's keyword-params only :params
                 (and kw? (not (:query-params req))) (update :query-params ring-keyify)
                 (and kw? (not (:form-params req))) (update :form-params ring-keyify))]
      (is (= ring ours) (pr-str req kw?)))))

(deftest namespaced-keyword-syntax-is-rings
  ;; Ring's rule: [\p{L}*+!_?-][\p{L}\d*+!_?.-]*/[\p{L}*+!_?-][\p{L}\d*+!_?-]*
  (let [ring-re #"[\p{L}*+!_?-][\p{L}\d*+!_?.-]*/[\p{L}*+!_?-][\p{L}\d*+!_?-]*"]
    (doseq [k ["ns/a" "a.b/c" "a1.2/b" "é/ü" "*/+" "-/?" "a/1" "/a" "a/" "1a/b" "a/b/c" "a.b"
               "a/.b" "a b/c" "a/b c" ".a/b" "a/b1" "" "/" "a//b"]]
      (is (= (boolean (re-matches ring-re k)) (FormCodec/isNamespacedKeywordSyntax k)) k))))

(deftest parse-namespaces-as-ring
  (let [q (str "ns/foo=1&a.b/c=2&x=3&1a/b=4&/a=5&a/=6&a/b/c=7&%C3%A9/%C3%BC=8&user/id=9&user/id=10")
        want {:ns/foo "1" :a.b/c "2" :x "3" "1a/b" "4" "/a" "5" "a/" "6" "a/b/c" "7"
              (keyword "é" "ü") "8" :user/id ["9" "10"]}
        opts {:keywords? true :parse-namespaces? true}]
    (testing "the query string, the form body and :params already there"
      (let [r (p/params-request {:query-string q :headers {"content-type" "application/x-www-form-urlencoded"}
                                 :body (ByteArrayInputStream. (.getBytes "f/g=1&h=2" utf-8))
                                 :params {"pre/set" "p" "n" {"in/ner" 1}}}
                                opts)]
        (is (= want (:query-params r)))
        (is (= {:f/g "1" :h "2"} (:form-params r)))
        (is (= (merge {:pre/set "p" :n {:in/ner 1}} {:f/g "1" :h "2"} want) (:params r)))))
    (testing "without :parse-namespaces?, \"ns/foo\" stays a string, as in Ring"
      (is (= {"ns/foo" "1" :x "3"} (:query-params (p/query-params-request {:query-string "ns/foo=1&x=3"}
                                                                          {:keywords? true})))))
    (testing "on a real server, through wrap-params"
      (with-server (p/wrap-params (fn [req] {:status 200 :body (pr-str (:params req))}) opts) {}
        (is (= {:ns/foo "1" "1a/b" "2"}
               (read-string (:body (request :get "/?ns/foo=1&1a/b=2")))))))))

(deftest assoc-query-and-form-params-as-ring
  (doseq [req [{:query-string "a=1&b=2&a=3" :headers {}}
               {:query-string nil :headers {}}
               {:query-string "a=1" :query-params {"pre" "set"} :params {"p" "q" "a" "0"} :headers {}}
               {:query-string "q=%E9" :headers {"content-type" "application/x-www-form-urlencoded; charset=ISO-8859-1"}
                :body-bytes (.getBytes "f=%E9&x=1" latin-1)}
               {:query-string "x=q" :form-params {"pre" "set"} :params {"p" "q"}
                :headers {"content-type" "application/x-www-form-urlencoded"}
                :body-bytes (.getBytes "x=f&y=2&y=3" utf-8)}
               {:headers {"content-type" "text/plain"} :body-bytes (.getBytes "x=f" utf-8)}]
          enc ["UTF-8" "ISO-8859-1"]
          ;; (%E9 alone is not UTF-8: refused by donkey, U+FFFD in Ring, as the namespace doc says)
          :when (not (and (= enc "UTF-8") (str/includes? (str (:query-string req)) "%E9")))]
    (let [mk #(cond-> (dissoc req :body-bytes)
                (:body-bytes req) (assoc :body (ByteArrayInputStream. (:body-bytes req))))
          keep #(select-keys % [:query-params :form-params :params])]
      (is (= (keep (ring-params/assoc-query-params (mk) enc)) (keep (p/assoc-query-params (mk) enc)))
          (pr-str :query req enc))
      (is (= (keep (ring-params/assoc-form-params (mk) enc)) (keep (p/assoc-form-params (mk) enc)))
          (pr-str :form req enc))))
  (testing "refused input throws a bad-input exception"
    (is (= 400 (:status (ex-data (try (p/assoc-query-params {:query-string "a=%zz"} "UTF-8")
                                      (catch ExceptionInfo e e)))))))
  (testing "a charset as a Charset, and an unknown one"
    (is (= {"a" "é"} (:query-params (p/assoc-query-params {:query-string "a=%E9"} latin-1))))
    (is (thrown-with-msg? IllegalArgumentException #"encoding names no charset"
                          (p/assoc-query-params {:query-string "a=1"} "no-such-charset")))))

(deftest options-are-validated-once
  (is (thrown-with-msg? IllegalArgumentException #":parse-namespaces\? must be true or false"
                        (p/wrap-params identity {:keywords? true :parse-namespaces? "yes"})))
  (is (thrown-with-msg? IllegalArgumentException #":parse-namespaces\? needs :keywords\? true"
                        (p/params-request {} {:parse-namespaces? true})))
  (is (thrown-with-msg? IllegalArgumentException #":keywords\? must be true or false"
                        (p/wrap-params identity {:keywords? "yes"})))
  (is (thrown-with-msg? IllegalArgumentException #":encoding names no charset"
                        (p/wrap-query-params identity {:encoding "no-such-charset"})))
  (is (thrown-with-msg? IllegalArgumentException #":encoding must be"
                        (p/wrap-form-params identity {:encoding 8})))
  (is (thrown-with-msg? IllegalArgumentException #"options must be a map"
                        (p/wrap-params identity [:keywords? true])))
  (is (fn? (p/wrap-params identity {:encoding StandardCharsets/ISO_8859_1 :keywords? true}))))

;; ---------------------------------------------------------------------------------------------
;; the middleware on a real server

(def ^:private form-ct "application/x-www-form-urlencoded")

(defn- capture-handler
  "A sync handler that answers with the parameter keys of the request it got, as EDN."
  [req]
  {:status 200
   :headers {"content-type" "application/edn"}
   :body (pr-str (select-keys req [:query-params :form-params :params]))})

(defn- send-all
  "Sends every [query body content-type] in `inputs` to a server running `handler`, and returns
  what came back: the parsed EDN of a 200, or [status body]."
  [handler server-opts inputs]
  (with-server handler server-opts
    (vec (for [[q body ct] inputs]
           (let [r (request (if body :post :get) (str "/p" (when q (str "?" q)))
                            {:headers (if ct {"Content-Type" ct} {}) :body body})]
             (if (= 200 (:status r)) (read-string (:body r)) [(:status r) (:body r)]))))))

(def ^:private inputs
  [["a=1&b=x%20y&a=2" "c=%C3%A9t%C3%A9&d=4" form-ct]
   ["x=1&x=2&x=3" "x=4&y=5" form-ct]
   ["=b&a=" "k=&=v" form-ct]
   ["a+b=c+d&e=%2B" "" form-ct]
   [nil "a=1&a=2" form-ct]
   ["q=%E2%82%AC&sym=%26%3D" nil nil]
   ["a.b=1&1x=2&ok-key=3&%C3%A9=4" "_x=5&a/b=6&x+y=7" form-ct]
   ["a=1&&b=2&" "&c=3&&" form-ct]
   ["k=v&flag" "f=1&g" form-ct]
   ["q=%E9" "name=%E9t%E9&raw=\u00fc" (str form-ct "; charset=ISO-8859-1")]
   ["q=1" "name=été" (str form-ct "; charset=UTF-8")]
   ["q=1" "{\"json\": true}" "application/json"]
   [nil nil nil]])

(deftest wrap-params-equals-ring-on-a-real-server
  (testing "string keys: donkey's wrap-params vs Ring's wrap-params"
    (let [ours (send-all (p/wrap-params capture-handler) {} inputs)
          ring (send-all (ring-params/wrap-params capture-handler) {} inputs)]
      (is (every? map? ours) (pr-str ours))
      (doseq [[in o r] (map vector inputs ours ring)]
        (is (= r o) (pr-str in)))))
  (testing ":keywords? true vs Ring's wrap-params + wrap-keyword-params"
    (let [ours (send-all (p/wrap-params capture-handler {:keywords? true}) {} inputs)
          ring (send-all (-> capture-handler ring-kw/wrap-keyword-params ring-params/wrap-params) {} inputs)]
      (doseq [[in o r] (map vector inputs ours ring)]
        (is (= (:params r) (:params o)) (pr-str in))
        (is (= (ring-keyify (:query-params r)) (:query-params o)) (pr-str in))
        (is (= (ring-keyify (:form-params r)) (:form-params o)) (pr-str in))))))

(deftest wrap-params-async
  (let [h (p/wrap-params (fn [req respond _raise]
                           (future (respond (capture-handler req))))
                         {:keywords? true})]
    (with-server h {:async? true}
      (let [r (request :post "/p?a=1&b=2&a=3" {:headers {"Content-Type" form-ct} :body "c=%C3%A9&b=f"})]
        (is (= 200 (:status r)))
        (is (= {:query-params {:a ["1" "3"] :b "2"} :form-params {:c "é" :b "f"}
                :params {:a ["1" "3"] :b "2" :c "é"}}
               (read-string (:body r)))))
      (let [r (request :get "/p?a=%C3")]
        (is (= 400 (:status r)))
        (is (= "Bad Request: invalid UTF-8 in query string at index 2" (:body r))))
      (is (= {:query-params {} :form-params {} :params {}} (read-string (:body (request :get "/p"))))))))

(deftest wrap-query-params-alone
  (testing "sync"
    (with-server (p/wrap-query-params capture-handler) {}
      (is (= {:query-params {"a" ["1" "2"] "b" "é"}}
             (read-string (:body (request :post "/p?a=1&b=%C3%A9&a=2" {:headers {"Content-Type" form-ct} :body "f=1"})))))
      (is (= {:query-params {}} (read-string (:body (request :get "/p")))))
      (is (= {:query-params {}} (read-string (:body (request :get "/p?")))))))
  (testing "async, keywords, :encoding"
    (with-server (p/wrap-query-params (fn [req respond _] (respond (capture-handler req)))
                                      {:keywords? true :encoding "ISO-8859-1"})
                 {:async? true}
      (is (= {:query-params {:q "é" "1x" "y"}} (read-string (:body (request :get "/p?q=%E9&1x=y"))))))))

(deftest wrap-form-params-alone
  (let [body-after (atom nil)
        h (p/wrap-form-params (fn [req]
                                (reset! body-after (try (some-> ^java.io.InputStream (:body req) slurp)
                                                        (catch java.io.IOException _ :closed)))
                                (capture-handler req)))]
    (with-server h {}
      (is (= {:form-params {"a" "1" "b" ["x y" "z"]}}
             (read-string (:body (request :post "/p?q=1" {:headers {"Content-Type" form-ct} :body "a=1&b=x+y&b=z"})))))
      (is (contains? #{"" :closed} @body-after) "the form body was consumed, as in Ring")
      (is (= {:form-params {"a" "1"}}
             (read-string (:body (request :put "/p" {:headers {"Content-Type" "Application/X-WWW-Form-Urlencoded"}
                                                      :body "a=1"}))))
          "the media type is case-insensitive")
      (testing "other content types are left alone, body included"
        (is (= {:form-params {}}
               (read-string (:body (request :post "/p" {:headers {"Content-Type" "application/json"} :body "{\"a\":1}"})))))
        (is (= "{\"a\":1}" @body-after)))
      (testing "a UTF-8 body sent raw (not percent-encoded) is fine; Latin-1 bytes labelled as such too"
        (is (= {:form-params {"n" "été"}}
               (read-string (:body (request :post "/p" {:headers {"Content-Type" form-ct}
                                                        :body (.getBytes "n=été" utf-8)})))))
        (is (= {:form-params {"n" "été"}}
               (read-string (:body (request :post "/p" {:headers {"Content-Type" (str form-ct ";charset=ISO-8859-1")}
                                                        :body (.getBytes "n=été" latin-1)}))))))))
  (testing "async"
    (with-server (p/wrap-form-params (fn [req respond _] (respond (capture-handler req))) {:keywords? true})
                 {:async? true}
      (is (= {:form-params {:a "1"}}
             (read-string (:body (request :post "/p" {:headers {"Content-Type" form-ct} :body "a=1"}))))))))

(defn- raw-get [target]
  (raw (str "GET " target " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")))

(deftest malformed-input-gets-400-and-the-server-keeps-serving
  (doseq [[label wrap server-opts h]
          [["sync" p/wrap-params {} (fn [req] (capture-handler req))]
           ["async" p/wrap-params {:async? true} (fn [req respond _] (respond (capture-handler req)))]]]
    (testing label
      (let [calls (AtomicInteger.)
            counted (if (:async? server-opts)
                      (fn [req respond raise] (.incrementAndGet calls) (h req respond raise))
                      (fn [req] (.incrementAndGet calls) (h req)))]
        (with-server (wrap counted) server-opts
          (testing "a malformed query string (sent raw: java.net.URI refuses it)"
            (let [resp (raw-get "/p?a=1&b=%zz")]
              (is (= "HTTP/1.1 400 Bad Request" (status-line resp)))
              (is (str/includes? (str/lower-case resp) "content-type: text/plain; charset=utf-8"))
              (is (str/ends-with? resp "\r\n\r\nBad Request: malformed percent-encoding in query string at index 6"))))
          (testing "then a good request succeeds"
            (is (= {:query-params {"a" "1"} :form-params {} :params {"a" "1"}}
                   (read-string (:body (request :get "/p?a=1"))))))
          (testing "a malformed form body"
            (let [r (request :post "/p?a=1" {:headers {"Content-Type" form-ct} :body "ok=1&bad=%C3%28"})]
              (is (= 400 (:status r)))
              (is (= ["text/plain; charset=utf-8"] (get-in r [:headers "content-type"])))
              (is (= "Bad Request: invalid UTF-8 in form body at index 9" (:body r)))))
          (testing "raw bytes that are not UTF-8 in the body"
            (let [r (request :post "/p" {:headers {"Content-Type" form-ct} :body (byte-array [97 61 -23])})]
              (is (= [400 "Bad Request: invalid UTF-8 in form body at byte 2"] [(:status r) (:body r)]))))
          (testing "an unknown charset"
            (let [r (request :post "/p" {:headers {"Content-Type" (str form-ct "; charset=x-no-such")} :body "a=1"})]
              (is (= [415 "Unsupported Media Type: unknown charset in Content-Type"] [(:status r) (:body r)]))))
          (is (= 1 (.get calls)) "the handler ran only for the good request")
          (is (= 200 (:status (request :get "/p?still=ok")))))))))

;; ---------------------------------------------------------------------------------------------
;; limits and hash flooding

(defn- pairs-of [names] (str/join "&" (map #(str % "=1") names)))

(defn- refusal
  "[status message index] of the MalformedInputException `f` throws, itself or as the cause of
  the middleware's bad-input exception, or :no-exception."
  [f]
  (try (f) :no-exception
       (catch MalformedInputException e [(.status e) (.getMessage e) (.index e)])
       (catch ExceptionInfo e
         (let [^MalformedInputException c (ex-cause e)]
           [(.status c) (.getMessage c) (.index c)]))))

(def ^:private others (mapv #(str "field" %) (range 10)))

(deftest codec-max-params-default
  (testing "the default is 1000 parameters: 1000 pass, 1001 are a 400 naming the input"
    (let [q (pairs-of (map #(str "k" %) (range 1000)))]
      (is (= 1000 (count (decode q utf-8 false))))
      (is (= [400 "more than 1000 parameters in query string" (inc (count q))]
             (refusal #(decode (str q "&x=1") utf-8 false)))
          "the index is where the first pair over the limit starts"))))

(deftest codec-max-params
  (is (= 1000 FormCodec/DEFAULT_MAX_PARAMS))
  (testing "a configured limit, off by one"
    (is (= {"a" "1" "b" "2" "c" "3"} (FormCodec/decode "a=1&b=2&c=3" utf-8 false "query string" 3)))
    (is (= [400 "more than 3 parameters in query string" 12]
           (refusal #(FormCodec/decode "a=1&b=2&c=3&d=4" utf-8 false "query string" 3)))))
  (testing "a repeated name counts each time; empty pairs do not count"
    (is (= [400 "more than 2 parameters in query string" 8]
           (refusal #(FormCodec/decode "a=1&a=2&a=3" utf-8 false "query string" 2))))
    (is (= {"a" "1" "b" "2"} (FormCodec/decode "&a=1&&&b=2&" utf-8 false "query string" 2))))
  (testing "a form body over the limit is a 413"
    (is (= [413 "more than 2 parameters in form body" 8]
           (refusal #(FormCodec/decodeBody (ByteArrayInputStream. (.getBytes "a=1&b=2&c=3" utf-8))
                                           utf-8 false (int 2)))))
    (is (= [413 "more than 2 parameters in form body" 8]
           (refusal #(FormCodec/decodeBody "a=1&b=2&c=3" utf-8 false (int 2)))))
    (is (= 1000 (count (FormCodec/decodeBody (ByteArrayInputStream. (.getBytes ^String (pairs-of (range 1000)) utf-8))
                                             utf-8 false)))))
  (is (thrown? IllegalArgumentException (FormCodec/decode "a=1" utf-8 false "query string" 0))))

(deftest codec-colliding-names
  (testing "up to 8 names of one hash decode as usual"
    (let [names (u/colliding-names 8)
          m (decode (pairs-of (concat names others)) utf-8 false)]
      (is (= (set (concat names others)) (set (keys m))))
      (is (= #{"1"} (set (vals m))))))
  (testing "9 are refused (400), without echoing them"
    (is (= [400 "too many parameter names with colliding hashes in query string" -1]
           (refusal #(decode (pairs-of (concat others (u/colliding-names 9))) utf-8 false)))))
  (testing "a name repeated is one name"
    (let [names (u/colliding-names 8)
          m (decode (pairs-of (concat (repeat 20 (first names)) names others)) utf-8 false)]
      (is (= 18 (count m)))
      (is (= (vec (repeat 21 "1")) (get m (first names))))))
  (testing "with keywords: refused before any name is interned"
    (let [names (u/colliding-names 9 "qzxNotInternedForm")]
      (is (= 400 (first (refusal #(decode (pairs-of (concat others names)) utf-8 true)))))
      (is (every? #(nil? (clojure.lang.Keyword/find ^String %)) names)
          "the global keyword table did not get them")))
  (testing "names whose keywords share a hash (their Strings do not): refused only as keywords"
    (let [names (u/keyword-colliding-names 9)
          q (pairs-of (concat others names))]
      (is (= 19 (count (decode q utf-8 false))))
      (is (= [400 "too many parameter names with colliding hashes in query string" -1]
             (refusal #(decode q utf-8 true))))
      (is (= 18 (count (decode (pairs-of (concat others (take 8 names))) utf-8 true)))))))

;; 20,000 names of one hash took seconds (a quadratic hash-map build); now the limit or the
;; collision check refuses them at once. Generous bounds: this machine is shared.
(def ^:private flood (pairs-of (u/colliding-names 20000)))

(deftest codec-colliding-names-stay-linear
  (let [[r ms] (u/millis (decode flood utf-8 false))]
    (is (instance? MalformedInputException r) (str (type r)))
    (is (str/includes? (str (ex-message r)) "more than 1000 parameters"))
    (is (< ms 2000) (str ms " ms"))))

(deftest codec-colliding-names-stay-linear-under-a-raised-limit
  (doseq [kw? [false true]]
    (let [[r ms] (u/millis (FormCodec/decode ^String flood utf-8 (boolean kw?) "form body" (int 100000)))]
      (is (instance? MalformedInputException r) (str (type r)))
      (is (= "too many parameter names with colliding hashes in form body" (ex-message r)))
      (is (< ms 2000) (str ms " ms")))))

(deftest max-params-option
  (testing "validated when the middleware is built"
    (doseq [bad [0 -1 "10" 1.5 (inc Integer/MAX_VALUE)]]
      (is (thrown-with-msg? IllegalArgumentException #":max-params must be a positive integer"
                            (p/wrap-params identity {:max-params bad}))
          (pr-str bad)))
    (is (fn? (p/wrap-form-params identity {:max-params 1}))))
  (testing "the request functions take it too"
    (is (= [400 "more than 1 parameters in query string" 4]
           (refusal #(p/query-params-request {:query-string "a=1&b=2"} {:max-params 1}))))
    (is (= [413 "more than 1 parameters in form body" 4]
           (refusal #(p/form-params-request {:headers {"content-type" form-ct} :body "a=1&b=2"}
                                            {:max-params 1}))))
    (is (= {"a" "1" "b" "2" "c" "3" "d" "4"}
           (:params (p/params-request {:headers {"content-type" form-ct} :body "a=1&b=2"
                                       :query-string "c=3&d=4"}
                                      {:max-params 2})))
        "the query string and the body are counted separately")))

(deftest keyword-params-of-existing-params-are-checked-too
  ;; wrap-params with :keywords? turns the string keys of a :params that was already there
  ;; into keywords: new keys, new hashes, so they are checked as the codec checks its own
  (let [names (u/keyword-colliding-names 9)
        existing (zipmap (concat others names) (repeat "v"))]
    (is (= 19 (count existing)) "as strings they do not collide")
    (is (= [400 "too many parameter names with colliding hashes in :params" -1]
           (refusal #(p/params-request {:params existing} {:keywords? true}))))
    (is (= 18 (count (:params (p/params-request {:params (zipmap (concat others (take 8 names)) (repeat "v"))}
                                                {:keywords? true})))))))

(defn- post-form [path body]
  (request :post path {:headers {"Content-Type" form-ct} :body body}))

(deftest too-many-params-on-a-server
  (let [calls (AtomicInteger.)
        h (fn [req] (.incrementAndGet calls) (capture-handler req))]
    (testing "default: 1000 in the query string pass, 1001 are a 400"
      (with-server (p/wrap-params h) {}
        (let [names (map #(str "k" %) (range 1000))
              r (request :get (str "/p?" (pairs-of names)))]
          (is (= 200 (:status r)))
          (is (= 1000 (count (:query-params (read-string (:body r)))))))
        (let [r (request :get (str "/p?" (pairs-of (map #(str "k" %) (range 1001)))))]
          (is (= 400 (:status r)))
          (is (= "text/plain; charset=utf-8" (u/header r "content-type")))
          (is (= "Bad Request: more than 1000 parameters in query string" (:body r))))))
    (testing "configured, off by one: a form body over it is a 413"
      (.set calls 0)
      (with-server (p/wrap-form-params h {:max-params 3}) {}
        (is (= 200 (:status (post-form "/p" "a=1&b=2&c=3"))))
        (let [r (post-form "/p" "a=1&b=2&c=3&d=4")]
          (is (= 413 (:status r)))
          (is (= "Payload Too Large: more than 3 parameters in form body" (:body r))))
        (is (= 1 (.get calls)) "the handler was not called for the refused one")))))

(deftest colliding-names-on-a-server
  (let [calls (AtomicInteger.)
        h (fn [req] (.incrementAndGet calls) (capture-handler req))]
    (with-server (p/wrap-params h {:keywords? true}) {}
      (testing "8 names of one hash pass, 9 are a 400 that does not echo them"
        (let [r (request :get (str "/p?" (pairs-of (concat others (u/colliding-names 8)))))]
          (is (= 200 (:status r)))
          (is (= 18 (count (:query-params (read-string (:body r)))))))
        (let [r (request :get (str "/p?" (pairs-of (concat others (u/colliding-names 9)))))]
          (is (= 400 (:status r)))
          (is (= "Bad Request: too many parameter names with colliding hashes in query string"
                 (:body r))))
        (let [r (post-form "/p" (pairs-of (u/colliding-names 9)))]
          (is (= 400 (:status r)))
          (is (= "Bad Request: too many parameter names with colliding hashes in form body"
                 (:body r))))
        (is (= 1 (.get calls)))))))

(deftest a-flood-of-colliding-names-is-answered-at-once
  ;; 20,000 names of one hash (0.6 MB): 11 s of a quadratic build before, for everyone on the
  ;; event loop with an async handler. Now refused at once. Generous bounds: shared machine.
  (let [body (pairs-of (u/colliding-names 20000))
        h (fn [req respond _] (respond (capture-handler req)))]
    (with-server (p/wrap-params h) {:async? true}
      (let [[r ms] (u/millis (post-form "/p" body))]
        (is (= 413 (:status r)) (str r))
        (is (= "Payload Too Large: more than 1000 parameters in form body" (:body r)))
        (is (< ms 2000) (str ms " ms"))))
    (with-server (p/wrap-params h {:max-params 100000}) {:async? true}
      (let [[r ms] (u/millis (post-form "/p" body))]
        (is (= 400 (:status r)) (str r))
        (is (= "Bad Request: too many parameter names with colliding hashes in form body" (:body r)))
        (is (< ms 2000) (str ms " ms"))))))
