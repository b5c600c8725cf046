(ns donkey.middleware.params
  "Middleware that parses urlencoded parameters from the query string and the request body,
  a drop-in for `ring.middleware.params/wrap-params` (plus `wrap-keyword-params` with
  `:keywords? true`). The parsing is done by the kernel (`donkey.codec.FormCodec`); this
  namespace only decides what to parse and where the result goes.

  Decoding follows Ring: pairs split on `&` (empty ones skipped) and at their first `=`; `+`
  is a space; `%XX` bytes are decoded in the charset; a repeated key maps to a vector of its
  values in order; a key without `=` maps to \"\". Differences from Ring 1.8.2, on purpose:

  - malformed input is answered, not ignored: a `%` without two hex digits, or bytes that are
    not valid in the charset (decoding is strict, never U+FFFD), gets
    `400 Bad Request: <what was wrong, and where>` and the handler is not called; Ring dropped
    such pairs silently. An unknown charset in the Content-Type gets 415.
  - input with no `=` at all (`?debug`) gives `{\"debug\" \"\"}`, as newer ring-codec does;
    Ring 1.8.2 gave `{}`.
  - the form media type is matched exactly and case-insensitively
    (`application/x-www-form-urlencoded`, parameters allowed), where Ring tested a
    case-sensitive prefix.
  - input that would make decoding slow is refused, and the handler is not called: more
    than :max-params parameters in the query string (400) or in the form body
    (`413 Payload Too Large: more than 1000 parameters in form body`), or more than 8
    distinct names with one `String.hashCode` in one query string or form
    (`400 Bad Request: too many parameter names with colliding hashes in query string`).
    Such names are easy to make (\"Aa\" and \"BB\" collide, and so do all 2^k strings of k
    such blocks) and make Clojure's hash maps, and Ring's own decoder, quadratic to build;
    real names practically never share a hash more than two or three at a time. The check
    runs before any name becomes a keyword, so an attack does not fill the global keyword
    table. With both, decoding stays (near-)linear in the input whatever the names.

  Options, for every middleware here, validated when it is built:
    :keywords?  when true, keys that are valid keywords (Ring's wrap-keyword-params rule, no
                namespaces) become keywords in :query-params, :form-params and :params (and
                wrap-params converts the keys of a :params that was already there, as
                wrap-keyword-params would); other keys stay strings (default false)
    :encoding   charset name (or java.nio.charset.Charset) used to read the body and decode
                percent-encoded bytes. Default, as Ring: the Content-Type's charset parameter,
                else UTF-8 (Ring uses that charset for the query string too, and so does this).
    :max-params the most parameters (name=value pairs, a repeated name counted each time) in
                the query string, and separately in the form body (default 1000, Jetty's
                default for form keys; a positive integer)

  All three middlewares serve both Ring handler arities: `(handler request)` and
  `(handler request respond raise)`. The body is read whole into memory; donkey has already
  bounded it by `:max-body-size`."
  (:import (clojure.lang IPersistentMap)
           (donkey.codec ContentType FormCodec KeyHashes MalformedInputException)
           (java.io InputStream)
           (java.nio.charset Charset StandardCharsets UnsupportedCharsetException)))

(set! *warn-on-reflection* true)

;; ---------------------------------------------------------------------------------------------
;; options, once

(defn- options
  "Validates `opts` and returns [keywords? charset-or-nil max-params]."
  [fname opts]
  (when-not (or (nil? opts) (map? opts))
    (throw (IllegalArgumentException.
            (str "donkey.middleware.params/" fname ": options must be a map, got " (pr-str opts)))))
  (let [{:keys [keywords? encoding max-params]} opts]
    (when-not (or (nil? keywords?) (boolean? keywords?))
      (throw (IllegalArgumentException.
              (str "donkey.middleware.params/" fname ": :keywords? must be true or false, got "
                   (pr-str keywords?)))))
    (when-not (or (nil? max-params) (and (integer? max-params) (<= 1 max-params Integer/MAX_VALUE)))
      (throw (IllegalArgumentException.
              (str "donkey.middleware.params/" fname ": :max-params must be a positive integer, got "
                   (pr-str max-params)))))
    [(boolean keywords?)
     (cond
       (nil? encoding) nil
       (instance? Charset encoding) encoding
       (string? encoding)
       (try (ContentType/forName encoding)
            (catch UnsupportedCharsetException _
              (throw (IllegalArgumentException.
                      (str "donkey.middleware.params/" fname ": :encoding names no charset this JVM has: "
                           (pr-str encoding))))))
       :else (throw (IllegalArgumentException.
                     (str "donkey.middleware.params/" fname
                          ": :encoding must be a charset name or a java.nio.charset.Charset, got "
                          (pr-str encoding)))))
     (int (or max-params FormCodec/DEFAULT_MAX_PARAMS))]))

