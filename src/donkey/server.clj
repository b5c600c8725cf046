(ns donkey.server
  "Start and stop a donkey HTTP server: a drop-in for `ring.adapter.jetty/run-jetty`.

  The whole per-request path runs in the Java kernel (`donkey.kernel.*`, `donkey.ring.*`);
  this namespace validates options once, at start-up, and gets out of the way."
  (:require [donkey.options :as options :refer [fail]]
            [donkey.routes :as routes])
  (:import (clojure.lang IFn)
           (donkey.kernel Server ServerConfig)))

(set! *warn-on-reflection* true)

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
  "Validates `handler` and `opts` and builds the kernel's configuration."
  ^ServerConfig [handler opts]
  (when-not (or (map? handler) (ifn? handler))
    (fail (str "handler must be a function or a route-table map, got " (pr-str handler))))
  (when-not (or (nil? opts) (map? opts)) (fail (str "options must be a map, got " (pr-str opts))))
  (let [cfg (options/configure! (ServerConfig.) opts)]
    (if (map? handler)
      (set-routes! cfg handler)
      (set! (.handler cfg) ^IFn handler))
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
    (when (options/join? opts)
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
