(ns donkey.server
  "Start and stop a donkey HTTP server: a drop-in for `ring.adapter.jetty/run-jetty`.

  The whole per-request path runs in the Java kernel (`donkey.kernel.*`, `donkey.ring.*`);
  this namespace has the options checked once, at start-up (by `donkey.options.check`), and
  gets out of the way."
  (:require [donkey.options :as options :refer [fail]]
            [donkey.options.check :as check]
            [donkey.routes :as routes])
  (:import (clojure.lang IFn)
           (donkey.kernel Server)
           (donkey.kernel.config ServerConfig)))

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
    (let [h (routes/wrap-middleware not-found middleware)]
      (when-let [p (routes/arity-problem h 1)]
        (fail (str ":not-found " p "; it is called as a sync Ring handler, (fn [request])")))
      (set! (.notFound cfg) ^IFn h)))
  (when error-handler
    (when-let [p (routes/arity-problem error-handler 2)]
      (fail (str ":error-handler " p "; it is called as (fn [request throwable])")))
    (set! (.errorHandler cfg) ^IFn error-handler)))

(defn- config
  "Validates `handler` and `opts` and builds the kernel's configuration."
  ^ServerConfig [handler opts]
  (when-not (or (map? handler) (ifn? handler))
    (fail (str "handler must be a function or a route-table map, got " (pr-str handler))))
  (when-not (or (nil? opts) (map? opts)) (fail (str "options must be a map, got " (pr-str opts))))
  (let [cfg (check/configure! (ServerConfig.) opts)]
    (if (map? handler)
      (set-routes! cfg handler)
      (do (when-let [p (routes/arity-problem handler (if (.async cfg) 3 1))]
            (fail (if (.async cfg)
                    (str "handler " p ", and with :async? true it is called as "
                         "(fn [request respond raise])")
                    (str "handler " p ", and it is called as a sync Ring handler, "
                         "(fn [request]): give :async? true for (fn [request respond raise])"))))
          (set! (.handler cfg) ^IFn handler)))
    (let [[write pred] (streamable-fns)]
      (set! (.streamableWriter cfg) ^IFn write)
      (set! (.streamablePred cfg) ^IFn pred))
    (set! (.wsListenerAdapter cfg) ^IFn (ws-listener-adapter))
    cfg))

