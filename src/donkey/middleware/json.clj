(ns donkey.middleware.json
  "JSON request and response middleware, a drop-in for ring-json's `wrap-json-body`,
  `wrap-json-params` and `wrap-json-response`, parsed and written by the kernel
  (`donkey.codec.Json`, on Jackson).

  A request is JSON when its Content-Type is `application/json` or any `application/*+json`
  (any case, any parameters). Its body is read as UTF-8 (or UTF-16/32, detected): RFC 8259
  defines no charset parameter for JSON, so one is ignored (ring-json 0.5 decodes with it).
  Bodies decode as: objects -> persistent maps (string keys, keywords with `:keywords? true`,
  or whatever `:key-fn` makes of each name; a repeated key keeps its last value), arrays ->
  vectors, integers -> Long (exact BigInt when too big), decimals ->
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
    colliding hashes ...\"). With `:key-fn` the same bounds hold for the keys it returns,
    checked as it returns them: an object with more than 8 distinct keys of one hash, or a
    document with more than 8 distinct keywords of one hash among them, is a 400.

  ring-json's options: every one is honoured (see each middleware's doc) except two of
  cheshire's that ring-json passes on when writing, which are refused with an
  IllegalArgumentException when the middleware is built: `:ex`, and `:pretty` as a map of
  pretty-print options. Options are checked once, when a middleware is built (each call, for
  the functions).

  Each middleware has its function beside it: `json-body-request` / `wrap-json-body`,
  `json-params-request` / `wrap-json-params`, `json-response` / `wrap-json-response`. The
  request functions throw refused bodies as a `donkey.middleware.errors/bad-input` exception
  (status 400 or 413, the default answer's text as its message, the
  `donkey.codec.JsonException` as its cause, with `.line` and `.column`), where ring-json's
  return nil; the middleware answers it with :error-handler instead of calling the handler
  (see `donkey.middleware.errors`). Every middleware serves both Ring handler arities."
  (:require [donkey.middleware.errors :as errors]
            [donkey.middleware.options :as opt])
  (:import (clojure.lang IFn Named)
           (com.fasterxml.jackson.core PrettyPrinter)
           (com.fasterxml.jackson.core.util DefaultPrettyPrinter Instantiatable)
           (donkey.codec ContentType Json JsonException JsonWriter)
           (java.io BufferedInputStream InputStream OutputStream)
           (java.text DateFormat SimpleDateFormat)
           (java.util TimeZone)))

(set! *warn-on-reflection* true)

(defn json-request?
  "True when the request's Content-Type is application/json or application/*+json."
  [request]
  (ContentType/isJson (get (:headers request) "content-type")))

;; ---------------------------------------------------------------------------------------------
;; options, once

(def ^:private refuse opt/fail)

(def ^:private option-names
  "The options of every function here, reading and writing: a key meant for the other
  direction is not used, but not taken for a misspelling either."
  #{:keywords? :key-fn :bigdecimals? :max-keys :malformed-response :error-handler :pretty
    :pretty? :escape-non-ascii :escape-non-ascii? :date-format :stream? :ex})

(defn- check-opts
  "Checks the options every function here shares; returns :max-keys (the default when absent)."
  [who opts]
  (opt/map-or-nil who opts option-names)
  (let [m (:max-keys opts)]
    (when (some? m) (opt/positive-int who :max-keys m Integer/MAX_VALUE))
    (int (or m Json/DEFAULT_MAX_KEYS))))

(defn- key-fn-option
  "The :key-fn of `opts` (nil when absent), checked. cheshire also takes true for `keyword`,
  but ring-json documents a function, and true on the writing side fails in cheshire only when
  a response is written; here it is refused at once, in every direction."
  [who opts]
  (let [f (:key-fn opts)]
    (cond
      (or (nil? f) (false? f)) nil
      (true? f) (refuse who ":key-fn must be a function of one key, got true; "
                        "for keyword keys use :keywords? true")
      (ifn? f) f
      :else (refuse who ":key-fn must be a function of one key, got " (pr-str f)))))

