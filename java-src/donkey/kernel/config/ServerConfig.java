package donkey.kernel.config;

import clojure.lang.IFn;
import clojure.lang.Keyword;
import donkey.kernel.metrics.ServerMetrics;

/**
 * Start-up configuration of a {@code Server}. Built once by {@code donkey.server/run-server}
 * after it has validated the user's options; the kernel only reads it afterwards.
 *
 * <p>The field initialisers are the defaults of run-server's options, and the only place they
 * are written: the option table ({@code donkey.options}) reads them from a fresh instance, and
 * Java code that fills one itself (the JMH benches) gets the same sane values.
 *
 * <p>Threading: filled on the caller's thread before {@code Server.start}; read-only from then
 * on, and safely published to the event loops by the deployment itself.
 */
public final class ServerConfig {
  /** Ring handler: 1-arity (sync) or 3-arity (async). */
  public IFn handler;
  /** True when {@link #handler} is a 3-arity async handler run on the event loop. */
  public boolean async;
  /** The compiled route table, or null when {@link #handler} serves every request. */
  public donkey.route.Router router;
  /** With a route table: a sync Ring handler for paths no route matches, or null for a 404. */
  public IFn notFound;
  /**
   * {@code (fn [request throwable])} returning the response for a handler failure instead of
   * the plain 500, or null. Runs on the thread that saw the failure; it must not block.
   */
  public IFn errorHandler;
  public String host = "0.0.0.0";
  public int port = 80;
  /** Event loops, one server verticle each. */
  public int eventLoops = Runtime.getRuntime().availableProcessors();
  /** Platform threads that run sync handlers. */
  public int workerThreads = 50;
  /**
   * Platform worker threads started with the server and kept while idle; threads above this
   * number exit after {@link #threadIdleTimeoutMs} without work. Not used with virtual threads.
   */
  public int minThreads;
  /** How long a worker thread above {@link #minThreads} waits for work before it exits, in ms. */
  public long threadIdleTimeoutMs = 60_000;
  /**
   * Most sync requests (and streamed response bodies) waiting for a worker thread once
   * {@link #workerThreads} are busy; a request over it gets 503 at once. 0 = no bound. No
   * effect with virtual threads, where every request gets a thread.
   */
  public int maxQueuedRequests;
  /** Run sync handlers on virtual threads (JVM 21+ only). */
  public boolean virtualThreads;
  /** Largest request body accepted, in bytes; larger gets 413. */
  public long maxBodySize = 16L * 1024 * 1024;
  public int maxInitialLineLength = 8192;
  public int maxHeaderSize = 16384;
  /** Idle keep-alive connections are closed after this many ms (0 = never). */
  public long idleTimeoutMs = 120_000;
  /** Open connections over this many are closed as soon as accepted (0 = no limit). */
  public int maxConnections = 10_000;
  /**
   * A connection must deliver each complete request head within this many ms of opening or
   * of its previous response, or it is closed (0 = no limit).
   */
  public long headerTimeoutMs = 30_000;
  /** A blocking handler waiting this many ms for more request body gets an IOException. */
  public long bodyTimeoutMs = 30_000;
  /** Log a warning when a non-blocking handler holds its event loop longer than this (ms). */
  public long blockedWarningMs = 2_000;
  /** Register a JVM shutdown hook that stops (drains) the server on SIGTERM. */
  public boolean shutdownHook;
  /** A handler that has not answered after this many ms gets a 503 (0 = no limit). */
  public long requestTimeoutMs = 60_000;
  /** How long {@code Server.stop} waits for in-flight requests, in ms. */
  public long shutdownTimeoutMs = 30_000;
  /**
   * How long {@code Server.stop} keeps serving, not ready, before it stops accepting, in ms:
   * time for a load balancer to see the readiness probe fail and stop sending.
   */
  public long shutdownDelayMs;
  /** Value of the {@code Server} response header, or null to send none. */
  public String serverHeader = "donkey";
  /** False: no {@code Date} header on any response. */
  public boolean sendDateHeader = true;
  /**
   * How long an async (non-blocking) handler has to answer, in ms: -1 = the same as
   * {@link #requestTimeoutMs}; 0 = no limit.
   */
  public long asyncTimeoutMs = -1;
  /**
   * Ring 1.9's {@code (fn [request respond raise])}, called on the event loop when an async
   * handler has not answered within {@link #asyncTimeoutMs}; null = the 503.
   */
  public IFn asyncTimeoutHandler;
  /**
   * Bytes a streamed response body (InputStream, seq, {@code StreamableResponseBody}) buffers
   * before its head is sent: a body that fits gets a Content-Length, a longer one is chunked.
   */
  public int outputBufferSize = donkey.ring.ResponseOutputStream.BUFFER;
  /**
   * True: the server's event-loop and acceptor threads are daemon threads, so they do not keep
   * the JVM alive (its worker threads always are).
   */
  public boolean daemon;
  /** When true, {@code :remote-addr} comes from the first X-Forwarded-For entry if present. */
  public boolean trustForwardedFor;
  /**
   * IP addresses and CIDR ranges of the proxies whose forwarding headers set
   * {@code :remote-addr}, {@code :scheme}, {@code :server-name} and {@code :server-port}
   * ({@code donkey.ring.Proxies}); null for none.
   */
  public java.util.Collection<String> trustedProxies;

