(ns donkey.middleware.errors
  "The one way donkey's kernel middleware (params, json, multipart) answers input it refuses.

  Each middleware has a pure request function (`params-request`, `json-body-request`,
  `multipart-params-request`, ...) that throws a bad-input exception: an ex-info whose
  `ex-message` is the text of the default answer and whose `ex-data` is

    {:type   :donkey.middleware/bad-input
     :status 400, 413 or 415}

  with the codec's own exception as its `ex-cause` (a `donkey.codec.MalformedInputException`,
  `JsonException` with `.line`/`.column`, `MultipartException`, or
  `java.nio.charset.UnsupportedCharsetException`). The first three implement
  `donkey.codec.BadInput` (`.status`, `.answer`), and `refusal` / `refusing` turn any of them
  into this exception.

  Its `wrap-x` catches that exception (and only that: a body that fails to read, say, still
  throws, or goes to `raise`) and calls the `:error-handler` option instead of the handler,
  with the request it was given plus the exception under `:donkey.middleware/error`. The
  error handler is a Ring handler, called with the arity the middleware was called with:
  `(error-handler request)` or `(error-handler request respond raise)`. The default,
  `default-error-handler`, answers `{:status <status> :headers {\"content-type\"
  \"text/plain; charset=utf-8\"} :body <ex-message>}`. A JSON API's own answer:

    (defn json-error [request]
      (let [e (:donkey.middleware/error request)]
        {:status (:status (ex-data e)) :body {:error (ex-message e)}}))

    (wrap-json-body handler {:error-handler (fn ([r] (json-error r))
                                                ([r respond _] (respond (json-error r))))})"
  (:import (clojure.lang ExceptionInfo IFn)
           (donkey.codec BadInput)))

(set! *warn-on-reflection* true)

(defn bad-input
  "The exception a request function throws for refused input: an ex-info with `message` (the
  default answer's body), `{:type :donkey.middleware/bad-input :status status}` and `cause`."
  ^ExceptionInfo [status ^String message cause]
  (ex-info message {:type :donkey.middleware/bad-input :status status} cause))

(defn ^:no-doc refusal
  "The bad-input exception for `e`, a codec's exception for input it refuses (a
  `donkey.codec.BadInput`): its status, its answer as the message, `e` as the cause."
  ^ExceptionInfo [^BadInput e]
  (bad-input (.status e) (.answer e) e))

(defmacro ^:no-doc refusing
  "Evaluates `body` and returns its value; a codec's exception for refused input (any
  `donkey.codec.BadInput`) leaves as its `refusal`, every other exception as it is."
  [& body]
  `(try
     ~@body
     (catch RuntimeException e#
       (throw (if (instance? BadInput e#) (refusal e#) e#)))))

(defn bad-input?
  "True when `e` is an exception made by `bad-input`."
  [e]
  (and (instance? ExceptionInfo e)
       (identical? :donkey.middleware/bad-input (:type (ex-data e)))))

(defn- answer [request]
  (let [e (:donkey.middleware/error request)]
    {:status (:status (ex-data e))
     :headers {"content-type" "text/plain; charset=utf-8"}
     :body (ex-message e)}))

(defn default-error-handler
  "The default `:error-handler`: the bad-input exception under `:donkey.middleware/error` as
  a text/plain answer of its status, its message as the body."
  ([request] (answer request))
  ([request respond _raise] (respond (answer request))))

(defn ^:no-doc error-handler-option
  "The `:error-handler` of `opts`, checked once when a middleware is built: `fname` names the
  middleware in the IllegalArgumentException of a value that is not a function."
  [fname opts]
  (let [h (:error-handler opts)]
    (cond (nil? h) default-error-handler
          (ifn? h) h
          :else (throw (IllegalArgumentException.
                        (str fname ": :error-handler must be a Ring handler (a function), got "
                             (pr-str h)))))))

(defn- attempt
  "`(f request)`, or the bad-input exception it throws (any other throwable propagates)."
  [f request]
  (try
    (f request)
    (catch ExceptionInfo e
      (if (bad-input? e) e (throw e)))))

(defn- attempt-async
  "As `attempt`, but any throwable is returned rather than thrown, for `raise`."
  [f request]
  (try
    (f request)
    (catch Throwable t t)))

(defn wrap
  "Ring middleware around `handler` that turns each request with `f`, a request function that
  throws `bad-input` for refused input, and answers that with `error-handler` (see the
  namespace doc). Both arities."
  [handler f error-handler]
  (let [^IFn handler handler
        ^IFn error-handler error-handler]
    (fn
      ([request]
       (let [r (attempt f request)]
         (if (instance? ExceptionInfo r)
           (error-handler (assoc request :donkey.middleware/error r))
           (handler r))))
      ([request respond raise]
       (let [r (attempt-async f request)]
         (cond
           (bad-input? r) (error-handler (assoc request :donkey.middleware/error r) respond raise)
           (instance? Throwable r) (raise r)
           :else (handler r respond raise)))))))
