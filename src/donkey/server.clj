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
   :min-threads 0
   :thread-idle-timeout 60000
   :max-queued-requests 0
   :virtual-threads? false
   :daemon? false
   :max-body-size (* 16 1024 1024)
   :max-initial-line-length 8192
   :max-header-size 16384
   :idle-timeout 120000
   :request-timeout 60000
   :async-timeout -1
   :max-connections 10000
   :header-timeout 30000
   :body-timeout 30000
   :blocked-warning 2000
   :shutdown-hook? false
   :shutdown-timeout 30000
   :server-header "donkey"
   :send-date-header? true
   :output-buffer-size (* 16 1024)
   :trust-forwarded-for? false})

(defn- fail [msg]
  (throw (IllegalArgumentException. (str "donkey.server/run-server: " msg))))

(defn- boolean-value [k v]
  (when-not (boolean? v) (fail (str k " must be true or false, got " (pr-str v))))
  v)

(def ^:private refused
  "Options of ring-jetty, http-kit and ring-jetty9-adapter that ask for something donkey does
  not do, as option -> [reason ok?]: a value `ok?` accepts (default nil or false: not asked
  for) passes. Ignoring them would surprise, serving plaintext to someone who asked for TLS,
  say; options whose absence only changes tuning are accepted instead (see the README)."
  (let [tls "donkey does not do TLS yet; terminate TLS in a proxy in front of it"
        ws "donkey does not do WebSockets yet"
        listen (str "donkey listens on a TCP :host and :port only (no Unix domain sockets or "
                    "custom channels)")
        pool (str "donkey runs sync handlers on a pool of its own; size it with "
                  ":worker-threads, or use :virtual-threads? true")
        logs (str "donkey logs through System.Logger (logger \"donkey\"); route that to your "
                  "logging library with its JUL bridge instead")]
    {:ssl? [tls] :ssl-port [tls] :ssl-context [tls] :keystore [tls] :keystore-type [tls]
     :key-password [tls] :keystore-scan-interval [tls] :truststore [tls] :trust-password [tls]
     :client-auth [tls] :sni-host-check? [tls] :exclude-ciphers [tls] :exclude-protocols [tls]
     :replace-exclude-ciphers? [tls] :replace-exclude-protocols? [tls]
     :http? ["donkey does not do TLS yet, so it cannot serve HTTPS only" #(not (false? %))]
     :h2? ["donkey does not do HTTP/2 yet"] :h2c? ["donkey does not do HTTP/2 yet"]
     :websockets [ws] :ws-idle-timeout [ws] :ws-max-text-size [ws] :ws-max-binary-size [ws]
     :max-ws [ws]
     :unix-socket [listen] :address-finder [listen] :channel-factory [listen]
     :configurator ["there is no Jetty Server to configure"]
     :thread-pool [pool] :worker-pool [pool]
     :proxy-protocol ["donkey does not read the PROXY protocol" #(contains? #{nil :disable} %)]
     :error-logger [logs] :warn-logger [logs] :event-logger [logs] :event-names [logs]}))

(def ^:private pool-keys
  "http-kit's worker-pool options, which it also takes in a :pool-opts map."
  [:thread :n-threads :n-min-threads :n-max-threads :queue-size :queue-type :prefix
   :worker-name-prefix :allow-virtual?])

(def ^:private aliases
  "Other servers' names for donkey options, as [alias option convert]: `convert` turns the
  alias's value into the option's, or ::none when that value sets nothing."
  (let [same (fn [_ v] v)]
    [;; ring-jetty
     [:max-threads :worker-threads same]
     [:max-idle-time :idle-timeout same]
     [:request-header-size :max-header-size same]
     [:selector-threads :event-loops (fn [_ v] (if (= -1 v) ::none v))]
     [:send-server-version? :server-header (fn [k v] (if (boolean-value k v) ::none nil))]
     ;; http-kit
     [:ip :host same]
     [:thread :worker-threads same]
     [:n-threads :worker-threads same]
     [:n-max-threads :worker-threads same]
     [:n-min-threads :min-threads same]
     [:queue-size :max-queued-requests same]
     [:max-body :max-body-size same]
     [:max-line :max-initial-line-length same]
     [:ring-async? :async? same]
     [:legacy-unsafe-remote-addr? :trust-forwarded-for? same]
     ;; http-kit runs handlers on virtual threads where the JVM has them unless told not to
     [:allow-virtual? :virtual-threads?
      (fn [k v] (if (and (boolean-value k v) (>= (.feature (Runtime/version)) 21))
                  true
                  ::none))]]))

(defn- given
  "The options `opts` sets: without nil values (nil means the default), except :server-header,
  whose nil sends no Server header."
  [opts]
  (into {} (filter (fn [[k v]] (or (some? v) (= k :server-header)))) opts))

(defn- resolve-aliases
  "`opts` with every alias replaced by the option it names, and ::from, a map from each option
  set through an alias to that alias (for messages). Fails when two names of one option
  disagree."
  [opts]
  (let [sources (reduce (fn [acc [alias k convert]]
                          (if (contains? opts alias)
                            (let [raw (get opts alias)
                                  v (convert alias raw)]
                              (if (= v ::none) acc (update acc k (fnil conj []) [alias v raw])))
                            acc))
                        (into {} (map (fn [[k v]] [k [[k v v]]])) opts)
                        aliases)]
    (reduce-kv (fn [m k srcs]
                 (when (< 1 (count (distinct (map second srcs))))
                   (fail (str "options naming one setting disagree: "
                              (apply str (interpose ", " (map (fn [[a _ raw]] (str a " " (pr-str raw)))
                                                              srcs)))
                              "; give one")))
                 (let [[from v] (first srcs)]
                   (cond-> (assoc m k v)
                     (not= from k) (assoc-in [::from k] from))))
               {}
               (apply dissoc sources (map first aliases)))))

(defn- opt-name [opts k] (get-in opts [::from k] k))

(defn- int-opt ^long [opts k lo hi]
  (let [v (get opts k)]
    (when-not (and (integer? v) (<= lo v hi))
      (fail (str (opt-name opts k) " must be an integer in " lo ".." hi ", got " (pr-str v))))
    (long v)))

(defn- bool-opt [opts k]
  (boolean-value (opt-name opts k) (get opts k)))

(defn- options
  "`opts` checked against the refused options, with aliases resolved, over the defaults."
  [opts]
  (doseq [[k [reason ok?]] refused
          :let [v (get opts k)]
          :when (not ((or ok? #(or (nil? %) (false? %))) v))]
    (fail (str k " is not supported: " reason)))
  (let [pool-opts (:pool-opts opts)
        _ (when-not (or (nil? pool-opts) (map? pool-opts))
            (fail (str ":pool-opts must be a map, got " (pr-str pool-opts))))
        ;; as http-kit: a :pool-opts map replaces the top-level pool options
        opts (if pool-opts (merge (apply dissoc opts pool-keys) (select-keys pool-opts pool-keys)) opts)
        opts (resolve-aliases (given opts))
        cores (.availableProcessors (Runtime/getRuntime))]
    (merge defaults {:event-loops cores} opts)))

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
  (let [opts (options opts)
        cfg (ServerConfig.)]
    (when-not (string? (:host opts))
      (fail (str (opt-name opts :host) " must be a string, got " (pr-str (:host opts)))))
    (when-not (or (nil? (:server-header opts)) (string? (:server-header opts)))
      (fail (str ":server-header must be a string or nil, got " (pr-str (:server-header opts)))))
    (when-not (or (nil? (:async-timeout-handler opts)) (ifn? (:async-timeout-handler opts)))
      (fail (str ":async-timeout-handler must be a function (fn [request respond raise]), got "
                 (pr-str (:async-timeout-handler opts)))))
    (if (map? handler)
      (set-routes! cfg handler)
      (set! (.handler cfg) ^IFn handler))
    (set! (.async cfg) (boolean (bool-opt opts :async?)))
    (set! (.host cfg) ^String (:host opts))
    (set! (.port cfg) (int (int-opt opts :port 0 65535)))
    (set! (.eventLoops cfg) (int (int-opt opts :event-loops 1 1024)))
    (set! (.workerThreads cfg) (int (int-opt opts :worker-threads 1 100000)))
    (set! (.minThreads cfg) (int (int-opt opts :min-threads 0 (.workerThreads cfg))))
    (set! (.threadIdleTimeoutMs cfg) (int-opt opts :thread-idle-timeout 1 Long/MAX_VALUE))
    (set! (.maxQueuedRequests cfg) (int (int-opt opts :max-queued-requests 0 Integer/MAX_VALUE)))
    (set! (.virtualThreads cfg) (boolean (bool-opt opts :virtual-threads?)))
    (set! (.daemon cfg) (boolean (bool-opt opts :daemon?)))
    (set! (.maxBodySize cfg) (int-opt opts :max-body-size 0 Long/MAX_VALUE))
    (set! (.maxInitialLineLength cfg) (int (int-opt opts :max-initial-line-length 256 Integer/MAX_VALUE)))
    (set! (.maxHeaderSize cfg) (int (int-opt opts :max-header-size 256 Integer/MAX_VALUE)))
    (set! (.idleTimeoutMs cfg) (int-opt opts :idle-timeout 0 Integer/MAX_VALUE))
    (set! (.requestTimeoutMs cfg) (int-opt opts :request-timeout 0 Long/MAX_VALUE))
    (set! (.asyncTimeoutMs cfg) (int-opt opts :async-timeout -1 Long/MAX_VALUE))
    (set! (.asyncTimeoutHandler cfg) ^IFn (:async-timeout-handler opts))
    (set! (.maxConnections cfg) (int (int-opt opts :max-connections 0 Integer/MAX_VALUE)))
    (set! (.headerTimeoutMs cfg) (int-opt opts :header-timeout 0 Long/MAX_VALUE))
    (set! (.bodyTimeoutMs cfg) (int-opt opts :body-timeout 0 Long/MAX_VALUE))
    (set! (.blockedWarningMs cfg) (int-opt opts :blocked-warning 0 Long/MAX_VALUE))
    (set! (.shutdownHook cfg) (boolean (bool-opt opts :shutdown-hook?)))
    (set! (.shutdownTimeoutMs cfg) (int-opt opts :shutdown-timeout 0 Long/MAX_VALUE))
    (set! (.serverHeader cfg) ^String (:server-header opts))
    (set! (.sendDateHeader cfg) (boolean (bool-opt opts :send-date-header?)))
    (set! (.outputBufferSize cfg) (int (int-opt opts :output-buffer-size 1 (* 64 1024 1024))))
    (set! (.trustForwardedFor cfg) (boolean (bool-opt opts :trust-forwarded-for?)))
    (when-let [[write pred] (streamable-fns)]
      (set! (.streamableWriter cfg) ^IFn write)
      (set! (.streamablePred cfg) ^IFn pred))
    cfg))

(defn run-server
  "Starts an HTTP server that serves `handler` and returns a server value once the socket is
  bound. Stop it with `stop`, `.close` (so `with-open` works) or by calling it, as http-kit's
  stop function: `(server)`, `(server :timeout ms)`; `port` gives the bound port and `status`
  whether it runs.

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
    :worker-threads          most threads that run sync handlers (default 50). As many as
                             there are cores run while handlers keep up; more start once
                             queued requests wait 1 ms behind handlers that block
    :min-threads             worker threads started with the server and kept while idle
                             (default 0)
    :thread-idle-timeout     ms a worker thread above :min-threads waits for work before it
                             exits (default 60000)
    :max-queued-requests     sync requests that may wait for a worker once :worker-threads
                             are busy; more get 503 at once; 0 for no bound (default 0). No
                             effect with :virtual-threads?
    :virtual-threads?        run sync handlers on virtual threads (reused, no limit on their
                             number); needs Java 21+ and fails at start-up on an older JVM
                             (default false)
    :daemon?                 the server's threads do not keep the JVM alive (default false)
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
    :async-timeout           ms an async (non-blocking) handler has to answer; 0 for no
                             limit; -1 (default): the same as :request-timeout
    :async-timeout-handler   (fn [request respond raise]), called on the event loop when an
                             async handler has not answered in time, answers instead of the
                             503 (Ring 1.9's option; default none)
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
    :send-date-header?       false: no Date header on any response (default true)
    :output-buffer-size      bytes a streamed body (InputStream, seq, StreamableResponseBody)
                             buffers before it is sent; one that fits gets a Content-Length,
                             a longer one is chunked (default 16384)
    :trust-forwarded-for?    take :remote-addr from X-Forwarded-For when present; only behind a
                             proxy you trust (default false: the socket peer)

  ring-jetty's and http-kit's names for these are accepted too (:max-threads, :max-idle-time,
  :request-header-size, :selector-threads, :send-server-version? false; :ip, :thread,
  :queue-size, :max-body, :max-line, :ring-async?, ...: the README has the whole mapping); two
  names of one setting with different values fail. Other unknown options are ignored, so an
  existing option map works as it is; options asking for something donkey does not do (TLS,
  HTTP/2, WebSockets, a thread pool or Jetty configurator of yours, ...) are refused rather
  than ignored.

  Throws IllegalArgumentException for an invalid option and IllegalStateException when the
  server cannot start (port in use, ...), after releasing whatever it had started."
  ^Server [handler opts]
  (let [server (Server/start (config handler opts))]
    (when (get opts :join? true)
      (.await server))
    server))

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
  "The port `server` is bound to; with `:port 0`, the one the OS chose."
  ^long [^Server server]
  (.port server))

(defn status
  "`:running`, `:stopping` (draining in-flight requests) or `:stopped`."
  [^Server server]
  (keyword (.status server)))
