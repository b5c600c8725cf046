(ns donkey.options
  "The options of `donkey.server/run-server`, defined once, as data: a table of every option
  (its default, its check, the `ServerConfig` field it sets, the names other servers give it
  and its meaning), beside the options refused and the ones accepted without effect.
  `donkey.options.check` walks an option map against it and fills a `ServerConfig`;
  `donkey.options.doc` renders it as text; `donkey.options.spelling` tells a typo. Internal
  to donkey: nothing here is public API. Long because the table is: one entry per option,
  each with its doc."
  {:no-doc true}
  (:import (donkey.kernel.config ServerConfig)))

(set! *warn-on-reflection* true)

(def ^:dynamic *caller*
  "The public function whose argument is being checked, which `fail` names."
  "donkey.server/run-server")

(defn fail
  "Throws the IllegalArgumentException run-server (or `*caller*`) throws for a bad argument."
  ([msg] (throw (IllegalArgumentException. (str *caller* ": " msg))))
  ([msg ^Throwable cause] (throw (IllegalArgumentException. (str *caller* ": " msg) cause))))

(defn- field
  "Where an option goes: the `ServerConfig` field named `f`, as `:get`, which reads it (its
  initialiser is the option's default), and `:set`, which stores a checked value converted to
  the field's type. A field that does not exist fails when this namespace loads. Reflection
  on the Field, not a fn compiled per option: this runs once per start, and one closure class
  loads faster than a hundred."
  [f]
  (let [^java.lang.reflect.Field fld (.getField ServerConfig (name f))
        type (.getType fld)]
    {:field (name f)
     :get (fn [cfg] (.get fld cfg))
     :set (condp = type
            Integer/TYPE (fn [cfg v] (.setInt fld cfg (int v)))
            Long/TYPE (fn [cfg v] (.setLong fld cfg (long v)))
            Boolean/TYPE (fn [cfg v] (.setBoolean fld cfg (boolean v)))
            (fn [cfg v] (.set fld cfg v)))}))

