(ns donkey.compression-test
  "Response compression (:compression? and its options, a route's :compress?, a response's
  Content-Encoding: identity) and request decompression (:decompress-requests?), over real
  sockets, with the bodies decoded by the JDK (gzip, deflate), brotli4j and zstd-jni."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.server :as server]
            [donkey.stream :as stream]
            [donkey.h2-client :as h2]
            [donkey.test-util :as u :refer [with-server]])
  (:import (com.aayushatharva.brotli4j Brotli4jLoader)
           (com.aayushatharva.brotli4j.decoder Decoder)
           (com.github.luben.zstd Zstd)
           (java.io ByteArrayInputStream ByteArrayOutputStream InputStream)
           (java.net Socket)
           (java.nio.charset StandardCharsets)
           (java.util.zip Deflater DeflaterOutputStream GZIPInputStream GZIPOutputStream
                          Inflater InflaterInputStream)))

(set! *warn-on-reflection* true)

(def ^:private text (apply str (repeat 300 "hello compressed world ")))

(defn- utf8 ^bytes [^String s] (.getBytes s StandardCharsets/UTF_8))

(defn- gunzip ^String [^bytes b]
  (slurp (GZIPInputStream. (ByteArrayInputStream. b)) :encoding "UTF-8"))

(defn- inflate ^String [^bytes b]
  (slurp (InflaterInputStream. (ByteArrayInputStream. b)) :encoding "UTF-8"))

(defn- gzip ^bytes [^bytes b]
  (let [out (ByteArrayOutputStream.)]
    (with-open [z (GZIPOutputStream. out)] (.write z b))
    (.toByteArray out)))

(defn- zlib ^bytes [^bytes b raw?]
  (let [out (ByteArrayOutputStream.)]
    (with-open [z (DeflaterOutputStream. out (Deflater. Deflater/DEFAULT_COMPRESSION (boolean raw?)))]
      (.write z b))
    (.toByteArray out)))

(defn- get-bytes [path accept & [headers]]
  (u/GET path {:as :bytes :headers (cond-> (or headers {}) accept (assoc "Accept-Encoding" accept))}))

(defn- text-handler [content-type & [headers]]
  (fn [_] {:status 200 :headers (merge {"Content-Type" content-type} headers) :body text}))

(def ^:private on {:compression? true})

(deftest compresses-what-the-client-accepts
  (with-server (text-handler "text/plain; charset=utf-8") on
    (testing "gzip, with Vary and the compressed length"
      (let [r (get-bytes "/" "gzip")
            ^bytes b (:body r)]
        (is (= "gzip" (u/header r "content-encoding")))
        (is (= "Accept-Encoding" (u/header r "vary")))
        (is (= (str (alength b)) (u/header r "content-length")))
        (is (< (alength b) (/ (count text) 10)))
        (is (= text (gunzip b)))))
    (testing "q-values choose: deflate over gzip;q=0.5"
      (let [r (get-bytes "/" "gzip;q=0.5, deflate")]
        (is (= "deflate" (u/header r "content-encoding")))
        (is (= text (inflate (:body r))))))
    (testing "gzip;q=0 is never gzip"
      (let [r (get-bytes "/" "gzip;q=0")]
        (is (nil? (u/header r "content-encoding")))
        (is (= text (String. ^bytes (:body r) StandardCharsets/UTF_8)))))
    (testing "identity;q=0 with gzip acceptable: gzip"
      (is (= "gzip" (u/header (get-bytes "/" "identity;q=0, gzip") "content-encoding"))))
    (testing "no Accept-Encoding: the body as it is, still with Vary for caches"
      (let [r (get-bytes "/" nil)]
        (is (nil? (u/header r "content-encoding")))
        (is (= "Accept-Encoding" (u/header r "vary")))
        (is (= text (String. ^bytes (:body r) StandardCharsets/UTF_8)))))
    (testing "brotli and zstd, their libraries being on the classpath"
      (is (Brotli4jLoader/isAvailable))
      (let [r (get-bytes "/" "br")]
        (is (= "br" (u/header r "content-encoding")))
        (is (= text (String. (.getDecompressedData (Decoder/decompress ^bytes (:body r)))
                             StandardCharsets/UTF_8))))
      (let [r (get-bytes "/" "zstd")
            ^bytes b (:body r)]
        (is (= "zstd" (u/header r "content-encoding")))
        (is (= text (String. (Zstd/decompress b (int (count text))) StandardCharsets/UTF_8)))))
    (testing "HEAD: no body, no coding"
      (let [r (u/request :head "/" {:headers {"Accept-Encoding" "gzip"}})]
        (is (= 200 (:status r)))
        (is (nil? (u/header r "content-encoding")))
        (is (= "" (:body r)))))))

