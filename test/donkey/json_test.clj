(ns donkey.json-test
  "JSON: the kernel codec (donkey.codec.Json / ClojureModule), map and vector response bodies
  written by the kernel, and donkey.middleware.json on real servers."
  (:require [clojure.string :as str]
            [clojure.walk :as walk]
            [clojure.test :refer [deftest is testing]]
            [donkey.middleware.json :as mj :refer [wrap-json-body wrap-json-params wrap-json-response]]
            [donkey.test-util :as u :refer [with-server GET request raw header]]
            [ring.middleware.params :refer [wrap-params]])
  (:import (clojure.lang BigInt IPersistentMap PersistentArrayMap PersistentHashMap PersistentVector)
           (com.fasterxml.jackson.databind ObjectMapper)
           (donkey.codec ClojureModule Json JsonException)
           (io.vertx.core.buffer Buffer)
           (java.io ByteArrayInputStream)
           (java.nio.charset StandardCharsets)
           (java.time Instant)
           (java.util ArrayList HashMap UUID)))

(set! *warn-on-reflection* true)

(defn- write ^String [x] (Json/writeString x))
(defn- read-kw [^String s] (Json/read s true false))
(defn- read-str [^String s] (Json/read s false false))
(defn- utf8 ^bytes [^String s] (.getBytes s StandardCharsets/UTF_8))

(defn- malformed
  "The JsonException `(Json/read s)` throws, as {:message :line :column}, or ::parsed."
  [^String s]
  (try (Json/read s false false) ::parsed
       (catch JsonException e {:message (.getMessage e) :line (.line e) :column (.column e)})))

(defrecord Point [x y])

;; ------------------------------------------------------------------------------------------
;; the codec: writing

