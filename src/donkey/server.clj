(ns donkey.server
  "Start and stop a donkey HTTP server: a drop-in for `ring.adapter.jetty/run-jetty`.

  The whole per-request path runs in the Java kernel (`donkey.kernel.*`, `donkey.ring.*`);
  this namespace has the options checked once, at start-up (by `donkey.options`), and gets out
  of the way."
  (:require [donkey.options :as options :refer [fail]]
            [donkey.routes :as routes])
  (:import (clojure.lang IFn)
           (donkey.kernel Server ServerConfig)))

(set! *warn-on-reflection* true)

(defn- loaded-var
  "The bound var `sym` names when its namespace has been loaded; nil otherwise. Never loads
  one: a value can only satisfy a protocol whose namespace has been loaded, and loading
  ring-core's from source costs a cold JVM most of a second of start-up and of JIT time."
  ([sym] (loaded-var (symbol (namespace sym)) (symbol (name sym))))
  ([ns-sym name-sym]
   (when-let [ns (find-ns ns-sym)]
     (let [v (ns-resolve ns name-sym)]
       (when (and (var? v) (.isBound ^clojure.lang.Var v)) v)))))

(defn- once-loaded
  "A fn of no arguments that returns `(make)` once `(loaded-var sym)` is non-nil, and nil
  until then; `make` runs at most once per thread race, its result kept. Any thread."
  [sym make]
  (let [made (volatile! nil)
        ns-sym (symbol (namespace sym))
        name-sym (symbol (name sym))]
    (fn []
      (or @made
          (when (loaded-var ns-sym name-sym)
            (vreset! made (make)))))))

