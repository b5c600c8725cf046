(ns donkey.test-util
  "Helpers shared by the test namespaces: real servers on :port 0, real HTTP clients."
  (:require [donkey.server :as server])
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