  // ---- TLS: loaded and checked by TlsOptions at start-up and at each reload -------------

  /** Serve TLS on {@link #sslPort}, beside the plaintext listener unless {@link #http} is off. */
  public boolean ssl;
  /** The TLS listener's port (0: a free one); used when {@link #ssl} is on. */
  public int sslPort = 443;
  /** Serve plaintext on {@link #port}; false with {@link #ssl} serves TLS only. */
  public boolean http = true;
  /** The server's key store: a path (String) or a loaded {@link java.security.KeyStore}. */
  public Object keystore;
  /** The type of a key store given as a path; null: PKCS12 for .p12/.pfx, else JKS. */
  public String keystoreType;
  /** The password of {@link #keystore} and of the keys in it. */
  public String keyPassword;
  /** The CAs whose client certificates are accepted: a path or a {@link java.security.KeyStore}. */
  public Object truststore;
  /** The password of {@link #truststore}. */
  public String trustPassword;
  /** Client certificates: {@code :need} (required), {@code :want} (asked for) or {@code :none}. */
  public Keyword clientAuth = Keyword.intern("none");
  /** A ready SSLContext used as it is (its key and trust managers), instead of a key store. */
  public javax.net.ssl.SSLContext sslContext;
  /** PEM certificate chain files (a path or a list of paths, one per {@link #sslKey}). */
  public Object sslCert;
  /** PEM PKCS#8 private key files (a path or a list of paths, one per {@link #sslCert}). */
  public Object sslKey;
  /** Cipher suites (names or regular expressions) removed from the enabled ones. */
  public java.util.List<?> excludeCiphers;
  /** Protocols removed from the enabled ones (TLSv1.3 and TLSv1.2 by default). */
  public java.util.List<?> excludeProtocols;
  /** True: {@link #excludeCiphers} applies to the JDK's default suites, not donkey's. */
  public boolean replaceExcludeCiphers;
  /** True: {@link #excludeProtocols} applies to TLSv1 to TLSv1.3, not donkey's two. */
  public boolean replaceExcludeProtocols;
  /**
   * The TLS listener's engine: {@code :auto} (OpenSSL when netty-tcnative is on the classpath
   * and loads, else the JDK's), {@code :jdk} or {@code :openssl}. Read at start-up only.
   */
  public Keyword sslProvider = Keyword.intern("auto");
  /**
   * Seconds between checks of the TLS files ({@link #keystore}, {@link #sslCert},
   * {@link #sslKey}, {@link #truststore}); when they have changed they are reloaded. 0: never.
   */
  public int keystoreScanInterval;
  /**
   * {@code (fn [body response output-stream])} that writes a body through
   * {@code ring.core.protocols/StreamableResponseBody}, or null when ring-core is absent.
   */
  public IFn streamableWriter;
  /** {@code (fn [body])} true when {@link #streamableWriter} can write this body. */
  public IFn streamablePred;

  /**
   * Largest WebSocket frame payload a client may send, in bytes; larger closes with 1009. This
   * and the message limits are longs so that option maps written for Jetty (which take
   * Long/MAX_VALUE for "no limit") work; a message is held in one buffer, so the kernel
   * applies at most Integer.MAX_VALUE ({@link #wsLimit}).
   */
  public long wsMaxFrameSize = 1024 * 1024;
  /** Largest WebSocket text message (all its fragments), in bytes; larger closes with 1009. */
  public long wsMaxTextSize = 1024 * 1024;
  /** Largest WebSocket binary message (all its fragments), in bytes; larger closes with 1009. */
  public long wsMaxBinarySize = 1024 * 1024;
  /**
   * A WebSocket on which no frame was read and no message written for this many ms is closed
   * with 1001 (0 = never). The server's own pings do not count; the client's pongs do.
   */
  public long wsIdleTimeoutMs = 120_000;
  /** Ping a WebSocket from which nothing was read for this many ms (0 = never). */
  public long wsPingIntervalMs = 30_000;
  /**
   * Bytes a WebSocket may have queued for a client that does not read them fast enough; past
   * it an async send fails and a sync send waits.
   */
  public long wsMaxQueuedBytes = 4L * 1024 * 1024;
  /**
   * Origins (as the Origin header has them: {@code scheme://host[:port]}) whose pages may open
   * WebSockets; a handshake from another gets 403. Null: any origin.
   */
  public java.util.Collection<String> wsAllowedOrigins;
  /** Negotiate permessage-deflate (RFC 7692) when a client offers it. */
  public boolean wsCompression;
  /**
   * {@code (fn [listener])} returning the {@code WebSocketListener} of a listener that
   * satisfies {@code ring.websocket.protocols/Listener}, or nil; null when that namespace is
   * not on the classpath (plain map listeners need no adapter).
   */
  public IFn wsListenerAdapter;