(deftest write-scalars
  (is (= "null" (write nil)))
  (is (= "true" (write true)))
  (is (= "false" (write false)))
  (is (= "42" (write 42)))
  (is (= "-7" (write (int -7))))
  (is (= "1.5" (write 1.5)))
  (is (= "2.5" (write (float 2.5))))
  (is (= "\"a\"" (write :a)) "keyword: its name, no colon")
  (is (= "\"user/a\"" (write :user/a)) "namespaced keyword: ns/name")
  (is (= "\"sym\"" (write 'sym)))
  (is (= "\"my.ns/sym\"" (write 'my.ns/sym)))
  (is (= "\"c\"" (write \c)) "character: a one-char string")
  (is (= "0.75" (write 3/4)) "ratio: a double")
  (is (= "0.3333333333333333" (write 1/3)))
  (is (= "123456789012345678901234567890" (write 123456789012345678901234567890N)) "BigInt exact")
  (is (= "7" (write 7N)) "a small BigInt")
  (is (= "98765432109876543210987654321" (write (BigInteger. "98765432109876543210987654321"))))
  (is (= "3.14159265358979323846264338327950288" (write 3.14159265358979323846264338327950288M))
      "BigDecimal exact")
  (is (= "\"6f1b2c3d-0000-4000-8000-00000000000a\""
         (write (UUID/fromString "6f1b2c3d-0000-4000-8000-00000000000a"))))
  (is (= "\"2024-02-29T12:34:56.789Z\"" (write (Instant/parse "2024-02-29T12:34:56.789Z")))
      "Instant: ISO-8601")
  (testing "other java.time values: ISO-8601 strings"
    (is (= "[\"2024-01-02\",\"2024-01-02T03:04:05\",\"03:04\",\"PT1H30M\",\"P1Y2M\",\"Europe/Paris\"]"
           (write [(java.time.LocalDate/of 2024 1 2) (java.time.LocalDateTime/of 2024 1 2 3 4 5)
                   (java.time.LocalTime/of 3 4) (java.time.Duration/ofMinutes 90)
                   (java.time.Period/of 1 2 0) (java.time.ZoneId/of "Europe/Paris")])))
    (is (= "\"2024-07-02T03:04:05+02:00\""
           (write (java.time.ZonedDateTime/of 2024 7 2 3 4 5 0 (java.time.ZoneId/of "Europe/Paris"))))
        "a zoned date-time with its offset, without the zone id")
    (is (= "\"2024-01-02T03:04:05Z\"" (write (java.time.OffsetDateTime/of 2024 1 2 3 4 5 0 java.time.ZoneOffset/UTC)))))
  (is (= "[\"NaN\",\"Infinity\",\"-Infinity\"]" (write [##NaN ##Inf ##-Inf]))
      "doubles JSON cannot represent, as Jackson writes them")
  (is (= "\"q\\\"b\\\\n\\nt\\tc\\u0001 été € 😀\""
         (write "q\"b\\n\nt\tc\u0001 été € 😀"))
      "strings: JSON escapes for quote, backslash and controls; non-ASCII kept as UTF-8"))

(deftest write-collections
  (is (= "{\"a\":1}" (write {:a 1})))
  (is (= "{}" (write {})))
  (is (= "[]" (write [])))
  (is (= "[1,\"two\",\"three\",null,[4]]" (write [1 "two" :three nil [4]])))
  (is (= "[1,2,3]" (write '(1 2 3))) "list")
  (is (= "[1,2,3]" (write (sorted-set 3 1 2))) "set")
  (is (= "[\"x\"]" (write #{:x})))
  (is (= "[1,2,3]" (write (map inc (range 3)))) "lazy seq")
  (is (= "[0,1,2]" (write (range 3))))
  (is (= "[1,2]" (write (seq [1 2]))))
  (is (= "[]" (write ())))
  (is (= "{\"x\":1,\"y\":2}" (write (->Point 1 2))) "a record is a map")
  (testing "map keys: keyword name, ns/name, string as is, anything else its str"
    (is (= "{\"k\":1}" (write {:k 1})))
    (is (= "{\"ns/k\":1}" (write {:ns/k 1})))
    (is (= "{\"a b\":1}" (write {"a b" 1})))
    (is (= "{\"42\":1}" (write {42 1})))
    (is (= "{\"sym\":1}" (write {'sym 1})))
    (is (= "{\"1.5\":1}" (write {1.5 1})))
    (is (= "{\"\":1}" (write {nil 1})) "nil: (str nil)")
    (is (= "{\"[1 2]\":1}" (write {[1 2] 1}))))
  (testing "maps over 8 entries (hash maps) keep every entry"
    (let [m (into {} (map (fn [i] [(keyword (str "k" i)) i])) (range 50))]
      (is (instance? PersistentHashMap m))
      (is (= (into {} (map (fn [i] [(str "k" i) i])) (range 50)) (read-str (write m))))))
  (testing "Java maps and collections, nested or at the top"
    (is (= "{\"k\":[\"a\",1]}" (write (doto (HashMap.) (.put :k (ArrayList. [:a 1]))))))
    (is (= "[{\"k\":\"v\"}]" (write [(doto (HashMap.) (.put :k :v))]))))
  (testing "nested data"
    (is (= "{\"users\":[{\"id\":1,\"tags\":[\"a\",\"b\"],\"meta\":{\"ok\":true,\"score\":0.5}}],\"n\":null}"
           (write (array-map :users [(array-map :id 1 :tags [:a "b"] :meta (array-map :ok true :score 1/2))]
                             :n nil)))))
  (testing "a vector of 1000 elements (a tree, not just a tail)"
    (is (= (str "[" (str/join "," (range 1000)) "]") (write (vec (range 1000)))))))

(deftest write-bytes-buffer-string-agree
  (doseq [x [{:a "été" :b [1 2 3]} [] (vec (range 5000)) (zipmap (map str (range 2000)) (repeat "x€"))]]
    (let [s (write x)
          bs (Json/writeBytes x)
          ^Buffer buf (Json/writeBuffer x)]
      (is (= s (String. ^bytes bs StandardCharsets/UTF_8)))
      (is (= (alength bs) (.length buf)) "the buffer holds exactly the document")
      (is (= s (.toString buf "UTF-8")))))
  (is (> (alength (Json/writeBytes (vec (range 5000)))) 8000) "one test doc spans several Jackson chunks"))

(deftest write-options
  (is (= "{\n  \"a\" : [ 1, 2 ]\n}" (Json/writeString {:a [1 2]} true false)) "pretty")
  (is (= "{\"\\u00E9\":\"\\u20AC\\uD83D\\uDE00\"}" (Json/writeString {"é" "€😀"} false true))
      "escape non-ASCII")
  (is (= "{\"é\":\"€\"}" (Json/writeString {"é" "€"} false false))))

(deftest write-failures-are-illegal-argument
  (let [e (try (write {:a (Object.)}) nil (catch IllegalArgumentException e e))]
    (is (some? e) "an object Jackson cannot write")
    (is (str/includes? (.getMessage ^Exception e) "cannot write")))
  (let [e (try (Json/writeBuffer [(map #(/ 1 %) [1 0])]) nil (catch IllegalArgumentException e e))]
    (is (some? e) "a lazy seq that throws while it is realised")
    (is (str/includes? (.getMessage ^Exception e) "Divide by zero")))
  (is (thrown? IllegalArgumentException
               (write (reduce (fn [acc _] [acc]) [] (range 2000))))
      "nesting deeper than Jackson's limit"))

;; ------------------------------------------------------------------------------------------
;; the codec: reading

(deftest read-values
  (is (= {"a" 1} (read-str "{\"a\":1}")))
  (is (= {:a 1} (read-kw "{\"a\":1}")))
  (is (= {:ns/k 1} (read-kw "{\"ns/k\":1}")) "a/b keys become namespaced keywords")
  (is (= [1 "x" true false nil] (read-str "[1,\"x\",true,false,null]")))
  (is (nil? (read-str "null")))
  (is (= "top" (read-str "\"top\"")))
  (is (= {} (read-str "{}")))
  (is (= [] (read-str "[]")))
  (is (instance? PersistentVector (read-str "[1,2]")))
  (is (instance? IPersistentMap (read-str "{\"a\":[]}")))
  (testing "integers: Long, and exact BigInt when too big"
    (is (instance? Long (read-str "1")))
    (is (= Long/MAX_VALUE (read-str "9223372036854775807")))
    (is (= Long/MIN_VALUE (read-str "-9223372036854775808")))
    (let [big (read-str "9223372036854775808")]
      (is (instance? BigInt big))
      (is (= 9223372036854775808N big)))
    (is (= 123456789012345678901234567890123456789N
           (read-str "123456789012345678901234567890123456789"))))
  (testing "decimals: Double by default, exact BigDecimal when asked"
    (is (= 1.5 (read-str "1.5")))
    (is (instance? Double (read-str "1e3")))
    (is (= 1.1 (read-str "1.10000000000000000000001")) "rounded to a double")
    (let [d (Json/read "1.10000000000000000000001" false true)]
      (is (instance? BigDecimal d))
      (is (= 1.10000000000000000000001M d)))
    (is (= [1 2.5M] (Json/read "[1,2.5]" false true)) "integers stay Long with bigdecimals"))
  (testing "unicode"
    (is (= "été € 😀" (read-str "\"été € 😀\"")))
    (is (= "é😀\n\"" (read-str "\"\\u00e9\\ud83d\\ude00\\n\\\"\"")) "escapes, a surrogate pair")
    (is (= {"clé" "valeur"} (Json/read (ByteArrayInputStream. (utf8 "{\"clé\":\"valeur\"}")) false false))
        "from UTF-8 bytes")
    (is (= {:клю "ч"} (read-kw "{\"клю\":\"ч\"}"))))
  (testing "nested"
    (is (= {:a [{:b {:c [1 [2 [3]]]}} {}] :d {:e nil}}
           (read-kw "{\"a\":[{\"b\":{\"c\":[1,[2,[3]]]}},{}],\"d\":{\"e\":null}}")))))

(deftest read-maps-and-vectors-are-real-clojure-collections
  (testing "maps up to 16 keys are array maps, larger ones hash maps; both complete"
    (let [json (fn [n] (str "{" (str/join "," (map #(str "\"k" % "\":" %) (range n))) "}"))]
      (is (instance? PersistentArrayMap (read-str (json 8))))
      (is (instance? PersistentArrayMap (read-str (json 16))))
      (is (instance? PersistentHashMap (read-str (json 17))))
      (testing "an assoc on a 9..16-key array map behaves as on any map"
        (let [m (read-kw (json 12))
              m2 (assoc m :new 1)]
          (is (= 13 (count m2)))
          (is (= 1 (:new m2)))
          (is (= 11 (:k11 m2)))
          (is (= (dissoc m2 :new) m))
          (is (= (hash m) (hash (into {} m))))))
      (doseq [n [1 7 8 9 16 17 100]]
        (is (= (into {} (map (fn [i] [(str "k" i) i])) (range n)) (read-str (json n))))
        (is (= (into {} (map (fn [i] [(keyword (str "k" i)) i])) (range n))
               (read-kw (json n)))))))
  (testing "a repeated key keeps its last value, small map or large"
    (is (= {"a" 3 "b" 2} (read-str "{\"a\":1,\"b\":2,\"a\":3}")))
    (is (= 2 (count (read-str "{\"a\":1,\"b\":2,\"a\":3}"))))
    (let [m (read-str (str "{" (str/join "," (map #(str "\"k" % "\":" %) (range 8))) ",\"k0\":99}"))]
      (is (= 8 (count m)) "a full array map and a repeated key")
      (is (instance? PersistentArrayMap m))
      (is (= 99 (get m "k0"))))
    (doseq [n [12 16 20]]
      (let [m (read-str (str "{" (str/join "," (map #(str "\"k" % "\":" %) (range n))) ",\"k0\":99}"))]
        (is (= n (count m)))
        (is (= 99 (get m "k0"))))))
  (testing "vectors of every size behave (the tail is adopted up to 32)"
    (doseq [n [1 8 9 31 32 33 100 1057]]
      (let [v (read-str (str "[" (str/join "," (range n)) "]"))]
        (is (= (vec (range n)) v))
        (is (= n (count v)))
        (is (= (conj (vec (range n)) :x) (conj v :x)))
        (is (= (dec n) (peek v))))))
  (is (= {:a 1 :b 2} (assoc (read-kw "{\"a\":1}") :b 2)))
  (is (= (hash {"a" [1 2]}) (hash (read-str "{\"a\":[1,2]}")))))

(deftest round-trips
  (let [data {:id 42
              :name "Zoë ☃"
              :tags ["a" "b"]
              :nested {:deep [{:x 1.25} {:y nil} [] {}]}
              :flag false
              :huge 1234567890123456789012345678901234567890N
              :neg -5}]
    (is (= data (read-kw (write data))) "keyword keys")
    (is (= (walk/stringify-keys data) (read-str (write data))) "string keys"))
  (let [exact {:price 19.990000000000000000001M :n [0.1M 1E+3M]}]
    (is (= exact (Json/read (write exact) true true)) "BigDecimal kept exact both ways"))
  (is (= {:a "x/y" :b "s"} (read-kw (write {:a :x/y :b 's}))) "keywords and symbols come back as strings"))

(deftest malformed-input
  (testing "truncated"
    (let [{:keys [message line column]} (malformed "{\"a\": [1, 2")]
      (is (str/includes? message "end-of-input"))
      (is (= 1 line))
      (is (= 12 column))
      (is (str/ends-with? message "at line 1, column 12"))))
  (testing "trailing garbage"
    (is (str/includes? (:message (malformed "{\"a\":1} x")) "Unrecognized token 'x'"))
    (is (= {:message "unexpected content after the JSON value at line 1, column 9" :line 1 :column 9}
           (malformed "{\"a\":1} {}")))
    (is (= "unexpected content after the JSON value at line 2, column 1" (:message (malformed "1\n2")))))
  (testing "bad literal, with its position"
    (let [{:keys [message line column]} (malformed "{\n  \"a\": tru\n}")]
      (is (str/includes? message "Unrecognized token 'tru'"))
      (is (= [2 8] [line column]))))
  (testing "other shapes"
    (is (str/includes? (:message (malformed "[1,]")) "Unexpected character (']'"))
    (is (str/includes? (:message (malformed "{\"a\" 1}")) "colon"))
    (is (str/includes? (:message (malformed "{a:1}")) "double-quote"))
    (is (str/includes? (:message (malformed "'x'")) "Unexpected character"))
    (is (str/includes? (:message (malformed "[NaN]")) "Non-standard token 'NaN'")))
  (testing "empty input: an error for read, nil for readBody"
    (is (= "no JSON value in the input at line 1, column 1" (:message (malformed ""))))
    (is (str/starts-with? (:message (malformed "  \n ")) "no JSON value"))
    (is (nil? (Json/readBody "" false false)))
    (is (nil? (Json/readBody (ByteArrayInputStream. (utf8 " \r\n\t")) false false)))
    (is (= {"a" 1} (Json/readBody "{\"a\":1}" false false))))
  (testing "huge bad input is not echoed back"
    (let [junk (apply str (repeat 100000 "x"))
          {:keys [message]} (malformed (str "[" junk "]"))]
      (is (< (count message) 300) message)
      (is (str/includes? message "Unrecognized token")))
    (let [{:keys [message]} (malformed (str "\"" (apply str (repeat 100000 "y"))))]
      (is (< (count message) 300) message)))
  (testing "over the parser's limits"
    (is (= "nesting deeper than 1000 levels at line 1, column 1002"
           (:message (malformed (apply str (repeat 5000 "["))))))
    (is (= "number longer than 1000 characters at line 1, column 2001"
           (:message (malformed (apply str (repeat 2000 "9")))))))
  (testing "the stream is not closed by the reader"
    (let [closed (atom false)
          in (proxy [ByteArrayInputStream] [(utf8 "[1]")]
               (close [] (reset! closed true)))]
      (is (= [1] (Json/read ^java.io.InputStream in false false)))
      (is (false? @closed)))))

(deftest json-content-types
  (doseq [ct ["application/json" "application/json; charset=utf-8" "APPLICATION/JSON"
              " application/json ;charset=UTF-8" "application/vnd.api+json"
              "application/problem+json; x=y" "application/merge-patch+json"]]
    (is (mj/json-request? {:headers {"content-type" ct}}) ct))
  (doseq [ct [nil "" "text/json" "application/jsonp" "application/json-seq" "application/+json"
              "text/plain" "application/x-www-form-urlencoded" "multipart/form-data; a=application/json"]]
    (is (not (mj/json-request? {:headers {"content-type" ct}})) (pr-str ct))))

(deftest module-on-a-mapper
  (let [^ObjectMapper m (Json/newMapper)]
    (is (= {"a" [1 {"b" 2.5}]} (.readValue m "{\"a\":[1,{\"b\":2.5}]}" Object)))
    (is (= {:a [1]} (-> m (.readerFor Object) (.withAttribute ClojureModule/KEYWORD_KEYS true)
                        (.readValue "{\"a\":[1]}"))))
    (is (= {"x" 1.5M} (-> m (.readerFor Object)
                           (.with com.fasterxml.jackson.databind.DeserializationFeature/USE_BIG_DECIMAL_FOR_FLOATS)
                           (.readValue "{\"x\":1.5}"))))
    (is (= {"a" 1} (.readValue m "{\"a\":1}" IPersistentMap)))
    (is (= [1] (.readValue m "[1]" clojure.lang.IPersistentVector)))
    (is (thrown? com.fasterxml.jackson.databind.JsonMappingException
                 (.readValue m "[1]" IPersistentMap)))
    (is (= "{\"a\":\"b/c\",\"d\":[0.5]}" (.writeValueAsString m {:a :b/c :d [1/2]})))
    (is (= "{\"k\":1}" (.writeValueAsString m (doto (HashMap.) (.put :k 1)))) "keyword keys of Java maps")
    (is (= "\"2024-01-02\"" (.writeValueAsString m (java.time.LocalDate/of 2024 1 2))) "java.time at the top")
    (is (= {"a" {"b" [1]}} (into {} (.readValue m "{\"a\":{\"b\":[1]}}" java.util.HashMap)))
        "Clojure data inside Jackson's own containers")
    (is (= "\"1970-01-01T00:00:00.000+00:00\"" (.writeValueAsString m (java.util.Date. 0)))
        "java.util.Date: ISO-8601 (Jackson's own, timestamps off)")))

;; ------------------------------------------------------------------------------------------
;; the kernel: map and vector bodies

(defn- const [resp] (fn [_] resp))

(deftest kernel-writes-map-bodies-as-json
  (with-server (const {:status 200 :body {:message "Hello, World!"}}) {}
    (let [r (GET "/" {:as :bytes})
          body (String. ^bytes (:body r) StandardCharsets/UTF_8)]
      (is (= 200 (:status r)))
      (is (= "{\"message\":\"Hello, World!\"}" body))
      (is (= "application/json; charset=utf-8" (header r "content-type")))
      (is (= (str (alength ^bytes (:body r))) (header r "content-length")) "exact Content-Length")
      (is (nil? (header r "transfer-encoding")))))
  (testing "non-ASCII: Content-Length counts UTF-8 bytes"
    (with-server (const {:body {:name "Zoë ☃ 😀"}}) {}
      (let [r (GET "/" {:as :bytes})]
        (is (= "{\"name\":\"Zoë ☃ 😀\"}" (String. ^bytes (:body r) StandardCharsets/UTF_8)))
        (is (= (str (alength (utf8 "{\"name\":\"Zoë ☃ 😀\"}"))) (header r "content-length"))))))
  (testing "a large body (several Jackson chunks) arrives whole"
    (let [data {:items (vec (for [i (range 20000)] {:i i :s (str "item-" i)}))}]
      (with-server (const {:body data}) {}
        (let [r (GET "/" {:as :bytes})]
          (is (= (str (alength ^bytes (:body r))) (header r "content-length")))
          (is (= data (Json/read (ByteArrayInputStream. ^bytes (:body r)) true false))))))))

(deftest kernel-writes-vector-bodies-as-json
  (with-server (const {:status 201 :body [1 "two" {:three 3} nil]}) {}
    (let [r (GET "/")]
      (is (= 201 (:status r)))
      (is (= "[1,\"two\",{\"three\":3},null]" (:body r)))
      (is (= "application/json; charset=utf-8" (header r "content-type")))
      (is (= "26" (header r "content-length")))))
  (with-server (const {:body []}) {}
    (is (= "[]" (:body (GET "/"))))))

(deftest kernel-json-records
  (with-server (const {:body (->Point 1 2)}) {}
    (let [r (GET "/")]
      (is (= "{\"x\":1,\"y\":2}" (:body r)) "a record body is a map, in field order")
      (is (= "application/json; charset=utf-8" (header r "content-type"))))))

(deftest kernel-json-keeps-the-handlers-content-type
  (with-server (const {:status 200 :headers {"Content-Type" "application/vnd.api+json"}
                       :body {:data []}}) {}
    (let [r (GET "/")]
      (is (= "{\"data\":[]}" (:body r)))
      (is (= ["application/vnd.api+json"] (get-in r [:headers "content-type"])) "not replaced")))
  (with-server (const {:status 200 :headers {"content-length" "999"} :body {:a 1}}) {}
    (let [r (GET "/")]
      (is (= "7" (header r "content-length")) "the handler's Content-Length is corrected")
      (is (= "{\"a\":1}" (:body r))))))

(deftest kernel-json-seqs-stay-streamed
  (with-server (const {:status 200 :body (list "a" "b")}) {}
    (is (= "ab" (:body (GET "/"))) "an ISeq body is Ring's seq of strings, not JSON")))

(deftest kernel-json-head-and-async
  (with-server (const {:body {:a 1}}) {}
    (let [resp (raw "HEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
          [head1 rest1] (str/split resp #"\r\n\r\n" 2)]
      (is (str/starts-with? rest1 "HTTP/1.1 200") "HEAD sent no body")
      (is (str/ends-with? rest1 "{\"a\":1}"))))
  (with-server (fn [_ respond _] (future (respond {:body {:async true}}))) {:async? true}
    (let [r (GET "/")]
      (is (= "{\"async\":true}" (:body r)))
      (is (= "application/json; charset=utf-8" (header r "content-type"))))))

(deftest kernel-json-failure-is-a-500-before-anything-is-sent
  (with-server (fn [req] (if (= "/bad" (:uri req))
                           {:status 200 :headers {"X-Mine" "1"} :body {:a (Object.)}}
                           {:status 200 :body {:ok true}})) {}
    (let [r (GET "/bad")]
      (is (= 500 (:status r)))
      (is (= "Internal Server Error" (:body r)))
      (is (nil? (header r "x-mine")) "none of the failed response's head was sent"))
    (let [r (GET "/ok")]
      (is (= 200 (:status r)) "the server keeps serving")
      (is (= "{\"ok\":true}" (:body r)))))
  (testing "(Object.) as a body is still an unknown body type"
    (with-server (const {:status 200 :body (Object.)}) {}
      (is (= 500 (:status (GET "/")))))))

;; ------------------------------------------------------------------------------------------
;; middleware on real servers

(defn- post-json [path body & [headers]]
  (request :post path {:headers (merge {"Content-Type" "application/json"} headers) :body body}))

(deftest wrap-json-body-on-a-server
  (let [seen (atom nil)
        h (wrap-json-body (fn [req]
                            (reset! seen (:body req))
                            {:status 200 :body {:got (when-not (instance? java.io.InputStream (:body req))
                                                       (:body req))}})
                          {:keywords? true})]
    (with-server h {}
      (let [r (post-json "/" "{\"user\":{\"name\":\"Zoë\",\"ids\":[1,2,3]},\"n\":12345678901234567890}")]
        (is (= 200 (:status r)))
        (is (= {:user {:name "Zoë" :ids [1 2 3]} :n 12345678901234567890N} @seen))
        (is (= "{\"got\":{\"user\":{\"name\":\"Zoë\",\"ids\":[1,2,3]},\"n\":12345678901234567890}}"
               (:body r))))
      (testing "application/*+json with parameters counts"
        (post-json "/" "[1,2]" {"Content-Type" "application/vnd.api+json; charset=utf-8"})
        (is (= [1 2] @seen)))
      (testing "other content types pass through untouched"
        (request :post "/" {:headers {"Content-Type" "text/plain"} :body "{\"a\":1}"})
        (is (instance? java.io.InputStream @seen)))
      (testing "an empty JSON body is nil"
        (is (= 200 (:status (post-json "/" ""))))
        (is (nil? @seen)))))
  (testing "string keys and BigDecimals by option"
    (let [seen (atom nil)]
      (with-server (wrap-json-body (fn [req] (reset! seen (:body req)) {:status 204})
                                   {:bigdecimals? true}) {}
        (post-json "/" "{\"price\":19.99}")
        (is (= {"price" 19.99M} @seen))
        (is (instance? BigDecimal (get @seen "price")))))))

(deftest malformed-json-is-a-400-and-the-server-keeps-serving
  (let [calls (atom 0)
        h (wrap-json-body (fn [req] (swap! calls inc) {:status 200 :body {:ok (:body req)}}))]
    (with-server h {}
      (let [r (post-json "/" "{\"a\": tru}")]
        (is (= 400 (:status r)))
        (is (= "text/plain; charset=utf-8" (header r "content-type")))
        (is (str/starts-with? (:body r) "Bad Request: malformed JSON: Unrecognized token 'tru'"))
        (is (str/ends-with? (:body r) "at line 1, column 7")))
      (let [r (post-json "/" "{\"a\": [1, 2")]
        (is (= 400 (:status r)))
        (is (str/includes? (:body r) "end-of-input")))
      (is (= 400 (:status (post-json "/" "{} trailing"))))
      (is (zero? @calls) "the handler was not called")
      (let [r (post-json "/" "{\"a\":true}")]
        (is (= 200 (:status r)) "next request OK")
        (is (= "{\"ok\":{\"a\":true}}" (:body r))))
      (is (= 1 @calls))))
  (testing "on one keep-alive connection: 400, then the next request on it is served"
    (with-server (wrap-json-body (fn [req] {:status 200 :body {:got (:body req)}})) {}
      (let [bad "{\"a\":"
            good "[7]"
            resp (raw (str "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                           (count bad) "\r\n\r\n" bad
                           "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: "
                           (count good) "\r\n\r\n" good))]
        (is (str/starts-with? resp "HTTP/1.1 400"))
        (is (str/includes? resp "HTTP/1.1 200"))
        (is (str/ends-with? resp "{\"got\":[7]}")))))
  (testing ":malformed-response as a map and as a fn"
    (with-server (wrap-json-body (const {:status 200}) {:malformed-response {:status 422 :body "nope"}}) {}
      (let [r (post-json "/" "{")]
        (is (= 422 (:status r)))
        (is (= "nope" (:body r)))))
    (with-server (wrap-json-body (const {:status 200})
                                 {:malformed-response (fn [req ^JsonException e]
                                                        {:status 400 :body {:error (.getMessage e)
                                                                            :line (.line e)
                                                                            :uri (:uri req)}})}) {}
      (let [r (post-json "/x" "[1,,2]")]
        (is (= 400 (:status r)))
        (is (= {:line 1 :uri "/x"} (dissoc (read-kw (:body r)) :error)))))))

(deftest async-middleware
  (let [h (-> (fn [req respond _] (future (respond {:status 200 :body {:params (:params req)
                                                                        :json (:json-params req)}})))
              (wrap-json-params {:keywords? true})
              (wrap-json-body {:keywords? false}))]
    (with-server h {:async? true}
      (testing "wrap-json-body first replaces :body, so wrap-json-params sees a parsed body and skips"
        (let [r (post-json "/" "{\"a\":1}")]
          (is (= 200 (:status r)))
          (is (= {:params nil :json nil} (read-kw (:body r))))))
      (let [r (post-json "/" "{")]
        (is (= 400 (:status r)) "malformed JSON answered from the async arity"))))
  (let [h (wrap-json-params (fn [req respond _] (respond {:status 200 :body (:params req)})))]
    (with-server h {:async? true}
      (is (= "{\"a\":[1]}" (:body (post-json "/" "{\"a\":[1]}"))))
      (is (= 400 (:status (post-json "/" "nul")))))))

(deftest wrap-json-params-on-a-server
  (let [seen (atom nil)
        h (-> (fn [req]
                (reset! seen (assoc (select-keys req [:json-params :params])
                                    :body-again (slurp (:body req))))
                {:status 200 :body "ok"})
              wrap-json-params
              wrap-params)]
    (with-server h {}
      (post-json "/p?q=1" "{\"a\":1,\"b\":{\"c\":[true]}}")
      (is (= {:json-params {"a" 1 "b" {"c" [true]}}
              :params {"q" "1" "a" 1 "b" {"c" [true]}}
              :body-again "{\"a\":1,\"b\":{\"c\":[true]}}"}
             @seen)
          "merged into :params; the body is still readable")
      (post-json "/p?q=1" "[1,2]")
      (is (= {:params {"q" "1"} :body-again "[1,2]"} @seen) "a non-object body leaves :params alone")
      (let [r (post-json "/p" "{\"a\" 1}")]
        (is (= 400 (:status r)))
        (is (str/starts-with? (:body r) "Bad Request: malformed JSON: ")))
      (is (= 200 (:status (post-json "/p" "{}"))) "next request OK")))
  (testing ":keywords?"
    (let [seen (atom nil)]
      (with-server (wrap-json-params (fn [req] (reset! seen (:params req)) {:status 204}) {:keywords? true}) {}
        (post-json "/" "{\"a\":{\"b\":2}}")
        (is (= {:a {:b 2}} @seen))))))

(deftest wrap-json-response-on-a-server
  (testing "seq, set and list bodies become JSON (the kernel alone would stream a seq)"
    (with-server (wrap-json-response (fn [_] {:status 200 :body (map inc [1 2 3])})) {}
      (let [r (GET "/")]
        (is (= "[2,3,4]" (:body r)))
        (is (= "application/json; charset=utf-8" (header r "content-type")))
        (is (= "7" (header r "content-length"))))))
  (testing "pretty, and the handler's own content type kept"
    (with-server (wrap-json-response (const {:headers {"content-type" "application/hal+json"}
                                             :body {:a [1]}})
                                     {:pretty? true}) {}
      (let [r (GET "/")]
        (is (= "{\n  \"a\" : [ 1 ]\n}" (:body r)))
        (is (= "application/hal+json" (header r "content-type"))))))
  (testing "other bodies pass through"
    (with-server (wrap-json-response (const {:status 200 :body "plain"})) {}
      (is (= "plain" (:body (GET "/"))))))
  (testing "async arity; a body that cannot be written goes to raise (500)"
    (with-server (wrap-json-response (fn [req respond _]
                                       (respond {:body (if (= "/bad" (:uri req)) [(Object.)] #{:x})})))
      {:async? true}
      (is (= "[\"x\"]" (:body (GET "/"))))
      (is (= 500 (:status (GET "/bad"))))
      (is (= 200 (:status (GET "/"))) "still serving"))))

(deftest middleware-without-a-server
  (testing "works on plain request maps, as under any Ring server"
    (let [h (-> (fn [req] {:status 200 :body {:echo (:body req)}})
                (wrap-json-body {:keywords? true})
                wrap-json-response)
          r (h {:request-method :post :uri "/" :headers {"content-type" "application/json"}
                :body (ByteArrayInputStream. (utf8 "{\"x\":[1]}"))})]
      (is (= {:status 200 :headers {"Content-Type" "application/json; charset=utf-8"}
              :body "{\"echo\":{\"x\":[1]}}"} r)))
    (let [h (wrap-json-body (fn [req] (:body req)))]
      (is (= {"s" 1} (h {:headers {"content-type" "application/json"} :body "{\"s\":1}"}))
          "a String body is decoded too")
      (is (= 400 (:status (h {:headers {"content-type" "application/json"} :body "{"}))))))
  (testing "wrap-json-response on a response with no headers map, nil response"
    (is (= {:body "[1]" :headers {"Content-Type" "application/json; charset=utf-8"}}
           ((wrap-json-response (const {:body [1]})) {})))
    (is (nil? ((wrap-json-response (const nil)) {})))
    (is (= {:body "{}" :headers {"X" "1" "CONTENT-TYPE" "a/b"}}
           ((wrap-json-response (const {:body {} :headers {"X" "1" "CONTENT-TYPE" "a/b"}})) {}))))
  (testing ":key-fn is taken at wrap time"
    (is (= {:x 1} ((wrap-json-body :body {:key-fn keyword}) {:headers {"content-type" "application/json"}
                                                           :body "{\"x\":1}"})))))

;; ------------------------------------------------------------------------------------------
;; messages of our own, limits and hash flooding

(def ^:private internals
  #"`|StreamReadConstraints|JsonReadFeature|com\.fasterxml|(?i)jackson|Feature|java\.|\w+\(\)")

(deftest messages-name-no-parser-internals
  (doseq [[input expected]
          [[(apply str (repeat 1001 "[")) "nesting deeper than 1000 levels at line 1, column 1002"]
           [(str (apply str (repeat 1001 "{\"a\":")) "1") "nesting deeper than 1000 levels at line 1, column 5002"]
           [(str "1." (apply str (repeat 1001 "5"))) "number longer than 1000 characters at line 1, column 1004"]
           [(str "{\"" (apply str (repeat 50001 "n")) "\":1}") "name longer than 50000 characters at line 1, column 50005"]
           [(str "\"" (String. (char-array 20000001 \s)) "\"")
            "string longer than 20000000 characters at line 1, column 20000004"]
           ["[NaN]" "Non-standard token 'NaN' at line 1, column 5"]
           ["-Infinity" "Non-standard token '-Infinity' at line 1, column 10"]
           ["/* x */ 1" "Unexpected character ('/' (code 47)): maybe a (non-standard) comment? at line 1, column 1"]
           ["+1" "Unexpected character ('+' (code 43)) in numeric value: JSON spec does not allow numbers to have plus signs at line 1, column 2"]
           ["-" "Unexpected end-of-input: no digit following sign at line 1, column 2"]
           ["1e" "Unexpected end-of-input: expected a digit for number exponent at line 1, column 3"]]]
    (let [{:keys [message]} (malformed input)]
      (is (= expected message))
      (is (not (re-find internals (str message))) message)))
  (testing "a decimal whose exponent BigDecimal cannot hold is a JsonException, not a NumberFormatException"
    (doseq [s ["1e-2147483648" "1e2147483648" "[0.5e99999999999]"]]
      (let [r (try (Json/read ^String s false true) (catch Exception e e))]
        (is (instance? JsonException r) (str s " " r))
        (is (str/starts-with? (str (ex-message r)) "number out of range at line 1, column "))
        (is (= 400 (.status ^JsonException r)))))
    (is (= ##Inf (Json/read "1e2147483648" false false)) "as a double it is infinite, as before")))

(defn- obj
  "A JSON object of `names`, each with the value 1."
  ^String [names]
  (str "{" (str/join "," (map #(str "\"" % "\":1") names)) "}"))

(defn- refusal
  "[status message] of the JsonException `f` throws, or :no-exception."
  [f]
  (try (f) :no-exception (catch JsonException e [(.status e) (.getMessage e)])))

(def ^:private others (mapv #(str "field" %) (range 10)))

(deftest max-keys-default
  (testing "the default: 10,000 members pass, 10,001 are a 413"
    (let [names (map #(str "k" %) (range 10001))]
      (is (= 10000 (count (read-str (obj (butlast names)))))))
    (let [[status message] (refusal #(read-str (obj (map (fn [i] (str "k" i)) (range 10001)))))]
      (is (= 413 status))
      (is (str/starts-with? message "JSON object with more than 10000 keys at line 1, column ")))))

(deftest max-keys
  (is (= 10000 Json/DEFAULT_MAX_KEYS))
  (testing "configured, off by one; a repeated name counts each time"
    (is (= {"a" 1 "b" 2 "c" 3} (Json/readBody "{\"a\":1,\"b\":2,\"c\":3}" false false (int 3))))
    (is (= [413 "JSON object with more than 3 keys at line 1, column 20"]
           (refusal #(Json/readBody "{\"a\":1,\"b\":2,\"c\":3,\"d\":4}" false false (int 3)))))
    (is (= [413 "JSON object with more than 3 keys at line 1, column 20"]
           (refusal #(Json/readBody "{\"a\":1,\"a\":2,\"a\":3,\"a\":4}" false false (int 3))))))
  (testing "per object, not per document"
    (is (= [{"a" 1 "b" 2 "c" 3} {"d" 1 "e" 2 "f" 3}]
           (Json/readBody "[{\"a\":1,\"b\":2,\"c\":3},{\"d\":1,\"e\":2,\"f\":3}]" false false (int 3))))
    (is (= 413 (first (refusal #(Json/readBody "{\"x\":{\"a\":1,\"b\":2,\"c\":3,\"d\":4}}" true false (int 3)))))))
  (testing "a mapper's reader has the default too"
    (is (= 413 (first (refusal #(.readValue (Json/newMapper) (obj (map (fn [i] (str "k" i)) (range 10001)))
                                            Object))))))
  (is (thrown? IllegalArgumentException (Json/readBody "{}" false false (int 0)))))

(deftest colliding-keys
  (testing "up to 8 keys of one hash decode as usual, in a hash map"
    (let [names (u/colliding-names 8)
          expected (zipmap (concat names others) (repeat 1))]
      (is (= expected (read-str (obj (concat names others)))))
      (is (instance? PersistentHashMap (read-str (obj (concat names others)))))
      (is (= (update-keys expected keyword) (read-kw (obj (concat names others)))))))
  (testing "9 are a 400, in string and keyword keys"
    (is (= [400 "too many keys with colliding hashes in one JSON object at line 1, column 229"]
           (refusal #(read-str (obj (concat others (u/colliding-names 9)))))))
    (let [[status message] (refusal #(read-kw (obj (concat others (u/colliding-names 9 "qzxNotInternedObj")))))]
      (is (= 400 status))
      (is (str/starts-with? message "too many keys with colliding hashes in the JSON document")
          "as keywords, the ninth new name of one hash is refused before it is interned")))
  (testing "objects of up to 16 keys are array maps, where hashes do not matter"
    (is (= 9 (count (read-str (obj (u/colliding-names 9)))))))
  (testing "a repeated key is one key, and the last value wins past the array map's size too"
    (let [names (u/colliding-names 8)
          m (read-str (str "{" (str/join "," (map #(str "\"" % "\":1") (concat names others)))
                           (apply str (repeat 20 (str ",\"" (first names) "\":2"))) "}"))]
      (is (= 18 (count m)))
      (is (= 2 (get m (first names))))
      (is (= 1 (get m (second names)))))
    (is (= (assoc (zipmap (map #(str "k" %) (range 17)) (range 17)) "k0" "last")
           (read-str (str "{" (str/join "," (map #(str "\"k" % "\":" %) (range 17))) ",\"k0\":\"last\"}")))))
  (testing "keys whose keywords share a hash (their Strings do not): refused only as keywords"
    (let [s (obj (concat others (u/keyword-colliding-names 9)))]
      (is (= 19 (count (read-str s))))
      (is (= 400 (first (refusal #(read-kw s)))))
      (is (= 18 (count (read-kw (obj (concat others (u/keyword-colliding-names 8))))))))))

(deftest keyword-keys-spare-the-global-keyword-table
  ;; every object within the limit, but 9 new names of one hash in the document: interning them
  ;; is the quadratic part (Clojure's keyword table keeps them in one searched list)
  (let [names (u/colliding-names 9 "qzxNotInternedJson")
        doc (str "[" (str/join "," (map obj (partition-all 3 names))) "]")]
    (is (= 9 (count (mapcat keys (read-str doc)))) "as strings: fine")
    (let [[status message] (refusal #(read-kw doc))]
      (is (= 400 status))
      (is (str/starts-with? message "too many keys with colliding hashes in the JSON document at line 1, column ")))
    (is (nil? (clojure.lang.Keyword/find ^String (last names))) "the ninth name was never interned")
    (is (= 8 (count (mapcat keys (read-kw (str "[" (str/join "," (map obj (partition-all 3 (take 8 names)))) "]"))))))
    (testing "a name repeated across objects is one name"
      (is (= 20 (count (read-kw (str "[" (str/join "," (repeat 20 (obj (take 8 names)))) "]"))))))))

;; 16,000 such keys took seconds as strings and tens of seconds as keywords; now refused at once
(def ^:private flood (obj (u/colliding-names 20000)))

(deftest colliding-keys-stay-linear
  (doseq [[label f message] [["string keys" #(read-str flood) "JSON object with more than 10000 keys"]
                             ["keyword keys" #(read-kw flood) "too many keys with colliding hashes"]]]
    (let [[r ms] (u/millis (f))]
      (is (instance? JsonException r) (str label ": " (type r)))
      (is (str/starts-with? (str (ex-message r)) message) label)
      (is (< ms 2000) (str label ": " ms " ms")))))

(deftest colliding-keys-stay-linear-under-a-raised-limit
  (doseq [kw? [false true]]
    (let [[r ms] (u/millis (Json/readBody ^String flood (boolean kw?) false (int 100000)))]
      (is (instance? JsonException r) (str (type r)))
      (is (= 400 (when (instance? JsonException r) (.status ^JsonException r))))
      (is (< ms 2000) (str ms " ms")))))

(deftest limits-on-a-server
  (let [calls (atom 0)
        h (fn [req respond _] (swap! calls inc) (respond {:status 200 :body {:n (count (:body req))}}))
        flood (obj (u/colliding-names 20000))]
    (testing "a flood of colliding keys is answered at once, by the event loop's handler too"
      (with-server (wrap-json-body h) {:async? true}
        (let [[r ms] (u/millis (post-json "/" flood))]
          (is (= 413 (:status r)) (str r))
          (is (str/starts-with? (str (:body r)) "Payload Too Large: JSON object with more than 10000 keys at line 1, column "))
          (is (< ms 2000) (str ms " ms"))))
      (with-server (wrap-json-body h {:max-keys 100000}) {:async? true}
        (let [[r ms] (u/millis (post-json "/" flood))]
          (is (= 400 (:status r)) (str r))
          (is (str/starts-with? (str (:body r)) "Bad Request: malformed JSON: too many keys with colliding hashes in one JSON object at line 1, column "))
          (is (< ms 2000) (str ms " ms"))))
      (with-server (wrap-json-body h {:keywords? true}) {:async? true}
        (let [[r ms] (u/millis (post-json "/" flood))]
          (is (= 400 (:status r)) (str r))
          (is (< ms 2000) (str ms " ms"))))
      (is (zero? @calls)))
    (testing ":max-keys, off by one, on wrap-json-params"
      (with-server (wrap-json-params (fn [req] {:status 200 :body {:p (:json-params req)}}) {:max-keys 2}) {}
        (is (= 200 (:status (post-json "/" "{\"a\":1,\"b\":2}"))))
        (is (= {:status 413 :body "Payload Too Large: JSON object with more than 2 keys at line 1, column 14"}
               (select-keys (post-json "/" "{\"a\":1,\"b\":2,\"c\":3}") [:status :body])))))
    (testing "the parser's limits and a decimal out of range: 400s in our words"
      (with-server (wrap-json-body (fn [req] {:status 200 :body {:got (str (:body req))}}) {:bigdecimals? true}) {}
        (is (= {:status 400 :body "Bad Request: malformed JSON: nesting deeper than 1000 levels at line 1, column 1002"}
               (select-keys (post-json "/" (apply str (repeat 1001 "["))) [:status :body])))
        (is (= {:status 400 :body "Bad Request: malformed JSON: number out of range at line 1, column 2"}
               (select-keys (post-json "/" "[1e-2147483648]") [:status :body])))))
    (testing ":malformed-response gets the status"
      (with-server (wrap-json-body (const {:status 200})
                                   {:max-keys 1
                                    :malformed-response (fn [_ ^JsonException e] {:status 422 :body (str (.status e))})}) {}
        (is (= "413" (:body (post-json "/" "{\"a\":1,\"b\":2}"))))
        (is (= "400" (:body (post-json "/" "{\"a\":")))))))
  (testing ":max-keys is validated when the middleware is built"
    (doseq [bad [0 -3 "5" 2.5 (inc Integer/MAX_VALUE)]]
      (is (thrown-with-msg? IllegalArgumentException #":max-keys must be a positive integer"
                            (wrap-json-body identity {:max-keys bad}))
          (pr-str bad)))
    (is (fn? (wrap-json-params identity {:max-keys 1})))))

;; ------------------------------------------------------------------------------------------
;; ring-json's options: :key-fn in all three directions, every other one honoured or refused

(defn- json-req
  "A JSON request map whose body is `body` as a stream, as a server gives it."
  [^String body]
  {:request-method :post :uri "/" :headers {"content-type" "application/json"}
   :body (ByteArrayInputStream. (utf8 body))})

(defn- body-of [opts ^String json] (:body (mj/json-body-request (json-req json) opts)))

(defn- thrown
  "What `(f)` throws, or :no-exception."
  [f]
  (try (f) :no-exception (catch Throwable t t)))

(deftest key-fn-reading
  (testing "json-body-request: every object key, nested ones too, is what :key-fn returns"
    (is (= {"A" {"B" 1} "C" [{"D" 2}]}
           (body-of {:key-fn str/upper-case} "{\"a\":{\"b\":1},\"C\":[{\"d\":2}]}")))
    (is (= ["v" 1] (body-of {:key-fn str/upper-case} "[\"v\",1]")) "values are left alone"))
  (testing ":key-fn wins over :keywords?, as in ring-json"
    (is (= {"A" 1} (body-of {:key-fn str/upper-case :keywords? true} "{\"a\":1}"))))
  (testing "`keyword` as :key-fn gives :keywords? true's keys"
    (is (= {:a {:ns/b 1}} (body-of {:key-fn keyword} "{\"a\":{\"ns/b\":1}}"))))
  (testing "keys of any class, nil among them"
    (is (= {1 "x" 2 "y"} (body-of {:key-fn parse-long} "{\"1\":\"x\",\"2\":\"y\"}")))
    (is (= {nil 2} (body-of {:key-fn (constantly nil)} "{\"a\":1,\"b\":2}"))))
  (testing "names it maps to one key are a repeated key: the last value wins, in maps of any size"
    (is (= {"a" 2} (body-of {:key-fn str/lower-case} "{\"a\":1,\"A\":2}")))
    (is (= {1 2} (body-of {:key-fn #(if (= "i" %) (int 1) 1)} "{\"i\":1,\"l\":2}"))
        "keys equal as a Clojure map compares them (Integer 1 and Long 1) are one key")
    (let [json (str "{" (str/join "," (map #(str "\"k" % "\":" %) (range 30))) ",\"K0\":\"last\"}")
          m (body-of {:key-fn #(when-not (= "k3" %) (str/lower-case %))} json)]
      (is (= 30 (count m)))
      (is (= "last" (get m "k0")))
      (is (= 3 (get m nil)))
      (is (instance? PersistentHashMap m))))
  (testing "json-params-request: the keys of :json-params and of what it merges into :params"
    (let [r (mj/json-params-request (assoc (json-req "{\"a\":{\"b\":1}}") :params {"q" "1"})
                                    {:key-fn #(keyword "p" %)})]
      (is (= {:p/a {:p/b 1}} (:json-params r)))
      (is (= {"q" "1" :p/a {:p/b 1}} (:params r))))))

(deftest codec-key-functions
  (testing "Json/readBody with a key fn: keywordKeys is ignored"
    (is (= {"A" [{"B" 1}]} (Json/readBody "{\"a\":[{\"b\":1}]}" true false (int 10) ^clojure.lang.IFn str/upper-case)))
    (is (= {"a" 1} (Json/readBody "{\"a\":1}" false false (int 10) nil)) "nil: as without one")
    (is (nil? (Json/readBody "" false false (int 10) ^clojure.lang.IFn str/upper-case))))
  (testing "Json/writer: the options together, and the shared writers"
    (is (= "{\"A\":\"\\u00E9\"}"
           (.writeString (Json/writer nil true nil ^clojure.lang.IFn #(str/upper-case (name %))) {:a "é"})))
    (is (identical? (Json/writer true false) (Json/writer true false)))
    (is (= (Json/writeString {:a [1]} true false) (.writeString (Json/writer true false) {:a [1]})))
    (let [out (java.io.ByteArrayOutputStream.)]
      (.writeTo (Json/writer false false) [1 {:a "é"}] out)
      (is (= "[1,{\"a\":\"é\"}]" (.toString out "UTF-8"))))
    (is (thrown? IllegalArgumentException (.writeString (Json/writer false false) [(Object.)]))
        "an unwritable value, as before")))

(deftest key-fn-keeps-the-limits
  (testing ":max-keys counts the members, whatever keys :key-fn makes of them"
    (let [e (thrown #(body-of {:max-keys 2 :key-fn (constantly :same)} "{\"a\":1,\"b\":2,\"c\":3}"))]
      (is (= 413 (:status (ex-data e))))
      (is (= "Payload Too Large: JSON object with more than 2 keys at line 1, column 14" (ex-message e)))))
  (testing "keys it makes that share a hash are refused, though the names do not share one"
    (let [names (mapv #(str "name" %) (range 20))
          to-colliding (fn [n] (zipmap (take n names) (u/colliding-names n)))
          json (obj names)
          e (thrown #(body-of {:key-fn (let [m (to-colliding 9)] (fn [s] (get m s s)))} json))]
      (is (= 400 (:status (ex-data e))))
      (is (str/starts-with? (ex-message e) "Bad Request: malformed JSON: too many keys with colliding hashes in one JSON object"))
      (is (= 20 (count (body-of {:key-fn (let [m (to-colliding 8)] (fn [s] (get m s s)))} json)))
          "8 of one hash are fine")))
  (testing "keywords it makes: at most 8 of one hash in a document of small objects"
    (let [names (u/colliding-names 9 "qzxKeyFnNotInterned")
          calls (atom 0)
          key-fn (fn [s] (swap! calls inc) (keyword s))
          doc (str "[" (str/join "," (map obj (partition-all 3 names))) "]")
          e (thrown #(body-of {:key-fn key-fn} doc))]
      (is (= 400 (:status (ex-data e))))
      (is (str/starts-with? (ex-message e) "Bad Request: malformed JSON: too many keys with colliding hashes in the JSON document"))
      (is (= 9 @calls) "refused at the ninth, before any further name reaches the key fn")
      (is (= 160 (count (mapcat keys (body-of {:key-fn key-fn}
                                              (str "[" (str/join "," (repeat 20 (obj (take 8 names)))) "]")))))
          "a keyword repeated across objects is one keyword")))
  (testing "a flood of colliding names is refused at once, as without :key-fn"
    (doseq [[label key-fn] [["string keys" #(str "s" %)] ["keyword keys" #(keyword "flood" %)]]]
      (let [[r ms] (u/millis (mj/json-body-request (json-req flood) {:key-fn key-fn :max-keys 100000}))]
        (is (= 400 (:status (ex-data r))) label)
        (is (< ms 2000) (str label ": " ms " ms"))))))

(deftest key-fn-exceptions-propagate
  (testing "direct calls: the key fn's own exception, unchanged, not a bad-input one"
    (let [boom (ex-info "boom" {:mine true})
          key-fn (fn [_] (throw boom))]
      (is (identical? boom (thrown #(body-of {:key-fn key-fn} "{\"a\":1}"))))
      (is (identical? boom (thrown #(mj/json-params-request (json-req "{\"a\":1}") {:key-fn key-fn}))))
      (is (identical? boom (thrown #(mj/json-response {:body {:a 1}} {:key-fn key-fn}))))
      (is (identical? boom (thrown #(mj/json-response {:body [{:a 1}]} {:key-fn key-fn}))) "nested")
      (is (identical? boom (thrown #((wrap-json-body identity {:key-fn key-fn}) (json-req "{\"a\":1}"))))
          "the middleware does not take it for bad input")))
  (testing "a checked exception too, not taken for the parser's I/O or a malformed body"
    (let [io (java.io.IOException. "mine")]
      (is (identical? io (thrown #(body-of {:key-fn (fn [_] (throw io))} "{\"a\":1}"))))
      (is (identical? io (thrown #(mj/json-response {:body {:a 1}} {:key-fn (fn [_] (throw io))}))))))
  (testing "on a server: a 500, sync and async, the handler not called, the server still serving"
    (let [calls (atom 0)
          key-fn (fn [k] (if (= "bad" (name k)) (throw (ex-info "boom" {})) (name k)))]
      (doseq [[opts h] [[{} (fn [req] (swap! calls inc) {:status 200 :body (:body req)})]
                        [{:async? true} (fn [req respond _] (swap! calls inc) (respond {:status 200 :body (:body req)}))]]]
        (with-server (wrap-json-body h {:key-fn key-fn}) opts
          (is (= 500 (:status (post-json "/" "{\"bad\":1}"))) (pr-str opts))
          (is (= {:status 200 :body "{\"ok\":1}"} (select-keys (post-json "/" "{\"ok\":1}") [:status :body]))))
        (with-server (wrap-json-params h {:key-fn key-fn}) opts
          (is (= 500 (:status (post-json "/" "{\"bad\":1}"))) (pr-str opts)))
        (with-server (wrap-json-response (if (:async? opts)
                                           (fn [req respond _] (respond {:body (list {(keyword (subs (:uri req) 1)) 1})}))
                                           (fn [req] {:body (list {(keyword (subs (:uri req) 1)) 1})}))
                                         {:key-fn key-fn}) opts
          (is (= 500 (:status (GET "/bad"))) (pr-str opts))
          (is (= "[{\"ok\":1}]" (:body (GET "/ok"))))))
      (is (= 2 @calls) "only the good requests reached the handler"))))

(deftest key-fn-on-a-server
  (let [seen (atom nil)
        h (fn [req] (reset! seen (select-keys req [:body :json-params :params])) {:status 204})]
    (testing "wrap-json-body, sync and async"
      (with-server (wrap-json-body h {:key-fn str/upper-case}) {}
        (post-json "/" "{\"a\":{\"b\":[{\"c\":1}]}}")
        (is (= {"A" {"B" [{"C" 1}]}} (:body @seen))))
      (with-server (wrap-json-body (fn [req respond _] (respond (h req))) {:key-fn str/upper-case}) {:async? true}
        (post-json "/" "{\"x\":1}")
        (is (= {"X" 1} (:body @seen)))))
    (testing "wrap-json-params"
      (with-server (wrap-json-params h {:key-fn #(keyword "j" %)}) {}
        (post-json "/" "{\"a\":1}")
        (is (= {:j/a 1} (:json-params @seen)))
        (is (= {:j/a 1} (:params @seen))))))
  (testing "wrap-json-response, sync and async: keyword keys named by :key-fn"
    (let [body {:user-id 1 "as-is" 2 :nested [{:first-name "Zoë"}] :tags #{:x}}
          camel (fn [k] (str/replace (name k) #"-(\w)" #(str/upper-case (second %))))]
      (with-server (wrap-json-response (const {:body body}) {:key-fn camel}) {}
        (is (= {"userId" 1 "as-is" 2 "nested" [{"firstName" "Zoë"}] "tags" ["x"]} (read-str (:body (GET "/"))))))
      (with-server (wrap-json-response (fn [_ respond _] (respond {:body (list body)})) {:key-fn camel}) {:async? true}
        (is (= [{"userId" 1 "as-is" 2 "nested" [{"firstName" "Zoë"}] "tags" ["x"]}] (read-str (:body (GET "/")))))))))

(deftest key-fn-writing
  (let [write-kf (fn [body key-fn] (:body (mj/json-response {:body body} {:key-fn key-fn})))]
    (testing "called with each keyword key, at any depth; other keys written as without it, as cheshire"
      (is (= "{\"A\":{\"B\":1},\"c\":2,\"D\":[{\"E\":1}]}"
             (write-kf (array-map :a {:b 1} "c" 2 :ns/d [{:e 1}]) #(str/upper-case (name %)))))
      (is (= "{\"s\":1,\"1\":2,\"\":3}" (write-kf (array-map 's 1 1 2 nil 3) (constantly "K")))))
    (testing "sets, seqs, lists, records, Java maps and collections"
      (is (= "[{\"K\":1}]" (write-kf #{{:a 1}} (constantly "K"))))
      (is (= "[{\"K\":1},[{\"K\":2}]]" (write-kf (list {:a 1} (map identity [{:b 2}])) (constantly "K"))))
      (is (= "{\"x!\":1,\"y!\":2}" (write-kf (->Point 1 2) #(str (name %) "!"))))
      (is (= "[{\"k!\":[{\"j!\":1}]}]" (write-kf [(doto (HashMap.) (.put :k (ArrayList. [{:j 1}])))] #(str (name %) "!")))))
    (testing "a result that is not a String is written as a key is"
      (is (= "{\"x/a\":1}" (write-kf {:a 1} #(keyword "x" (name %)))))
      (is (= "{\"7\":1}" (write-kf {:a 1} (constantly 7)))))
    (testing "with the other options"
      (is (= "{\n  \"A\" : \"\\u00E9\"\n}"
             (:body (mj/json-response {:body {:a "é"}} {:key-fn #(str/upper-case (name %)) :pretty true
                                                        :escape-non-ascii true})))))
    (testing "without :key-fn, keys are written as before"
      (is (= "{\"a\":{\"ns/b\":1}}" (:body (mj/json-response {:body {:a {:ns/b 1}}})))))))

(defn- stream-body
  "What a JsonStreamBody (or any StreamableResponseBody) writes, as a String."
  [response]
  (require 'ring.core.protocols)
  (let [out (java.io.ByteArrayOutputStream.)]
    ((resolve 'ring.core.protocols/write-body-to-stream) (:body response) response out)
    (.toString out "UTF-8")))

(deftest writing-options
  (testing ":pretty and :pretty?: Jackson's default pretty printer, as cheshire's"
    (doseq [k [:pretty :pretty?]]
      (is (= "{\n  \"a\" : [ 1, 2 ],\n  \"b\" : {\n    \"c\" : 1\n  }\n}"
             (:body (mj/json-response {:body (array-map :a [1 2] :b {:c 1})} {k true}))))))
  (testing ":pretty as a PrettyPrinter, as cheshire takes one"
    (let [pp (doto (com.fasterxml.jackson.core.util.DefaultPrettyPrinter.)
               (.indentObjectsWith (com.fasterxml.jackson.core.util.DefaultIndenter. "\t" "\n")))]
      (is (= "{\n\t\"a\" : {\n\t\t\"b\" : 1\n\t}\n}" (:body (mj/json-response {:body {:a {:b 1}}} {:pretty pp}))))))
  (testing ":escape-non-ascii and :escape-non-ascii?"
    (doseq [k [:escape-non-ascii :escape-non-ascii?]]
      (is (= "[\"\\u00E9\"]" (:body (mj/json-response {:body ["é"]} {k true}))))))
  (testing ":date-format: java.util.Date in that pattern, in UTC, as cheshire"
    (is (= "{\"d\":\"1970-01-01T00:00:00Z\"}"
           (:body (mj/json-response {:body {:d (java.util.Date. 0)}} {:date-format "yyyy-MM-dd'T'HH:mm:ss'Z'"}))))
    (is (= "[\"1970/01/02\"]" (:body (mj/json-response {:body [(java.util.Date. 86400000)]} {:date-format "yyyy/MM/dd"}))))
    (is (= "[\"1970-01-01T00:00:00.000+00:00\"]" (:body (mj/json-response {:body [(java.util.Date. 0)]})))
        "without it, as the kernel writes a Date"))
  (testing ":stream?: a body that writes itself through ring-core's StreamableResponseBody"
    (let [r (mj/json-response {:body (list {:a "é"})} {:stream? true :key-fn #(str (name %) "!") :pretty true})]
      (require 'ring.core.protocols)
      (is (satisfies? @(resolve 'ring.core.protocols/StreamableResponseBody) (:body r)))
      (is (not (string? (:body r))))
      (is (= "application/json; charset=utf-8" (get-in r [:headers "Content-Type"])))
      (is (= "[ {\n  \"a!\" : \"é\"\n} ]" (stream-body r))))
    (is (= {:body "x"} (mj/json-response {:body "x"} {:stream? true})) "other bodies pass through"))
  (testing ":stream? on a server, sync and async, small and several chunks long"
    (let [big (vec (for [i (range 5000)] {:i i :s (str "item-" i)}))]
      (with-server (wrap-json-response (fn [req] {:status 200 :body (if (= "/big" (:uri req)) big (list 1 2))})
                                       {:stream? true}) {}
        (let [r (GET "/")]
          (is (= "[1,2]" (:body r)))
          (is (= "application/json; charset=utf-8" (header r "content-type"))))
        (is (= big (read-kw (:body (GET "/big"))))))
      (with-server (wrap-json-response (fn [_ respond _] (respond {:body #{:x}})) {:stream? true}) {:async? true}
        (is (= "[\"x\"]" (:body (GET "/")))))))
  (testing ":stream?, failing while it is written: a 500 while nothing has been sent, else cut short"
    (let [key-fn (fn [k] (if (= :bad k) (throw (ex-info "boom" {})) (name k)))
          big (conj (vec (for [i (range 5000)] {:i i})) {:bad 1})
          h (fn [req] {:body (if (= "/big" (:uri req)) big [{:bad 1}])})]
      (doseq [[opts h] [[{} h] [{:async? true} (fn [req respond _] (respond (h req)))]]]
        (with-server (wrap-json-response h {:stream? true :key-fn key-fn}) opts
          (is (str/starts-with? (raw "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                                "HTTP/1.1 500 ")
              (str "nothing of the document was flushed " opts))
          (let [resp (raw "GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")]
            (is (str/starts-with? resp "HTTP/1.1 200 ") (str "a long document was under way " opts))
            (is (not (str/ends-with? resp "\r\n0\r\n\r\n")) "not ended as if complete")))))))

(deftest every-ring-json-option-is-honoured-or-refused
  (let [decode (fn [wrap opts json]
                 (let [seen (atom nil)
                       r ((wrap (fn [req] (reset! seen req) {:status 200}) opts) (json-req json))]
                   (if (= wrap wrap-json-params) (or (:json-params @seen) r) (or (:body @seen) r))))]
    (doseq [wrap [wrap-json-body wrap-json-params]]
      (testing (str wrap)
        (is (= {:a 1} (decode wrap {:keywords? true} "{\"a\":1}")) ":keywords?")
        (is (= {"a" 1.5M} (decode wrap {:bigdecimals? true} "{\"a\":1.5}")) ":bigdecimals?")
        (is (= {"A" 1} (decode wrap {:key-fn str/upper-case} "{\"a\":1}")) ":key-fn")
        (is (= {:status 422} (decode wrap {:malformed-response {:status 422}} "{")) ":malformed-response"))))
  (testing "the writing options change the output (each one checked above)"
    (doseq [opts [{:pretty true} {:escape-non-ascii true} {:key-fn (constantly "K")}
                  {:date-format "yyyy"}]]
      (is (not= (:body (mj/json-response {:body {:a ["é" (java.util.Date. 0)]}}))
                (:body (mj/json-response {:body {:a ["é" (java.util.Date. 0)]}} opts)))
          (pr-str opts))))
  (testing "refused when built, naming the function and the option"
    (doseq [[f opts option] [[#(mj/json-response {:body {}} %) {:ex (Exception. "x")} ":ex"]
                             [#(wrap-json-response identity %) {:ex (Exception. "x")} ":ex"]
                             [#(wrap-json-response identity %) {:pretty {:indentation 4}} ":pretty"]
                             [#(wrap-json-response identity %) {:pretty "yes"} ":pretty"]
                             [#(wrap-json-response identity %)
                              {:pretty (proxy [com.fasterxml.jackson.core.util.DefaultPrettyPrinter] [])}
                              ":pretty"]
                             [#(wrap-json-response identity %) {:date-format "qqq"} ":date-format"]
                             [#(wrap-json-response identity %) {:date-format 5} ":date-format"]
                             [#(wrap-json-response identity %) {:key-fn "x"} ":key-fn"]
                             [#(wrap-json-body identity %) {:key-fn true} ":key-fn"]
                             [#(wrap-json-params identity %) {:key-fn 5} ":key-fn"]
                             [#(mj/json-body-request (json-req "{}") %) {:key-fn true} ":key-fn"]
                             [#(mj/json-params-request (json-req "{}") %) {:key-fn "x"} ":key-fn"]]]
      (let [e (thrown #(f opts))
            fname (re-find #"donkey\.middleware\.json/[\w-]+" (str (ex-message e)))]
        (is (instance? IllegalArgumentException e) (pr-str opts))
        (is (some? fname) (ex-message e))
        (is (str/includes? (str (ex-message e)) option) (ex-message e))))
    (is (str/includes? (ex-message (thrown #(wrap-json-body identity {:key-fn true}))) "use :keywords? true")
        "true for keyword keys, as cheshire takes it, gets the option that does that")))

(deftest request-charset-is-not-used
  (testing "a Latin-1 body labelled as such is still read as UTF-8 (RFC 8259), so it is malformed"
    (let [h (wrap-json-body (fn [req] {:status 200 :body {:got (:body req)}}))
          r (h {:headers {"content-type" "application/json; charset=ISO-8859-1"}
                :body (ByteArrayInputStream. (.getBytes "{\"a\":\"é\"}" StandardCharsets/ISO_8859_1))})]
      (is (= 400 (:status r)))
      (is (str/starts-with? (:body r) "Bad Request: malformed JSON: ")))
    (is (= {"a" "é"} ((wrap-json-body :body) {:headers {"content-type" "application/json; charset=ISO-8859-1"}
                                               :body (ByteArrayInputStream. (utf8 "{\"a\":\"é\"}"))})))))
