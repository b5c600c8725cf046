(ns donkey.multipart-test
  "donkey.codec.Multipart (the kernel's streaming multipart/form-data parser) and
  donkey.middleware.multipart/wrap-multipart-params, unit-tested and on real servers, compared
  with ring-core 1.8.2's own wrap-multipart-params."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.middleware.errors :as errors]
            [donkey.middleware.multipart :as mp]
            [donkey.test-util :as u :refer [with-server request]]
            [ring.middleware.multipart-params :as ring-mp]
            [ring.middleware.multipart-params.byte-array :as ring-ba])
  (:import (clojure.lang ExceptionInfo)
           (donkey.codec Multipart MultipartException MultipartResult)
           (java.io ByteArrayInputStream ByteArrayOutputStream File InputStream IOException)
           (java.nio.charset Charset StandardCharsets)
           (java.nio.file Files)
           (java.nio.file.attribute FileAttribute)
           (java.util Arrays Random)))

(set! *warn-on-reflection* true)

;; ---------------------------------------------------------------------------------------------
;; helpers

(def boundary "----donkeyTestBoundary7MA4YWxkTrZu0gW")

(defn- ->bytes ^bytes [x]
  (cond (bytes? x) x
        (string? x) (.getBytes ^String x StandardCharsets/UTF_8)
        :else (throw (IllegalArgumentException. (str "not bytes: " (pr-str x))))))

(defn- concat-bytes ^bytes [& xs]
  (let [out (ByteArrayOutputStream.)]
    (doseq [x xs] (let [b (->bytes x)] (.write out b 0 (alength b))))
    (.toByteArray out)))

