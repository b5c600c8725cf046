(ns donkey.middleware.multipart
  "multipart/form-data request bodies (file uploads) as parameters, a drop-in for
  `ring.middleware.multipart-params` (its options up to Ring 1.15): `wrap-multipart-params`,
  `multipart-params-request` and `parse-multipart-params` give the same parameter map, but the
  kernel parses the body (`donkey.codec.Multipart`) in one pass and bounded memory, with
  limits, and the default store's temp files are deleted as soon as the request is answered
  rather than an hour later. Ring's :store functions (its `byte-array-store`, your own) are
  called as Ring calls them, reading each file part straight from the body.

  Every option of Ring's is honoured: :encoding, :fallback-encoding, :store, :progress-fn,
  :max-file-size, :max-file-count, :error-handler; donkey adds :max-field-size,
  :max-request-size, :max-parts, :keywords? and :temp-dir (see `wrap-multipart-params`).
  Options are checked once, when the middleware is built (by each call of a request function),
  and a bad value is an IllegalArgumentException naming the option, as is a key that looks
  like a misspelt option (:max-file-szie); other keys are ignored.

  Differences from Ring, on purpose:

  - a refused body is a `donkey.middleware.errors/bad-input` exception, thrown by the request
    functions (an ex-info with status 400 or 413, the default answer's text as its message, the
    `donkey.codec.MultipartException` as its cause), where Ring throws commons-fileupload's
    exceptions or an ex-info \"Max file count exceeded\". The middleware answers it with
    :error-handler instead of calling the handler (see `donkey.middleware.errors`), given the
    request with the exception under :donkey.middleware/error, so a Ring error handler works
    as it is. The default answer is text/plain 400 or 413 naming what was wrong (\"file 'up'
    is larger than 1000 bytes\"), where Ring's `content-too-large-handler` answers 413
    \"Uploaded content exceeded limits.\" for each of its limits.
  - limits by default: :max-file-size 100 MiB (nil means the default, not Ring's \"no
    limit\"), :max-request-size 200 MiB, :max-field-size 1 MiB, :max-parts 1000; under
    donkey the server's :max-body-size (16 MiB by default) caps them all.
  - :max-file-count counts file parts, as Ring's doc says; Ring's code counts every part,
    fields too, against it. :max-parts bounds them all.
  - the default store's temp files (donkey-multipart-*.tmp, readable by their owner only) are
    deleted by the middleware when the request is answered; the request functions leave them
    to their caller. Ring's temp-file-store deletes its files an hour later.
  - a :store's own exception propagates (a bad-input one goes to :error-handler); Ring's
    middleware sends every ex-info to its :error-handler.
  - a field's own Content-Type charset beats a `_charset_` field's; Ring lets `_charset_` win.
  - multipart/form-data is recognised in any case and with parameters (RFC 9110); Ring
    compares the media type case-sensitively."
  (:require [donkey.middleware.errors :as errors]
            [donkey.middleware.options :as opt]
            [donkey.scope :as scope])
  (:import (clojure.lang ExceptionInfo IFn)
           (donkey.codec ContentType Multipart Multipart$Progress MultipartException
                         MultipartResult)
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
   :max-file-count nil
   :keywords? false
   :temp-dir nil
   :store nil
   :progress-fn nil})

(defn- fail [who msg]
  (opt/fail (str "donkey.middleware.multipart/" who) msg))

(defn- charset-opt ^Charset [who opts k]
  (opt/charset (str "donkey.middleware.multipart/" who) k (get opts k)))

(defn- size-opt ^long [who opts k]
  (long (opt/positive-int (str "donkey.middleware.multipart/" who) k (get opts k) Long/MAX_VALUE)))

(defn- fn-opt [who opts k what]
  (let [v (get opts k)]
    (when-not (or (nil? v) (ifn? v))
      (fail who (str k " must be " what ", got " (pr-str v))))
    v))

(defn- multipart
  "Validates the options once and builds the kernel parser."
  ^Multipart [who opts]
  (let [dir (:temp-dir opts)
        dir (cond (nil? dir) nil
                  (instance? File dir) dir
                  (string? dir) (File. ^String dir)
                  :else (fail who (str ":temp-dir must be a String or a java.io.File, got " (pr-str dir))))
        max-files (:max-file-count opts)]
    (when (and dir (not (.isDirectory ^File dir)))
      (fail who (str ":temp-dir is not a directory: " dir)))
    (opt/boolean-or-nil (str "donkey.middleware.multipart/" who) opts :keywords?)
    (when-not (<= (size-opt who opts :max-parts) Integer/MAX_VALUE)
      (fail who ":max-parts must fit in an int"))
    (when-not (or (nil? max-files) (and (integer? max-files) (<= 0 max-files Integer/MAX_VALUE)))
      (fail who (str ":max-file-count must be nil or an integer from 0 (no file parts) to "
                     Integer/MAX_VALUE ", got " (pr-str max-files))))
    (Multipart. (charset-opt who opts :encoding)
                (charset-opt who opts :fallback-encoding)
                (size-opt who opts :max-file-size)
                (size-opt who opts :max-field-size)
                (size-opt who opts :max-request-size)
                (int (size-opt who opts :max-parts))
                (int (if (nil? max-files) Integer/MAX_VALUE max-files))
                (boolean (:keywords? opts))
                ^File dir
                ^IFn (fn-opt who opts :store "a function of {:filename :content-type :stream}"))))

(defn- content-type ^String [request]
  (get (:headers request) "content-type"))

(defn- content-length ^long [request]
  (let [v (get (:headers request) "content-length")]
    (or (when (string? v) (parse-long v)) -1)))

(defn- progress
  "Ring's :progress-fn as the kernel's listener: called with the request as Ring does."
  ^Multipart$Progress [^IFn f request]
  (reify Multipart$Progress
    (update [_ bytes-read content-length items]
      (.invoke f request bytes-read content-length items))))

(defn- parser
  "Validates `opts` once and returns a fn of a multipart/form-data request to its parsed
  MultipartResult, which throws a bad-input exception for a refused body (its temp files
  already deleted)."
  [who opts]
  (opt/map-or-nil (str "donkey.middleware.multipart/" who) opts
                  (conj (set (keys defaults)) :error-handler))
  (let [opts (merge defaults (into {} (remove (comp nil? val)) opts))
        mp (multipart who opts)
        progress-fn (fn-opt who opts :progress-fn
                            "a function of request, bytes-read, content-length and item-count")]
    (fn parse ^MultipartResult [request]
      (errors/refusing
        (.parse mp ^InputStream (:body request) (content-type request) (content-length request)
                (when progress-fn (progress progress-fn request)))))))

(defn- add-params
  "Ring's keys: :multipart-params, and the same map merged into :params."
  [request params]
  (assoc request :multipart-params params :params (merge (:params request) params)))

(defn- detach
  "A response whose body is one of the request's temp files gets a stream opened on it
  instead, so the file can be deleted now and still be sent (POSIX semantics)."
  [^MultipartResult result response]
  (if (and (map? response) (.isTempFile result (:body response)))
    (assoc response :body (FileInputStream. ^File (:body response)))
    response))

(defn parse-multipart-params
  "Ring 1.14's `parse-multipart-params`: the parameter map of a multipart/form-data request
  (what `wrap-multipart-params` puts under :multipart-params), or nil for any other request.
  Options as for `wrap-multipart-params`, checked on each call; :error-handler is not used.
  Throws a bad-input exception for a refused body (see the namespace doc), after deleting the
  temp files it wrote. The temp files of a parsed body are the caller's to delete (each file
  part's :tempfile): nothing else will, unlike Ring's temp-file-store, which deletes its files
  an hour later. With a :store there are none."
  ([request] (parse-multipart-params request {}))
  ([request options]
   (let [parse (parser "parse-multipart-params" options)]
     (when (Multipart/isFormData (content-type request))
       (.params ^MultipartResult (parse request))))))

(defn multipart-params-request
  "What `wrap-multipart-params` does to a request, as a function: a multipart/form-data
  request with its body parsed into :multipart-params, merged into :params; any other request
  gets `{}` for both. Throws a bad-input exception for a refused body (see the namespace doc),
  after deleting the temp files it wrote. The temp files of a parsed body are the caller's to
  delete (each file part's :tempfile); `wrap-multipart-params` deletes them for you. Options
  as for `wrap-multipart-params`, checked on each call; :error-handler is not used."
  ([request] (multipart-params-request request {}))
  ([request options]
   (let [parse (parser "multipart-params-request" options)]
     (if (Multipart/isFormData (content-type request))
       (add-params request (.params ^MultipartResult (parse request)))
       (add-params request {})))))

(defn- parse-or-refusal
  "The MultipartResult of a multipart/form-data request, nil for any other request, or the
  bad-input exception refusing its body (other throwables propagate)."
  [parse request]
  (try
    (when (Multipart/isFormData (content-type request))
      (parse request))
    (catch ExceptionInfo e
      (if (errors/bad-input? e) e (throw e)))))

(defn- parse-or-throwable
  "As parse-or-refusal, but any throwable is returned, for `raise`."
  [parse request]
  (try
    (parse-or-refusal parse request)
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

  Names map to a String, or for a file part (a part with a filename, even an empty one) to
  what the store made of it; a name sent several times maps to a vector of its values, in
  order. The default store gives {:filename :content-type :tempfile :size}: :tempfile is a
  java.io.File (donkey-multipart-*.tmp, readable by its owner only), deleted once the request
  is answered: when a sync handler returns or throws, when an async handler calls respond or
  raise (or throws), and under donkey also when an async handler never answers (once the
  request has timed out or its client has gone). To keep an upload, move or copy it before
  then. A response whose :body is the temp file itself is still sent.

  A :store is Ring's: a function called once per file part, as the parse reaches it, with
  {:filename :content-type :stream}, whose return value is the part's value (Ring's
  `byte-array-store` gives {:filename :content-type :bytes}). :stream reads the part straight
  from the request body, so nothing is written to disk, and it must be read before the store
  returns: what is left unread is skipped, then the stream is closed. A part over
  :max-file-size ends the stream with an IOException (its cause the MultipartException) once
  the store has read :max-file-size bytes, and the request is refused with 413 whatever the
  store does with that exception (a body that breaks off in the part: likewise, 400). What a store
  kept of a request refused later (a part further on over a limit) is its own to undo. A store
  may refuse a part itself by throwing a `donkey.middleware.errors/bad-input` exception, which
  goes to :error-handler; any other exception of its own propagates. The store, and
  :progress-fn, run where the body is parsed: on a sync handler's thread, or under donkey on a
  worker thread for an async handler, never on the event loop.

  A refused body goes to :error-handler, not the handler, its temp files already deleted; the
  default answer is {:status 400 or 413 :headers {\"content-type\" \"text/plain;
  charset=utf-8\"} :body \"<what was wrong>\"}:
    400 - no boundary in the Content-Type, a malformed or truncated body, a part without a
          form-data Content-Disposition or name, a malformed Content-Disposition parameter,
          an unknown charset, more than 8 distinct part names of one `String.hashCode`
          (\"too many part names with colliding hashes\": such names would make the
          parameter map quadratic to build; checked before any name becomes a keyword)
    413 - a body, file, field, part count or file count over its limit (\"file 'up' is
          larger than 1000 bytes\", \"multipart body has more than 2 files\"; a
          Content-Length over :max-request-size is refused before reading)
  Other failures (reading the body, a full disk) propagate: thrown by a sync handler, passed
  to raise by an async one.

  Options, checked once when the middleware is built (Ring's first; nil is the default):

  :encoding          - charset (name or java.nio.charset.Charset) for every field and part
                       header, whatever the body says (as Ring's :encoding)
  :fallback-encoding - charset (name or Charset) for fields that name none; default: the
                       request Content-Type's charset, else UTF-8. A field is decoded with
                       the charset of its own Content-Type, else the value of a field named
                       \"_charset_\" (HTML 5), else this one
  :store             - Ring's store function, above (default: donkey's temp files)
  :progress-fn       - Ring's: called as (progress-fn request bytes-read content-length
                       item-count) after every read from the body and after the headers of
                       every part; content-length is -1 when not declared, item-count the
                       parts begun so far, fields and files
  :max-file-size     - bytes, per file part (default 100 MiB)
  :max-file-count    - file parts per body; 0 allows fields only (default: no count, as
                       Ring; :max-parts still bounds every part)
  :error-handler     - a Ring handler of both arities for a refused body (default
                       `donkey.middleware.errors/default-error-handler`)
  :max-field-size    - bytes, per non-file field; fields are held in memory (default 1 MiB)
  :max-request-size  - bytes, of the whole body (default 200 MiB)
  :max-parts         - parts per body (default 1000)
  :keywords?         - names that are valid keywords become keywords, in :multipart-params
                       and :params (as ring's wrap-keyword-params decides; default false)
  :temp-dir          - directory (String or File) for the default store's temp files
                       (default java.io.tmpdir)

  The server bounds every body by its own :max-body-size (16 MiB by default), which caps the
  defaults above: raise it too for larger uploads. A sync handler's body is parsed as it
  arrives from the socket, before the handler runs; an async handler's has arrived whole
  before the middleware runs, and under donkey is parsed on one of the server's worker
  threads (temp files and stores block, which the event loop must not), after which the
  handler is called on the event loop as usual. Both arities."
  ([handler]
   (wrap-multipart-params handler {}))
  ([handler options]
   (let [parse (parser "wrap-multipart-params" options)
         ^IFn handler handler
         ^IFn error-handler (errors/error-handler-option
                             "donkey.middleware.multipart/wrap-multipart-params" options)]
     (fn
       ([request]
        (let [r (parse-or-refusal parse request)]
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
                    (if (scope/at-end-on-worker! #(.deleteTempFiles r))
                      (when-not (scope/over?)
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
              (when-not (scope/offload! #(vreset! result (parse-or-throwable parse request))
                                        #(continue @result))
                (continue (parse-or-throwable parse request))))
            (continue nil))))))))
