(ns donkey.middleware.multipart
  "Middleware that parses multipart/form-data request bodies (file uploads) into parameters.

  A drop-in for `ring.middleware.multipart-params/wrap-multipart-params` with the default
  temp-file store: the parameter map has the same shape, but the parsing runs in the Java
  kernel (`donkey.codec.Multipart`), single pass and in bounded memory, with limits, and the
  temp files are deleted as soon as the request is answered rather than an hour later."
  (:import (clojure.lang IFn)
           (donkey.codec Multipart MultipartException MultipartResult)
           (donkey.kernel RequestScope)
           (java.io File FileInputStream InputStream)
           (java.nio.charset Charset)))

(set! *warn-on-reflection* true)

(def ^:private defaults
  {:encoding nil
   :fallback-encoding nil
   :max-file-size (* 100 1024 1024)
   :max-field-size (* 1024 1024)
   :max-request-size (* 200 1024 1024)
   :max-parts 1000
   :keywords? false
   :temp-dir nil})

(defn- fail [msg]
  (throw (IllegalArgumentException. (str "donkey.middleware.multipart/wrap-multipart-params: " msg))))

(defn- charset-opt ^Charset [opts k]
  (let [v (get opts k)]
    (cond (nil? v) nil
          (instance? Charset v) v
          (string? v) (try (Charset/forName v)
                           (catch Exception _ (fail (str k " names no charset this JVM has: " (pr-str v)))))
          :else (fail (str k " must be a charset name or a java.nio.charset.Charset, got " (pr-str v))))))

(defn- size-opt ^long [opts k]
  (let [v (get opts k)]
    (when-not (and (integer? v) (pos? v) (<= v Long/MAX_VALUE))
      (fail (str k " must be a positive integer, got " (pr-str v))))
    (long v)))

(defn- multipart
  "Validates the options once and builds the kernel parser."
  ^Multipart [opts]
  (when-not (or (nil? opts) (map? opts)) (fail (str "options must be a map, got " (pr-str opts))))
  (let [opts (merge defaults (into {} (remove (comp nil? val)) opts))
        dir (:temp-dir opts)
        dir (cond (nil? dir) nil
                  (instance? File dir) dir
                  (string? dir) (File. ^String dir)
                  :else (fail (str ":temp-dir must be a String or a java.io.File, got " (pr-str dir))))]
    (when (and dir (not (.isDirectory ^File dir)))
      (fail (str ":temp-dir is not a directory: " dir)))
    (when-not (boolean? (:keywords? opts))
      (fail (str ":keywords? must be true or false, got " (pr-str (:keywords? opts)))))
    (when-not (<= (size-opt opts :max-parts) Integer/MAX_VALUE)
      (fail ":max-parts must fit in an int"))
    (Multipart. (charset-opt opts :encoding)
                (charset-opt opts :fallback-encoding)
                (size-opt opts :max-file-size)
                (size-opt opts :max-field-size)
                (size-opt opts :max-request-size)
                (int (size-opt opts :max-parts))
                (boolean (:keywords? opts))
                ^File dir)))

(defn- content-type ^String [request]
  (get (:headers request) "content-type"))

(defn- content-length ^long [request]
  (let [v (get (:headers request) "content-length")]
    (or (when (string? v) (parse-long v)) -1)))

(defn- add-params
  "Ring's keys: :multipart-params, and the same map merged into :params."
  [request params]
  (assoc request :multipart-params params :params (merge (:params request) params)))

(defn- parse
  "The parsed body of a multipart/form-data request, or the MultipartException refusing it."
  [^Multipart mp request]
  (try
    (.parse mp ^InputStream (:body request) (content-type request) (content-length request))
    (catch MultipartException e e)))

(defn- error-response [^MultipartException e]
  {:status (.status e)
   :headers {"content-type" "text/plain; charset=utf-8"}
   :body (.getMessage e)})

(defn- detach
  "A response whose body is one of the request's temp files gets a stream opened on it
  instead, so the file can be deleted now and still be sent (POSIX semantics)."
  [^MultipartResult result response]
  (if (and (map? response) (.isTempFile result (:body response)))
    (assoc response :body (FileInputStream. ^File (:body response)))
    response))