(defn- read-opts
  "[keywords? bigdecimals? max-keys key-fn] for the reading functions, checked. :key-fn wins
  over :keywords?, as in ring-json (it passes `(or key-fn keywords?)` to cheshire). `keyword`
  itself as :key-fn is :keywords? true: the same keys, with the codec's keyword cache and its
  check of new names before they are interned."
  [who opts]
  (let [max-keys (check-opts who opts)
        key-fn (key-fn-option who opts)]
    [(if key-fn (identical? key-fn keyword) (boolean (:keywords? opts)))
     (boolean (:bigdecimals? opts))
     max-keys
     (when-not (identical? key-fn keyword) key-fn)]))

(defn- json-error-handler
  "The handler for refused bodies: :error-handler, or the deprecated :malformed-response (a
  response map, or a `(fn [request ^JsonException e])` returning one), or the default."
  [who opts]
  (let [r (:malformed-response opts)]
    (when (and (some? r) (some? (:error-handler opts)))
      (opt/fail who "give :error-handler or :malformed-response, not both"))
    (cond
      (nil? r) (errors/error-handler-option who opts)
      (map? r) (fn ([_] r) ([_ respond _] (respond r)))
      (fn? r) (let [answer (fn [request] (r request (ex-cause (:donkey.middleware/error request))))]
                (fn ([request] (answer request))
                    ([request respond _] (respond (answer request)))))
      :else (opt/fail who ":malformed-response must be a response map or a fn, got "
                      (pr-str r)))))

;; ---------------------------------------------------------------------------------------------
;; reading

(defn- read-body
  "The decoded JSON body of `request`, or ::none when it is not a JSON request with a body to
  read. Throws a bad-input exception for a refused body; what `key-fn` throws propagates."
  [request keywords? bigdecimals? max-keys key-fn]
  (if (json-request? request)
    (let [body (:body request)
          kw (boolean keywords?)
          bd (boolean bigdecimals?)
          mk (int max-keys)]
      (errors/refusing
        (cond (instance? InputStream body) (Json/readBody ^InputStream body kw bd mk ^IFn key-fn)
              (string? body) (Json/readBody ^String body kw bd mk ^IFn key-fn)
              :else ::none)))
    ::none))