(def table
  "Every option of run-server, in the order its docstring and the README list them:
    :key      the option
    :to       where it goes: a `ServerConfig` field (see `field`), or nil for :join?, which
              run-server reads itself
    :default  only for an option without a field. The others' defaults are the field
              initialisers of `ServerConfig`, read from a fresh one, so that they are written
              once and Java code that builds a `ServerConfig` itself (the JMH benches) gets
              the same values
    :check    what a value must be, default included (see `problem`)
    :nil      :kept when a nil value is the value; otherwise nil means the default
    :aliases  [[name convert] ...]: ring-jetty's and http-kit's names for it; `convert`
              (default: the value as it is) names one of the alias conversions of
              `donkey.options.check`
    :doc      its meaning, for run-server's docstring
    :default-doc how the docs give the default, when its value (machine-dependent) cannot"
  [{:key :port :to (field 'port) :check [:int 0 65535]
    :doc "port to listen on; 0 picks a free one"}
   {:key :host :to (field 'host) :check :string :aliases [[:ip]]
    :doc "address to bind"}
   ;; read by truthiness, as ring-jetty reads it: {:join? nil} returns at once there too
   {:key :join? :default true :check :any :nil :kept
    :doc "block the calling thread until the server stops"}
   {:key :async? :to (field 'async) :check :boolean :aliases [[:ring-async?]]
    :doc "the handler is a 3-arity async handler"}
   {:key :event-loops :to (field 'eventLoops) :check [:int 1 1024]
    :aliases [[:selector-threads :unless-minus-1] [:instances]] :default-doc "one per core"
    :doc "event loops, one server each"}
   {:key :worker-threads :to (field 'workerThreads) :check [:int 1 100000]
    :aliases [[:max-threads] [:thread] [:n-threads] [:n-max-threads]]
    :doc (str "most threads that run sync handlers. As many as there are cores run while "
              "handlers keep up; more start once queued requests wait 1 ms behind handlers "
              "that block")}
   {:key :min-threads :to (field 'minThreads) :check [:int 0 :worker-threads]
    :aliases [[:n-min-threads]]
    :doc "worker threads started with the server and kept while idle"}
   {:key :thread-idle-timeout :to (field 'threadIdleTimeoutMs) :check [:int 1 Long/MAX_VALUE]
    :doc "ms a worker thread above :min-threads waits for work before it exits"}
   {:key :max-queued-requests :to (field 'maxQueuedRequests) :check [:int 0 Integer/MAX_VALUE]
    :aliases [[:queue-size]]
    :doc (str "sync requests that may wait for a worker once :worker-threads are busy; more "
              "get 503 at once; 0 for no bound. No effect with :virtual-threads?")}
   {:key :virtual-threads? :to (field 'virtualThreads) :check :boolean
    :aliases [[:allow-virtual? :allow-virtual]]
    :doc (str "run sync handlers on virtual threads (reused, no limit on their number); needs "
              "Java 21+ and fails at start-up on an older JVM")}
   {:key :daemon? :to (field 'daemon) :check :boolean
    :doc "the server's threads do not keep the JVM alive"}
   {:key :max-body-size :to (field 'maxBodySize) :check [:int 0 Long/MAX_VALUE]
    :aliases [[:max-body]]
    :doc (str "largest request body in bytes; larger gets 413. A sync handler reads its :body "
              "as it arrives, with flow control; an async one gets it after it has arrived "
              "whole")}
   {:key :max-initial-line-length :to (field 'maxInitialLineLength)
    :check [:int 256 Integer/MAX_VALUE] :aliases [[:max-line]]
    :doc "longest request line; longer gets 414"}
   {:key :max-header-size :to (field 'maxHeaderSize) :check [:int 256 Integer/MAX_VALUE]
    :aliases [[:request-header-size]]
    :doc "largest header section; larger gets 431"}
   {:key :idle-timeout :to (field 'idleTimeoutMs) :check [:int 0 Integer/MAX_VALUE]
    :aliases [[:max-idle-time] [:idle-timeout-seconds :seconds]]
    :doc (str "ms a connection may go without a byte moving either way before it is closed: "
              "between requests, or while a response waits on a client that stopped reading "
              "(which frees the thread writing it); checked within a second or a quarter of "
              "it; 0 for none")}
   {:key :request-timeout :to (field 'requestTimeoutMs) :check [:int 0 Long/MAX_VALUE]
    :doc (str "ms a handler has to answer before the client gets 503; its late answer is "
              "dropped and logged, its thread not interrupted; 0 for no limit. The timeouts "
              "are checked by a sweep every quarter of the shortest one (50 ms to 1 s) and "
              "fire at their limit at the earliest, up to two sweep periods after it")}
   {:key :async-timeout :to (field 'asyncTimeoutMs) :check [:int -1 Long/MAX_VALUE]
    :doc (str "ms an async (non-blocking) handler has to answer; 0 for no limit; -1: the "
              "same as :request-timeout")}
   {:key :async-timeout-handler :to (field 'asyncTimeoutHandler)
    :check [:fn-or-nil "(fn [request respond raise])"]
    :doc (str "(fn [request respond raise]), called on the event loop when an async handler "
              "has not answered in time, answers instead of the 503 (Ring 1.9's option)")}
   {:key :shutdown-timeout :to (field 'shutdownTimeoutMs) :check [:int 0 Long/MAX_VALUE]
    :doc "ms `stop` waits for in-flight requests"}
   {:key :shutdown-delay :to (field 'shutdownDelayMs) :check [:int 0 Long/MAX_VALUE]
    :doc (str "ms `stop` keeps serving before it stops accepting, while `readiness-handler` "
              "answers 503, so a load balancer stops sending first (see the README on deploys)")}
   {:key :shutdown-hook? :to (field 'shutdownHook) :check :boolean
    :doc "register a JVM shutdown hook that stops the server, draining it, on SIGTERM"}
   {:key :max-connections :to (field 'maxConnections) :check [:int 0 Integer/MAX_VALUE]
    :doc (str "open connections over this are closed as soon as accepted (refused, not "
              "queued); 0 for no limit")}
   {:key :header-timeout :to (field 'headerTimeoutMs) :check [:int 0 Long/MAX_VALUE]
    :doc (str "ms a connection has to deliver each complete request head after opening or "
              "after its previous response, else it is closed (slowloris defence; also bounds "
              "idle keep-alive)")}
   {:key :body-timeout :to (field 'bodyTimeoutMs) :check [:int 0 Long/MAX_VALUE]
    :doc "ms a sync handler's body read waits for more bytes before it throws IOException"}
   {:key :blocked-warning :to (field 'blockedWarningMs) :check [:int 0 Long/MAX_VALUE]
    :doc (str "ms after which a non-blocking handler still holding its event loop is logged, "
              "naming the route; 0 for none")}
   ;; AppsFlyer Donkey's :server-header is a switch: true is the default header, false none
   {:key :server-header :to (field 'serverHeader) :check :string-or-nil :nil :kept
    :coerce :header-switch :aliases [[:send-server-version? :server-version]]
    :doc "value of the Server header, nil for none (true and false also work, as switches)"}
   {:key :send-date-header? :to (field 'sendDateHeader) :check :boolean :aliases [[:date-header]]
    :doc "false: no Date header on any response"}
   {:key :output-buffer-size :to (field 'outputBufferSize) :check [:int 1 (* 64 1024 1024)]
    :doc (str "bytes a streamed body (InputStream, seq, StreamableResponseBody) buffers before "
              "it is sent; one that fits gets a Content-Length, a longer one is chunked")}
   {:key :trust-forwarded-for? :to (field 'trustForwardedFor) :check :boolean
    :aliases [[:legacy-unsafe-remote-addr?]]
    :doc (str "take :remote-addr from X-Forwarded-For when present, not from the socket "
              "peer; only behind a proxy you trust (:trusted-proxies is the safer choice)")}
   {:key :trusted-proxies :to (field 'trustedProxies) :check :proxies
    :doc (str "IP addresses and CIDR ranges (\"10.0.0.0/8\") of the proxies in front of the "
              "server: on a connection from one of them, Forwarded (RFC 7239) or "
              "X-Forwarded-For/-Proto/-Host/-Port set :remote-addr, :scheme, :server-name and "
              ":server-port, hops through these proxies passed over; nil: the socket's values")}
   ;; TLS: the files are read and checked by the kernel (donkey.kernel.tls.TlsOptions) at start-up
   {:key :ssl? :to (field 'ssl) :check :boolean
    :doc (str "serve HTTPS on :ssl-port, beside HTTP on :port unless :http? is false; giving "
              ":ssl-port turns it on too (as with ring-jetty)")}
   {:key :ssl-port :to (field 'sslPort) :check [:int 0 65535]
    :doc "port of the TLS listener; 0 picks a free one"}
   {:key :http? :to (field 'http) :check :boolean
    :doc "false: no plaintext listener, HTTPS only"}
   {:key :keystore :to (field 'keystore) :check :keystore
    :doc (str "the server's key and certificate chain: a key store file's path or a "
              "java.security.KeyStore; with several key entries, SNI chooses (see the README)")}
   {:key :keystore-type :to (field 'keystoreType) :check :string-or-nil
    :default-doc "by extension"
    :doc "type of a :keystore file; by default PKCS12 for .p12 and .pfx files, else JKS"}
   {:key :key-password :to (field 'keyPassword) :check :string-or-nil
    :doc "password of :keystore and of its keys"}
   {:key :ssl-cert :to (field 'sslCert) :check :paths
    :doc (str "PEM file of the certificate chain, the server's certificate first (instead of "
              ":keystore); a vector of files, one per :ssl-key, for SNI")}
   {:key :ssl-key :to (field 'sslKey) :check :paths
    :doc "PEM file of :ssl-cert's unencrypted PKCS#8 private key, or a vector of them"}
   {:key :ssl-context :to (field 'sslContext) :check :ssl-context
    :doc (str "a javax.net.ssl.SSLContext to serve as it is (its key and trust managers), "
              "instead of :keystore or PEM files")}
   {:key :ssl-provider :to (field 'sslProvider) :check [:one-of :auto :jdk :openssl]
    :doc (str "the TLS engine: :openssl (BoringSSL, from io.netty/netty-tcnative-boringssl-"
              "static, which donkey does not depend on), :jdk, or :auto, OpenSSL when it is on "
              "the classpath and loads, else the JDK's; :openssl fails start-up without it. An "
              ":ssl-context is served by the JDK's engine under :auto (:openssl refuses one)")}
   {:key :truststore :to (field 'truststore) :check :keystore
    :doc (str "the CAs whose client certificates are accepted: a key store file's path or a "
              "java.security.KeyStore; without it, :client-auth takes :keystore as the trust "
              "store, as Jetty does")}
   {:key :trust-password :to (field 'trustPassword) :check :string-or-nil
    :doc (str "password of :truststore, or of :keystore taken as the trust store (there "
              ":key-password when absent)")}
   {:key :client-auth :to (field 'clientAuth) :check [:one-of :none :want :need]
    :doc (str ":need: a client certificate is required; :want: asked for, not required; "
              "the request's :ssl-client-cert is the one presented")}
   {:key :exclude-ciphers :to (field 'excludeCiphers) :check :strings
    :doc "cipher suites (names or regular expressions) not to enable"}
   {:key :exclude-protocols :to (field 'excludeProtocols) :check :strings
    :doc "protocols not to enable (of TLSv1.3 and TLSv1.2)"}
   {:key :replace-exclude-ciphers? :to (field 'replaceExcludeCiphers) :check :boolean
    :doc (str "true: :exclude-ciphers applies to every suite the JDK enables, not to donkey's "
              "forward-secret AEAD ones")}
   {:key :replace-exclude-protocols? :to (field 'replaceExcludeProtocols) :check :boolean
    :doc (str "true: :exclude-protocols applies to TLSv1 to TLSv1.3 (those the JDK allows), "
              "not to TLSv1.3 and TLSv1.2")}
   {:key :keystore-scan-interval :to (field 'keystoreScanInterval) :check [:int 0 86400]
    :doc (str "seconds between checks of the TLS files (:keystore, :ssl-cert, :ssl-key, "
              ":truststore); when their contents change they are reloaded as by reload-ssl!; "
              "0 for never")}
   ;; HTTP/2: the limits are announced in the connection's SETTINGS and enforced by Netty
   {:key :h2? :to (field 'h2) :check :boolean
    :doc (str "offer HTTP/2 by ALPN on the TLS listener (clients that do not ask for it keep "
              "HTTP/1.1)")}
   {:key :h2c? :to (field 'h2c) :check :boolean
    :doc (str "serve cleartext HTTP/2 on the plaintext listener, to clients that start with "
              "its preface (prior knowledge) or ask with Upgrade: h2c")}
   {:key :h2-max-concurrent-streams :to (field 'h2MaxConcurrentStreams)
    :check [:int 1 4294967295]
    :doc "streams a client may have open at once on one HTTP/2 connection"}
   {:key :h2-max-frame-size :to (field 'h2MaxFrameSize) :check [:int 16384 16777215]
    :doc "largest HTTP/2 frame payload a client may send, in bytes"}
   {:key :h2-initial-window-size :to (field 'h2InitialWindowSize) :check [:int 1 2147483647]
    :doc (str "bytes of request body a client may send on one HTTP/2 stream before the "
              "server asks for more (flow control)")}
   {:key :h2-connection-window-size :to (field 'h2ConnectionWindowSize)
    :check [:int 65535 2147483647]
    :doc "the same for all of one HTTP/2 connection's streams together"}
   {:key :h2-max-resets :to (field 'h2MaxResets) :check [:int 1 Integer/MAX_VALUE]
    :doc (str "streams a client may reset within :h2-reset-window before its connection is "
              "closed (rapid reset, CVE-2023-44487)")}
   {:key :h2-reset-window :to (field 'h2ResetWindowS) :check [:int 1 3600]
    :doc "seconds over which :h2-max-resets is counted"}
   ;; Jetty takes Long/MAX_VALUE for "no limit"; the kernel applies at most Integer/MAX_VALUE
   {:key :ws-max-frame-size :to (field 'wsMaxFrameSize) :check [:int 125 Long/MAX_VALUE]
    :doc "largest WebSocket frame payload a client may send, in bytes; larger closes with 1009"}
   ;; http-kit's :max-ws bounds both kinds of message, so it names both options
   {:key :ws-max-text-size :to (field 'wsMaxTextSize) :check [:int 1 Long/MAX_VALUE]
    :aliases [[:max-ws]]
    :doc (str "largest WebSocket text message (all its fragments) a client may send, in bytes; "
              "larger closes with 1009")}
   {:key :ws-max-binary-size :to (field 'wsMaxBinarySize) :check [:int 1 Long/MAX_VALUE]
    :aliases [[:max-ws]]
    :doc (str "largest WebSocket binary message (all its fragments) a client may send, in "
              "bytes; larger closes with 1009")}
   {:key :ws-idle-timeout :to (field 'wsIdleTimeoutMs) :check [:int 0 Long/MAX_VALUE]
    :doc (str "ms a WebSocket may go without a frame read or a message written before it is "
              "closed with 1001 (the server's pings do not count, the client's pongs do); 0 "
              "for never")}
   {:key :ws-ping-interval :to (field 'wsPingIntervalMs) :check [:int 0 Long/MAX_VALUE]
    :doc (str "ms after which a WebSocket from which nothing was read is pinged (again each "
              "interval), so a live client stays within :ws-idle-timeout; 0 for no pings")}
   {:key :ws-max-queued-bytes :to (field 'wsMaxQueuedBytes) :check [:int 1 Long/MAX_VALUE]
    :doc (str "bytes a WebSocket may have queued for its client; past it an async send fails "
              "(its fail callback gets an IOException) and a sync send waits for room, at most "
              ":ws-idle-timeout (:idle-timeout when 0) while the client takes nothing")}
   {:key :ws-allowed-origins :to (field 'wsAllowedOrigins) :check :strings-or-nil
    :doc (str "origins (\"https://app.example\") whose pages may open WebSockets; a handshake "
              "with another Origin gets 403; nil for any")}
   {:key :ws-compression? :to (field 'wsCompression) :check :boolean
    :doc (str "negotiate permessage-deflate when a WebSocket client offers it (costs each "
              "such connection a compressor's memory)")}
   {:key :access-log :to (field 'accessLog) :check [:one-of nil :common :json]
    :doc (str "log a line per request (kernel answers included) to System.Logger "
              "\"donkey.access\" at INFO: :common (Apache's common log format, then the ms "
              "taken and the route) or :json (a JSON object per line); nil for none. Written "
              "from a thread of its own, never the event loop")}
   {:key :metrics :to (field 'metricsRegistry) :check :meter-registry
    :doc (str "a Micrometer MeterRegistry the server reports its meters to (requests by "
              "route, connections, bytes, workers, the kernel's own answers: see donkey.metrics "
              "and the README); nil for none. Needs io.micrometer/micrometer-core")}
   {:key :metrics-tags :to (field 'metricsTags) :check :tags
    :doc (str "tags every meter of :metrics carries ({:server \"api\"}): what tells apart "
              "two servers that share a registry")}
   ;; compression is Vert.x's (Netty's encoders); the kernel says which responses may be
   {:key :compression? :to (field 'compression) :check :boolean
    :aliases [[:compression]]
    :doc (str "compress responses for clients that accept it: gzip and deflate, and brotli "
              "and zstd first when their libraries are on the classpath (see the README). Off "
              "by default: see the README on BREACH")}
   {:key :compression-level :to (field 'compressionLevel) :check [:int 1 9]
    :doc "gzip and deflate level, 1 (fastest) to 9 (smallest)"}
   {:key :compression-min-size :to (field 'compressionMinSize) :check [:int 0 Integer/MAX_VALUE]
    :doc (str "bytes under which a String, byte[] or JSON body is sent uncompressed (streamed "
              "bodies and files are compressed whatever their size)")}
   {:key :compression-types :to (field 'compressionTypes) :check :strings-or-nil
    :default-doc "text formats"
    :doc (str "media types that are compressed: \"application/json\", ranges \"text/*\", "
              "suffixes \"+json\"; nil for the default list of text formats (see the "
              "README). text/event-stream only when named")}
   {:key :decompress-requests? :to (field 'decompressRequests) :check :boolean
    :doc (str "inflate request bodies sent with Content-Encoding gzip or deflate (counted "
              "against :max-body-size once inflated); any other coding gets 415")}])

(def refused
  "Options of ring-jetty, http-kit, ring-jetty9-adapter and AppsFlyer Donkey that ask for
  something donkey does not do (or does another way), as option -> [reason ok?]: a value `ok?`
  accepts (default nil or false: not asked for) passes. Ignoring them would surprise, serving plaintext to someone
  who asked for TLS, say; options whose absence only changes tuning are accepted instead (see
  `without-effect`)."
  (let [ws (str "donkey serves WebSockets through Ring's API (answer the upgrade request "
                      "with :ring.websocket/listener); it does not read a map of WebSocket handlers")
        listen (str "donkey listens on a TCP :host and :port only (no Unix domain sockets or "
                    "custom channels)")
        pool (str "donkey runs sync handlers on a pool of its own; size it with "
                  ":worker-threads, or use :virtual-threads? true")
        logs (str "donkey logs through System.Logger (logger \"donkey\"); route that to your "
                  "logging library with its JUL bridge instead")
        routes (str "give the route table as run-server's first argument: "
                    "(run-server {:routes [...] :middleware [...]} opts)")
        metrics (str "donkey reports to a Micrometer MeterRegistry given as :metrics "
                     "(Micrometer bridges to Dropwizard metrics), under fixed names (a "
                     "MeterFilter renames them); see the README's Metrics")]
    {:sni-host-check? [(str "donkey does not check the Host header against the SNI name; "
                            "false is accepted") #(not (true? %))]
     :websockets [ws]
     :unix-socket [listen] :address-finder [listen] :channel-factory [listen]
     :configurator ["there is no Jetty Server to configure"]
     :thread-pool [pool] :worker-pool [pool]
     :proxy-protocol ["donkey does not read the PROXY protocol" #(contains? #{nil :disable} %)]
     :error-logger [logs] :warn-logger [logs] :event-logger [logs] :event-names [logs]
     ;; AppsFlyer Donkey's server and create-donkey options
     :debug [(str "donkey has no trace logs to turn on; it logs through System.Logger "
                  "(logger \"donkey\"), whose level your logging library sets")]
     :content-type-header [(str "donkey does not choose a Content-Type from Accept; the "
                                "handler sets it, and a map or vector body is sent as JSON")]
     :routes [routes]
     :middleware [(str "server middleware goes in the route table's :middleware; " routes)]
     :metrics-enabled [metrics] :metric-registry [metrics] :metrics-registry [metrics]
     :metrics-prefix [metrics]}))

(def without-effect
  "Options of ring-jetty and http-kit accepted, whatever their value, without effect: like any
  unknown option they are ignored, so that an existing option map works as it is. Listed so
  that the README's migration tables can be checked against them."
  #{:acceptor-threads :response-header-size :queue-type :worker-name-prefix :prefix
    :legacy-return-value? :legacy-content-length?})

(def pool-keys
  "http-kit's worker-pool options, which it also takes in a :pool-opts map."
  [:thread :n-threads :n-min-threads :n-max-threads :queue-size :queue-type :prefix
   :worker-name-prefix :allow-virtual?])

(defn default-of
  "`entry`'s default: its field's value in `cfg`, a fresh ServerConfig, or its :default."
  [entry ^ServerConfig cfg]
  (if-let [get-field (:get (:to entry))] (get-field cfg) (:default entry)))
