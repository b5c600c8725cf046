(ns donkey.test-util
  "Helpers shared by the test namespaces: real servers on :port 0, real HTTP clients."
  (:require [clojure.string :as str]
            [donkey.server :as server])
  (:import (java.io BufferedReader IOException InputStream InputStreamReader OutputStream)
           (java.net Socket SocketException SocketTimeoutException URI)
           (java.net.http HttpClient HttpClient$Version HttpRequest HttpRequest$BodyPublishers
                          HttpResponse HttpResponse$BodyHandlers)
           (java.nio.charset StandardCharsets)
           (java.time Duration)))

(set! *warn-on-reflection* true)

(def ^:dynamic *port* nil)

(defmacro with-server
  "Runs `body` with a donkey server for `handler` started on a free port bound to *port*."
  [handler opts & body]
  `(with-open [s# (server/run-server ~handler (merge {:port 0 :join? false :event-loops 2} ~opts))]
     (binding [*port* (server/port s#)]
       ~@body)))

(def ^HttpClient client
  (-> (HttpClient/newBuilder)
      (.version HttpClient$Version/HTTP_1_1)
      (.connectTimeout (Duration/ofSeconds 5))
      (.build)))

(defn url [path] (str "http://127.0.0.1:" *port* path))

(defn- response-map [^HttpResponse r]
  {:status (.statusCode r)
   :headers (into {} (map (fn [[k v]] [k (vec v)])) (.map (.headers r)))
   :body (.body r)})

(defn request
  "Sends one request with java.net.http and returns {:status :headers :body} (body a String,
  or bytes with :as :bytes). Headers in the result map to vectors of values."
  ([method path] (request method path {}))
  ([method path {:keys [headers body as timeout] :or {timeout 10}}]
   (let [b (-> (HttpRequest/newBuilder (URI/create (url path)))
               (.timeout (Duration/ofSeconds timeout))
               (.method (.toUpperCase (name method))
                        (cond (nil? body) (HttpRequest$BodyPublishers/noBody)
                              (bytes? body) (HttpRequest$BodyPublishers/ofByteArray ^bytes body)
                              :else (HttpRequest$BodyPublishers/ofString (str body)))))]
     (doseq [[k v] headers] (.header b k v))
     (response-map (.send client (.build b)
                          (if (= as :bytes)
                            (HttpResponse$BodyHandlers/ofByteArray)
                            (HttpResponse$BodyHandlers/ofString)))))))

(defn GET [path & [opts]] (request :get path opts))

(defn header [resp name] (first (get-in resp [:headers name])))

(defn raw
  "Writes `data` (a String, sent as ISO-8859-1) on a fresh socket and returns everything the
  server sends until it closes the connection or `timeout-ms` passes."
  ([data] (raw data 3000))
  ([^String data timeout-ms]
   (with-open [s (Socket. "127.0.0.1" (int *port*))]
     (.setSoTimeout s (int timeout-ms))
     (let [^OutputStream out (.getOutputStream s)
           ^InputStream in (.getInputStream s)
           buf (byte-array 65536)
           sb (StringBuilder.)]
       (.write out (.getBytes data StandardCharsets/ISO_8859_1))
       (.flush out)
       (try
         (loop []
           (let [n (.read in buf)]
             (when (pos? n)
               (.append sb (String. buf 0 n StandardCharsets/ISO_8859_1))
               (recur))))
         (catch java.net.SocketTimeoutException _ nil)
         (catch java.net.SocketException _ nil))
       (str sb)))))

(defn status-line [^String raw-response]
  (first (.split raw-response "\r\n" 2)))

;; ---------------------------------------------------------------------------------------------
;; raw connections: requests written as bytes, answers read as text

(defn ->bytes ^bytes [data]
  (if (bytes? data) data (.getBytes (str data) StandardCharsets/ISO_8859_1)))

(defn now-ms ^long [] (quot (System/nanoTime) 1000000))

(defn read-all
  "Reads from `s` until the server closes (:eof), resets (:reset), `idle-ms` pass without a
  byte once something has arrived, or `timeout-ms` pass in all (:timeout)."
  [^Socket s timeout-ms idle-ms]
  (let [in (.getInputStream s)
        buf (byte-array 65536)
        sb (StringBuilder.)
        deadline (+ (now-ms) (long timeout-ms))]
    (loop []
      (let [left (- deadline (now-ms))]
        (if (<= left 0)
          {:resp (str sb) :end :timeout}
          (let [wait (if (pos? (.length sb)) (min left (long idle-ms)) left)
                _ (.setSoTimeout s (int (max 1 wait)))
                r (try (.read in buf)
                       (catch SocketTimeoutException _ (if (pos? (.length sb)) :idle :wait))
                       (catch SocketException _ :reset))]
            (cond
              (= :idle r) {:resp (str sb) :end :idle}
              (= :wait r) (recur)
              (= :reset r) {:resp (str sb) :end :reset}
              (neg? (long r)) {:resp (str sb) :end :eof}
              :else (do (.append sb (String. buf 0 (int r) StandardCharsets/ISO_8859_1))
                        (recur)))))))))

(defn exchange
  "Opens a connection, writes `data` (a String sent as ISO-8859-1, or bytes) and then:
  :read (default) reads the answer; :half-close shuts the output first (the server sees EOF);
  :close closes the socket at once without reading (returns nil). Returns
  {:resp String :end (:eof | :reset | :idle | :timeout)}: :eof/:reset mean the server closed."
  ([data] (exchange data {}))
  ([data {:keys [then timeout-ms idle-ms] :or {then :read timeout-ms 3000 idle-ms 400}}]
   (with-open [s (Socket. "127.0.0.1" (int *port*))]
     (let [out (.getOutputStream s)]
       (try (.write out (->bytes data)) (.flush out)
            (catch SocketException _ nil))
       (case then
         :close nil
         :half-close (do (try (.shutdownOutput s) (catch IOException _ nil))
                         (read-all s timeout-ms idle-ms))
         :read (read-all s timeout-ms idle-ms))))))

(defn closed? [r] (contains? #{:eof :reset} (:end r)))

(defn statuses
  "The status codes of every response in a raw byte stream, in order."
  [resp]
  (mapv #(Long/parseLong (second %)) (re-seq #"HTTP/1\.[01] (\d{3}) " (str resp))))

;; keys of colliding hashes, for the hash-flooding tests

(defn colliding-names
  "`n` distinct strings with one String.hashCode: `prefix` then k two-char blocks, each `a` or
  `b` (two blocks of equal hash: \"Aa\" and \"BB\" by default; \"a~\" and \"b_\" are
  lower-case and valid in header names). Equal lengths and equal hashes, so any prefix keeps
  them colliding."
  ([n] (colliding-names n ""))
  ([n prefix] (colliding-names n prefix "Aa" "BB"))
  ([n prefix a b]
   (let [k (max 1 (long (Math/ceil (/ (Math/log (max 2 n)) (Math/log 2)))))]
     (mapv (fn [i] (apply str prefix (for [j (range k)] (if (bit-test i j) b a)))) (range n)))))

(defn- rotl32 ^long [^long x ^long r]
  (bit-and 0xffffffff (bit-or (bit-shift-left x r) (unsigned-bit-shift-right (bit-and x 0xffffffff) (- 32 r)))))

(defn- rotr32 ^long [^long x ^long r] (rotl32 x (- 32 r)))

(defn- mul32 ^long [^long a ^long b] (bit-and 0xffffffff (unchecked-multiply a b)))

(defn- inverse32
  "The inverse of the odd `a` modulo 2^32 (Newton's iteration)."
  ^long [^long a]
  (loop [x a i 0]
    (if (= i 5) x (recur (mul32 x (bit-and 0xffffffff (- 2 (mul32 a x)))) (inc i)))))

(def ^:private c1 0xcc9e2d51)
(def ^:private c2 0x1b873593)

(defn- mix-k1 ^long [^long k] (mul32 (rotl32 (mul32 k c1) 15) c2))
(defn- unmix-k1 ^long [^long m] (mul32 (rotr32 (mul32 m (inverse32 c2)) 15) (inverse32 c1)))
(defn- mix-h1 ^long [^long h ^long k] (bit-and 0xffffffff (+ (* 5 (rotl32 (bit-xor h k) 13)) 0xe6546b64)))

(defn keyword-colliding-names
  "`n` distinct four-letter names (valid keyword and header-free names: letters only) whose
  keywords share one hash, while their String.hashCodes differ. A keyword's hash is murmur3
  of its name's chars, two chars a block: for any first block, the second block that brings
  murmur3's state to a chosen value is computed by inverting the block mixing, and kept when
  both of its chars are letters."
  [n]
  (let [target 0x5bd1e995
        names (for [a (range (int \a) (inc (int \z)))
                    b (range (int \a) (inc (int \z)))
                    :let [h1 (mix-h1 0 (mix-k1 (bit-or a (bit-shift-left b 16))))
                          k2 (unmix-k1 (bit-xor h1 target))
                          c (bit-and k2 0xffff)
                          d (unsigned-bit-shift-right k2 16)]
                    :when (and (Character/isLetter (char c)) (Character/isLetter (char d)))]
                (str (char a) (char b) (char c) (char d)))
        out (vec (take n names))]
    (assert (= n (count out)))
    (assert (apply = (map #(clojure.lang.Murmur3/hashUnencodedChars ^String %) out)))
    (assert (= n (count (set (map #(.hashCode ^String %) out)))))
    out))

(defmacro millis
  "Evaluates `body`; returns [its value (or the Throwable it threw) and the milliseconds taken]."
  [& body]
  `(let [t# (System/nanoTime)
         v# (try (do ~@body) (catch Throwable e# e#))]
     [v# (/ (- (System/nanoTime) t#) 1e6)]))

(defn event-loop-allocation
  "Bytes allocated so far by the threads of Vert.x's event loops (all servers in this JVM)."
  ^long []
  (let [^com.sun.management.ThreadMXBean mx (java.lang.management.ManagementFactory/getThreadMXBean)]
    (reduce + 0 (for [^Thread t (keys (Thread/getAllStackTraces))
                      :when (.contains (.getName t) "eventloop")]
                  (max 0 (.getThreadAllocatedBytes mx (.getId t)))))))

(defn run-clojure-without
  "Runs `script` (Clojure source) in a new JVM whose classpath is this one's without the
  entries matching `excluded` (a regex): what a user without those optional libraries has.
  Returns {:exit code :out everything it printed, stderr included}."
  [excluded ^String script]
  (let [cp (->> (.split (System/getProperty "java.class.path") ":")
                (remove #(re-find excluded %))
                (str/join ":"))
        p (-> (ProcessBuilder. ^java.util.List (java.util.List/of (str (System/getProperty "java.home") "/bin/java")
                                                                  "-cp" cp "clojure.main" "-e" script))
              (.redirectErrorStream true)
              (.start))
        out (slurp (.getInputStream p))]
    {:exit (.waitFor p) :out out}))