  /** The access log's format, {@code :common} or {@code :json}; null for none. */
  public Keyword accessLog;

  /** A Micrometer {@code MeterRegistry} to report to ({@code :metrics}), or null. */
  public Object metricsRegistry;
  /** Tags every meter of the server carries, name to value ({@code :metrics-tags}), or null. */
  public java.util.Map<?, ?> metricsTags;
  /**
   * What the kernel reports to, made from {@link #metricsRegistry} when the options are
   * checked ({@code donkey.metrics}); null for no metrics.
   */
  public ServerMetrics metrics;

  // ---- compression -------------------------------------------------------------------

  /** Compress responses whose client accepts it (gzip, deflate; brotli, zstd when present). */
  public boolean compression;
  /** The gzip and deflate level, 1 (fastest) to 9 (smallest). */
  public int compressionLevel = 6;
  /** A fixed body shorter than this many bytes is sent as it is. */
  public int compressionMinSize = 1024;
  /**
   * Media types that are compressed ({@code type/subtype}, {@code type/*}, or a
   * {@code +suffix}); null for the default list of text formats.
   */
  public java.util.Collection<String> compressionTypes;
  /** Inflate request bodies sent with {@code Content-Encoding: gzip} or {@code deflate}. */
  public boolean decompressRequests;

  // ---- HTTP/2 ------------------------------------------------------------------------

  /** Offer h2 by ALPN on the TLS listener (HTTP/1.1 stays for clients that do not ask). */
  public boolean h2;
  /** Serve h2c on the plaintext listener: prior knowledge, and the {@code Upgrade: h2c} path. */
  public boolean h2c;
  /** Streams a client may have open at once on one HTTP/2 connection (SETTINGS). */
  public long h2MaxConcurrentStreams = 128;
  /** The largest HTTP/2 frame payload the server accepts (SETTINGS_MAX_FRAME_SIZE). */
  public int h2MaxFrameSize = 16384;
  /** Each stream's flow-control window for request bodies (SETTINGS_INITIAL_WINDOW_SIZE). */
  public int h2InitialWindowSize = 65535;
  /** A connection's flow-control window for request bodies, all streams together. */
  public int h2ConnectionWindowSize = 1024 * 1024;
  /** Streams a client may reset in {@link #h2ResetWindowS} before its connection is closed. */
  public int h2MaxResets = 200;
  /** The window of {@link #h2MaxResets}, in seconds. */
  public int h2ResetWindowS = 30;

  /** A WebSocket size limit as the kernel applies it: at most Integer.MAX_VALUE. */
  public static int wsLimit(long limit) {
    return (int) Math.min(Integer.MAX_VALUE, limit);
  }

  /**
   * Refuses listener options that contradict each other: a listener or protocol asked for and
   * not served would be a surprise, so it is refused as the options donkey lacks are.
   *
   * @throws IllegalArgumentException naming the options
   */
  public void checkListeners() {
    if (h2 && !ssl) {
      throw new IllegalArgumentException(":h2? true offers HTTP/2 on the TLS listener, and "
          + "there is none: give :ssl? true or an :ssl-port (or :h2c? true for cleartext)");
    }
    if (h2c && !http) {
      throw new IllegalArgumentException(":h2c? true serves HTTP/2 on the plaintext listener, "
          + "which :http? false turns off");
    }
    if (!ssl && !http) {
      throw new IllegalArgumentException(":http? false serves nothing without TLS: give "
          + ":ssl? true or an :ssl-port");
    }
    if (ssl && http && port != 0 && port == sslPort) {
      throw new IllegalArgumentException(":ssl-port " + sslPort + " is :port too; "
          + "give each listener a port of its own");
    }
  }

  /** The limit for async handlers in ms, resolved: {@link #asyncTimeoutMs}, or the request one. */
  public long resolvedAsyncTimeoutMs() {
    return asyncTimeoutMs < 0 ? requestTimeoutMs : asyncTimeoutMs;
  }
}
