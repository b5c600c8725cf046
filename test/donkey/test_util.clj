(ns donkey.test-util
  "Helpers shared by the test namespaces: real servers on :port 0, real HTTP clients."
  (:require [donkey.server :as server])
  (:import (java.io BufferedReader InputStream InputStreamReader OutputStream)
           (java.net Socket URI)
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