(defn- json-body* [request keywords? bigdecimals? max-keys key-fn]
  (let [r (read-body request keywords? bigdecimals? max-keys key-fn)]
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
  [request keywords? bigdecimals? max-keys key-fn]
  (let [body (:body request)]
    (if (and (instance? InputStream body) (.markSupported ^InputStream body))
      (let [^InputStream in body]
        (.mark in Integer/MAX_VALUE)
        (try
          (read-body request keywords? bigdecimals? max-keys key-fn)
          (finally (.reset in))))
      (read-body request keywords? bigdecimals? max-keys key-fn))))

(defn- json-params* [request keywords? bigdecimals? max-keys key-fn]
  (let [request (rewindable request)
        r (read-params request keywords? bigdecimals? max-keys key-fn)]
    (if (map? r)
      (assoc request :json-params r :params (merge (:params request) r))
      request)))

(defn json-body-request
  "What `wrap-json-body` does, as a function: a JSON request with its :body replaced by the
  decoded data (nil for an empty body); any other request unchanged. Throws a bad-input
  exception for a refused body (see the namespace doc), and whatever :key-fn throws. Options
  as for `wrap-json-body`; :error-handler and :malformed-response are not used."
  ([request] (json-body-request request {}))
  ([request opts]
   (let [[keywords? bigdecimals? max-keys key-fn]
         (read-opts "donkey.middleware.json/json-body-request" opts)]
     (json-body* request keywords? bigdecimals? max-keys key-fn))))

(defn json-params-request
  "What `wrap-json-params` does, as a function: for a JSON request whose body is an object,
  the request with the map in :json-params and merged into :params; with any other body, or
  for any other request, unchanged. The body stays readable from its start (a stream without
  mark/reset is replaced by a buffered one). Throws a bad-input exception for a refused body
  (see the namespace doc), and whatever :key-fn throws. Options as for `wrap-json-params`;
  :error-handler and :malformed-response are not used."
  ([request] (json-params-request request {}))
  ([request opts]
   (let [[keywords? bigdecimals? max-keys key-fn]
         (read-opts "donkey.middleware.json/json-params-request" opts)]
     (json-params* request keywords? bigdecimals? max-keys key-fn))))

(defn- wrap-decoding
  "`handler` behind `decode` (json-body* or json-params*), with the options checked once in
  the name of `who` and refused bodies sent to the error handler."
  [who decode handler opts]
  (let [[keywords? bigdecimals? max-keys key-fn] (read-opts who opts)]
    (errors/wrap handler #(decode % keywords? bigdecimals? max-keys key-fn)
                 (json-error-handler who opts))))

(defn wrap-json-body
  "Middleware that replaces the :body of a JSON request (Content-Type application/json or
  application/*+json) with its decoded data; other requests pass through untouched. An empty
  body becomes nil. A refused body goes to :error-handler, not the handler.

  Options (ring-json's, and donkey's :max-keys and :error-handler):
    :keywords?          object keys as keywords (default false: strings)
    :key-fn             a function that makes each object key from its name (a String), as
                        ring-json 0.5's; when given, :keywords? is not used (as in ring-json).
                        Its keys may be anything, nil included; two names it maps to one key
                        are a repeated key (the last value wins). :max-keys and the bounds on
                        keys of one hash hold for the keys it returns (see the namespace
                        doc). What it throws is not bad input: it propagates as the
                        handler's own exception would (thrown, or passed to `raise`), so the
                        server answers 500
    :bigdecimals?       decimals as exact BigDecimal (default false: Double)
    :max-keys           the most members of any one object (default 10000); more is a 413
    :error-handler      a Ring handler of both arities for a refused body (default
                        `donkey.middleware.errors/default-error-handler`: 400 text/plain
                        \"Bad Request: malformed JSON: <message>\", or 413 \"Payload Too
                        Large: <message>\" past :max-keys)
    :malformed-response deprecated, use :error-handler: a response map, or a
                        `(fn [request ^donkey.codec.JsonException e])` returning one, the
                        answer to every refused body; not together with :error-handler

  Where it differs from ring-json on purpose: a refused body's default answer is the 400 (or
  413) above, naming what was wrong and where, rather than \"Malformed JSON in request
  body.\"; and a Content-Type charset is not used (RFC 8259 defines none for JSON): the body
  is UTF-8 (UTF-16 or UTF-32 is detected from its first bytes), where ring-json 0.5 decodes
  it with the charset it names. Both arities."
  ([handler] (wrap-json-body handler {}))
  ([handler opts]
   (wrap-decoding "donkey.middleware.json/wrap-json-body" json-body* handler opts)))

(defn wrap-json-params
  "Middleware that decodes the body of a JSON request and, when it is a JSON object, puts the
  map in :json-params and merges it into :params (keys strings, as wrap-params makes them,
  unless :keywords? or :key-fn says otherwise). A body that is not an object (an array, a
  number...) leaves :params alone. The body stays readable from its start (a stream without
  mark/reset is replaced by a buffered one). A refused body goes to :error-handler, not the
  handler.

  Options: :keywords?, :key-fn, :bigdecimals?, :max-keys, :error-handler and the deprecated
  :malformed-response, as for `wrap-json-body`, with its differences from ring-json. Both
  arities."
  ([handler] (wrap-json-params handler {}))
  ([handler opts]
   (wrap-decoding "donkey.middleware.json/wrap-json-params" json-params* handler opts)))

;; ---------------------------------------------------------------------------------------------
;; writing

(defn- content-type? [k]
  (.equalsIgnoreCase "content-type" (if (instance? Named k) (name k) (str k))))

(deftype JsonStreamBody [body ^JsonWriter writer])

;; the type's positional factory is the middleware's own plumbing
(alter-meta! #'->JsonStreamBody assoc :no-doc true)

(defn- streamable!
  "Makes JsonStreamBody satisfy ring-core's StreamableResponseBody (the servers' protocol for
  bodies that write themselves), loading ring-core's protocols, which donkey does not depend
  on; refuses :stream? in the name of `who` without them."
  [who]
  (let [protocol (try @(requiring-resolve 'ring.core.protocols/StreamableResponseBody)
                      (catch Exception e
                        (refuse who ":stream? needs ring-core 1.6 or later on the classpath "
                                "(its ring.core.protocols), which did not load: " (ex-message e))))]
    (locking JsonStreamBody
      (when-not (extends? protocol JsonStreamBody)
        (extend JsonStreamBody protocol
                {:write-body-to-stream
                 ;; closed only once written: a server takes the close for the body's end,
                 ;; so a failed document must leave by its exception alone, for the server
                 ;; to answer 500 (nothing flushed yet) or cut the response short
                 (fn [^JsonStreamBody b _response ^OutputStream out]
                   (.writeTo ^JsonWriter (.-writer b) (.-body b) out)
                   (.close out))})))))

(defn- pretty-printer
  "The PrettyPrinter for :pretty / :pretty?, or nil for compact output."
  ^PrettyPrinter [who p]
  (cond
    (or (nil? p) (false? p)) nil
    (true? p) (DefaultPrettyPrinter.)
    (instance? PrettyPrinter p)
    ;; Jackson gives each document its own copy of a printer that can make one (a
    ;; DefaultPrettyPrinter keeps its nesting in itself); a subclass that does not override
    ;; createInstance fails there, on every response, so it is refused here
    (if (instance? Instantiatable p)
      (try (.createInstance ^Instantiatable p) p
           (catch IllegalStateException e
             (refuse who ":pretty: this PrettyPrinter cannot be copied for each response ("
                     (ex-message e) "), and one instance is not safe to share")))
      p)
    (map? p) (refuse who ":pretty: cheshire's map of pretty-print options is not supported; "
                     "give true, or a com.fasterxml.jackson.core.PrettyPrinter (such as a "
                     "DefaultPrettyPrinter with its indenters set), got " (pr-str p))
    :else (refuse who ":pretty must be true, false or a com.fasterxml.jackson.core.PrettyPrinter, "
                  "got " (pr-str p))))

(defn- date-format
  "The DateFormat for :date-format (a SimpleDateFormat pattern, in UTC as cheshire's), or nil."
  ^DateFormat [who f]
  (cond
    (nil? f) nil
    (string? f) (try (doto (SimpleDateFormat. ^String f)
                       (.setTimeZone (TimeZone/getTimeZone "UTC")))
                     (catch IllegalArgumentException e
                       (refuse who ":date-format is not a SimpleDateFormat pattern ("
                               (ex-message e) "): " (pr-str f))))
    :else (refuse who ":date-format must be a SimpleDateFormat pattern (a String), got "
                  (pr-str f))))

(defn- write-opts
  "[writer stream?] from the options, checked: a JsonWriter with every writing option in it,
  ring-json's names (:pretty, :escape-non-ascii) and donkey's (:pretty?, :escape-non-ascii?)."
  [who opts]
  (check-opts who opts)
  (when (some? (:ex opts))
    (refuse who ":ex (cheshire's exception for a value it cannot write) is not supported: "
            "a body that cannot be written throws an IllegalArgumentException with the "
            "failure as its cause"))
  (let [pp (pretty-printer who (or (:pretty opts) (:pretty? opts)))
        ascii? (boolean (or (:escape-non-ascii opts) (:escape-non-ascii? opts)))
        df (date-format who (:date-format opts))
        key-fn (key-fn-option who opts)
        stream? (boolean (:stream? opts))]
    (when stream? (streamable! who))
    [(if (or pp df key-fn)
       (Json/writer pp ascii? df ^IFn key-fn)
       (Json/writer false ascii?))
     stream?]))

(defn- json-response* [response ^JsonWriter writer stream?]
  (let [body (:body response)]
    (if (coll? body)
      (let [headers (:headers response)]
        (cond-> (assoc response :body (if stream?
                                        (JsonStreamBody. body writer)
                                        (.writeString writer body)))
          (not (some content-type? (keys headers)))
          (assoc :headers (assoc headers "Content-Type" Json/CONTENT_TYPE))))
      response)))

(defn json-response
  "What `wrap-json-response` does to a response, as a function: a collection body (map,
  vector, set, list or seq, as ring-json) becomes JSON, with `Content-Type: application/json;
  charset=utf-8` unless the response has a Content-Type; any other response is returned
  unchanged. Throws IllegalArgumentException for a body that cannot be written, and whatever
  :key-fn throws. Options as for `wrap-json-response`, checked on each call."
  ([response] (json-response response {}))
  ([response opts]
   (let [[writer stream?] (write-opts "donkey.middleware.json/json-response" opts)]
     (json-response* response writer stream?))))

(defn wrap-json-response
  "Middleware that writes a collection body as JSON (see `json-response`).

  donkey's kernel already writes a map or vector body as JSON (straight to bytes, with the
  same Content-Type), so under donkey this middleware is only needed for what the kernel does
  not do: seq, list and set bodies (the kernel streams a seq as Ring's `str` of each
  element), the options below, and handlers that must also run under other Ring servers. It
  costs one serialization to a String per response (with :stream?, a write to the stream).

  Options (ring-json 0.5's, which passes them to cheshire's generate-string, and cheshire's
  :date-format):
    :pretty             true for indented output (Jackson's default pretty printer, as
                        cheshire's), or a com.fasterxml.jackson.core.PrettyPrinter; donkey's
                        :pretty? is the same
    :escape-non-ascii   true for every non-ASCII character as a \\uXXXX escape; donkey's
                        :escape-non-ascii? is the same
    :key-fn             a function that names each keyword key of a map (called with the
                        keyword), as cheshire's; keys that are not keywords are written as
                        without it. A result that is not a String is written as a key would
                        be (a keyword as its name). What it throws propagates as the
                        handler's own exception would (thrown, or passed to `raise`), so the
                        server answers 500
    :date-format        a SimpleDateFormat pattern for java.util.Date values, in UTC, as
                        cheshire's (without it a Date is ISO-8601 with milliseconds and
                        offset, where cheshire writes yyyy-MM-dd'T'HH:mm:ss'Z')
    :stream?            true for a body that writes its JSON to the server's output stream as
                        it is sent, rather than a String, as ring-json 0.5's: it satisfies
                        ring-core's StreamableResponseBody, so ring-core 1.6 or later must be
                        on the classpath (refused without it). A failure while writing then
                        comes as the response is sent: donkey answers 500 while nothing has
                        gone out (a document within :output-buffer-size), else ends the
                        response short, without its last chunk

  Refused with an IllegalArgumentException when the middleware is built: cheshire's :ex
  (a body that cannot be written throws IllegalArgumentException with the failure as its
  cause), and :pretty as cheshire's map of pretty-print options (give a PrettyPrinter).

  A body that cannot be written throws (sync) or is passed to `raise` (async). Both arities."
  ([handler] (wrap-json-response handler {}))
  ([handler opts]
   (let [^IFn handler handler
         [writer stream?] (write-opts "donkey.middleware.json/wrap-json-response" opts)]
     (fn
       ([request]
        (json-response* (handler request) writer stream?))
       ([request respond raise]
        (handler request
                 (fn [response]
                   (let [r (try (json-response* response writer stream?)
                                (catch Throwable t t))]
                     (if (instance? Throwable r)
                       (raise r)
                       (respond r))))
                 raise))))))
