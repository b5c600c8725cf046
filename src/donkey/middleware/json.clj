(ns donkey.middleware.json
  "JSON request and response middleware, a drop-in for ring-json's `wrap-json-body`,
  `wrap-json-params` and `wrap-json-response`, parsed and written by the kernel
  (`donkey.codec.Json`, on Jackson).

  A request is JSON when its Content-Type is `application/json` or any `application/*+json`
  (any case, any parameters). Its body is read as UTF-8 (or UTF-16/32, detected): RFC 8259
  defines no charset parameter for JSON, so one is ignored. Bodies decode as: objects ->
  persistent maps (string keys, or keywords with `:keywords? true`; a repeated key keeps its
  last value), arrays -> vectors, integers -> Long (exact BigInt when too big), decimals ->
  Double (exact BigDecimal with `:bigdecimals? true`), true/false/null -> booleans and nil. An
  empty body is an absent one (nil).

  Refused bodies:
  - malformed JSON, or JSON over the parser's limits: 400, \"Bad Request: malformed JSON:
    <what was wrong> at line L, column C\" (e.g. \"nesting deeper than 1000 levels\"; messages
    never echo the input or name the parser's classes);
  - an object with more than :max-keys members (a repeated name counts each time): 413,
    \"Payload Too Large: JSON object with more than 10000 keys at line L, column C\". The limit
    is per object: it bounds the one map a handler gets, while the server's :max-body-size
    bounds the rest;
  - an object with more than 8 distinct keys of one `String.hashCode`, which would make the
    map quadratic to build, or with `:keywords? true` a document that would add more than 8
    new keywords of one hash to Clojure's keyword table: 400 (\"... too many keys with
    colliding hashes ...\").

  Each middleware has its function beside it: `json-body-request` / `wrap-json-body`,
  `json-params-request` / `wrap-json-params`, `json-response` / `wrap-json-response`. The
  request functions throw refused bodies as a `donkey.middleware.errors/bad-input` exception
  (status 400 or 413, the default answer's text as its message, the
  `donkey.codec.JsonException` as its cause, with `.line` and `.column`), where ring-json's
  return nil; the middleware answers it with :error-handler instead of calling the handler
  (see `donkey.middleware.errors`). Every middleware serves both Ring handler arities."
  (:require [donkey.middleware.errors :as errors])
  (:import (clojure.lang IFn Named)
           (donkey.codec ContentType Json JsonException)
           (java.io BufferedInputStream InputStream)))

(set! *warn-on-reflection* true)

(defn json-request?
  "True when the request's Content-Type is application/json or application/*+json."
  [request]
  (ContentType/isJson (get (:headers request) "content-type")))

;; ---------------------------------------------------------------------------------------------
;; options, once

(defn- check-opts
  "Checks the options every function here shares; returns :max-keys (the default when absent)."
  [who opts]
  (when-not (or (nil? opts) (map? opts))
    (throw (IllegalArgumentException. (str who ": options must be a map, got " (pr-str opts)))))
  (when (contains? opts :key-fn)
    (throw (IllegalArgumentException.
            (str who ": :key-fn is not supported; use :keywords? true for keyword keys"))))
  (let [m (:max-keys opts)]
    (when-not (or (nil? m) (and (integer? m) (<= 1 m Integer/MAX_VALUE)))
      (throw (IllegalArgumentException.
              (str who ": :max-keys must be a positive integer, got " (pr-str m)))))
    (int (or m Json/DEFAULT_MAX_KEYS))))

(defn- json-error-handler
  "The handler for refused bodies: :error-handler, or the deprecated :malformed-response (a
  response map, or a `(fn [request ^JsonException e])` returning one), or the default."
  [who opts]
  (let [r (:malformed-response opts)]
    (when (and (some? r) (some? (:error-handler opts)))
      (throw (IllegalArgumentException.
              (str who ": give :error-handler or :malformed-response, not both"))))
    (cond
      (nil? r) (errors/error-handler-option who opts)
      (map? r) (fn ([_] r) ([_ respond _] (respond r)))
      (fn? r) (let [answer (fn [request] (r request (ex-cause (:donkey.middleware/error request))))]
                (fn ([request] (answer request))
                    ([request respond _] (respond (answer request)))))
      :else (throw (IllegalArgumentException.
                    (str who ": :malformed-response must be a response map or a fn, got "
                         (pr-str r)))))))

;; ---------------------------------------------------------------------------------------------
;; reading

(defn- refused [^JsonException e]
  (let [status (.status e)]
    (errors/bad-input status
                      (str (if (= 413 status) "Payload Too Large: " "Bad Request: malformed JSON: ")
                           (.getMessage e))
                      e)))

(defn- read-body
  "The decoded JSON body of `request`, or ::none when it is not a JSON request with a body to
  read. Throws a bad-input exception for a refused body."
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
        (catch JsonException e (throw (refused e)))))
    ::none))

(defn- json-body* [request keywords? bigdecimals? max-keys]
  (let [r (read-body request keywords? bigdecimals? max-keys)]
    (if (identical? r ::none) request (assoc request :body r))))

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

(defn- json-params* [request keywords? bigdecimals? max-keys]
  (let [request (rewindable request)
        r (read-params request keywords? bigdecimals? max-keys)]
    (if (map? r)
      (assoc request :json-params r :params (merge (:params request) r))
      request)))

(defn json-body-request
  "What `wrap-json-body` does, as a function: a JSON request with its :body replaced by the
  decoded data (nil for an empty body); any other request unchanged. Throws a bad-input
  exception for a refused body (see the namespace doc). Options as for `wrap-json-body`;
  :error-handler and :malformed-response are not used."
  ([request] (json-body-request request {}))
  ([request opts]
   (let [max-keys (check-opts "json-body-request" opts)]
     (json-body* request (:keywords? opts) (:bigdecimals? opts) max-keys))))