(defn- part
  "One encapsulation: `--boundary CRLF headers CRLF CRLF content CRLF`. `headers` are raw lines."
  [{:keys [name filename content-type headers content] :or {content ""}} & [b]]
  (let [b (or b boundary)
        disp (cond-> (str "Content-Disposition: form-data; name=\"" name "\"")
               filename (str "; filename=\"" filename "\""))
        lines (or headers (cond-> [disp] content-type (conj (str "Content-Type: " content-type))))]
    (concat-bytes "--" b "\r\n" (str/join (map #(str % "\r\n") lines)) "\r\n" content "\r\n")))

(defn- body
  "A whole multipart body of `parts` (maps for `part`), with the close delimiter."
  ^bytes [parts & [{:keys [b preamble epilogue] :or {preamble "" epilogue ""}}]]
  (let [b (or b boundary)]
    (apply concat-bytes preamble (concat (map #(part % b) parts) [(str "--" b "--\r\n") epilogue]))))

(defn- temp-dir
  "A fresh directory for temp files, so a test can see exactly what was left behind. Removed at
  exit (it is empty by then, or a test failed)."
  ^File []
  (doto (.toFile (Files/createTempDirectory "donkey-mp-test" (make-array FileAttribute 0)))
    (.deleteOnExit)))

(defn- files-in [^File dir] (vec (.listFiles dir)))

(defn- parser
  ^Multipart [& [{:keys [encoding fallback max-file max-field max-request max-parts keywords? dir]
                  :or {max-file 1e8 max-field 1e6 max-request 2e8 max-parts 1000 keywords? false}}]]
  (Multipart. (some-> encoding Charset/forName) (some-> fallback Charset/forName)
              (long max-file) (long max-field) (long max-request) (int max-parts)
              (boolean keywords?) ^File dir))

(defn- trickle
  "An InputStream over `b` that hands out 1..max-chunk bytes per read (random sizes)."
  ^InputStream [^bytes b max-chunk]
  (let [rnd (Random. 42)
        src (ByteArrayInputStream. b)]
    (proxy [InputStream] []
      (read
        ([] (.read src))
        ([buf off len]
         (.read src ^bytes buf (int off) (int (min (long len) (inc (.nextInt rnd (int max-chunk)))))))))))

(defn- eventually
  "True once (pred) is, polling for up to 2 s."
  [pred]
  (loop [i 0]
    (cond (pred) true
          (> i 200) false
          :else (do (Thread/sleep 10) (recur (inc i))))))

(defn- parse-bytes
  "Parses `b` with the given parser options; returns the MultipartResult."
  ^MultipartResult [^bytes b & [opts]]
  (.parseBody (parser opts) (if-let [c (:chunk opts)] (trickle b c) (ByteArrayInputStream. b))
              ^String (or (:boundary opts) boundary) StandardCharsets/UTF_8))

(defn- file-bytes ^bytes [m] (Files/readAllBytes (.toPath ^File (:tempfile m))))

(defn- readable
  "The params with each file map's :tempfile replaced by its content as a String (one char a
  byte, ISO-8859-1, so binary content compares exactly)."
  [params]
  (let [f (fn [v] (if (map? v) (-> v (assoc :content (String. (file-bytes v) StandardCharsets/ISO_8859_1))
                                   (dissoc :tempfile))
                      v))]
    (into {} (map (fn [[k v]] [k (if (vector? v) (mapv f v) (f v))])) params)))

(defn- refused
  "Parses `b` expecting a MultipartException; returns [status message] (nil if none thrown)."
  [b & [opts]]
  (try (let [r (parse-bytes b opts)] (.deleteTempFiles r) nil)
       (catch MultipartException e [(.status e) (.getMessage e)])))

;; ---------------------------------------------------------------------------------------------
;; the parser

(deftest fields
  (let [r (parse-bytes (body [{:name "a" :content "1"} {:name "b" :content "two words"}
                              {:name "empty" :content ""}]))]
    (is (= {"a" "1" "b" "two words" "empty" ""} (.params r)))
    (is (empty? (.tempFiles r)))))

(deftest a-file-part
  (let [dir (temp-dir)
        r (parse-bytes (body [{:name "title" :content "t"}
                              {:name "up" :filename "notes.txt" :content-type "text/plain"
                               :content "line one\nline two\n"}])
                       {:dir dir})
        up (get (.params r) "up")
        ^File f (:tempfile up)]
    (is (= #{:filename :content-type :tempfile :size} (set (keys up))))
    (is (= "notes.txt" (:filename up)))
    (is (= "text/plain" (:content-type up)))
    (is (= 18 (:size up)))
    (is (instance? Long (:size up)))
    (is (= "line one\nline two\n" (slurp f)))
    (is (str/starts-with? (.getName f) "donkey-multipart-"))
    (is (= dir (.getParentFile f)))
    (is (= [f] (vec (.tempFiles r))))
    (is (.isTempFile r f))
    (.close r)
    (is (not (.exists f)) "close deletes the temp files")
    (.deleteTempFiles r)
    (is (empty? (files-in dir)) "deleting twice is harmless")))

(deftest repeated-names-become-vectors
  (let [r (parse-bytes (body [{:name "x" :content "1"} {:name "y" :content "only"}
                              {:name "x" :content "2"} {:name "x" :content "3"}
                              {:name "f" :filename "a.txt" :content "A"}
                              {:name "f" :filename "b.txt" :content "BB"}]))
        p (.params r)]
    (is (= ["1" "2" "3"] (get p "x")))
    (is (= "only" (get p "y")))
    (is (vector? (get p "f")))
    (is (= [["a.txt" "A" 1] ["b.txt" "BB" 2]]
           (map (juxt :filename #(String. (file-bytes %) StandardCharsets/UTF_8) :size) (get p "f"))))
    (.deleteTempFiles r)))

(deftest many-names-make-a-hash-map
  (let [r (parse-bytes (body (for [i (range 40)] {:name (str "k" i) :content (str i)})))]
    (is (= (into {} (for [i (range 40)] [(str "k" i) (str i)])) (.params r)))))

(defn- index-of
  "The index of `needle` in `hay`, or -1."
  ^long [^bytes hay ^bytes needle]
  (let [n (alength needle)]
    (loop [i 0]
      (cond (> (+ i n) (alength hay)) -1
            (Arrays/equals hay i (+ i n) needle 0 n) i
            :else (recur (inc i))))))

(defn- tricky-content
  "Random bytes of length n with boundary look-alikes planted in them, ending with `tail`;
  any accidental occurrence of the real delimiter is broken up."
  ^bytes [n seed ^String tail]
  (let [rnd (Random. seed)
        b (byte-array n)
        traps [(str "\r\n--" (subs boundary 0 (dec (count boundary))))
               (str "--" boundary)
               (str "\r\n-" boundary)
               (str "\n--" boundary "\r\n")
               "\r\n--" "\r\n" "\r\r\n\r\n--"]]
    (.nextBytes rnd b)
    (dotimes [_ (quot n 500)]
      (let [^String t (nth traps (.nextInt rnd (count traps)))
            at (.nextInt rnd (max 1 (- n (count t))))]
        (when (< (+ at (count t)) n)
          (System/arraycopy (.getBytes t StandardCharsets/ISO_8859_1) 0 b at (count t)))))
    (let [out (concat-bytes b tail)
          delim (->bytes (str "\r\n--" boundary))]
      (loop []
        (let [i (index-of out delim)]
          (when (>= i 0) (aset-byte out i (byte 88)) (recur))))
      out)))

(deftest binary-content-with-crlf-and-boundary-look-alikes
  (doseq [n [0 1 2 100 65000 65530 65536 65540 70000 131072 300001]
          tail ["" "\r\n" "\r" "\r\n--" (str "\r\n--" (subs boundary 0 10))]
          chunk [nil 7 4096]]
    (let [content (tricky-content n n tail)
          r (parse-bytes (body [{:name "bin" :filename "b.bin" :content-type "application/octet-stream"
                                 :content content}
                                {:name "after" :content "ok"}])
                         {:chunk chunk})
          up (get (.params r) "bin")]
      (is (Arrays/equals content (file-bytes up)) (str "content survives, n=" n " tail=" (pr-str tail)
                                                       " chunk=" chunk))
      (is (= (alength content) (:size up)))
      (is (= "ok" (get (.params r) "after")))
      (.deleteTempFiles r))))

(deftest binary-field-content
  (let [content (tricky-content 5000 1 "\r\n")
        r (parse-bytes (body [{:name "raw" :content content}]) {:encoding "ISO-8859-1"})]
    (is (Arrays/equals content (.getBytes ^String (get (.params r) "raw") StandardCharsets/ISO_8859_1)))))

(deftest empty-file
  (let [r (parse-bytes (body [{:name "f" :filename "" :content-type "application/octet-stream"}
                              {:name "g" :filename "empty.txt"}]))
        {:strs [f g]} (.params r)]
    (is (= {:filename "" :content-type "application/octet-stream" :size 0} (dissoc f :tempfile)))
    (is (= 0 (.length ^File (:tempfile f))))
    (is (= {:filename "empty.txt" :content-type nil :size 0} (dissoc g :tempfile))
        "no Content-Type header: nil, as Ring")
    (is (= 2 (count (.tempFiles r))))
    (.deleteTempFiles r)))

(deftest preamble-and-epilogue-are-ignored
  (let [b (body [{:name "a" :content "1"}]
                {:preamble (str "This is the preamble.\r\n--" (subs boundary 0 20) "\r\n")
                 :epilogue (str "This is the epilogue.\r\n--" boundary "\r\ngarbage")})]
    (is (= {"a" "1"} (.params (parse-bytes b)))))
  (testing "the first boundary right at the start, and no CRLF after the close delimiter"
    (is (= {"a" "1"} (.params (parse-bytes (concat-bytes "--" boundary "\r\n"
                                                         "Content-Disposition: form-data; name=a\r\n\r\n"
                                                         "1\r\n--" boundary "--"))))))
  (testing "transport padding after a boundary"
    (is (= {"a" "1"} (.params (parse-bytes (concat-bytes "--" boundary " \t \r\n"
                                                         "Content-Disposition: form-data; name=a\r\n\r\n"
                                                         "1\r\n--" boundary "--")))))))

(deftest quoted-and-odd-parameters
  (let [hdr (fn [& lines] {:headers (vec lines) :content "v"})
        params #(.params (parse-bytes (body %)))]
    (is (= {"a\"b" "v"} (params [(hdr "Content-Disposition: form-data; name=\"a\\\"b\"")]))
        "quoted pair \\\" unescaped")
    (is (= {"semi;colon" "v"} (params [(hdr "Content-Disposition: form-data; name=\"semi;colon\"")])))
    (is (= {"tok" "v"} (params [(hdr "content-disposition: FORM-DATA ;  NAME = tok ;; ")]))
        "case-insensitive names, unquoted token, spaces, empty parameters")
    (is (= {"first" "v"} (params [(hdr "Content-Disposition: form-data; name=first; name=second")]))
        "first of a repeated parameter wins")
    (is (= {"x" "v"} (params [(hdr "Content-Disposition: form-data;" "  name=\"x\"")]))
        "folded header line")
    (let [r (parse-bytes (body [(hdr "Content-Disposition: form-data; name=\"f\"; filename=\"C:\\dir\\a.txt\"")
                                (hdr "Content-Disposition: form-data; name=\"g\"; filename=\"x.txt\"; filename*=UTF-8''%E2%82%AC%20rates.txt")
                                (hdr "Content-Disposition: form-data; name=\"h\"; filename*=iso-8859-1'en'%E9t%E9.txt")
                                (hdr "Content-Disposition: form-data; name=\"i\"; filename=\"caf\u00e9 \u2603.txt\""
                                     "Content-Type: image/png; foo=bar")]))
          p (.params r)]
      (is (= "C:\\dir\\a.txt" (:filename (get p "f"))) "other backslashes kept (old IE paths)")
      (is (= "\u20ac rates.txt" (:filename (get p "g"))) "filename* preferred")
      (is (= "\u00e9t\u00e9.txt" (:filename (get p "h"))))
      (is (= "caf\u00e9 \u2603.txt" (:filename (get p "i"))) "raw UTF-8 filename")
      (is (= "image/png; foo=bar" (:content-type (get p "i"))))
      (.deleteTempFiles r))))

(deftest charsets
  (let [latin1 (.getBytes "d\u00e9j\u00e0" StandardCharsets/ISO_8859_1)
        utf8 (->bytes "d\u00e9j\u00e0")]
    (testing "the part's own Content-Type charset"
      (is (= {"a" "d\u00e9j\u00e0" "b" "d\u00e9j\u00e0"}
             (.params (parse-bytes (body [{:name "a" :content-type "text/plain; charset=ISO-8859-1" :content latin1}
                                          {:name "b" :content-type "text/plain" :content utf8}]))))))
    (testing "_charset_ names the form's charset; a part's own charset still wins"
      (is (= {"_charset_" "ISO-8859-1" "a" "d\u00e9j\u00e0" "b" "d\u00e9j\u00e0"}
             (.params (parse-bytes (body [{:name "a" :content latin1}
                                          {:name "_charset_" :content "ISO-8859-1"}
                                          {:name "b" :content-type "text/plain; charset=\"utf-8\"" :content utf8}]))))))
    (testing "the fallback charset"
      (is (= {"a" "d\u00e9j\u00e0"}
             (.params (.parseBody (parser) (ByteArrayInputStream. (body [{:name "a" :content latin1}]))
                                  boundary StandardCharsets/ISO_8859_1)))))
    (testing "the request Content-Type's charset is the fallback, unless one is configured"
      (let [ct (str "multipart/form-data; charset=ISO-8859-1; boundary=\"" boundary "\"")]
        (is (= {"a" "d\u00e9j\u00e0"}
               (.params (.parse (parser) (ByteArrayInputStream. (body [{:name "a" :content latin1}])) ct -1))))
        (is (= {"a" "d\u00e9j\u00e0"}
               (.params (.parse (parser {:fallback "UTF-8"}) (ByteArrayInputStream. (body [{:name "a" :content utf8}])) ct -1))))))
    (testing "a forced charset overrides everything"
      (is (= {"a" "d\u00e9j\u00e0" "b" "d\u00c3\u00a9j\u00c3\u00a0"}
             (.params (parse-bytes (body [{:name "a" :content-type "text/plain; charset=UTF-8" :content latin1}
                                          {:name "b" :content utf8}])
                                   {:encoding "ISO-8859-1"})))))
    (testing "non-ASCII names (UTF-8 in the header) and invalid bytes"
      (is (= {"\u00e9t\u00e9" "\ufffd"}
             (.params (parse-bytes (body [{:name "\u00e9t\u00e9" :content (byte-array [(unchecked-byte 0xff)])}]))))))))

(deftest keywords
  (is (= {:a "1" "b c" "2" :é "3" "1x" "4"}
         (.params (parse-bytes (body [{:name "a" :content "1"} {:name "b c" :content "2"}
                                      {:name "é" :content "3"} {:name "1x" :content "4"}])
                               {:keywords? true})))))

(deftest malformed-bodies-are-400
  (let [dir (temp-dir)
        ok-part (part {:name "f" :filename "f.txt" :content "data"})
        cases {"no opening boundary" (concat-bytes "just some text\r\nwithout any boundary")
               "no opening boundary " (byte-array 0)
               "no closing boundary" (concat-bytes ok-part "--" boundary "\r\n"
                                                   "Content-Disposition: form-data; name=\"g\"; filename=\"g\"\r\n\r\n"
                                                   "truncated file conte")
               "no closing boundary " (concat-bytes ok-part "Content-Disposition: form-data; name=\"x\"\r\n\r\nx")
               "body ends after a boundary" (concat-bytes ok-part "--" boundary)
               "body ends in part headers" (concat-bytes ok-part "--" boundary "\r\nContent-Disposition: form-da")
               "unexpected characters after a boundary" (concat-bytes ok-part "--" boundary "zz\r\n")
               "unexpected characters after a boundary " (body [{:name "a" :content (str "x\r\n--" boundary "-and-more")}])
               "part header without a colon" (concat-bytes ok-part (part {:headers ["Content-Disposition form-data; name=x"]}))
               "part header without a name" (concat-bytes ok-part (part {:headers [": x"]}))
               "part header starts with a space" (concat-bytes ok-part (part {:headers [" name=x"]}))
               "part without Content-Disposition" (concat-bytes ok-part (part {:headers ["Content-Type: text/plain"]}))
               ;; names compare in ASCII case only: U+0131 and U+017F fold into I and S in Java's
               ;; ignore-case comparisons, and this is no Content-Disposition to other parsers
               "part without Content-Disposition " (concat-bytes ok-part (part {:headers ["Content-D\u0131\u017Fposition: form-data; name=\"x\""]}))
               "part Content-Disposition without a name" (concat-bytes ok-part (part {:headers ["Content-Disposition: form-data; filename=\"a\""]}))
               "part Content-Disposition is not form-data" (concat-bytes ok-part (part {:headers ["Content-Disposition: attachment; name=\"a\""]}))
               "unterminated quoted string in Content-Disposition" (concat-bytes ok-part (part {:headers ["Content-Disposition: form-data; name=\"a"]}))
               "parameter without a value in Content-Disposition" (concat-bytes ok-part (part {:headers ["Content-Disposition: form-data; name=a; extra"]}))
               "malformed parameter list in Content-Disposition" (concat-bytes ok-part (part {:headers ["Content-Disposition: form-data; name=\"a\" filename=\"b\""]}))
               "malformed filename* parameter" (concat-bytes ok-part (part {:headers ["Content-Disposition: form-data; name=a; filename*=UTF-8''%E2%8"]}))
               "unsupported charset in multipart body: nope" (concat-bytes ok-part (part {:name "t" :content-type "text/plain; charset=nope"}))
               "part headers larger than 16384 bytes" (concat-bytes ok-part (part {:headers [(str "X-Big: " (apply str (repeat 20000 "a")))]}))}]
    (doseq [[expected b] cases]
      (let [[status msg] (refused b {:dir dir})]
        (is (= 400 status) expected)
        (is (and msg (str/includes? msg (str/trim expected))) (str "message " (pr-str msg) " names " expected))
        (is (empty? (files-in dir)) (str "temp files cleaned after " expected))))
    (testing "a _charset_ field naming an unknown charset"
      (is (= 400 (first (refused (body [{:name "_charset_" :content "klingon"}]))))))
    (testing "bad boundaries and content types"
      (is (= [400 "invalid multipart boundary"] (refused (body [{:name "a"}]) {:boundary (apply str (repeat 201 "b"))})))
      (is (= [400 "invalid multipart boundary"] (refused (body [{:name "a"}]) {:boundary "b\u00e9"})))
      (let [p (parser)
            try-parse (fn [ct b] (try (.deleteTempFiles (.parse p (some-> ^bytes b ByteArrayInputStream.) ct -1)) nil
                                      (catch MultipartException e [(.status e) (.getMessage e)])))]
        (is (= [400 "multipart/form-data request without a boundary"] (try-parse "multipart/form-data" (body []))))
        (is (= [400 "multipart/form-data request without a boundary"] (try-parse "multipart/form-data; boundary=\"\"" (body []))))
        (is (= 400 (first (try-parse "multipart/form-data; boundary=\"unterminated" (body [])))))
        (is (= [400 "malformed multipart body: no opening boundary"]
               (try-parse (str "multipart/form-data; boundary=" boundary) nil)) "no body")))))

(deftest limits-are-413-and-clean-up
  (let [dir (temp-dir)
        big (byte-array 5000 (byte 65))
        two-files (body [{:name "ok" :filename "ok.bin" :content (byte-array 100)}
                         {:name "big" :filename "big.bin" :content big}])]
    (testing "a file over :max-file-size, after another file was written"
      (is (= [413 "file 'big' is larger than 4096 bytes"] (refused two-files {:dir dir :max-file 4096 :chunk 1000})))
      (is (empty? (files-in dir))))
    (testing "exactly at the limit is fine"
      (let [r (parse-bytes two-files {:dir dir :max-file 5000})]
        (is (= 5000 (:size (get (.params r) "big"))))
        (.deleteTempFiles r)))
    (testing "a body over :max-request-size"
      (is (= [413 "multipart body is larger than 3000 bytes"] (refused two-files {:dir dir :max-request 3000})))
      (is (empty? (files-in dir))))
    (testing "a Content-Length over :max-request-size is refused before reading"
      (is (= [413 "multipart body is larger than 3000 bytes"]
             (try (.parse (parser {:dir dir :max-request 3000}) nil (str "multipart/form-data; boundary=" boundary) 3001)
                  nil
                  (catch MultipartException e [(.status e) (.getMessage e)])))))
    (testing "a field over :max-field-size"
      (is (= [413 "field 'text' is larger than 10 bytes"]
             (refused (body [{:name "f" :filename "f" :content "x"} {:name "text" :content "01234567890"}])
                      {:dir dir :max-field 10})))
      (is (empty? (files-in dir))))
    (testing "more parts than :max-parts"
      (is (= [413 "multipart body has more than 3 parts"]
             (refused (body (for [i (range 4)] {:name "f" :filename (str i) :content "x"})) {:dir dir :max-parts 3})))
      (is (empty? (files-in dir)))
      (is (nil? (refused (body (for [i (range 3)] {:name "f" :content "x"})) {:max-parts 3}))))))

(deftest io-errors-clean-up-too
  (let [dir (temp-dir)
        b (body [{:name "f" :filename "f" :content (byte-array 200000)}])
        failing (proxy [InputStream] []
                  (read
                    ([] -1)
                    ([buf off len] (throw (java.io.IOException. "connection reset")))))
        in (java.io.SequenceInputStream. (ByteArrayInputStream. b 0 100000) ^InputStream failing)]
    (is (thrown-with-msg? java.io.IOException #"connection reset"
                          (.parseBody (parser {:dir dir}) in boundary StandardCharsets/UTF_8)))
    (is (empty? (files-in dir)))))

;; ---------------------------------------------------------------------------------------------
;; the middleware on real servers

(defn- post [path ^bytes b & [headers]]
  (request :post path {:headers (merge {"Content-Type" (str "multipart/form-data; boundary=" boundary)} headers)
                       :body b}))

(def ^:private upload-body
  (body [{:name "title" :content "My file"}
         {:name "tag" :content "a"}
         {:name "tag" :content "b"}
         {:name "upload" :filename "notes.txt" :content-type "text/plain" :content "line one\nline two\n"}]))

(defn- seen-upload
  "What a handler sees of upload-body, with the temp file's state during the handler."
  [req]
  (let [up (get-in req [:multipart-params "upload"])
        ^File f (:tempfile up)]
    {:params (readable (:multipart-params req))
     :merged (:params req)
     :file f
     :existed (.exists f)}))

(def ^:private expected-upload
  {"title" "My file" "tag" ["a" "b"]
   "upload" {:filename "notes.txt" :content-type "text/plain" :size 18 :content "line one\nline two\n"}})

(deftest keywords-option
  (let [seen (promise)
        h (mp/wrap-multipart-params (fn [req] (deliver seen (select-keys req [:multipart-params :params]))
                                      {:status 200})
                                    {:keywords? true})]
    (with-server h {}
      (post "/" (body [{:name "a" :content "1"} {:name "not a keyword" :content "2"}]))
      (is (= {:multipart-params {:a "1" "not a keyword" "2"} :params {:a "1" "not a keyword" "2"}}
             (deref seen 5000 nil))))))

(deftest sync-upload-and-cleanup
  (let [seen (promise)
        h (mp/wrap-multipart-params (fn [req] (deliver seen (seen-upload req)) {:status 200 :body "uploaded"}))]
    (with-server h {}
      (let [r (post "/up?q=1" upload-body)
            s (deref seen 5000 nil)]
        (is (= 200 (:status r)))
        (is (= "uploaded" (:body r)))
        (is (= expected-upload (:params s)))
        (is (= #{"title" "tag" "upload"} (set (keys (:merged s)))))
        (is (:existed s) "the temp file exists while the handler runs")
        (is (not (.exists ^File (:file s))) "and is gone once the response is out"))
      (testing "a request that is not multipart passes through with empty params"
        (let [seen (promise)]
          (with-server (mp/wrap-multipart-params (fn [req] (deliver seen (select-keys req [:multipart-params :params]))
                                                   {:status 200 :body (slurp (:body req))}))
                       {}
            (is (= "a=1" (:body (request :post "/" {:headers {"Content-Type" "application/x-www-form-urlencoded"}
                                                   :body "a=1"}))))
            (is (= {:multipart-params {} :params {}} (deref seen 5000 nil)))))))))

(deftest async-upload-and-cleanup
  (let [seen (promise)
        h (mp/wrap-multipart-params
           (fn [req respond _raise]
             (let [s (seen-upload req)]
               (deliver seen s)
               ;; respond from another thread, as async handlers may
               (future (respond {:status 200 :body "async uploaded"})))))]
    (with-server h {:async? true}
      (let [r (post "/up" upload-body)
            s (deref seen 5000 nil)]
        (is (= 200 (:status r)))
        (is (= "async uploaded" (:body r)))
        (is (= expected-upload (:params s)))
        (is (:existed s))
        ;; the wrapped respond deletes after handing the response over: allow it a moment
        (is (eventually #(not (.exists ^File (:file s)))) "the temp file is deleted after respond")))))

(deftest async-raise-deletes-too
  (let [seen (promise)
        h (mp/wrap-multipart-params
           (fn [req _respond raise]
             (deliver seen (get-in req [:multipart-params "upload" :tempfile]))
             (raise (ex-info "boom" {}))))]
    (with-server h {:async? true}
      (is (= 500 (:status (post "/up" upload-body))))
      (let [^File f (deref seen 5000 nil)]
        (is (some? f))
        (is (eventually #(not (.exists f))))))))

(deftest sync-throw-deletes-too
  (let [seen (promise)
        h (mp/wrap-multipart-params
           (fn [req]
             (deliver seen (get-in req [:multipart-params "upload" :tempfile]))
             (throw (ex-info "boom" {}))))]
    (with-server h {}
      (is (= 500 (:status (post "/up" upload-body))))
      (is (not (.exists ^File (deref seen 5000 nil)))))))

(deftest echoing-the-temp-file-still-works
  (doseq [async? [false true]]
    (let [seen (promise)
          echo (fn [req] (let [f (get-in req [:multipart-params "upload" :tempfile])]
                           (deliver seen f)
                           {:status 200 :headers {"content-type" "text/plain"} :body f}))
          h (mp/wrap-multipart-params (if async? (fn [req respond _] (respond (echo req))) echo))]
      (with-server h {:async? async?}
        (let [r (post "/echo" upload-body)]
          (is (= 200 (:status r)) (str "async? " async?))
          (is (= "line one\nline two\n" (:body r)))
          (let [^File f (deref seen 5000 nil)]
            (is (eventually #(not (.exists f))))))))))

(deftest too-large-file-is-413
  (doseq [async? [false true]]
    (let [called (atom false)
          dir (temp-dir)
          h (mp/wrap-multipart-params (if async?
                                        (fn [_ respond _] (reset! called true) (respond {:status 200}))
                                        (fn [_] (reset! called true) {:status 200}))
                                      {:max-file-size 1000 :temp-dir dir})]
      (with-server h {:async? async?}
        (let [r (post "/up" (body [{:name "small" :filename "s" :content (byte-array 10)}
                                   {:name "big" :filename "b" :content (byte-array 5000)}]))]
          (is (= 413 (:status r)))
          (is (= "file 'big' is larger than 1000 bytes" (:body r)))
          (is (= ["text/plain; charset=utf-8"] (get-in r [:headers "content-type"])))
          (is (not @called))
          (is (empty? (files-in dir)))
          (testing "the server keeps serving"
            (is (= 200 (:status (post "/up" (body [{:name "small" :filename "s" :content "x"}])))))))))))

(deftest limits-per-route
  ;; an upload route with its own :max-body-size and multipart limits beside the server's
  (let [dir (temp-dir)
        ok (fn [_] {:status 200 :body "ok"})]
    (with-server {:routes [{:path "/avatars" :methods [:post] :handler ok
                            :max-body-size 20000
                            :middleware [#(mp/wrap-multipart-params % {:max-file-size 8000
                                                                       :max-file-count 1
                                                                       :temp-dir dir})]}
                           {:path "/docs" :methods [:post] :handler ok
                            :middleware [#(mp/wrap-multipart-params % {:temp-dir dir})]}]}
                 {:max-body-size 1000}
      (let [file (fn [n size] {:name n :filename n :content (byte-array size)})]
        (is (= 200 (:status (post "/avatars" (body [(file "a" 6000)])))) "over the server's cap")
        (is (= 413 (:status (post "/avatars" (body [(file "a" 9000)])))) "the route's file limit")
        (is (= 413 (:status (post "/avatars" (body [(file "a" 10) (file "b" 10)]))))
            "the route's file count")
        (is (= 413 (:status (post "/avatars" (body [{:name "f" :content (byte-array 30000)}]))))
            "the route's body cap")
        (is (= 413 (:status (post "/docs" (body [(file "a" 2000)])))) "the server's cap elsewhere")
        (is (= 200 (:status (post "/docs" (body [(file "a" 100)])))))
        (is (empty? (files-in dir)))))))

(deftest too-large-request-is-413
  (with-server (mp/wrap-multipart-params (fn [_] {:status 200}) {:max-request-size 1000}) {}
    (let [r (post "/" (body [{:name "a" :content (apply str (repeat 2000 "x"))}]))]
      (is (= 413 (:status r)))
      (is (= "multipart body is larger than 1000 bytes" (:body r))))))

(deftest truncated-multipart-is-400-and-the-next-request-works
  (doseq [async? [false true]]
    (let [dir (temp-dir)
          h (mp/wrap-multipart-params (if async?
                                        (fn [req respond _] (respond {:status 200 :body (get-in req [:params "a"])}))
                                        (fn [req] {:status 200 :body (get-in req [:params "a"])}))
                                      {:temp-dir dir})
          whole (body [{:name "a" :content "one"} {:name "f" :filename "f" :content (byte-array 3000)}])
          truncated (Arrays/copyOf whole (- (alength whole) 100))]
      (with-server h {:async? async?}
        (let [r (post "/" truncated)]
          (is (= 400 (:status r)))
          (is (= "malformed multipart body: no closing boundary" (:body r)))
          (is (empty? (files-in dir))))
        (let [r (request :post "/" {:headers {"Content-Type" "multipart/form-data"} :body "x"})]
          (is (= 400 (:status r)))
          (is (= "multipart/form-data request without a boundary" (:body r))))
        (let [r (post "/" whole)]
          (is (= 200 (:status r)))
          (is (= "one" (:body r))))))))

(deftest options-are-checked-once
  (doseq [bad [{:encoding "no-such-charset"} {:fallback-encoding 7} {:max-file-size 0}
               {:max-request-size -1} {:max-parts 1.5} {:keywords? "yes"} {:temp-dir "/no/such/dir"}]]
    (is (thrown? IllegalArgumentException (mp/wrap-multipart-params identity bad)) (pr-str bad)))
  (is (fn? (mp/wrap-multipart-params identity {:encoding StandardCharsets/ISO_8859_1 :fallback-encoding "UTF-8"
                                               :max-parts 10 :keywords? true :temp-dir (System/getProperty "java.io.tmpdir")}))))

;; ---------------------------------------------------------------------------------------------
;; the same request through ring-core 1.8.2's wrap-multipart-params

(defn- ring-view
  "A handler recording what it sees of :multipart-params and :params, files as their content."
  [seen]
  (fn [req]
    (deliver seen {:multipart (readable (:multipart-params req))
                   :params-keys (set (keys (:params req)))})
    ;; ring's temp files live an hour: do not leave them behind
    (doseq [[_ v] (:multipart-params req)
            m (if (vector? v) v [v])
            :when (map? m)]
      (io/delete-file (:tempfile m) true))
    {:status 200 :body "ok"}))

(deftest same-result-as-ring
  (let [b (body [{:name "title" :content "My file"}
                 {:name "tag" :content "a"}
                 {:name "tag" :content "b"}
                 {:name "caf\u00e9" :content "cr\u00e8me br\u00fbl\u00e9e \u2603"}
                 {:name "upload" :filename "notes.txt" :content-type "text/plain" :content "line one\r\nline two\r\n"}
                 {:name "bin" :filename "data.bin" :content-type "application/octet-stream"
                  :content (tricky-content 70000 3 "")}
                 {:name "none" :filename "" :content-type "application/octet-stream"}
                 {:name "notype" :filename "x.txt" :content "no content type"}
                 {:name "multi" :filename "1.txt" :content "one"}
                 {:name "multi" :filename "2.txt" :content "two"}
                 {:name "latin" :content-type "text/plain; charset=ISO-8859-1"
                  :content (.getBytes "\u00e9t\u00e9" StandardCharsets/ISO_8859_1)}
                 {:name "empty" :content ""}]
                {:preamble "preamble\r\n" :epilogue "epilogue"})
        ours (promise)
        theirs (promise)
        app (fn [req]
              (if (= "/ring" (:uri req))
                ((ring-mp/wrap-multipart-params (ring-view theirs)) req)
                ((mp/wrap-multipart-params (ring-view ours)) req)))]
    (with-server app {}
      (is (= 200 (:status (post "/ring" b))))
      (is (= 200 (:status (post "/donkey" b))))
      (let [o (deref ours 5000 nil)
            t (deref theirs 5000 nil)]
        (is (some? o))
        (is (= (:multipart t) (:multipart o)))
        (is (= (:params-keys t) (:params-keys o)))
        (is (= "cr\u00e8me br\u00fbl\u00e9e \u2603" (get-in o [:multipart "caf\u00e9"])))
        (is (= "\u00e9t\u00e9" (get-in o [:multipart "latin"])))))))

(deftest temp-files-go-when-an-async-handler-never-answers
  ;; the request timeout answers 503 for the handler; the upload's temp files must not stay
  (let [dir (temp-dir)
        seen (promise)
        handler (mp/wrap-multipart-params
                 (fn [req _respond _raise]
                   (deliver seen (.exists ^File (:tempfile (get-in req [:multipart-params "f"])))))
                 {:temp-dir dir})
        b (body [{:name "f" :filename "up.bin" :content (byte-array 50000 (byte 7))}])]
    (doseq [[what server-handler opts] [["async server" handler {:async? true}]
                                        ["non-blocking route"
                                         {:routes [{:path "/up" :methods [:post] :handler-mode :non-blocking
                                                    :handler handler}]}
                                         {}]]]
      (testing what
        (with-server server-handler (merge {:request-timeout 400 :max-body-size (* 1024 1024)} opts)
          (let [r (request :post "/up" {:body b :headers {"content-type" (str "multipart/form-data; boundary=" boundary)}})]
            (is (= 503 (:status r)))
            (is (true? (deref seen 1000 nil)) "the handler saw its file")
            (Thread/sleep 1000)
        (is (eventually #(empty? (files-in dir))) (str "left behind: " (files-in dir)))))))
    (testing "and when the client goes away before any answer (the files go at the timeout at the latest)"
      (with-server handler {:async? true :request-timeout 1000 :max-body-size (* 1024 1024)}
        (with-open [s (java.net.Socket. "127.0.0.1" (int u/*port*))]
          (doto (.getOutputStream s)
            (.write (.getBytes (str "POST /up HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary="
                                    boundary "\r\nContent-Length: " (alength b) "\r\n\r\n")
                               StandardCharsets/ISO_8859_1))
            (.write b)
            (.flush))
          (is (eventually #(seq (files-in dir))) "the upload was parsed"))
        (Thread/sleep 1000)
        (is (eventually #(empty? (files-in dir))) (str "left behind: " (files-in dir)))))))

;; ---------------------------------------------------------------------------------------------
;; hash flooding

(def ^:private others (mapv #(str "field" %) (range 10)))

(defn- fields-body ^bytes [names] (body (map (fn [n] {:name n :content "v"}) names)))

(deftest colliding-part-names
  (testing "up to 8 names of one hash parse as usual, files included"
    (let [names (u/colliding-names 8)
          r (parse-bytes (body (concat (map (fn [n] {:name n :content "v"}) (concat names others))
                                       [{:name (first names) :filename "f.txt" :content "F"}])))
          p (.params r)]
      (is (= 18 (count p)))
      (is (= "v" (get p (second names))))
      (is (= ["v" "f.txt"] (update (get p (first names)) 1 :filename)))
      (.deleteTempFiles r)))
  (testing "9 are a 400 naming no input, and temp files already written are deleted"
    (let [dir (temp-dir)]
      (is (= [400 "too many part names with colliding hashes"]
             (refused (body (concat [{:name "up" :filename "a.txt" :content "A"}]
                                    (map (fn [n] {:name n :content "v"}) (concat others (u/colliding-names 9)))))
                      {:dir dir})))
      (is (empty? (files-in dir)))))
  (testing "with :keywords? true: refused before any name is interned"
    (let [names (u/colliding-names 9 "qzxNotInternedPart")]
      (is (= [400 "too many part names with colliding hashes"]
             (refused (fields-body (concat others names)) {:keywords? true})))
      (is (every? #(nil? (clojure.lang.Keyword/find ^String %)) names))))
  (testing "names whose keywords share a hash (their Strings do not): refused only as keywords"
    (let [names (u/keyword-colliding-names 9)
          r (parse-bytes (fields-body (concat others names)))]
      (is (= 19 (count (.params r))))
      (is (= [400 "too many part names with colliding hashes"]
             (refused (fields-body (concat others names)) {:keywords? true}))))))

(deftest colliding-part-names-on-a-server
  (let [calls (atom 0)
        h (mp/wrap-multipart-params (fn [req] (swap! calls inc) {:status 200 :body (str (count (:multipart-params req)))}))
        flood (fields-body (u/colliding-names 1000))]
    (with-server h {}
      (let [[r ms] (u/millis (post "/" flood))]
        (is (= {:status 400 :body "too many part names with colliding hashes"} (select-keys r [:status :body])))
        (is (< ms 2000) (str ms " ms")))
      (is (= "1000" (:body (post "/" (fields-body (map #(str "k" %) (range 1000)))))))
      (is (= 1 @calls)))))

;; ---------------------------------------------------------------------------------------------
;; Ring's :store, :max-file-count, :progress-fn and parse-multipart-params

(defn- ring-request
  "A request map as the server makes it, for calling the request functions directly."
  [^bytes b]
  {:request-method :post :uri "/up"
   :headers {"content-type" (str "multipart/form-data; boundary=" boundary)
             "content-length" (str (alength b))}
   :body (ByteArrayInputStream. b)})

(defn- refusal
  "[status message cause-class] of the bad-input exception `(f)` throws; nil if it returns."
  [f]
  (try (f) nil
       (catch ExceptionInfo e
         (when (errors/bad-input? e) [(:status (ex-data e)) (ex-message e) (class (ex-cause e))]))))

(defn- on-event-loop? [] (str/includes? (.getName (Thread/currentThread)) "eventloop"))

(defn- recording-store
  "A store that reads each part whole, records what it was given (and whether it ran on an
  event loop) in `calls`, and returns {:stored filename :n size}."
  [calls]
  (fn [{:keys [filename content-type ^InputStream stream] :as item}]
    (let [b (.readAllBytes stream)]
      (swap! calls conj {:keys (set (keys item)) :filename filename :content-type content-type
                         :content (String. b StandardCharsets/ISO_8859_1)
                         :event-loop? (on-event-loop?)})
      {:stored filename :n (alength b)})))

(defn- with-vec-bytes
  "The params with each :bytes array as a vector, so two results compare by content."
  [params]
  (let [f (fn [v] (if (map? v) (update v :bytes vec) v))]
    (into {} (map (fn [[k v]] [k (if (vector? v) (mapv f v) (f v))])) params)))

(deftest byte-array-store-has-rings-shape
  (let [dir (temp-dir)
        r (mp/multipart-params-request (ring-request upload-body)
                                       {:store (ring-ba/byte-array-store) :temp-dir dir})
        up (get-in r [:multipart-params "upload"])]
    (is (= {:filename "notes.txt" :content-type "text/plain"} (dissoc up :bytes)))
    (is (bytes? (:bytes up)))
    (is (= "line one\nline two\n" (String. ^bytes (:bytes up) StandardCharsets/UTF_8)))
    (is (= ["a" "b"] (get-in r [:params "tag"])))
    (is (empty? (files-in dir)) "no temp file is written with a store")))

(deftest byte-array-store-same-result-as-ring
  (let [b (body [{:name "title" :content "My file"}
                 {:name "upload" :filename "notes.txt" :content-type "text/plain" :content "line one\r\n"}
                 {:name "bin" :filename "data.bin" :content-type "application/octet-stream"
                  :content (tricky-content 70000 5 "")}
                 {:name "none" :filename "" :content-type "application/octet-stream"}
                 {:name "notype" :filename "x.txt" :content "no content type"}
                 {:name "multi" :filename "1.txt" :content "one"}
                 {:name "multi" :filename "2.txt" :content "two"}])
        dir (temp-dir)
        ours (promise)
        theirs (promise)
        store (ring-ba/byte-array-store)
        view (fn [p] (fn [req] (deliver p (with-vec-bytes (:multipart-params req))) {:status 200}))
        app (fn [req]
              (if (= "/ring" (:uri req))
                ((ring-mp/wrap-multipart-params (view theirs) {:store store}) req)
                ((mp/wrap-multipart-params (view ours) {:store store :temp-dir dir}) req)))]
    (with-server app {}
      (is (= 200 (:status (post "/ring" b))))
      (is (= 200 (:status (post "/donkey" b))))
      (let [o (deref ours 5000 nil)]
        (is (= 70000 (count (get-in o ["bin" :bytes]))))
        (is (= (deref theirs 5000 nil) o)))
      (is (empty? (files-in dir))))))

(deftest custom-store-on-a-server
  (doseq [async? [false true]]
    (let [dir (temp-dir)
          calls (atom [])
          seen (promise)
          h (mp/wrap-multipart-params
             (if async?
               (fn [req respond _] (deliver seen (:multipart-params req)) (respond {:status 200 :body "ok"}))
               (fn [req] (deliver seen (:multipart-params req)) {:status 200 :body "ok"}))
             {:store (recording-store calls) :temp-dir dir})
          big (apply str (repeat 70000 "B"))]
      (with-server h {:async? async?}
        (is (= 200 (:status (post "/up" (body [{:name "title" :content "t"}
                                               {:name "f" :filename "a.txt" :content-type "text/plain" :content "AAA"}
                                               {:name "f" :filename "b.bin" :content big}])))))
        (is (= {"title" "t" "f" [{:stored "a.txt" :n 3} {:stored "b.bin" :n 70000}]} (deref seen 5000 nil))
            (str "the store's values are the params, async? " async?))
        (is (= [{:keys #{:filename :content-type :stream} :filename "a.txt" :content-type "text/plain"
                 :content "AAA" :event-loop? false}
                {:keys #{:filename :content-type :stream} :filename "b.bin" :content-type nil
                 :content big :event-loop? false}]
               @calls)
            "called once per file part, never for a field, and never on an event loop")
        (is (empty? (files-in dir)))))))

(deftest a-store-and-the-limits
  (let [big (body [{:name "small" :filename "s" :content "x"} {:name "big" :filename "b" :content (byte-array 5000 (byte 1))}])
        too-large [413 "file 'big' is larger than 1000 bytes" MultipartException]
        seen (atom [])
        reading (fn [{:keys [^InputStream stream filename]}]
                  (let [out (ByteArrayOutputStream.)
                        buf (byte-array 100)]
                    (try (loop [] (let [n (.read stream buf)] (when (pos? n) (.write out buf 0 n) (recur))))
                         (swap! seen conj [filename (.size out)])
                         :read
                         (catch IOException e
                           (swap! seen conj [filename (.size out) (class (.getCause e))])
                           (throw e)))))
        parse (fn [b opts] #(mp/multipart-params-request (ring-request b) opts))]
    (testing "a store reading a part over :max-file-size gets an IOException once it has read the limit"
      (is (= too-large (refusal (parse big {:store reading :max-file-size 1000}))))
      (is (= [["s" 1] ["b" 1000 MultipartException]] @seen)))
    (testing "and the part is refused whatever the store makes of it"
      (doseq [[what store] {"swallows it" (fn [{:keys [^InputStream stream]}]
                                            (try (.readAllBytes stream) (catch Exception _ :swallowed)))
                            "reads nothing" (fn [_] :unread)
                            "closes the stream" (fn [{:keys [^InputStream stream]}]
                                                  (try (.close stream) (catch IOException _ nil))
                                                  :closed)
                            "throws its own exception" (fn [{:keys [^InputStream stream]}]
                                                         (try (.readAllBytes stream)
                                                              (catch IOException e (throw (ex-info "store failed" {} e)))))}]
        (is (= too-large (refusal (parse big {:store store :max-file-size 1000}))) what)))
    (testing "what a store leaves unread is skipped, and the next part parses"
      (is (= {"f" :unread "after" "ok"}
             (:multipart-params ((parse (body [{:name "f" :filename "f" :content (byte-array 100000)}
                                               {:name "after" :content "ok"}])
                                        {:store (fn [_] :unread)}))))))
    (testing "a body that breaks off in a file part"
      (let [whole (body [{:name "f" :filename "f" :content (byte-array 3000)}])]
        (is (= [400 "malformed multipart body: no closing boundary" MultipartException]
               (refusal (parse (Arrays/copyOf whole (- (alength whole) 100)) {:store reading}))))))
    (testing "the stream is closed once the store has returned"
      (let [r ((parse (body [{:name "f" :filename "f" :content "data"}]) {:store :stream}))]
        (is (thrown-with-msg? IOException #"closed" (.read ^InputStream (get-in r [:multipart-params "f"]))))))
    (testing "a store that returns nil: nil is the value, also for a repeated name"
      (is (= {"f" [nil nil]}
             (:multipart-params ((parse (body [{:name "f" :filename "1"} {:name "f" :filename "2"}])
                                        {:store (constantly nil)}))))))
    (testing "the store's own exception propagates"
      (is (thrown-with-msg? ExceptionInfo #"no thanks"
                            ((parse (body [{:name "f" :filename "f" :content "x"}])
                                    {:store (fn [_] (throw (ex-info "no thanks" {})))})))))))

(deftest store-refusals-on-a-server
  (doseq [async? [false true]]
    (let [called (atom false)
          handler (if async?
                    (fn [_ respond _] (reset! called true) (respond {:status 200}))
                    (fn [_] (reset! called true) {:status 200}))
          b (body [{:name "big" :filename "b" :content (byte-array 5000)}])]
      (testing (str "async? " async?)
        (with-server (mp/wrap-multipart-params handler {:store (ring-ba/byte-array-store) :max-file-size 1000}) {:async? async?}
          (let [r (post "/" b)]
            (is (= 413 (:status r)))
            (is (= "file 'big' is larger than 1000 bytes" (:body r)))))
        (testing "a store may refuse a part with a bad-input exception: :error-handler answers"
          (with-server (mp/wrap-multipart-params handler {:store (fn [_] (throw (errors/bad-input 415 "images only" nil)))})
                       {:async? async?}
            (let [r (post "/" b)]
              (is (= 415 (:status r)))
              (is (= "images only" (:body r))))))
        (testing "any other exception of the store's is a failure, not bad input"
          (with-server (mp/wrap-multipart-params handler {:store (fn [_] (throw (IllegalStateException. "disk full")))})
                       {:async? async?}
            (is (= 500 (:status (post "/" b))))))
        (is (not @called))))))

(def ^:private three-files
  (body [{:name "a" :content "1"} {:name "f" :filename "1" :content "x"} {:name "b" :content "2"}
         {:name "f" :filename "2" :content "y"} {:name "f" :filename "3" :content "z"}]))

(deftest max-file-count
  (let [dir (temp-dir)
        parse (fn [b opts] #(mp/multipart-params-request (ring-request b) (assoc opts :temp-dir dir)))]
    (testing "more file parts than :max-file-count: the request function throws a 413"
      (is (= [413 "multipart body has more than 2 files" MultipartException]
             (refusal (parse three-files {:max-file-count 2}))))
      (is (empty? (files-in dir)) "the files written before are deleted"))
    (testing "fields do not count"
      (let [r ((parse three-files {:max-file-count 3}))]
        (is (= 3 (count (get-in r [:multipart-params "f"]))))
        (run! #(.delete ^File (:tempfile %)) (get-in r [:multipart-params "f"]))))
    (testing "0 allows fields only"
      (is (= {"a" "1"} (:multipart-params ((parse (body [{:name "a" :content "1"}]) {:max-file-count 0})))))
      (is (= [413 "multipart body has more than 0 files" MultipartException]
             (refusal (parse (body [{:name "a" :content "1"} {:name "f" :filename "" :content ""}]) {:max-file-count 0})))))
    (testing "a store is not called for the part over the count"
      (let [calls (atom [])]
        (is (= 413 (first (refusal (parse three-files {:max-file-count 2 :store (recording-store calls)})))))
        (is (= ["1" "2"] (map :filename @calls)))))
    (testing "default: no count, :max-parts bounds the parts"
      (is (= [413 "multipart body has more than 4 parts" MultipartException]
             (refusal (parse three-files {:max-parts 4 :store (fn [_] :x)}))))))
  (doseq [async? [false true]]
    (testing (str "the middleware answers 413, async? " async?)
      (let [called (atom false)
            handler (if async?
                      (fn [_ respond _] (reset! called true) (respond {:status 200}))
                      (fn [_] (reset! called true) {:status 200}))
            own (fn [req] {:status 413 :body (str "own: " (:status (ex-data (:donkey.middleware/error req))))})]
        (with-server (mp/wrap-multipart-params handler {:max-file-count 2}) {:async? async?}
          (let [r (post "/" three-files)]
            (is (= 413 (:status r)))
            (is (= "multipart body has more than 2 files" (:body r)))
            (is (= ["text/plain; charset=utf-8"] (get-in r [:headers "content-type"])))))
        (with-server (mp/wrap-multipart-params handler {:max-file-count 2
                                                        :error-handler (fn ([req] (own req))
                                                                         ([req respond _] (respond (own req))))})
                     {:async? async?}
          (is (= "own: 413" (:body (post "/" three-files)))))
        (is (not @called))))))

(deftest parse-multipart-params-as-ring-has-it
  (is (= '([request] [request options]) (:arglists (meta #'mp/parse-multipart-params))))
  (let [dir (temp-dir)
        p (mp/parse-multipart-params (ring-request upload-body) {:temp-dir dir})]
    (is (= expected-upload (readable p)) "the params map, as under :multipart-params")
    (is (= [(get-in p ["upload" :tempfile])] (files-in dir)) "its temp file is the caller's")
    (io/delete-file (get-in p ["upload" :tempfile])))
  (is (= {"a" "1" "b" ["2" "3"]}
         (mp/parse-multipart-params (ring-request (body [{:name "a" :content "1"} {:name "b" :content "2"}
                                                         {:name "b" :content "3"}])))))
  (is (= {:a "1"} (mp/parse-multipart-params (ring-request (body [{:name "a" :content "1"}])) {:keywords? true})))
  (is (= "line one\nline two\n"
         (String. ^bytes (get-in (mp/parse-multipart-params (ring-request upload-body) {:store (ring-ba/byte-array-store)})
                                 ["upload" :bytes])
                  StandardCharsets/UTF_8)))
  (testing "nil for a request that is not multipart/form-data"
    (is (nil? (mp/parse-multipart-params {:headers {"content-type" "application/x-www-form-urlencoded"}
                                          :body (ByteArrayInputStream. (.getBytes "a=1"))})))
    (is (nil? (mp/parse-multipart-params {:headers {}} {:max-file-count 1}))))
  (testing "a refused body is the bad-input exception"
    (is (= [400 "malformed multipart body: no opening boundary" MultipartException]
           (refusal #(mp/parse-multipart-params (assoc (ring-request (.getBytes "junk")) :body (ByteArrayInputStream. (.getBytes "junk")))))))))

(deftest progress-fn
  (let [calls (atom [])
        b (body [{:name "a" :content "1"} {:name "f" :filename "f" :content (byte-array 200000)} {:name "b" :content "2"}])
        req (ring-request b)
        r (mp/multipart-params-request
           req {:store (fn [{:keys [^InputStream stream]}] (alength (.readAllBytes stream)))
                :progress-fn (fn [request bytes-read content-length item-count]
                               (swap! calls conj [(identical? request req) bytes-read content-length item-count]))})]
    (is (= {"a" "1" "f" 200000 "b" "2"} (:multipart-params r)))
    (is (every? first @calls) "called with the request")
    (is (= #{(alength b)} (set (map #(nth % 2) @calls))) "and its Content-Length")
    (is (apply <= (map second @calls)) "bytes read only grow")
    (is (= (alength b) (second (last @calls))))
    (is (= [0 1 2 3] (distinct (map #(nth % 3) @calls))) "item count: parts begun, fields and files"))
  (testing "on a server: called where the body is parsed, never on an event loop"
    (doseq [async? [false true]]
      (let [calls (atom [])
            h (mp/wrap-multipart-params (if async? (fn [_ respond _] (respond {:status 200})) (fn [_] {:status 200}))
                                        {:progress-fn (fn [request bytes-read _ items]
                                                        (swap! calls conj [(:uri request) bytes-read items (on-event-loop?)]))})]
        (with-server h {:async? async?}
          (is (= 200 (:status (post "/up" upload-body))))
          (let [[uri bytes-read items] (last @calls)]
            (is (= ["/up" 4] [uri items]) (str "async? " async?))
            ;; the parse stops at the close delimiter: a CRLF after it may be left unread
            (is (<= (- (alength ^bytes upload-body) 2) bytes-read (alength ^bytes upload-body))))
          (is (not-any? #(nth % 3) @calls)))))))

(deftest every-ring-option-is-read
  ;; a value of the wrong kind is refused for each of Ring's options, which shows it is read
  (doseq [[k bad] {:encoding 7 :fallback-encoding 7 :store 7 :progress-fn 7 :max-file-size "1"
                   :max-file-count "1" :error-handler 7}]
    (is (thrown-with-msg? IllegalArgumentException (re-pattern (str "wrap-multipart-params: " k))
                          (mp/wrap-multipart-params identity {k bad}))
        (str k)))
  (doseq [[k bad] {:store "s" :progress-fn 7 :max-file-count -1}]
    (is (thrown-with-msg? IllegalArgumentException (re-pattern (str "multipart-params-request: " k))
                          (mp/multipart-params-request {:headers {}} {k bad})))
    (is (thrown-with-msg? IllegalArgumentException (re-pattern (str "parse-multipart-params: " k))
                          (mp/parse-multipart-params {:headers {}} {k bad}))))
  (doseq [bad [1.5 (inc Integer/MAX_VALUE)]]
    (is (thrown? IllegalArgumentException (mp/wrap-multipart-params identity {:max-file-count bad}))))
  (is (fn? (mp/wrap-multipart-params identity {:store (ring-ba/byte-array-store) :progress-fn (fn [& _])
                                               :max-file-count 0 :max-file-size nil}))))