;; ---------------------------------------------------------------------------------------------
;; per request

(defn- content-type ^String [request]
  (get (:headers request) "content-type"))

(defn- charset
  "The charset for `request`: the :encoding option, else the Content-Type's charset, else UTF-8."
  ^Charset [request ^Charset fixed]
  (or fixed (ContentType/charset (content-type request)) StandardCharsets/UTF_8))

(defn- decode-query ^IPersistentMap [request ^Charset cs keywords? max-params]
  (FormCodec/decode ^String (:query-string request) cs (boolean keywords?) "query string"
                    (int max-params)))

(defn- form-body?
  "True when the request carries a urlencoded form body that can be read."
  [request]
  (let [body (:body request)]
    (and (or (instance? InputStream body) (string? body))
         (ContentType/is (content-type request) "application" "x-www-form-urlencoded"))))

(defn- decode-form ^IPersistentMap [request ^Charset cs keywords? max-params]
  (let [body (:body request)]
    (if (string? body)
      (FormCodec/decodeBody ^String body cs (boolean keywords?) (int max-params))
      (FormCodec/decodeBody ^InputStream body cs (boolean keywords?) (int max-params)))))

(defn- text-response [status ^String msg]
  {:status status
   :headers {"content-type" "text/plain; charset=utf-8"}
   :body msg})