(defn- streamable-fns
  "The two fns the kernel writes bodies through `ring.core.protocols/StreamableResponseBody`
  with: `(fn [body response out])` and `(fn [body])`, true when it can write `body`. The
  kernel calls them only for a body of a type it does not know; until the app has loaded
  ring-core's protocols no body can satisfy them, and the predicate answers false."
  []
  (let [protocol (once-loaded 'ring.core.protocols/write-body-to-stream
                              (fn [] [@(loaded-var 'ring.core.protocols/write-body-to-stream)
                                      @(loaded-var 'ring.core.protocols/StreamableResponseBody)]))]
    [(fn [body response out]
       (let [[write] (protocol)] (write body response out)))
     (fn [body]
       (if-let [[_ p] (protocol)] (satisfies? p body) false))]))

(defn- ws-listener-adapter
  "The kernel's adapter for WebSocket listeners that satisfy `ring.websocket.protocols/Listener`
  (ring-core 1.11+), built by `donkey.websocket/protocol-adapter` when the app has loaded that
  namespace: at once when it has by now, else at the first such listener. donkey.websocket is
  loaded only then, so a server without Ring's WebSocket API does not compile it at start-up."
  []
  (let [adapter (once-loaded 'ring.websocket.protocols/Listener
                             (fn [] ((requiring-resolve 'donkey.websocket/protocol-adapter))))]
    (adapter)
    (fn [listener]
      (when-let [a (adapter)] (a listener)))))

(defn- set-routes!
  "Compiles a route-table spec into `cfg`."
  [^ServerConfig cfg {:keys [routes middleware not-found error-handler] :as spec}]
  (when-let [unknown (seq (remove #{:routes :middleware :not-found :error-handler} (keys spec)))]
    (fail (str "unknown keys in the route-table spec: " (vec unknown))))
  (when-not (or (nil? middleware) (sequential? middleware))
    (fail (str ":middleware must be a vector of middleware fns, got " (pr-str middleware))))
  (when-not (or (nil? not-found) (ifn? not-found)) (fail ":not-found must be a Ring handler"))
  (when-not (or (nil? error-handler) (ifn? error-handler)) (fail ":error-handler must be a function"))
  (set! (.router cfg) (routes/compile-routes routes middleware))
  (when not-found
    (set! (.notFound cfg) ^IFn (routes/wrap-middleware not-found middleware)))
  (when error-handler
    (set! (.errorHandler cfg) ^IFn error-handler)))

(defn- config
  "Validates `handler` and `opts` and builds the kernel's configuration."
  ^ServerConfig [handler opts]
  (when-not (or (map? handler) (ifn? handler))
    (fail (str "handler must be a function or a route-table map, got " (pr-str handler))))
  (when-not (or (nil? opts) (map? opts)) (fail (str "options must be a map, got " (pr-str opts))))
  (let [cfg (options/configure! (ServerConfig.) opts)]
    (if (map? handler)
      (set-routes! cfg handler)
      (set! (.handler cfg) ^IFn handler))
    (let [[write pred] (streamable-fns)]
      (set! (.streamableWriter cfg) ^IFn write)
      (set! (.streamablePred cfg) ^IFn pred))
    (set! (.wsListenerAdapter cfg) ^IFn (ws-listener-adapter))
    cfg))

;; The options part of the docstring is generated from the option table, so that it lists
;; every option with the default it has.
(defn run-server
  {:doc (str "Starts an HTTP server that serves `handler` and returns a server value once
  the socket is bound. Stop it with `stop`, `.close` (so `with-open` works) or by calling it,
  as http-kit's stop function: `(server)`, `(server :timeout ms)`; `port` gives the bound port
  and `status` whether it runs.

  `handler` is a sync Ring handler `(fn [request] response)`, run on a worker thread, or with
  `:async? true` an async one `(fn [request respond raise])`, run on the event loop: it must not
  block, and `respond`/`raise` may be called from any thread, once. Either may answer a
  WebSocket upgrade with `{:ring.websocket/listener l}` (Ring 1.11; see `donkey.websocket`).

  `handler` may instead be a route table, routed by the kernel (see `donkey.routes` for the
  route map keys):
    {:routes        [{:path \"/users/:id\" :methods [:get] :handler get-user} ...]
     :middleware    [...]   ; Ring middleware around every route, outside the route's own
     :not-found     h       ; sync Ring handler for unmatched paths (default: a plain 404)
     :error-handler f}      ; (fn [request throwable]) => response with a String/byte[]/nil
                            ; body, instead of the plain 500; must not block
  The kernel answers 404, 405 (with Allow), 415 and 406 itself. A duplicate or invalid route
  fails start-up with an IllegalArgumentException naming it.

  Options (ring-jetty's names where the concept is the same):
"
             (options/doc)
             "

  ring-jetty's and http-kit's names for these are accepted too (:max-threads, :max-idle-time,
  :request-header-size, :selector-threads, :send-server-version? false; :ip, :thread,
  :queue-size, :max-body, :max-line, :ring-async?, ...: the README has the whole mapping); two
  names of one setting with different values fail. A key that looks like a misspelt option
  (:max-body-szie, :ssl, :maxBodySize) fails, naming the option it resembles; other unknown
  keys (an application's own config) are ignored, so an existing option map works as it is.
  Options asking for something donkey does not do (Unix domain sockets, a thread pool or
  Jetty configurator of yours, ...) are refused rather than ignored. `(run-server handler)`
  takes every default: port 80, and it blocks (:join? true).

  TLS: with :ssl? or :ssl-port, HTTPS is served on :ssl-port beside HTTP on :port (HTTPS only
  with :http? false), TLS 1.3 and 1.2 only, with forward-secret AEAD cipher suites; requests
  on it have :scheme :https, and :ssl-client-cert when the client presented a certificate.
  `reload-ssl!` replaces the certificate of a running server. HTTP/2: :h2? offers it by ALPN
  on the TLS listener, :h2c? serves it in cleartext; the same handlers serve its streams.

  Throws IllegalArgumentException for an invalid option (a TLS file that is missing, a wrong
  password, a key that does not match its certificate, ... included) and
  IllegalStateException when the server cannot start (port in use, ...), after releasing
  whatever it had started.")}
  (^Server [handler] (run-server handler {}))
  (^Server [handler opts]
   (let [cfg (config handler opts)
         ^Server server (try (Server/start cfg)
                             ;; the kernel's TLS checks name the option; say whose argument
                             ;; it was
                             (catch IllegalArgumentException e (fail (ex-message e) e)))]
     (when (options/join? opts)
       (.await server))
     server)))

(def ^:private tls-options
  "The options `reload-ssl!` reads: those of the key material, trust and protocols."
  [:keystore :keystore-type :key-password :ssl-cert :ssl-key :ssl-context :truststore
   :trust-password :client-auth :exclude-ciphers :exclude-protocols :replace-exclude-ciphers?
   :replace-exclude-protocols?])

(defn reload-ssl!
  "Has `server`'s TLS listener serve new TLS connections with the key material, trust and
  protocol settings `opts` gives, in run-server's TLS options (:keystore, :key-password,
  :keystore-type, :ssl-cert, :ssl-key, :ssl-context, :truststore, :trust-password,
  :client-auth, :exclude-ciphers, :exclude-protocols and the :replace-exclude-... switches;
  other keys are ignored, so run-server's whole option map may be given). Open connections
  keep what they negotiated. `opts` is checked and its files read first: a bad value throws
  IllegalArgumentException naming the option and leaves the server as it was. Throws
  IllegalStateException when `server` has no TLS listener or has stopped. Blocks the calling
  thread while the files load (do not call it from an event loop); returns nil."
  [^Server server opts]
  (binding [options/*caller* "donkey.server/reload-ssl!"]
    (when-not (map? opts) (fail (str "options must be a map, got " (pr-str opts))))
    (let [cfg (options/configure! (ServerConfig.) (select-keys opts tls-options))]
      (try (.reloadTls server cfg)
           (catch IllegalArgumentException e (fail (ex-message e) e)))
      nil)))

(defn stop
  "Stops `server`: stops accepting connections, lets in-flight requests finish for up to
  `:shutdown-timeout` ms (or `:timeout` ms when given), then closes connections and releases
  every thread it started. Idempotent. Blocks; do not call it from an event loop."
  ([^Server server]
   (.stop server)
   nil)
  ([^Server server {:keys [timeout]}]
   (if (nil? timeout)
     (.stop server)
     (server {:timeout timeout}))
   nil))

(defn port
  "The port `server`'s plaintext listener is bound to (with `:port 0`, the one the OS chose);
  with `:http? false`, its TLS listener's."
  ^long [^Server server]
  (.port server))

(defn ssl-port
  "The port `server`'s TLS listener is bound to (with `:ssl-port 0`, the one the OS chose), or
  nil when it serves no TLS. Any thread."
  [^Server server]
  (let [p (.tlsPort server)]
    (when (<= 0 p) p)))

(defn ssl-provider
  "The TLS engine `server`'s new TLS connections get: `:openssl` or `:jdk` (the JDK's serves
  an `:ssl-context`, whatever `:ssl-provider` chose), or nil when it serves no TLS. Any
  thread."
  [^Server server]
  (.tlsProvider server))

(defn status
  "`:running`, `:stopping` (draining in-flight requests) or `:stopped`."
  [^Server server]
  (keyword (.status server)))
