(ns donkey.middleware.params
  "Urlencoded parameters from the query string and the request body, a drop-in for
  `ring.middleware.params` (plus `ring.middleware.keyword-params` with `:keywords? true`),
  parsed by the kernel (`donkey.codec.FormCodec`).

  Decoding follows Ring: pairs split on `&` (empty ones skipped) and at their first `=`; `+`
  is a space; `%XX` bytes are decoded in the charset; a repeated key maps to a vector of its
  values in order. Differences from Ring 1.8.2, on purpose:

  - bad input is refused, not dropped: a `%` without two hex digits, or bytes not valid in the
    charset (decoding is strict, never U+FFFD), is a 400 naming what was wrong and where, e.g.
    \"Bad Request: malformed percent-encoding in query string at index 6\"; an unknown charset in
    the Content-Type is a 415 (\"Unsupported Media Type: unknown charset in Content-Type\").
  - a key without `=` maps to \"\" (`?debug` gives `{\"debug\" \"\"}`, as newer ring-codec).
  - the form media type is matched exactly and ignoring case, parameters allowed (see
    `donkey.codec.ContentType`), where Ring tests a case-sensitive prefix.
  - input that would make decoding slow is refused: more than :max-params parameters (400 for
    the query string; 413 for a form body, \"Payload Too Large: more than 1000 parameters in
    form body\"), or more than 8 distinct names of one `String.hashCode`, which would make the
    parameter map quadratic to build (400, \"Bad Request: too many parameter names with
    colliding hashes in query string\"); checked before any name becomes a keyword.

  Each middleware has its request function beside it, with the same options:
  `query-params-request` / `wrap-query-params`, `form-params-request` / `wrap-form-params`,
  `params-request` / `wrap-params`. A request function throws refused input as a
  `donkey.middleware.errors/bad-input` exception (status 400, 413 or 415, the default
  answer's text as its message); the middleware answers it with :error-handler instead of
  calling the handler (see `donkey.middleware.errors`). Every middleware serves both Ring
  handler arities. The body is read whole into memory; the server has already bounded it by
  its :max-body-size.

  Options, checked when the middleware is built (by each call of a request function):
    :keywords?     keys with keyword syntax (Ring's wrap-keyword-params rule) become keywords
                   in :query-params, :form-params and :params, and wrap-params converts the
                   keys of a :params already there; others stay strings (default false)
    :parse-namespaces?  with :keywords?, as Ring's wrap-keyword-params option: keys such as
                   \"user/name\" become namespaced keywords (:user/name), by Ring's rule
                   (one `/`, a namespace that may hold `.`) (default false; true without
                   :keywords? is refused, as it would do nothing)
    :encoding      charset (name or java.nio.charset.Charset) of the body and of
                   percent-encoded bytes; default, as Ring: the Content-Type's charset, else
                   UTF-8 (for the query string too)
    :max-params    the most name=value pairs (a repeated name counted each time) in the query
                   string, and separately in the form body (default 1000, Jetty's default for
                   form keys)
    :error-handler a Ring handler of both arities for refused input (default
                   `donkey.middleware.errors/default-error-handler`: the text/plain answer)"
  (:require [donkey.middleware.errors :as errors]
            [donkey.middleware.options :as opt])
  (:import (clojure.lang IPersistentMap)
           (donkey.codec ContentType FormCodec KeyHashes MalformedInputException)
           (java.io InputStream)
           (java.nio.charset Charset StandardCharsets UnsupportedCharsetException)))

(set! *warn-on-reflection* true)

;; ---------------------------------------------------------------------------------------------
;; options, once

(defn- charset-option
  "`encoding` (nil, a charset name or a Charset) as a Charset or nil; throws
  IllegalArgumentException naming `fname` and `what` otherwise."
  ^Charset [fname what encoding]
  (opt/charset (str "donkey.middleware.params/" fname) what encoding))

(defn- options
  "Validates `opts` and returns [keys charset-or-nil max-params], where keys is false
  (strings), :keywords or :namespaced."
  [fname opts]
  (let [who (str "donkey.middleware.params/" fname)
        opts (opt/map-or-nil who opts
                             #{:encoding :keywords? :parse-namespaces? :max-params :error-handler})
        keywords? (opt/boolean-or-nil who opts :keywords?)
        parse-namespaces? (opt/boolean-or-nil who opts :parse-namespaces?)
        max-params (:max-params opts)]
    (when (and parse-namespaces? (not keywords?))
      (opt/fail who ":parse-namespaces? needs :keywords? true (it says which keys become keywords)"))
    (when (some? max-params) (opt/positive-int who :max-params max-params Integer/MAX_VALUE))
    [(cond parse-namespaces? :namespaced keywords? :keywords :else false)
     (charset-option fname ":encoding" (:encoding opts))
     (int (or max-params FormCodec/DEFAULT_MAX_PARAMS))]))

;; ---------------------------------------------------------------------------------------------
;; per request

(defn- content-type ^String [request]
  (get (:headers request) "content-type"))

(defn- charset
  "The charset for `request`: the :encoding option, else the Content-Type's charset, else UTF-8.
  Throws UnsupportedCharsetException for a Content-Type charset this JVM does not have."
  ^Charset [request ^Charset fixed]
  (or fixed (ContentType/charset (content-type request)) StandardCharsets/UTF_8))

(declare keyify)

(defn- namespaced
  "`m`, a decoded map, with the string keys left that have namespaced keyword syntax as
  namespaced keywords when `keys` is :namespaced."
  [m keys]
  (if (and (= :namespaced keys)
           (some #(and (string? %) (.contains ^String % "/")) (clojure.core/keys m)))
    (keyify m true)
    m))

(defn- decode-query ^IPersistentMap [request ^Charset cs keys max-params]
  (namespaced (FormCodec/decode ^String (:query-string request) cs (boolean keys) "query string"
                                (int max-params))
              keys))

(defn- form-body?
  "True when the request carries a urlencoded form body that can be read."
  [request]
  (let [body (:body request)]
    (and (or (instance? InputStream body) (string? body))
         (ContentType/is (content-type request) "application" "x-www-form-urlencoded"))))

(defn- decode-form ^IPersistentMap [request ^Charset cs keys max-params]
  (let [body (:body request)]
    (namespaced (if (string? body)
                  (FormCodec/decodeBody ^String body cs (boolean keys) (int max-params))
                  (FormCodec/decodeBody ^InputStream body cs (boolean keys) (int max-params)))
                keys)))

(defmacro ^:private refusing-bad-input
  "Evaluates `body`; the codec's exceptions for refused input leave as bad-input exceptions."
  [& body]
  `(try
     ~@body
     (catch MalformedInputException e#
       (throw (errors/refusal e#)))
     ;; the charset name is the client's text: not echoed back
     (catch UnsupportedCharsetException e#
       (throw (errors/bad-input 415 "Unsupported Media Type: unknown charset in Content-Type" e#)))))

;; ---------------------------------------------------------------------------------------------
;; the request functions and the middleware

(defn- query-params* [request keywords? fixed max-params]
  (refusing-bad-input
   (cond
     (:query-params request) request
     (nil? (:query-string request)) (assoc request :query-params {})
     :else (assoc request :query-params
                  (decode-query request (charset request fixed) keywords? max-params)))))

(defn- form-params* [request keywords? fixed max-params]
  (refusing-bad-input
   (cond
     (:form-params request) request
     (not (form-body? request)) (assoc request :form-params {})
     :else (assoc request :form-params
                  (decode-form request (charset request fixed) keywords? max-params)))))

(defn- keyify
  "Ring's wrap-keyword-params (with :parse-namespaces? when `namespaces?`): string keys with
  keyword syntax become keywords, in nested maps and vectors too. New keys have new hashes,
  so a map's new keys are checked as the codecs check theirs."
  [x namespaces?]
  (cond
    (map? x) (let [kvs (into [] (map (fn [[k v]]
                                       [(if (string? k) (FormCodec/keywordKey k (boolean namespaces?)) k)
                                        (keyify v namespaces?)]))
                             x)]
               (when (KeyHashes/tooManyShared (object-array (map first kvs)) 0 1 (count kvs))
                 (throw (MalformedInputException.
                         "too many parameter names with colliding hashes in :params" -1)))
               (into {} kvs))
    (vector? x) (mapv #(keyify % namespaces?) x)
    :else x))

(defn- params* [request keywords? fixed max-params]
  (refusing-bad-input
   (let [request (if (and keywords? (seq (:params request)))
                   (update request :params keyify (= :namespaced keywords?))
                   request)
         form? (and (not (:form-params request)) (form-body? request))
         query? (and (not (:query-params request)) (some? (:query-string request)))
         cs (when (or form? query?) (charset request fixed))
         request (if (:form-params request)
                   request
                   (let [p (if form? (decode-form request cs keywords? max-params) {})]
                     (assoc request :form-params p :params (merge (:params request) p))))]
     (if (:query-params request)
       request
       (let [p (if query? (decode-query request cs keywords? max-params) {})]
         (assoc request :query-params p :params (merge (:params request) p)))))))

(defn query-params-request
  "What `wrap-query-params` does, as a function: the request with :query-params added (unless
  it has them already). Throws a bad-input exception for refused input (see the namespace
  doc). Options as for the middleware; :error-handler is not used."
  ([request] (query-params-request request {}))
  ([request opts]
   (let [[keywords? fixed max-params] (options "query-params-request" opts)]
     (query-params* request keywords? fixed max-params))))

(defn form-params-request
  "What `wrap-form-params` does, as a function: the request with :form-params added (unless
  it has them already), its form body read. Throws a bad-input exception for refused input
  (see the namespace doc). Options as for the middleware; :error-handler is not used."
  ([request] (form-params-request request {}))
  ([request opts]
   (let [[keywords? fixed max-params] (options "form-params-request" opts)]
     (form-params* request keywords? fixed max-params))))

(defn params-request
  "What `wrap-params` does, as a function: the request with :query-params, :form-params and
  the merged :params. Throws a bad-input exception for refused input (see the namespace doc).
  Options as for the middleware; :error-handler is not used."
  ([request] (params-request request {}))
  ([request opts]
   (let [[keywords? fixed max-params] (options "params-request" opts)]
     (params* request keywords? fixed max-params))))

(defn assoc-query-params
  "Ring's `ring.middleware.params/assoc-query-params`: the query string's parameters (String
  keys) as :query-params and merged into :params, each merged into what the request already
  has there; `{}` merged when there is no query string. `encoding` is a charset name or a
  java.nio.charset.Charset (nil: UTF-8). Throws a bad-input exception for refused input (see
  the namespace doc), IllegalArgumentException for an unknown `encoding`."
  [request encoding]
  (let [cs (or (charset-option "assoc-query-params" "encoding" encoding) StandardCharsets/UTF_8)
        p (if (some? (:query-string request))
            (refusing-bad-input (decode-query request cs false FormCodec/DEFAULT_MAX_PARAMS))
            {})]
    (merge-with merge request {:query-params p :params p})))

(defn assoc-form-params
  "Ring's `ring.middleware.params/assoc-form-params`: for a urlencoded form, its body's
  parameters (String keys; the body read to its end) as :form-params and merged into
  :params, each merged into what the request already has there; `{}` merged for any other
  request. `encoding` is a charset name or a java.nio.charset.Charset (nil: the
  Content-Type's charset, else UTF-8). Throws a bad-input exception for refused input (see the
  namespace doc), IllegalArgumentException for an unknown `encoding`."
  [request encoding]
  (let [fixed (charset-option "assoc-form-params" "encoding" encoding)
        p (if (form-body? request)
            (refusing-bad-input
             (decode-form request (charset request fixed) false FormCodec/DEFAULT_MAX_PARAMS))
            {})]
    (merge-with merge request {:form-params p :params p})))

(defn wrap-query-params
  "Middleware that parses the query string into :query-params, a map of String keys
  (keywords with `:keywords? true`) to a String, or a vector of Strings for a repeated key;
  `{}` when there is no query string. A request that already has :query-params is left
  alone. Does not touch :params (see `wrap-params`).

  Refused input (malformed, more than :max-params parameters, too many names of one hash:
  400; an unknown Content-Type charset: 415) goes to :error-handler, not the handler.

  Options: {:keywords? false, :encoding nil, :max-params 1000, :error-handler
  donkey.middleware.errors/default-error-handler} (see the namespace doc). Both arities."
  ([handler] (wrap-query-params handler {}))
  ([handler opts]
   (let [[keywords? fixed max-params] (options "wrap-query-params" opts)]
     (errors/wrap handler #(query-params* % keywords? fixed max-params)
                  (errors/error-handler-option
                   "donkey.middleware.params/wrap-query-params" opts)))))

(defn wrap-form-params
  "Middleware that, for a request whose Content-Type is application/x-www-form-urlencoded,
  reads the :body (an InputStream, to its end, closing it; or a String) in the Content-Type's
  charset (UTF-8 when it names none; :encoding overrides it) and adds the parsed form as
  :form-params; `{}` for any other request. A request that already has :form-params is left
  alone. Does not touch :params (see `wrap-params`).

  Refused input (malformed, or too many names of one hash: 400; more than :max-params
  parameters: 413; an unknown charset: 415) goes to :error-handler, not the handler.

  Options: {:keywords? false, :encoding nil, :max-params 1000, :error-handler
  donkey.middleware.errors/default-error-handler} (see the namespace doc). Both arities."
  ([handler] (wrap-form-params handler {}))
  ([handler opts]
   (let [[keywords? fixed max-params] (options "wrap-form-params" opts)]
     (errors/wrap handler #(form-params* % keywords? fixed max-params)
                  (errors/error-handler-option
                   "donkey.middleware.params/wrap-form-params" opts)))))

(defn wrap-params
  "Middleware that parses urlencoded parameters from the query string and from the body (when
  the request is a urlencoded form), like `ring.middleware.params/wrap-params`. Adds:

    :query-params  the query string's parameters ({} when there is none)
    :form-params   the body's parameters ({} when the body is not a urlencoded form)
    :params        the existing :params, merged with :form-params, then :query-params (a key
                   in both takes the query string's value, as in Ring)

  Keys are Strings, or with `:keywords? true` keywords where they have keyword syntax (as
  `wrap-keyword-params` inside `wrap-params`, which also converts the keys of a :params
  already there); values are Strings, or vectors of Strings for repeated keys. As in Ring, a
  request that already has :form-params (or :query-params) keeps it, unmerged.

  Refused input goes to :error-handler, not the handler: malformed input or too many names
  of one hash (400), a query string over :max-params (400), a form body over :max-params
  (413), an unknown charset (415). :max-params counts the query string and the form body
  separately.

  Options: {:keywords? false, :encoding nil, :max-params 1000, :error-handler
  donkey.middleware.errors/default-error-handler} (see the namespace doc). Both arities."
  ([handler] (wrap-params handler {}))
  ([handler opts]
   (let [[keywords? fixed max-params] (options "wrap-params" opts)]
     (errors/wrap handler #(params* % keywords? fixed max-params)
                  (errors/error-handler-option
                   "donkey.middleware.params/wrap-params" opts)))))