(defmacro ^:private answering-bad-input
  "Evaluates `body` (which returns the new request). Bad input becomes a `reduced` response
  instead, so the caller can tell the two apart without catching around the handler."
  [& body]
  `(try
     ~@body
     (catch MalformedInputException e#
       (let [status# (.status e#)]
         (reduced (text-response status# (str (if (= 413 status#) "Payload Too Large: " "Bad Request: ")
                                              (.getMessage e#))))))
     ;; the charset name is the client's text: not echoed back
     (catch UnsupportedCharsetException _#
       (reduced (text-response 415 "Unsupported Media Type: unknown charset in Content-Type")))))

(defn- wrap-with
  "A Ring middleware around `handler` that turns each request with `f` (request -> request, or
  a `reduced` response for bad input) before calling the handler."
  [handler f]
  (fn
    ([request]
     (let [r (f request)]
       (if (reduced? r) @r (handler r))))
    ([request respond raise]
     (let [r (f request)]
       (if (reduced? r) (respond @r) (handler r respond raise))))))

;; ---------------------------------------------------------------------------------------------
;; the middleware

(defn- query-params* [request keywords? fixed max-params]
  (cond
    (:query-params request) request
    (nil? (:query-string request)) (assoc request :query-params {})
    :else (assoc request :query-params
                 (decode-query request (charset request fixed) keywords? max-params))))

(defn- form-params* [request keywords? fixed max-params]
  (cond
    (:form-params request) request
    (not (form-body? request)) (assoc request :form-params {})
    :else (assoc request :form-params
                 (decode-form request (charset request fixed) keywords? max-params))))

(defn- keyify
  "Ring's wrap-keyword-params on existing :params: string keys with keyword syntax become
  keywords, in nested maps and vectors too. Only runs when :params was already there. New
  keys have new hashes, so a map's new keys are checked as the codecs check theirs."
  [x]
  (cond
    (map? x) (let [kvs (into [] (map (fn [[k v]] [(if (string? k) (FormCodec/keywordKey k) k) (keyify v)])) x)]
               (when (KeyHashes/tooManyShared (object-array (map first kvs)) 0 1 (count kvs))
                 (throw (MalformedInputException.
                         "too many parameter names with colliding hashes in :params" -1)))
               (into {} kvs))
    (vector? x) (mapv keyify x)
    :else x))

(defn- params* [request keywords? fixed max-params]
  (let [request (if (and keywords? (seq (:params request)))
                  (update request :params keyify)
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
        (assoc request :query-params p :params (merge (:params request) p))))))

(defn query-params-request
  "What `wrap-query-params` does to a request, as a function. Throws
  donkey.codec.MalformedInputException on malformed or refused input (its `.status` is the
  answer the middleware gives: 400, or 413 for a form body over :max-params), and
  java.nio.charset.UnsupportedCharsetException for an unknown Content-Type charset.
  Options as for the middleware."
  ([request] (query-params-request request {}))
  ([request opts]
   (let [[keywords? fixed max-params] (options "query-params-request" opts)]
     (query-params* request keywords? fixed max-params))))

(defn form-params-request
  "What `wrap-form-params` does to a request, as a function. Throws
  donkey.codec.MalformedInputException on malformed or refused input (its `.status` is the
  answer the middleware gives: 400, or 413 for a form body over :max-params), and
  java.nio.charset.UnsupportedCharsetException for an unknown Content-Type charset.
  Options as for the middleware."
  ([request] (form-params-request request {}))
  ([request opts]
   (let [[keywords? fixed max-params] (options "form-params-request" opts)]
     (form-params* request keywords? fixed max-params))))

(defn params-request
  "What `wrap-params` does to a request, as a function: adds :query-params, :form-params and
  :params. Throws donkey.codec.MalformedInputException on malformed or refused input (its
  `.status` is the answer the middleware gives: 400, or 413 for a form body over
  :max-params), and java.nio.charset.UnsupportedCharsetException for an unknown Content-Type
  charset. Options as for the middleware."
  ([request] (params-request request {}))
  ([request opts]
   (let [[keywords? fixed max-params] (options "params-request" opts)]
     (params* request keywords? fixed max-params))))

(defn wrap-query-params
  "Middleware that parses the query string and adds it to the request as :query-params, a
  map of String keys (keywords with `:keywords? true`) to a String, or a vector of Strings
  for a repeated key; `{}` when there is no query string. A request that already has
  :query-params is left alone. Does not touch :params (see `wrap-params`).

  Malformed input, more than :max-params parameters, or too many names with colliding hashes
  get a 400 response (text/plain, \"Bad Request: <reason>\") and the handler is not called.

  Options: {:keywords? false, :encoding nil, :max-params 1000} (see the namespace doc)."
  ([handler] (wrap-query-params handler {}))
  ([handler opts]
   (let [[keywords? fixed max-params] (options "wrap-query-params" opts)]
     (wrap-with handler #(answering-bad-input (query-params* % keywords? fixed max-params))))))

(defn wrap-form-params
  "Middleware that, for a request whose Content-Type is application/x-www-form-urlencoded,
  reads the :body InputStream (to its end, closing it) in the Content-Type's charset (UTF-8
  when it names none; the :encoding option overrides it) and adds the parsed form to the
  request as :form-params; `{}` for any other request. A request that already has
  :form-params is left alone. Does not touch :params (see `wrap-params`).

  Malformed input (bad percent-encoding, bytes invalid in the charset) or too many names with
  colliding hashes get a 400 response (text/plain, \"Bad Request: <reason>\"), more than
  :max-params parameters a 413 (\"Payload Too Large: <reason>\"), an unknown charset a 415,
  and the handler is not called.

  Options: {:keywords? false, :encoding nil, :max-params 1000} (see the namespace doc)."
  ([handler] (wrap-form-params handler {}))
  ([handler opts]
   (let [[keywords? fixed max-params] (options "wrap-form-params" opts)]
     (wrap-with handler #(answering-bad-input (form-params* % keywords? fixed max-params))))))

(defn wrap-params
  "Middleware that parses urlencoded parameters from the query string and from the body (when
  the request is a urlencoded form), like `ring.middleware.params/wrap-params`. Adds:

    :query-params  a map of the query string's parameters ({} when there is none)
    :form-params   a map of the body's parameters ({} when the body is not a urlencoded form)
    :params        the existing :params, merged with :form-params, then :query-params (so a
                   key in both takes the query string's value, as in Ring)

  Keys are Strings, or with `:keywords? true` keywords where they have keyword syntax: the
  equivalent of `ring.middleware.keyword-params/wrap-keyword-params` inside `wrap-params`,
  which also converts the keys of :params that were already there (from routes, multipart,
  ...), and here also the keys of :query-params and :form-params. Values are Strings, or vectors of Strings for repeated keys. As in Ring, a request
  that already has :form-params (or :query-params) keeps it, and it is not merged into :params.

  Malformed input gets a 400 response (text/plain, \"Bad Request: <reason>\"), a query string
  over :max-params or too many names with colliding hashes a 400 too, a form body over
  :max-params a 413 (\"Payload Too Large: <reason>\"), an unknown charset a 415, and the
  handler is not called. :max-params counts the query string and the form body separately.

  Options: {:keywords? false, :encoding nil, :max-params 1000} (see the namespace doc)."
  ([handler] (wrap-params handler {}))
  ([handler opts]
   (let [[keywords? fixed max-params] (options "wrap-params" opts)]
     (wrap-with handler #(answering-bad-input (params* % keywords? fixed max-params))))))
