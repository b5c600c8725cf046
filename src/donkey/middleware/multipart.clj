(ns donkey.middleware.multipart
  "multipart/form-data request bodies (file uploads) as parameters, a drop-in for
  `ring.middleware.multipart-params` with its default temp-file store: the parameter map has
  the same shape, but the kernel parses it (`donkey.codec.Multipart`) in one pass and bounded
  memory, with limits, and the temp files are deleted as soon as the request is answered
  rather than an hour later.

  `multipart-params-request` is what `wrap-multipart-params` does, as a function. It throws a
  refused body as a `donkey.middleware.errors/bad-input` exception (status 400 or 413, the
  default answer's text as its message, the `donkey.codec.MultipartException` as its cause);
  the middleware answers it with :error-handler instead of calling the handler (see
  `donkey.middleware.errors`)."
  (:require [donkey.middleware.errors :as errors])
  (:import (clojure.lang ExceptionInfo IFn)
           (donkey.codec ContentType Multipart MultipartException MultipartResult)
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

(defn- fail [who msg]
  (throw (IllegalArgumentException. (str "donkey.middleware.multipart/" who ": " msg))))

(defn- charset-opt ^Charset [who opts k]
  (let [v (get opts k)]
    (cond (nil? v) nil
          (instance? Charset v) v
          (string? v) (try (ContentType/forName v)
                           (catch Exception _ (fail who (str k " names no charset this JVM has: " (pr-str v)))))
          :else (fail who (str k " must be a charset name or a java.nio.charset.Charset, got " (pr-str v))))))

(defn- size-opt ^long [who opts k]
  (let [v (get opts k)]
    (when-not (and (integer? v) (pos? v) (<= v Long/MAX_VALUE))
      (fail who (str k " must be a positive integer, got " (pr-str v))))
    (long v)))

(defn- multipart
  "Validates the options once and builds the kernel parser."
  ^Multipart [who opts]
  (when-not (or (nil? opts) (map? opts)) (fail who (str "options must be a map, got " (pr-str opts))))
  (let [opts (merge defaults (into {} (remove (comp nil? val)) opts))
        dir (:temp-dir opts)
        dir (cond (nil? dir) nil
                  (instance? File dir) dir
                  (string? dir) (File. ^String dir)
                  :else (fail who (str ":temp-dir must be a String or a java.io.File, got " (pr-str dir))))]
    (when (and dir (not (.isDirectory ^File dir)))
      (fail who (str ":temp-dir is not a directory: " dir)))
    (when-not (boolean? (:keywords? opts))
      (fail who (str ":keywords? must be true or false, got " (pr-str (:keywords? opts)))))
    (when-not (<= (size-opt who opts :max-parts) Integer/MAX_VALUE)
      (fail who ":max-parts must fit in an int"))
    (Multipart. (charset-opt who opts :encoding)
                (charset-opt who opts :fallback-encoding)
                (size-opt who opts :max-file-size)
                (size-opt who opts :max-field-size)
                (size-opt who opts :max-request-size)
                (int (size-opt who opts :max-parts))
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
  "The parsed body of a multipart/form-data request. Throws a bad-input exception for a
  refused body; its temp files are deleted first."
  ^MultipartResult [^Multipart mp request]
  (try
    (.parse mp ^InputStream (:body request) (content-type request) (content-length request))
    (catch MultipartException e
      (throw (errors/bad-input (.status e) (.getMessage e) e)))))

(defn- detach
  "A response whose body is one of the request's temp files gets a stream opened on it
  instead, so the file can be deleted now and still be sent (POSIX semantics)."
  [^MultipartResult result response]
  (if (and (map? response) (.isTempFile result (:body response)))
    (assoc response :body (FileInputStream. ^File (:body response)))
    response))

(defn multipart-params-request
  "What `wrap-multipart-params` does to a request, as a function: a multipart/form-data
  request with its body parsed into :multipart-params, merged into :params; any other request
  gets `{}` for both. Throws a bad-input exception for a refused body (see the namespace doc),
  after deleting the temp files it wrote. The temp files of a parsed body are the caller's to
  delete (each file part's :tempfile); `wrap-multipart-params` deletes them for you. Options
  as for `wrap-multipart-params`, checked on each call; :error-handler is not used."
  ([request] (multipart-params-request request {}))
  ([request options]
   (let [mp (multipart "multipart-params-request" options)]
     (if (Multipart/isFormData (content-type request))
       (add-params request (.params (parse mp request)))
       (add-params request {})))))

(defn- parse-or-refusal
  "The MultipartResult of a multipart/form-data request, nil for any other request, or the
  bad-input exception refusing its body (other throwables propagate)."
  [mp request]
  (try
    (when (Multipart/isFormData (content-type request))
      (parse mp request))
    (catch ExceptionInfo e
      (if (errors/bad-input? e) e (throw e)))))

(defn- parse-or-throwable
  "As parse-or-refusal, but any throwable is returned, for `raise`."
  [mp request]
  (try
    (parse-or-refusal mp request)
    (catch Throwable t t)))

(defn- delete-after
  "`(f)`, then the temp files of `result` deleted, also when it throws."
  [^MultipartResult result f]
  (try (f) (finally (.deleteTempFiles result))))

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

  A refused body goes to :error-handler, not the handler, its temp files already deleted; the
  default answer is {:status 400 or 413 :headers {\"content-type\" \"text/plain;
  charset=utf-8\"} :body \"<what was wrong>\"}:
    400 - no boundary in the Content-Type, a malformed or truncated body, a part without a
          form-data Content-Disposition or name, a malformed Content-Disposition parameter,
          an unknown charset, more than 8 distinct part names of one `String.hashCode`
          (\"too many part names with colliding hashes\": such names would make the
          parameter map quadratic to build; checked before any name becomes a keyword)
    413 - a body, file, field or part count over its limit (a Content-Length over
          :max-request-size is refused before reading)
  Other failures (reading the body, a full disk) propagate: thrown by a sync handler, passed
  to raise by an async one.

  Options, checked once when the middleware is built:

  :encoding          - charset (name or java.nio.charset.Charset) for every field and part
                       header, whatever the body says (as ring-core's :encoding)
  :fallback-encoding - charset (name or Charset) for fields that name none; default: the
                       request Content-Type's charset, else UTF-8. A field is decoded with
                       the charset of its own Content-Type, else the value of a field named
                       \"_charset_\" (HTML 5), else this one
  :max-file-size     - bytes, per file part (default 100 MiB)
  :max-field-size    - bytes, per non-file field; fields are held in memory (default 1 MiB)
  :max-request-size  - bytes, of the whole body (default 200 MiB)
  :max-parts         - parts per body (default 1000)
  :keywords?         - names that are valid keywords become keywords, in :multipart-params
                       and :params (as ring's wrap-keyword-params decides; default false)
  :temp-dir          - directory (String or File) for temp files (default java.io.tmpdir)
  :error-handler     - a Ring handler of both arities for a refused body (default
                       `donkey.middleware.errors/default-error-handler`)

  The server bounds every body by its own :max-body-size (16 MiB by default): raise it too
  for larger uploads. A sync handler's body is parsed as it arrives from the socket, before
  the handler runs; an async handler's has arrived whole before the middleware runs, and
  under donkey is parsed on one of the server's worker threads (temp files are file-system
  calls, which must not hold the event loop), after which the handler is called on the event
  loop as usual. Both arities."
  ([handler]
   (wrap-multipart-params handler {}))
  ([handler options]
   (let [mp (multipart "wrap-multipart-params" options)
         ^IFn handler handler
         ^IFn error-handler (errors/error-handler-option
                             "donkey.middleware.multipart/wrap-multipart-params" options)]
     (fn
       ([request]
        (let [r (parse-or-refusal mp request)]
          (cond
            (nil? r) (handler (add-params request {}))
            (errors/bad-input? r) (error-handler (assoc request :donkey.middleware/error r))
            :else (let [^MultipartResult r r]
                    (delete-after r #(detach r (handler (add-params request (.params r)))))))))
       ([request respond raise]
        (let [^IFn respond respond
              ^IFn raise raise
              continue
              (fn [r]
                (cond
                  (nil? r) (handler (add-params request {}) respond raise)
                  (errors/bad-input? r) (error-handler (assoc request :donkey.middleware/error r)
                                                       respond raise)
                  (instance? Throwable r) (raise r)
                  :else
                  (let [^MultipartResult r r]
                    ;; under donkey the kernel deletes the files once the request is over,
                    ;; on a worker: after the response is sent, and also when the handler
                    ;; never answers (a timeout) or the client goes away
                    (if (RequestScope/atEndOnWorker #(.deleteTempFiles r))
                      (when-not (RequestScope/isOver)
                        (handler (add-params request (.params r)) respond raise))
                      (try
                        (handler (add-params request (.params r))
                                 (fn [response]
                                   (delete-after r #(respond (detach r response))))
                                 (fn [error]
                                   (.deleteTempFiles r)
                                   (raise error)))
                        (catch Throwable t
                          (.deleteTempFiles r)
                          (throw t)))))))]
          (if (Multipart/isFormData (content-type request))
            ;; parsing writes temp files: under donkey it runs on a worker, and the handler
            ;; then on the event loop as before, so a body of many small file parts does not
            ;; hold the loop in file-system calls
            (let [result (volatile! nil)]
              (when-not (RequestScope/offload #(vreset! result (parse-or-throwable mp request))
                                              #(continue @result))
                (continue (parse-or-throwable mp request))))
            (continue nil))))))))