(defn json-params-request
  "What `wrap-json-params` does, as a function: for a JSON request whose body is an object,
  the request with the map in :json-params and merged into :params; with any other body, or
  for any other request, unchanged. The body stays readable from its start (a stream without
  mark/reset is replaced by a buffered one). Throws a bad-input exception for a refused body
  (see the namespace doc). Options as for `wrap-json-params`; :error-handler and
  :malformed-response are not used."
  ([request] (json-params-request request {}))
  ([request opts]
   (let [max-keys (check-opts "json-params-request" opts)]
     (json-params* request (:keywords? opts) (:bigdecimals? opts) max-keys))))

(defn- wrap-decoding
  "`handler` behind `decode` (json-body* or json-params*), with the options checked once in
  the name of `who` and refused bodies sent to the error handler."
  [who decode handler opts]
  (let [max-keys (check-opts who opts)
        {:keys [keywords? bigdecimals?]} opts]
    (errors/wrap handler #(decode % keywords? bigdecimals? max-keys)
                 (json-error-handler who opts))))

(defn wrap-json-body
  "Middleware that replaces the :body of a JSON request (Content-Type application/json or
  application/*+json) with its decoded data; other requests pass through untouched. An empty
  body becomes nil. A refused body goes to :error-handler, not the handler.

  Options:
    :keywords?          object keys as keywords (default false: strings)
    :bigdecimals?       decimals as exact BigDecimal (default false: Double)
    :max-keys           the most members of any one object (default 10000); more is a 413
    :error-handler      a Ring handler of both arities for a refused body (default
                        `donkey.middleware.errors/default-error-handler`: 400 text/plain
                        \"Bad Request: malformed JSON: <message>\", or 413 \"Payload Too
                        Large: <message>\" past :max-keys)
    :malformed-response deprecated, use :error-handler: a response map, or a
                        `(fn [request ^donkey.codec.JsonException e])` returning one, the
                        answer to every refused body; not together with :error-handler

  Both arities."
  ([handler] (wrap-json-body handler {}))
  ([handler opts]
   (wrap-decoding "donkey.middleware.json/wrap-json-body" json-body* handler opts)))

(defn wrap-json-params
  "Middleware that decodes the body of a JSON request and, when it is a JSON object, puts the
  map in :json-params and merges it into :params (keys strings, as wrap-params makes them,
  unless :keywords? is true). A body that is not an object (an array, a number...) leaves
  :params alone. The body stays readable from its start (a stream without mark/reset is
  replaced by a buffered one). A refused body goes to :error-handler, not the handler.

  Options: :keywords?, :bigdecimals?, :max-keys, :error-handler and the deprecated
  :malformed-response, as for `wrap-json-body`. Both arities."
  ([handler] (wrap-json-params handler {}))
  ([handler opts]
   (wrap-decoding "donkey.middleware.json/wrap-json-params" json-params* handler opts)))

;; ---------------------------------------------------------------------------------------------
;; writing

(defn- content-type? [k]
  (.equalsIgnoreCase "content-type" (if (instance? Named k) (name k) (str k))))

(defn- json-response* [response pretty? ascii?]
  (let [body (:body response)]
    (if (coll? body)
      (let [headers (:headers response)]
        (cond-> (assoc response :body (Json/writeString body (boolean pretty?) (boolean ascii?)))
          (not (some content-type? (keys headers)))
          (assoc :headers (assoc headers "Content-Type" Json/CONTENT_TYPE))))
      response)))

(defn- write-opts
  "[pretty? escape-non-ascii?] from the options, ring-json's names accepted too."
  [opts]
  [(boolean (or (:pretty? opts) (:pretty opts)))
   (boolean (or (:escape-non-ascii? opts) (:escape-non-ascii opts)))])

(defn json-response
  "What `wrap-json-response` does to a response, as a function: a collection body (map,
  vector, set, list or seq, as ring-json) becomes a JSON String, with `Content-Type:
  application/json; charset=utf-8` unless the response has a Content-Type; any other
  response is returned unchanged. Throws IllegalArgumentException for a body that cannot be
  written. Options as for `wrap-json-response`."
  ([response] (json-response response {}))
  ([response opts]
   (check-opts "json-response" opts)
   (let [[pretty? ascii?] (write-opts opts)]
     (json-response* response pretty? ascii?))))

(defn wrap-json-response
  "Middleware that writes a collection body as JSON (see `json-response`).

  donkey's kernel already writes a map or vector body as JSON (straight to bytes, with the
  same Content-Type), so under donkey this middleware is only needed for what the kernel does
  not do: seq, list and set bodies (the kernel streams a seq as Ring's `str` of each
  element), the options below, and handlers that must also run under other Ring servers. It
  costs one serialization to a String per response.

  Options:
    :pretty?            indented output (ring-json's :pretty also accepted)
    :escape-non-ascii?  every non-ASCII character as a \\uXXXX escape
                        (ring-json's :escape-non-ascii also accepted)

  A body that cannot be written throws (sync) or is passed to `raise` (async). Both arities."
  ([handler] (wrap-json-response handler {}))
  ([handler opts]
   (check-opts "donkey.middleware.json/wrap-json-response" opts)
   (let [^IFn handler handler
         [pretty? ascii?] (write-opts opts)]
     (fn
       ([request]
        (json-response* (handler request) pretty? ascii?))
       ([request respond raise]
        (handler request
                 (fn [response]
                   (let [r (try (json-response* response pretty? ascii?)
                                (catch Throwable t t))]
                     (if (instance? Throwable r)
                       (raise r)
                       (respond r))))
                 raise))))))
