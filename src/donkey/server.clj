(ns donkey.server
  "Start and stop a donkey HTTP server: a drop-in for `ring.adapter.jetty/run-jetty`.

  The whole per-request path runs in the Java kernel (`donkey.kernel.*`, `donkey.ring.*`);
  this namespace validates options once, at start-up, and gets out of the way."
  (:require [donkey.routes :as routes])
  (:import (clojure.lang IFn)
           (donkey.kernel Server ServerConfig)))

(set! *warn-on-reflection* true)

(def ^:private defaults
  {:port 80
   :host "0.0.0.0"
   :join? true
   :async? false
   :worker-threads 50
   :virtual-threads? false
   :max-body-size (* 16 1024 1024)
   :max-initial-line-length 8192
   :max-header-size 16384
   :idle-timeout 120000
   :request-timeout 60000
   :max-connections 10000
   :header-timeout 30000
   :body-timeout 30000
   :blocked-warning 2000
   :shutdown-hook? false
   :shutdown-timeout 30000
   :server-header "donkey"
   :trust-forwarded-for? false})

(def ^:private unsupported
  "ring-jetty options whose meaning donkey cannot honour yet. Ignoring them silently would,
  for example, serve plaintext to someone who asked for TLS."
  {:ssl? "TLS" :ssl-port "TLS" :keystore "TLS" :truststore "TLS" :client-auth "TLS"
   :ssl-context "TLS" :http? "disabling plain HTTP" :configurator "Jetty configurators"
   :websockets "Jetty websocket handlers"})

(defn- fail [msg]
  (throw (IllegalArgumentException. (str "donkey.server/run-server: " msg))))

(defn- int-opt ^long [opts k lo hi]
  (let [v (get opts k)]
    (when-not (and (integer? v) (<= lo v hi))
      (fail (str k " must be an integer in " lo ".." hi ", got " (pr-str v))))
    (long v)))

(defn- bool-opt [opts k]
  (let [v (get opts k)]
    (when-not (boolean? v) (fail (str k " must be true or false, got " (pr-str v))))
    v))