(defn wrap-multipart-params
  "Middleware to parse multipart/form-data request bodies. Adds the following keys to the
  request map, as ring-core's `wrap-multipart-params` does:

  :multipart-params - a map of the multipart parameters ({} when the request is not
                      multipart/form-data)
  :params           - the same map merged into any existing :params

  Names map to a String, or for a file part (a part with a filename, even an empty one) to a
  map {:filename :content-type :tempfile :size}; a name sent several times maps to a vector of
  its values, in order. :tempfile is a java.io.File (donkey-multipart-*.tmp, readable by its
  owner only), deleted once the request is answered: when a sync handler returns or throws,
  when an async handler calls respond or raise (or throws), and under donkey also when an
  async handler never answers (once the request has timed out or its client has gone). To
  keep an upload, move or copy it before then. A response whose :body is the temp file itself
  is still sent.

  Answers without calling the handler, as {:status 400 or 413 :headers {\"content-type\"
  \"text/plain; charset=utf-8\"} :body \"<what was wrong>\"}:
    400 - no boundary in the Content-Type, a malformed or truncated body, a part without a
          form-data Content-Disposition or name, an unknown charset, more than 8 distinct
          part names of one hash (\"too many part names with colliding hashes\": such names
          are easy to make, \"Aa\" and \"BB\" share a String.hashCode, and would make the
          parameter map quadratic to build; real names never do this; checked before any
          name becomes a keyword)
    413 - a body, file, field or part count over its limit (a Content-Length over
          :max-request-size is refused before reading)
  Temp files already written are deleted first. Other failures (reading the body, a full disk)
  propagate: thrown by a sync handler, passed to raise by an async one.

  The following options are accepted, checked once when the middleware is built:

  :encoding          - charset (name or java.nio.charset.Charset) that overrides every other: used for all fields and part
                       headers (as ring-core's :encoding)
  :fallback-encoding - charset (name or Charset) for fields that name none; default: the request
                       Content-Type's charset, else \"UTF-8\". Otherwise a field is decoded
                       with the charset of its own Content-Type, else the value of a field
                       named \"_charset_\" (HTML 5), else this one
  :max-file-size     - bytes, per file part (default 100 MiB)
  :max-field-size    - bytes, per non-file field; fields are held in memory (default 1 MiB)
  :max-request-size  - bytes, of the whole body (default 200 MiB)
  :max-parts         - parts per body (default 1000)
  :keywords?         - turn names that are valid keywords into keywords, in :multipart-params
                       and :params (as ring's wrap-keyword-params decides; default false)
  :temp-dir          - directory (String or File) for temp files (default java.io.tmpdir)

  Note that donkey's server bounds every body by its own :max-body-size (16 MiB by default):
  raise that too for larger uploads. A sync handler's body is parsed as it arrives from the
  socket; an async handler's has arrived whole before the handler runs. Works with both sync
  (1-arity) and async (3-arity) handlers."
  ([handler]
   (wrap-multipart-params handler {}))
  ([handler options]
   (let [mp (multipart options)
         ^IFn handler handler]
     (fn
       ([request]
        (if-not (Multipart/isFormData (content-type request))
          (handler (add-params request {}))
          (let [r (parse mp request)]
            (if (instance? MultipartException r)
              (error-response r)
              (let [^MultipartResult r r]
                (try
                  (detach r (handler (add-params request (.params r))))
                  (finally (.deleteTempFiles r))))))))
       ([request respond raise]
        (if-not (Multipart/isFormData (content-type request))
          (handler (add-params request {}) respond raise)
          (let [r (try (parse mp request) (catch Throwable t t))]
            (cond
              (instance? MultipartException r) (respond (error-response r))
              (instance? Throwable r) (raise r)
              :else
              (let [^MultipartResult r r
                    ^IFn respond respond
                    ^IFn raise raise]
                ;; also when the handler never answers (the request times out, or the client
                ;; goes away): the kernel runs this once the request is over
                (RequestScope/atEnd #(.deleteTempFiles r))
                (try
                  (handler (add-params request (.params r))
                           (fn [response]
                             (try (respond (detach r response))
                                  (finally (.deleteTempFiles r))))
                           (fn [error]
                             (.deleteTempFiles r)
                             (raise error)))
                  (catch Throwable t
                    (.deleteTempFiles r)
                    (throw t))))))))))))
