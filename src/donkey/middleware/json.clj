(ns donkey.middleware.json
  "JSON request and response middleware, a drop-in for ring-json's `wrap-json-body`,
  `wrap-json-params` and `wrap-json-response`, with the parsing and serializing done by
  donkey's Java kernel (`donkey.codec.Json`, on Jackson).

  A request is JSON when its Content-Type is `application/json` or any `application/*+json`
  (any case, any parameters). Bodies decode as: objects -> persistent maps (string keys, or
  keywords with `:keywords? true`; a repeated key keeps its last value), arrays -> vectors,
  integers -> Long (exact BigInt when too big), decimals -> Double (exact BigDecimal with
  `:bigdecimals? true`), true/false/null -> booleans and nil. An empty body is an absent one
  (nil). Malformed JSON is answered 400 without calling the handler:

      {:status 400 :headers {\"content-type\" \"text/plain; charset=utf-8\"}
       :body \"Bad Request: malformed JSON: <what was wrong> at line L, column C\"}

  or the `:malformed-response` option: a response map, or a fn of the request and the
  `donkey.codec.JsonException` returning one. The message is the codec's own, never the
  parser's class or method names: e.g. \"nesting deeper than 1000 levels\", \"number longer
  than 1000 characters\", \"string longer than 20000000 characters\".

  Input that would make decoding slow or a map too large is refused the same way:
  - an object with more than :max-keys members (default 10,000; a repeated name counts each
    time) gets 413, body \"Payload Too Large: JSON object with more than 10000 keys at line L,
    column C\". The limit is per object, not per document: it bounds the one hash map a
    handler gets, while a long array of small records costs time in proportion to its bytes,
    which the server's :max-body-size bounds. It is higher than the params middleware's 1000
    because JSON objects double as dictionaries keyed by data (ids, translation keys).
  - an object with more than 8 distinct keys of one hash gets 400 (\"... too many keys with
    colliding hashes in one JSON object ...\"). Such keys are easy to make (\"Aa\" and \"BB\"
    have one String.hashCode) and make Clojure's hash maps quadratic to build; real keys
    practically never share a hash more than two or three at a time.
  - with :keywords? true, a document that would add more than 8 new keywords of one
    String.hashCode to Clojure's global keyword table gets 400 (\"... too many keys with
    colliding hashes in the JSON document ...\"): that table keeps the names of one hash in
    a list it searches. What remains: every new key name is interned (as with ring-json)
    and stays in that table until the garbage collector clears it, so a sustained attack
    can still lengthen the list of a hash by 8 names per request between collections:
    decoding such requests then costs a few times more (linearly, not quadratically), while
    names of other hashes do not pay for it.
  The JsonException's `.status` is the status the default answer uses (400 or 413), for a
  `:malformed-response` fn that wants it too.

  Every wrapper has the sync (1-arity) and async (3-arity) Ring arities."
  (:import (clojure.lang IFn Named)
           (donkey.codec ContentType Json JsonException)
           (java.io BufferedInputStream InputStream)))

(set! *warn-on-reflection* true)

(defn json-request?
  "True when the request's Content-Type is application/json or application/*+json."
  [request]
  (ContentType/isJson (get (:headers request) "content-type")))

(defn- check-opts
  "Checks the options every wrapper shares; returns :max-keys (the default when absent)."
  [who opts]
  (when (contains? opts :key-fn)
    (throw (IllegalArgumentException.
            (str who ": :key-fn is not supported; use :keywords? true for keyword keys"))))
  (let [m (:max-keys opts)]
    (when-not (or (nil? m) (and (integer? m) (<= 1 m Integer/MAX_VALUE)))
      (throw (IllegalArgumentException.
              (str who ": :max-keys must be a positive integer, got " (pr-str m)))))
    (int (or m Json/DEFAULT_MAX_KEYS))))

(defn- read-body
  "The decoded JSON body of `request`, ::none when it is not a JSON request with a body to
  read, or the JsonException when the body is malformed or refused."
  [request keywords? bigdecimals? max-keys]
  (if (json-request? request)
    (let [body (:body request)
          kw (boolean keywords?)
          bd (boolean bigdecimals?)
          mk (int max-keys)]
      (try
        (cond (instance? InputStream body) (Json/readBody ^InputStream body kw bd mk)
              (string? body) (Json/readBody ^String body kw bd mk)
              :else ::none)
        (catch JsonException e e)))
    ::none))

(defn- default-malformed [_request ^JsonException e]
  (let [status (.status e)]
    {:status status
     :headers {"content-type" "text/plain; charset=utf-8"}
     :body (str (if (= 413 status) "Payload Too Large: " "Bad Request: malformed JSON: ")
                (.getMessage e))}))

(defn- malformed-fn
  "The `(fn [request exception])` answering malformed JSON, from :malformed-response."
  [who opts]
  (let [r (:malformed-response opts)]
    (cond (nil? r) default-malformed
          (map? r) (fn [_ _] r)
          (fn? r) r
          :else (throw (IllegalArgumentException.
                        (str who ": :malformed-response must be a response map or a fn, got "
                             (pr-str r)))))))

(defn wrap-json-body
  "Middleware that replaces the :body of a JSON request (Content-Type application/json or
  application/*+json) with its decoded data. Other requests pass through untouched.

  Options:
    :keywords?          object keys as keywords (default false: strings)
    :bigdecimals?       decimals as exact BigDecimal (default false: Double)
    :max-keys           the most members of any one object (default 10000); more is a 413
    :malformed-response the answer to malformed or refused JSON: a response map, or a
                        `(fn [request ^donkey.codec.JsonException e])` returning one
                        (default: 400 text/plain \"Bad Request: malformed JSON: <message>\",
                        or 413 \"Payload Too Large: <message>\" past :max-keys)

  The handler is not called when the body is malformed or refused (see the namespace doc).
  An empty body becomes nil."
  ([handler] (wrap-json-body handler {}))
  ([handler opts]
   (let [max-keys (check-opts "wrap-json-body" opts)
         ^IFn handler handler
         {:keys [keywords? bigdecimals?]} opts
         malformed (malformed-fn "wrap-json-body" opts)]
     (fn
       ([request]
        (let [r (read-body request keywords? bigdecimals? max-keys)]
          (cond (identical? r ::none) (handler request)
                (instance? JsonException r) (malformed request r)
                :else (handler (assoc request :body r)))))
       ([request respond raise]
        (let [r (read-body request keywords? bigdecimals? max-keys)]
          (cond (identical? r ::none) (handler request respond raise)
                (instance? JsonException r) (respond (malformed request r))
                :else (handler (assoc request :body r) respond raise))))))))

(defn- rewindable
  "`request` with a body stream that supports mark/reset: a JSON request's stream that does not
  (a sync handler's body arrives as it is read) is wrapped in a BufferedInputStream."
  [request]
  (let [body (:body request)]
    (if (and (instance? InputStream body) (not (.markSupported ^InputStream body))
             (json-request? request))
      (assoc request :body (BufferedInputStream. ^InputStream body))
      request)))

(defn- read-params
  "As read-body, but leaves a markable body stream readable again from its start."
  [request keywords? bigdecimals? max-keys]
  (let [body (:body request)]
    (if (and (instance? InputStream body) (.markSupported ^InputStream body))
      (let [^InputStream in body]
        (.mark in Integer/MAX_VALUE)
        (try
          (read-body request keywords? bigdecimals? max-keys)
          (finally (.reset in))))
      (read-body request keywords? bigdecimals? max-keys))))

(defn- assoc-json-params [request json]
  (if (map? json)
    (assoc request :json-params json :params (merge (:params request) json))
    request))

(defn wrap-json-params
  "Middleware that decodes the body of a JSON request and, when it is a JSON object, puts the
  map in :json-params and merges it into :params (keys strings, as wrap-params makes them,
  unless :keywords? is true). A body that is not an object (an array, a number...) leaves
  :params alone. The body stays readable from its start (a stream without mark/reset is
  replaced by a buffered one).

  Options: :keywords?, :bigdecimals?, :max-keys and :malformed-response, as for
  `wrap-json-body`."
  ([handler] (wrap-json-params handler {}))
  ([handler opts]
   (let [max-keys (check-opts "wrap-json-params" opts)
         ^IFn handler handler
         {:keys [keywords? bigdecimals?]} opts
         malformed (malformed-fn "wrap-json-params" opts)]
     (fn
       ([request]
        (let [request (rewindable request)
              r (read-params request keywords? bigdecimals? max-keys)]
          (cond (identical? r ::none) (handler request)
                (instance? JsonException r) (malformed request r)
                :else (handler (assoc-json-params request r)))))
       ([request respond raise]
        (let [request (rewindable request)
              r (read-params request keywords? bigdecimals? max-keys)]
          (cond (identical? r ::none) (handler request respond raise)
                (instance? JsonException r) (respond (malformed request r))
                :else (handler (assoc-json-params request r) respond raise))))))))

(defn- content-type? [k]
  (.equalsIgnoreCase "content-type" (if (instance? Named k) (name k) (str k))))

(defn- json-response [response pretty? ascii?]
  (let [body (:body response)]
    (if (coll? body)
      (let [headers (:headers response)]
        (cond-> (assoc response :body (Json/writeString body (boolean pretty?) (boolean ascii?)))
          (not (some content-type? (keys headers)))
          (assoc :headers (assoc headers "Content-Type" Json/CONTENT_TYPE))))
      response)))

(defn wrap-json-response
  "Middleware that writes a collection body (map, vector, set, list or seq, as ring-json does)
  as a JSON String and sets `Content-Type: application/json; charset=utf-8` when the response
  has no Content-Type. Other bodies pass through untouched.

  donkey's kernel already writes a map or vector body as JSON (straight to bytes, with the same
  Content-Type), so under donkey this middleware is only needed for what the kernel does not
  do: seq, list and set bodies (the kernel streams a seq as Ring's `str` of each element),
  the options below, and handlers that must also run under other Ring servers. It costs one
  serialization to a String per response; without options, prefer returning maps and vectors
  bare under donkey.

  Options:
    :pretty?            indented output (ring-json's :pretty also accepted)
    :escape-non-ascii?  every non-ASCII character as a \\uXXXX escape
                        (ring-json's :escape-non-ascii also accepted)

  A body that cannot be written throws (sync) or is passed to `raise` (async)."
  ([handler] (wrap-json-response handler {}))
  ([handler opts]
   (check-opts "wrap-json-response" opts)
   (let [^IFn handler handler
         pretty? (boolean (or (:pretty? opts) (:pretty opts)))
         ascii? (boolean (or (:escape-non-ascii? opts) (:escape-non-ascii opts)))]
     (fn
       ([request]
        (json-response (handler request) pretty? ascii?))
       ([request respond raise]
        (handler request
                 (fn [response]
                   (let [r (try (json-response response pretty? ascii?)
                                (catch Throwable t t))]
                     (if (instance? Throwable r)
                       (raise r)
                       (respond r))))
                 raise))))))