;; The options part of the docstring is the option table's text (donkey.options.doc/doc), which
;; a test keeps it equal to, so that it lists every option with the default it has.
(defn run-server
  "Starts an HTTP server that serves `handler` and returns a server value once
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
    :port                       port to listen on; 0 picks a free one (default 80)
    :host                       address to bind (default \"0.0.0.0\")
    :join?                      block the calling thread until the server stops (default true)
    :async?                     the handler is a 3-arity async handler (default false)
    :event-loops                event loops, one server each (default one per core)
    :worker-threads             most threads that run sync handlers. As many as there are cores
                                run while handlers keep up; more start once queued requests wait
                                1 ms behind handlers that block (default 50)
    :min-threads                worker threads started with the server and kept while idle
                                (default 0)
    :thread-idle-timeout        ms a worker thread above :min-threads waits for work before it
                                exits (default 60000)
    :max-queued-requests        sync requests that may wait for a worker once :worker-threads
                                are busy; more get 503 at once; 0 for no bound. No effect with
                                :virtual-threads? (default 0)
    :virtual-threads?           run sync handlers on virtual threads (reused, no limit on their
                                number); needs Java 21+ and fails at start-up on an older JVM
                                (default false)
    :daemon?                    the server's threads do not keep the JVM alive (default false)
    :max-body-size              largest request body in bytes; larger gets 413. A sync handler
                                reads its :body as it arrives, with flow control; an async one
                                gets it after it has arrived whole (default 16 MiB)
    :max-initial-line-length    longest request line; longer gets 414 (default 8192)
    :max-header-size            largest header section; larger gets 431 (default 16384)
    :idle-timeout               ms a connection may go without a byte moving either way before
                                it is closed: between requests, or while a response waits on a
                                client that stopped reading (which frees the thread writing it);
                                checked within a second or a quarter of it; 0 for none
                                (default 120000)
    :request-timeout            ms a handler has to answer before the client gets 503; its late
                                answer is dropped and logged, its thread not interrupted; 0 for
                                no limit. The timeouts are checked by a sweep every quarter of
                                the shortest one (50 ms to 1 s) and fire at their limit at the
                                earliest, up to two sweep periods after it (default 60000)
    :async-timeout              ms an async (non-blocking) handler has to answer; 0 for no
                                limit; -1: the same as :request-timeout (default -1)
    :async-timeout-handler      (fn [request respond raise]), called on the event loop when an
                                async handler has not answered in time, answers instead of the
                                503 (Ring 1.9's option) (default none)
    :shutdown-timeout           ms `stop` waits for in-flight requests (default 30000)
    :shutdown-delay             ms `stop` keeps serving before it stops accepting, while
                                `readiness-handler` answers 503, so a load balancer stops
                                sending first (see the README on deploys) (default 0)
    :shutdown-hook?             register a JVM shutdown hook that stops the server, draining it,
                                on SIGTERM (default false)
    :max-connections            open connections over this are closed as soon as accepted
                                (refused, not queued); 0 for no limit (default 10000)
    :header-timeout             ms a connection has to deliver each complete request head after
                                opening or after its previous response, else it is closed
                                (slowloris defence; also bounds idle keep-alive) (default 30000)
    :body-timeout               ms a sync handler's body read waits for more bytes before it
                                throws IOException (default 30000)
    :blocked-warning            ms after which a non-blocking handler still holding its event
                                loop is logged, naming the route; 0 for none (default 2000)
    :server-header              value of the Server header, nil for none (true and false also
                                work, as switches) (default \"donkey\")
    :send-date-header?          false: no Date header on any response (default true)
    :output-buffer-size         bytes a streamed body (InputStream, seq, StreamableResponseBody)
                                buffers before it is sent; one that fits gets a Content-Length,
                                a longer one is chunked (default 16384)
    :trust-forwarded-for?       take :remote-addr from X-Forwarded-For when present, not from
                                the socket peer; only behind a proxy you trust (:trusted-proxies
                                is the safer choice) (default false)
    :trusted-proxies            IP addresses and CIDR ranges (\"10.0.0.0/8\") of the proxies in
                                front of the server: on a connection from one of them, Forwarded
                                (RFC 7239) or X-Forwarded-For/-Proto/-Host/-Port set
                                :remote-addr, :scheme, :server-name and :server-port, hops
                                through these proxies passed over; nil: the socket's values
                                (default none)
    :ssl?                       serve HTTPS on :ssl-port, beside HTTP on :port unless :http? is
                                false; giving :ssl-port turns it on too (as with ring-jetty)
                                (default false)
    :ssl-port                   port of the TLS listener; 0 picks a free one (default 443)
    :http?                      false: no plaintext listener, HTTPS only (default true)
    :keystore                   the server's key and certificate chain: a key store file's path
                                or a java.security.KeyStore; with several key entries, SNI
                                chooses (see the README) (default none)
    :keystore-type              type of a :keystore file; by default PKCS12 for .p12 and .pfx
                                files, else JKS (default by extension)
    :key-password               password of :keystore and of its keys (default none)
    :ssl-cert                   PEM file of the certificate chain, the server's certificate
                                first (instead of :keystore); a vector of files, one per
                                :ssl-key, for SNI (default none)
    :ssl-key                    PEM file of :ssl-cert's unencrypted PKCS#8 private key, or a
                                vector of them (default none)
    :ssl-context                a javax.net.ssl.SSLContext to serve as it is (its key and trust
                                managers), instead of :keystore or PEM files (default none)
    :ssl-provider               the TLS engine: :openssl (BoringSSL, from
                                io.netty/netty-tcnative-boringssl-static, which donkey does not
                                depend on), :jdk, or :auto, OpenSSL when it is on the classpath
                                and loads, else the JDK's; :openssl fails start-up without it.
                                An :ssl-context is served by the JDK's engine under :auto
                                (:openssl refuses one) (default :auto)
    :truststore                 the CAs whose client certificates are accepted: a key store
                                file's path or a java.security.KeyStore; without it,
                                :client-auth takes :keystore as the trust store, as Jetty does
                                (default none)
    :trust-password             password of :truststore, or of :keystore taken as the trust
                                store (there :key-password when absent) (default none)
    :client-auth                :need: a client certificate is required; :want: asked for, not
                                required; the request's :ssl-client-cert is the one presented
                                (default :none)
    :exclude-ciphers            cipher suites (names or regular expressions) not to enable
                                (default none)
    :exclude-protocols          protocols not to enable (of TLSv1.3 and TLSv1.2) (default none)
    :replace-exclude-ciphers?   true: :exclude-ciphers applies to every suite the JDK enables,
                                not to donkey's forward-secret AEAD ones (default false)
    :replace-exclude-protocols? true: :exclude-protocols applies to TLSv1 to TLSv1.3 (those the
                                JDK allows), not to TLSv1.3 and TLSv1.2 (default false)
    :keystore-scan-interval     seconds between checks of the TLS files (:keystore, :ssl-cert,
                                :ssl-key, :truststore); when their contents change they are
                                reloaded as by reload-ssl!; 0 for never (default 0)
    :h2?                        offer HTTP/2 by ALPN on the TLS listener (clients that do not
                                ask for it keep HTTP/1.1) (default false)
    :h2c?                       serve cleartext HTTP/2 on the plaintext listener, to clients
                                that start with its preface (prior knowledge) or ask with
                                Upgrade: h2c (default false)
    :h2-max-concurrent-streams  streams a client may have open at once on one HTTP/2 connection
                                (default 128)
    :h2-max-frame-size          largest HTTP/2 frame payload a client may send, in bytes
                                (default 16384)
    :h2-initial-window-size     bytes of request body a client may send on one HTTP/2 stream
                                before the server asks for more (flow control) (default 65535)
    :h2-connection-window-size  the same for all of one HTTP/2 connection's streams together
                                (default 1 MiB)
    :h2-max-resets              streams a client may reset within :h2-reset-window before its
                                connection is closed (rapid reset, CVE-2023-44487) (default 200)
    :h2-reset-window            seconds over which :h2-max-resets is counted (default 30)
    :ws-max-frame-size          largest WebSocket frame payload a client may send, in bytes;
                                larger closes with 1009 (default 1 MiB)
    :ws-max-text-size           largest WebSocket text message (all its fragments) a client may
                                send, in bytes; larger closes with 1009 (default 1 MiB)
    :ws-max-binary-size         largest WebSocket binary message (all its fragments) a client
                                may send, in bytes; larger closes with 1009 (default 1 MiB)
    :ws-idle-timeout            ms a WebSocket may go without a frame read or a message written
                                before it is closed with 1001 (the server's pings do not count,
                                the client's pongs do); 0 for never (default 120000)
    :ws-ping-interval           ms after which a WebSocket from which nothing was read is pinged
                                (again each interval), so a live client stays within
                                :ws-idle-timeout; 0 for no pings (default 30000)
    :ws-max-queued-bytes        bytes a WebSocket may have queued for its client; past it an
                                async send fails (its fail callback gets an IOException) and a
                                sync send waits for room, at most :ws-idle-timeout
                                (:idle-timeout when 0) while the client takes nothing
                                (default 4 MiB)
    :ws-allowed-origins         origins (\"https://app.example\") whose pages may open WebSockets;
                                a handshake with another Origin gets 403; nil for any
                                (default none)
    :ws-compression?            negotiate permessage-deflate when a WebSocket client offers it
                                (costs each such connection a compressor's memory)
                                (default false)
    :access-log                 log a line per request (kernel answers included) to
                                System.Logger \"donkey.access\" at INFO: :common (Apache's common
                                log format, then the ms taken and the route) or :json (a JSON
                                object per line); nil for none. Written from a thread of its
                                own, never the event loop (default none)
    :metrics                    a Micrometer MeterRegistry the server reports its meters to
                                (requests by route, connections, bytes, workers, the kernel's
                                own answers: see donkey.metrics and the README); nil for none.
                                Needs io.micrometer/micrometer-core (default none)
    :metrics-tags               tags every meter of :metrics carries ({:server \"api\"}): what
                                tells apart two servers that share a registry (default none)
    :compression?               compress responses for clients that accept it: gzip and deflate,
                                and brotli and zstd first when their libraries are on the
                                classpath (see the README). Off by default: see the README on
                                BREACH (default false)
    :compression-level          gzip and deflate level, 1 (fastest) to 9 (smallest) (default 6)
    :compression-min-size       bytes under which a String, byte[] or JSON body is sent
                                uncompressed (streamed bodies and files are compressed whatever
                                their size) (default 1024)
    :compression-types          media types that are compressed: \"application/json\", ranges
                                \"text/*\", suffixes \"+json\"; nil for the default list of text
                                formats (see the README). text/event-stream only when named
                                (default text formats)
    :decompress-requests?       inflate request bodies sent with Content-Encoding gzip or
                                deflate (counted against :max-body-size once inflated); any
                                other coding gets 415 (default false)

  ring-jetty's, http-kit's and AppsFlyer Donkey's names for these are accepted too
  (:max-threads, :max-idle-time, :request-header-size, :selector-threads, :send-server-version?
  false; :ip, :thread, :queue-size, :max-body, :max-line, :ring-async?; :instances,
  :idle-timeout-seconds, :date-header, ...: the README has the whole mapping); two names of
  one setting with different values fail. A key that looks like a misspelt option
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
  whatever it had started."
  (^Server [handler] (run-server handler {}))
  (^Server [handler opts]
   (let [cfg (config handler opts)
         ^Server server (try (Server/start cfg)
                             ;; the kernel's TLS checks name the option; say whose argument
                             ;; it was
                             (catch IllegalArgumentException e (fail (ex-message e) e)))]
     (when (check/join? opts)
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
    (let [cfg (check/configure! (ServerConfig.) (select-keys opts tls-options))]
      (try (.reloadTls server cfg)
           (catch IllegalArgumentException e (fail (ex-message e) e)))
      nil)))

(defn stop
  "Stops `server`: stops accepting connections, lets in-flight requests finish for up to
  `:shutdown-timeout` ms (or `:timeout` ms when given), then closes connections and releases
  every thread it started. Idempotent. Returns nil. Blocks; do not call it from an event
  loop."
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

(defn vertx
  "`server`'s Vert.x instance (`io.vertx.core.Vertx`), for Vert.x clients (the PostgreSQL
  client, the web client, Redis, Kafka) that should run on the server's own event loops
  rather than on a second Vert.x. Make them at start-up from it; called from a non-blocking
  handler, they answer on the request's event loop (see `donkey.scope/context`). `stop`
  closes the instance, and with it every client made from it: their pending calls fail. Any
  thread."
  ^io.vertx.core.Vertx [^Server server]
  (.vertx server))

(defn status
  "`:running`, `:stopping` (draining in-flight requests) or `:stopped`."
  [^Server server]
  (keyword (.status server)))

(defn ready?
  "True while a donkey server of this JVM runs and none is stopping: false from the start of a
  `stop` (its `:shutdown-delay` included). Any thread."
  []
  (Server/ready))

(def ^:private ready-response
  {:status 200 :headers {"Content-Type" "text/plain" "Cache-Control" "no-store"} :body "ready"})

(def ^:private not-ready-response
  {:status 503 :headers {"Content-Type" "text/plain" "Cache-Control" "no-store"}
   :body "shutting down"})

(defn readiness-handler
  "A Ring handler (1- and 3-arity) for a load balancer's or Kubernetes' readiness probe: 200
  `ready` while `ready?`, 503 `shutting down` once a `stop` has begun, so the balancer stops
  sending during `:shutdown-delay` while the server still answers."
  []
  (fn
    ([_] (if (Server/ready) ready-response not-ready-response))
    ([_ respond _] (respond (if (Server/ready) ready-response not-ready-response)))))

(defn liveness-handler
  "A Ring handler (1- and 3-arity) for a liveness probe: 200 `alive` whenever it is called,
  stopping or not (a liveness probe that failed during a drain would have the pod killed)."
  []
  (let [alive {:status 200 :headers {"Content-Type" "text/plain" "Cache-Control" "no-store"}
               :body "alive"}]
    (fn
      ([_] alive)
      ([_ respond _] (respond alive)))))