(deftest off-by-default
  (with-server (text-handler "text/plain") {}
    (let [r (get-bytes "/" "gzip, br")]
      (is (nil? (u/header r "content-encoding")))
      (is (nil? (u/header r "vary")))
      (is (= text (String. ^bytes (:body r) StandardCharsets/UTF_8))))))

(deftest what-is-left-alone
  (with-server {:routes [{:path "/png" :handler (text-handler "image/png")}
                         {:path "/none" :handler (fn [_] {:status 200 :body text})}
                         {:path "/off" :compress? false :handler (text-handler "text/plain")}
                         {:path "/identity" :handler (text-handler "text/plain" {"Content-Encoding" "identity"})}
                         {:path "/own" :handler (fn [_] {:status 200
                                                         :headers {"Content-Type" "text/plain"
                                                                   "Content-Encoding" "gzip"}
                                                         :body (gzip (utf8 text))})}
                         {:path "/small" :handler (fn [_] {:status 200 :headers {"Content-Type" "text/plain"}
                                                           :body "short"})}
                         {:path "/range" :handler (fn [_] {:status 206
                                                           :headers {"Content-Type" "text/plain"
                                                                     "Content-Range" (str "bytes 0-" (dec (count text)) "/99999")}
                                                           :body text})}
                         {:path "/events" :handler (text-handler "text/event-stream")}
                         {:path "/nc" :handler (fn [_] {:status 204 :headers {"Content-Type" "text/plain"}})}
                         {:path "/nm" :handler (fn [_] {:status 304 :headers {"Content-Type" "text/plain"
                                                                              "ETag" "\"v1\""}})}]}
    on
    (doseq [p ["/png" "/none" "/off" "/identity" "/range" "/events"]
            accept ["gzip" nil]]
      (testing (str p " " accept)
        (let [r (get-bytes p accept)]
          (is (nil? (u/header r "content-encoding")) "sent as it is, with no identity line")
          (is (= text (String. ^bytes (:body r) StandardCharsets/UTF_8))))))
    (testing "HEAD of a response that is not compressed: no identity line either"
      (is (nil? (u/header (u/request :head "/png" {:headers {"Accept-Encoding" "gzip"}})
                          "content-encoding"))))
    (testing "a media type that is not compressed gets no Vary"
      (is (nil? (u/header (get-bytes "/png" "gzip") "vary"))))
    (testing "the handler's own coding is sent as it is, not compressed again"
      (let [r (get-bytes "/own" "gzip")]
        (is (= "gzip" (u/header r "content-encoding")))
        (is (= text (gunzip (:body r))))))
    (testing "a body under :compression-min-size"
      (let [r (get-bytes "/small" "gzip")]
        (is (nil? (u/header r "content-encoding")))
        (is (= "short" (String. ^bytes (:body r) StandardCharsets/UTF_8)))))
    (testing "204 and 304 carry no body and no coding; a 304 keeps its Vary"
      (let [r (u/exchange "GET /nc HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")]
        (is (str/starts-with? (:resp r) "HTTP/1.1 204"))
        (is (not (re-find #"(?i)content-encoding" (:resp r)))))
      (let [r (u/exchange "GET /nm HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")]
        (is (str/starts-with? (:resp r) "HTTP/1.1 304"))
        (is (not (re-find #"(?i)content-encoding" (:resp r))))
        (is (re-find #"(?i)\r\nvary: accept-encoding\r\n" (:resp r)))))))

(deftest vary-is-merged
  (with-server {:routes [{:path "/origin" :handler (text-handler "text/html" {"Vary" "Origin"})}
                         {:path "/star" :handler (text-handler "text/html" {"Vary" "*"})}
                         {:path "/already" :handler (text-handler "text/html" {"Vary" "accept-encoding, Cookie"})}]}
    on
    (is (= ["Origin" "Accept-Encoding"] (get-in (get-bytes "/origin" "gzip") [:headers "vary"])))
    (is (= ["*"] (get-in (get-bytes "/star" "gzip") [:headers "vary"])))
    (is (= ["accept-encoding, Cookie"] (get-in (get-bytes "/already" "gzip") [:headers "vary"])))))

(deftest every-body-kind-and-handler-mode
  (with-server {:routes [{:path "/json" :handler-mode :non-blocking
                          :handler (fn [_ respond _] (respond {:status 200 :body {:text text}}))}
                         {:path "/stream"
                          :handler (fn [_] {:status 200 :headers {"Content-Type" "text/csv"}
                                            :body (ByteArrayInputStream. (utf8 (str text text text)))})}
                         {:path "/seq" :handler (fn [_] {:status 200 :headers {"Content-Type" "text/plain"}
                                                         :body (repeat 50 text)})}]}
    (assoc on :output-buffer-size 4096)
    (testing "a JSON body from a non-blocking handler"
      (let [r (get-bytes "/json" "gzip")]
        (is (= "gzip" (u/header r "content-encoding")))
        (is (= (str "{\"text\":\"" text "\"}") (gunzip (:body r))))))
    (testing "a streamed body longer than the output buffer: chunked and compressed"
      (let [r (get-bytes "/stream" "gzip")]
        (is (= "gzip" (u/header r "content-encoding")))
        (is (nil? (u/header r "content-length")))
        (is (= (str text text text) (gunzip (:body r)))))
      (is (= (apply str (repeat 50 text)) (gunzip (:body (get-bytes "/seq" "gzip"))))))))

(defn- read-head
  "Reads a response head from `in`, byte by byte; returns it as a String."
  ^String [^InputStream in]
  (let [sb (StringBuilder.)]
    (loop []
      (let [c (.read in)]
        (when (neg? c) (throw (ex-info "closed in the head" {:head (str sb)})))
        (.append sb (char c))
        (if (str/ends-with? (str sb) "\r\n\r\n") (str sb) (recur))))))

(defn- read-chunk
  "Reads one chunk of a chunked body from `in`: its bytes (empty for the last)."
  ^bytes [^InputStream in]
  (let [size-line (loop [sb (StringBuilder.)]
                    (let [c (.read in)]
                      (if (= c (int \newline)) (str/trim (str sb)) (recur (.append sb (char c))))))
        n (Long/parseLong (first (str/split size-line #";")) 16)
        b (.readNBytes in (int n))]
    (.readNBytes in 2)
    b))

(deftest streamed-events-arrive-one-by-one
  (let [release (promise)
        handler (fn [content-type]
                  (fn [_ respond _]
                    (respond {:status 200 :headers {"content-type" content-type}
                              :body (stream/channel
                                     (fn [ch]
                                       (future
                                         (stream/send! ch (stream/sse {:data "first"}))
                                         (deref release 5000 nil)
                                         (stream/send! ch (stream/sse {:data "second"}))
                                         (stream/close! ch))))})))]
    (with-server {:routes [{:path "/sse" :handler-mode :non-blocking :handler (handler "text/event-stream")}
                           {:path "/log" :handler-mode :non-blocking :handler (handler "text/plain")}]}
      (assoc on :compression-min-size 0)
      (testing "text/event-stream: not compressed, the first event before the second is sent"
        (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
          (.setSoTimeout s 3000)
          (.write (.getOutputStream s) (utf8 "GET /sse HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n"))
          (let [in (.getInputStream s)
                head (read-head in)]
            (is (not (re-find #"(?i)content-encoding" head)))
            (is (= "data: first\n\n" (String. (read-chunk in) StandardCharsets/UTF_8))))))
      (testing "a compressed stream is flushed per write: the first part decodes on its own"
        (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
          (.setSoTimeout s 3000)
          (.write (.getOutputStream s) (utf8 "GET /log HTTP/1.1\r\nHost: x\r\nAccept-Encoding: deflate\r\n\r\n"))
          (let [in (.getInputStream s)
                head (read-head in)
                inflater (Inflater.)
                out (byte-array 1024)]
            (is (re-find #"(?i)content-encoding: deflate" head))
            (.setInput inflater (read-chunk in))
            (let [n (.inflate inflater out)]
              (is (= "data: first\n\n" (String. out 0 n StandardCharsets/UTF_8))))
            (deliver release true)))))))

(deftest options
  (testing "AppsFlyer Donkey's :compression is :compression?"
    (with-server (text-handler "text/plain") {:compression true}
      (is (= "gzip" (u/header (get-bytes "/" "gzip") "content-encoding")))))
  (testing ":compression-types replaces the list; +suffix and type/* ranges"
    (with-server {:routes [{:path "/a" :handler (text-handler "application/vnd.x+json")}
                           {:path "/b" :handler (text-handler "text/plain")}
                           {:path "/c" :handler (text-handler "image/png")}]}
      (assoc on :compression-types ["+json" "image/*"])
      (is (= "gzip" (u/header (get-bytes "/a" "gzip") "content-encoding")))
      (is (nil? (u/header (get-bytes "/b" "gzip") "content-encoding")))
      (is (= "gzip" (u/header (get-bytes "/c" "gzip") "content-encoding")))))
  (testing ":compression-level 1 and 9 both decode"
    (doseq [level [1 9]]
      (with-server (text-handler "text/plain") (assoc on :compression-level level)
        (is (= text (gunzip (:body (get-bytes "/" "gzip"))))))))
  (testing "bad values are refused at start-up, naming the option"
    (doseq [[opts re] [[{:compression-level 0} #":compression-level"]
                       [{:compression-level 10} #":compression-level"]
                       [{:compression-min-size -1} #":compression-min-size"]
                       [{:compression-types ["text"]} #":compression-types"]
                       [{:compression-types ["text/ plain"]} #":compression-types"]
                       [{:compression-types "text/plain"} #":compression-types"]
                       [{:compression? "yes"} #":compression\?"]
                       [{:decompress-requests? 1} #":decompress-requests\?"]]]
      (let [e (try (with-open [_ (server/run-server (text-handler "text/plain")
                                                    (merge {:port 0 :join? false :compression? true} opts))]
                     nil)
                   (catch Exception e e))]
        (is (some? e) (pr-str opts))
        (is (re-find re (str (ex-message e) (some-> e ex-cause ex-message))) (pr-str opts)))))
  (testing "a route's :compress? must be a boolean"
    (is (thrown-with-msg? IllegalArgumentException #":compress\?"
                          (server/run-server {:routes [{:path "/" :compress? "no" :handler (text-handler "text/plain")}]}
                                             {:port 0 :join? false})))))

;; ---- request bodies ---------------------------------------------------------------------

(defn- echo-sync [req]
  {:status 200
   :headers {"Content-Type" "text/plain"}
   :body (str (get-in req [:headers "content-encoding"] "-") " " (pr-str (:content-length req)) " "
              (slurp (:body req) :encoding "UTF-8"))})

(defn- echo-async [req respond raise]
  (try (respond (echo-sync req)) (catch Throwable t (raise t))))

(defn- post [path coding ^bytes body]
  (u/request :post path {:headers (cond-> {"Content-Type" "text/plain"} coding (assoc "Content-Encoding" coding))
                         :body body}))

(deftest request-bodies-are-inflated
  (with-server {:routes [{:path "/sync" :methods [:post] :handler echo-sync}
                         {:path "/async" :methods [:post] :handler-mode :non-blocking :handler echo-async}]}
    {:decompress-requests? true :max-body-size (* 1024 1024)}
    (doseq [path ["/sync" "/async"]]
      (testing path
        (testing "gzip, x-gzip, deflate (zlib and raw): the handler reads the inflated body, with no coding or length"
          (doseq [[coding body] [["gzip" (gzip (utf8 text))] ["x-gzip" (gzip (utf8 text))]
                                 ["deflate" (zlib (utf8 text) false)] ["deflate" (zlib (utf8 text) true)]]]
            (let [r (post path coding body)]
              (is (= 200 (:status r)) coding)
              (is (= (str "- nil " text) (:body r)) coding))))
        (testing "no coding, or identity: as it is"
          (is (= (str "- " (count text) " " text) (:body (post path nil (utf8 text)))))
          (is (= (str "identity " (count text) " " text) (:body (post path "identity" (utf8 text))))))
        (testing "not valid in its coding: 400, never an empty or shorter body"
          (let [whole (gzip (utf8 text))]
            (doseq [body [(utf8 "not gzip at all")
                          (java.util.Arrays/copyOf whole (quot (alength whole) 2))
                          ;; the trailer's CRC is checked
                          (doto (aclone whole) (aset-byte (- (alength whole) 6) (byte 1)))]]
              (is (= 400 (:status (post path "gzip" body)))))
            (is (= 400 (:status (post path "deflate" (utf8 "\u0078\u009cnot deflate")))))))
        (testing "an unknown coding: 415"
          (let [r (post path "br" (utf8 "x"))]
            (is (= 415 (:status r)))
            (is (str/includes? (:body r) "gzip or deflate"))))
        (testing "a small body that inflates past :max-body-size: 413, quickly"
          (let [bomb (gzip (byte-array (* 64 1024 1024)))
                t0 (System/nanoTime)
                r (post path "gzip" bomb)]
            (is (< (alength bomb) (* 100 1024)))
            (is (= 413 (:status r)))
            (is (< (/ (- (System/nanoTime) t0) 1e6) 5000))))))))

(deftest request-bodies-are-left-as-they-are-by-default
  (with-server {:routes [{:path "/sync" :methods [:post] :handler
                          (fn [req] {:status 200 :body (str (get-in req [:headers "content-encoding"]) " "
                                                            (count (.readAllBytes ^InputStream (:body req))))})}]}
    {}
    (let [body (gzip (utf8 text))]
      (is (= (str "gzip " (alength body)) (:body (post "/sync" "gzip" body))))
      (is (= "br 1" (:body (post "/sync" "br" (utf8 "x"))))))))

(deftest over-http2
  (with-server {:routes [{:path "/text" :handler (text-handler "text/plain")}
                         {:path "/png" :handler (text-handler "image/png")}
                         {:path "/echo" :methods [:post] :handler echo-sync}]}
    {:h2c? true :compression? true :decompress-requests? true}
    (let [c (h2/connect u/*port*)]
      (try
        (let [r (h2/request! c 1 "GET" "/text" [["accept-encoding" "gzip"]] nil)]
          (is (= 200 (:status r)))
          (is (= "gzip" (get-in r [:headers "content-encoding"])))
          (is (= "Accept-Encoding" (get-in r [:headers "vary"])))
          (is (< (count (:body r)) (count text))))
        (let [r (h2/request! c 3 "GET" "/png" [["accept-encoding" "gzip"]] nil)]
          (is (nil? (get-in r [:headers "content-encoding"])) "no identity line on HTTP/2 either")
          (is (= text (:body r))))
        (let [r (h2/request! c 5 "POST" "/echo" [["content-encoding" "gzip"]] (gzip (utf8 text)))]
          (is (= (str "- nil " text) (:body r))))
        (let [r (h2/request! c 7 "POST" "/echo" [["content-encoding" "gzip"]] (utf8 "not gzip"))]
          (is (= 400 (:status r))))
        (finally (h2/close! c))))))

(deftest without-the-optional-libraries
  ;; a JVM whose classpath lacks brotli4j and zstd-jni: the server starts, and a client that
  ;; prefers br or zstd gets gzip
  (let [script (str "(require '[donkey.server :as s])"
                    "(with-open [srv (s/run-server (fn [_] {:status 200 :headers {\"Content-Type\" \"text/plain\"}"
                    "                                       :body (apply str (repeat 500 \"abc \"))})"
                    "                              {:port 0 :join? false :compression? true})]"
                    "  (let [c (java.net.http.HttpClient/newHttpClient)"
                    "        r (.send c (-> (java.net.http.HttpRequest/newBuilder"
                    "                         (java.net.URI. (str \"http://127.0.0.1:\" (s/port srv) \"/\")))"
                    "                       (.header \"Accept-Encoding\" \"br, zstd, gzip;q=0.5\") (.build))"
                    "                   (java.net.http.HttpResponse$BodyHandlers/ofByteArray))]"
                    "    (println \"BROTLI\" (io.netty.handler.codec.compression.Brotli/isAvailable)"
                    "             \"ZSTD\" (io.netty.handler.codec.compression.Zstd/isAvailable)"
                    "             \"CODING\" (.orElse (.firstValue (.headers r) \"content-encoding\") \"none\"))))"
                    "(shutdown-agents)")
        {:keys [exit out]} (u/run-clojure-without #"brotli4j|zstd-jni" script)]
    (is (zero? exit) out)
    (is (str/includes? out "BROTLI false ZSTD false CODING gzip") out)))