(defn- streamable-fns
  "When ring-core is on the classpath, the two fns the kernel uses to write bodies through
  `ring.core.protocols/StreamableResponseBody`; nil otherwise."
  []
  (when-let [write (try (requiring-resolve 'ring.core.protocols/write-body-to-stream)
                        (catch Exception _ nil))]
    (let [protocol @(requiring-resolve 'ring.core.protocols/StreamableResponseBody)]
      [(fn [body response out] (write body response out))
       (fn [body] (satisfies? protocol body))])))

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
  "Validates `opts` (merged over the defaults) and builds the kernel's configuration."
  ^ServerConfig [handler opts]
  (when-not (or (map? handler) (ifn? handler))
    (fail (str "handler must be a function or a route-table map, got " (pr-str handler))))
  (when-not (or (nil? opts) (map? opts)) (fail (str "options must be a map, got " (pr-str opts))))
  (doseq [[k what] unsupported
          :let [v (get opts k)]
          :when (if (= k :http?) (false? v) (and (some? v) (not (false? v))))]
    (fail (str k " is not supported: donkey does not do " what " yet")))
  (let [opts (merge defaults
                    (when-let [t (:max-threads opts)] {:worker-threads t})
                    (into {} (remove (comp nil? val)) opts)
                    (select-keys opts [:server-header]))
        cores (.availableProcessors (Runtime/getRuntime))
        opts (update opts :event-loops #(or % cores))
        cfg (ServerConfig.)]
    (when-not (string? (:host opts)) (fail (str ":host must be a string, got " (pr-str (:host opts)))))
    (when-not (or (nil? (:server-header opts)) (string? (:server-header opts)))
      (fail (str ":server-header must be a string or nil, got " (pr-str (:server-header opts)))))
    (if (map? handler)
      (set-routes! cfg handler)
      (set! (.handler cfg) ^IFn handler))
    (set! (.async cfg) (boolean (bool-opt opts :async?)))
    (set! (.host cfg) ^String (:host opts))
    (set! (.port cfg) (int (int-opt opts :port 0 65535)))
    (set! (.eventLoops cfg) (int (int-opt opts :event-loops 1 1024)))
    (set! (.workerThreads cfg) (int (int-opt opts :worker-threads 1 100000)))
    (set! (.virtualThreads cfg) (boolean (bool-opt opts :virtual-threads?)))
    (set! (.maxBodySize cfg) (int-opt opts :max-body-size 0 Long/MAX_VALUE))
    (set! (.maxInitialLineLength cfg) (int (int-opt opts :max-initial-line-length 256 Integer/MAX_VALUE)))
    (set! (.maxHeaderSize cfg) (int (int-opt opts :max-header-size 256 Integer/MAX_VALUE)))
    (set! (.idleTimeoutMs cfg) (int-opt opts :idle-timeout 0 Integer/MAX_VALUE))
    (set! (.requestTimeoutMs cfg) (int-opt opts :request-timeout 0 Long/MAX_VALUE))
    (set! (.maxConnections cfg) (int (int-opt opts :max-connections 0 Integer/MAX_VALUE)))
    (set! (.headerTimeoutMs cfg) (int-opt opts :header-timeout 0 Long/MAX_VALUE))
    (set! (.bodyTimeoutMs cfg) (int-opt opts :body-timeout 0 Long/MAX_VALUE))
    (set! (.blockedWarningMs cfg) (int-opt opts :blocked-warning 0 Long/MAX_VALUE))
    (set! (.shutdownHook cfg) (boolean (bool-opt opts :shutdown-hook?)))
    (set! (.shutdownTimeoutMs cfg) (int-opt opts :shutdown-timeout 0 Long/MAX_VALUE))
    (set! (.serverHeader cfg) ^String (:server-header opts))
    (set! (.trustForwardedFor cfg) (boolean (bool-opt opts :trust-forwarded-for? )))
    (when-let [[write pred] (streamable-fns)]
      (set! (.streamableWriter cfg) ^IFn write)
      (set! (.streamablePred cfg) ^IFn pred))
    cfg))

(defn run-server
  "Starts an HTTP server that serves `handler` and returns a server value once the socket is
  bound. Stop it with `stop` or `.close` (so `with-open` works); `port` gives the
  bound port.

  `handler` is a sync Ring handler `(fn [request] response)`, run on a worker thread, or with
  `:async? true` an async one `(fn [request respond raise])`, run on the event loop: it must not
  block, and `respond`/`raise` may be called from any thread, once.

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
    :port                    port to listen on; 0 picks a free one (default 80)
    :host                    address to bind (default \"0.0.0.0\")
    :join?                   block the calling thread until the server stops (default true)
    :async?                  the handler is a 3-arity async handler (default false)
    :event-loops             event loops, one server each (default: number of cores)
    :worker-threads          most threads that run sync handlers (default 50; :max-threads
                             is accepted as an alias). As many as there are cores run while
                             handlers keep up; more start once queued requests wait 1 ms
                             behind handlers that block
    :virtual-threads?        run sync handlers on virtual threads (reused, no limit on their
                             number); needs Java 21+ and fails at start-up on an older JVM
                             (default false)
    :max-body-size           largest request body in bytes; larger gets 413 (default 16 MiB).
                             A sync handler reads its :body as it arrives, with flow control;
                             an async one gets it after it has arrived whole
    :max-initial-line-length longest request line; longer gets 414 (default 8192)
    :max-header-size         largest header section; larger gets 431 (default 16384)
    :idle-timeout            ms a connection may go without a byte moving either way before it
                             is closed: between requests, or while a response waits on a
                             client that stopped reading (which frees the thread writing it);
                             checked within a second or a quarter of it; 0 for none
                             (default 120000)
    :request-timeout         ms a handler has to answer before the client gets 503; its late
                             answer is dropped and logged, its thread not interrupted; 0 for
                             no limit (default 60000). The timeouts are checked by a sweep
                             every quarter of the shortest one (50 ms to 1 s) and fire at
                             their limit at the earliest, up to two sweep periods after it
    :shutdown-timeout        ms `stop` waits for in-flight requests (default 30000)
    :shutdown-hook?          register a JVM shutdown hook that stops the server, draining it,
                             on SIGTERM (default false)
    :max-connections         open connections over this are closed as soon as accepted
                             (refused, not queued); 0 for no limit (default 10000)
    :header-timeout          ms a connection has to deliver each complete request head after
                             opening or after its previous response, else it is closed
                             (slowloris defence; also bounds idle keep-alive) (default 30000)
    :body-timeout            ms a sync handler's body read waits for more bytes before it
                             throws IOException (default 30000)
    :blocked-warning         ms after which a non-blocking handler still holding its event
                             loop is logged, naming the route; 0 for none (default 2000)
    :server-header           value of the Server header, nil for none (default \"donkey\")
    :trust-forwarded-for?    take :remote-addr from X-Forwarded-For when present; only behind a
                             proxy you trust (default false: the socket peer)

  Unknown options are ignored, so a ring-jetty option map works as it is; options naming a
  feature donkey lacks (:ssl? and the TLS options) are refused rather than ignored.

  Throws IllegalArgumentException for an invalid option and IllegalStateException when the
  server cannot start (port in use, ...), after releasing whatever it had started."
  ^Server [handler opts]
  (let [server (Server/start (config handler opts))]
    (when (get opts :join? true)
      (.await server))
    server))

(defn stop
  "Stops `server`: stops accepting connections, lets in-flight requests finish for up to
  `:shutdown-timeout` ms, then closes connections and releases every thread it started.
  Idempotent. Blocks; do not call it from an event loop."
  [^Server server]
  (.stop server)
  nil)

(defn port
  "The port `server` is bound to; with `:port 0`, the one the OS chose."
  ^long [^Server server]
  (.port server))
