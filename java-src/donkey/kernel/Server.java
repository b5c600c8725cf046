package donkey.kernel;

import clojure.lang.AFn;
import clojure.lang.IPersistentMap;
import clojure.lang.Keyword;
import donkey.kernel.compression.ResponseCompression;
import donkey.kernel.config.ServerConfig;
import donkey.kernel.internals.ConnectionCount;
import donkey.kernel.internals.VertxInternals;
import donkey.kernel.log.AccessLog;
import donkey.kernel.tls.TlsFileWatch;
import donkey.kernel.tls.TlsOptions;
import donkey.kernel.workers.WorkerPool;
import donkey.kernel.workers.Workers;
import donkey.route.Route;
import io.vertx.core.DeploymentOptions;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.file.FileSystemOptions;
import io.vertx.core.net.ServerSSLOptions;
import java.io.Closeable;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A running donkey server: its own Vert.x instance, one {@link ServerVerticle} per event loop,
 * and the executor of sync handlers.
 *
 * <p>It is also a function that stops it, as http-kit's {@code run-server} returns one, so code
 * written for http-kit keeps working: {@code (server)} is {@link #stop()}, and
 * {@code (server :timeout ms)} or {@code (server {:timeout ms})} is {@link #stop(long)}.
 *
 * <p>Past 450 lines because start-up and stop are one sequence read both ways: each step of
 * the start is released by the stop, and by a start that fails after it.
 *
 * <p>Threading: {@link #start}, {@link #stop}, {@link #reloadTls} and {@link #await} (and
 * calling it) block the calling thread and must not be called from an event loop.
 * {@link #port}, {@link #tlsPort} and {@link #status} may be called from any thread.
 */
public final class Server extends AFn implements Closeable {
  private static final Keyword TIMEOUT = Keyword.intern("timeout");

  private static final long START_TIMEOUT_S = 30;

  private final ServerConfig config;
  private final Vertx vertx;
  private final WorkerPool workers;
  private final List<ServerVerticle> loops = new CopyOnWriteArrayList<>();
  private final AtomicBoolean stopping = new AtomicBoolean();
  private final ConnectionCount connections;
  private final CountDownLatch stopped = new CountDownLatch(1);
  private volatile int port;
  /** The TLS listener's bound port, or -1 without one. */
  private volatile int tlsPort = -1;
  /** The TLS settings in use: the start's, or the last reload's. */
  private volatile ServerConfig tlsConfig;
  private final java.util.concurrent.ScheduledExecutorService watchdog;
  private volatile Thread shutdownHook;
  /** The access log every event loop records to, or null without :access-log. */
  private final AccessLog accessLog;

  private Server(ServerConfig config, Vertx vertx, WorkerPool workers) {
    this.config = config;
    this.accessLog = config.accessLog == null ? null : new AccessLog(config.accessLog.getName());
    this.vertx = vertx;
    this.workers = workers;
    this.connections = new ConnectionCount(config.maxConnections, config.metrics);
    this.watchdog = java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "donkey-watchdog");
      t.setDaemon(true);
      return t;
    });
  }

  /**
   * Starts a server and returns once its socket is bound.
   *
   * <p>The option values are checked once, by {@code donkey.server/run-server}, against the
   * table in {@code donkey.options}, which names the option (or the alias) a bad value came
   * from; they are not checked again here. What else gets here is a {@link ServerConfig} a Java
   * caller filled itself, whose typed fields can only be out of range: a port over 65535 fails
   * to bind (IllegalStateException), a negative one binds a free port as 0 does, and fewer
   * than one event loop or worker thread is Vert.x's or the pool's IllegalArgumentException,
   * thrown before any thread is started.
   *
   * @throws IllegalArgumentException when there is no handler or route table, or the TLS options
   *     are inconsistent or their files cannot be used (the message names the option)
   * @throws IllegalStateException when the server cannot start (port in use, bad host, no
   *     virtual threads on this JVM); everything started so far is released first
   */
  public static Server start(ServerConfig config) {
    if (config.handler == null && config.router == null) {
      throw new IllegalArgumentException("no handler or route table given");
    }
    // (route handlers are linked when their Route is made)
    Route.linkForInlining(config.handler);
    Route.linkForInlining(config.notFound);
    Route.linkForInlining(config.errorHandler);
    config.checkListeners();
    ResponseCompression.of(config); // throws for a bad :compression-types entry
    ServerSSLOptions tls = null;
    if (config.ssl) {
      // read and checked here, before any thread is started
      tls = TlsOptions.from(config, config.sslProvider, handshakeTimeoutMs(config));
    }
    // before the worker pool, which may start threads: this is what throws for eventLoops < 1
    VertxOptions vertxOptions = new VertxOptions()
        .setEventLoopPoolSize(config.eventLoops)
        .setFileSystemOptions(new FileSystemOptions()
            .setFileCachingEnabled(false)
            .setClassPathResolvingEnabled(false));
    // Vert.x's event-loop and acceptor threads are not daemon threads by default, so a running
    // server keeps the JVM alive (as Jetty's do); the workers and the watchdog always are.
    if (config.daemon) vertxOptions.setUseDaemonThread(Boolean.TRUE);
    WorkerPool workers = config.virtualThreads ? Workers.virtual(config.threadIdleTimeoutMs)
        : Workers.platform(config.workerThreads, config.minThreads, config.threadIdleTimeoutMs,
            config.maxQueuedRequests);
    // a TLS connection counts toward :max-connections from its accept, which only the
    // listening channel sees (Vert.x hands the connection over after its handshake); so does
    // a plaintext one with h2c on (handed over once its first bytes have been read)
    boolean h2c = config.http && config.h2c;
    VertxInternals.Listeners listeners = config.ssl || h2c ? new VertxInternals.Listeners()
        : null;
    Vertx vertx;
    try {
      vertx = listeners == null ? Vertx.vertx(vertxOptions)
          : Vertx.builder().with(vertxOptions).withTransport(listeners).build();
    } catch (RuntimeException e) {
      workers.shutdownNow();
      throw e;
    }
    Server server = new Server(config, vertx, workers);
    try {
      if (config.metrics != null) config.metrics.start(workers, config.router != null);
      // Vert.x binds one random port shared by every instance for a negative port; port 0
      // would give each event loop a port of its own. The TLS listener's is another negative
      // port, so that the two listeners stay two.
      server.deploy(config.port == 0 ? -1 : config.port, config.sslPort == 0 ? -2 : config.sslPort,
          tls, config.eventLoops);
      int bound = server.loops.get(0).actualPort();
      int tlsBound = server.loops.get(0).actualTlsPort();
      for (ServerVerticle v : server.loops) {
        if (v.actualPort() != bound || v.actualTlsPort() != tlsBound) {
          throw new IllegalStateException("event loops bound different ports: " + bound + "/"
              + tlsBound + " and " + v.actualPort() + "/" + v.actualTlsPort());
        }
      }
      server.port = bound >= 0 ? bound : tlsBound;
      server.tlsPort = tlsBound;
      // a connection not handed over within the wait for a request head is closed
      long handOverMs = config.headerTimeoutMs <= 0 ? config.idleTimeoutMs
          : config.idleTimeoutMs <= 0 ? config.headerTimeoutMs
          : Math.min(config.headerTimeoutMs, config.idleTimeoutMs);
      if (config.ssl && !VertxInternals.countAtAccept(listeners, tlsBound, server.connections,
          handOverMs, START_TIMEOUT_S * 1000)) {
        System.getLogger("donkey").log(System.Logger.Level.WARNING, "donkey: TLS connections "
            + "count toward :max-connections only once their handshake is done: the TLS "
            + "listener's channel was not found");
      }
      if (h2c && !VertxInternals.countAtAccept(listeners, bound, server.connections,
          handOverMs, START_TIMEOUT_S * 1000)) {
        System.getLogger("donkey").log(System.Logger.Level.WARNING, "donkey: h2c connections "
            + "count toward :max-connections only once their first bytes are read: the "
            + "listener's channel was not found");
      }
      if (config.blockedWarningMs > 0) {
        BlockedLoopWarning.schedule(server.watchdog, server.loops, config.eventLoops,
            config.blockedWarningMs);
      }
      if (config.ssl) {
        server.tlsConfig = config;
        if (config.keystoreScanInterval > 0) {
          TlsFileWatch.start(server.watchdog, config.keystoreScanInterval,
              () -> server.tlsConfig, server::reloadTls);
        }
      }
      if (config.shutdownHook) {
        Thread hook = new Thread(server::stop, "donkey-shutdown-hook");
        server.shutdownHook = hook;
        Runtime.getRuntime().addShutdownHook(hook);
      }
      server.counted = true;
      RUNNING.incrementAndGet();
      return server;
    } catch (RuntimeException e) {
      server.release(0);
      throw new IllegalStateException("donkey could not listen on " + config.host + ":"
          + (config.http ? config.port + (config.ssl ? " and " : "") : "")
          + (config.ssl ? config.sslPort + " (TLS)" : "") + ": " + rootMessage(e), e);
    }
  }

  /**
   * How long a TLS handshake may take, in ms: Vert.x's 10 s, or the header timeout when that is
   * shorter (a connection that has not finished its handshake has not sent a head either).
   */
  private static long handshakeTimeoutMs(ServerConfig config) {
    return config.headerTimeoutMs > 0 ? Math.min(config.headerTimeoutMs, 10_000) : 10_000;
  }

  private void deploy(int onPort, int onTlsPort, ServerSSLOptions tls, int instances) {
    await(vertx.deployVerticle(() -> {
      ServerVerticle v = new ServerVerticle(config, workers, onPort, onTlsPort, tls,
          connections, accessLog);
      loops.add(v);
      return v;
    }, new DeploymentOptions().setInstances(instances)), START_TIMEOUT_S * 1000);
  }

  /**
   * The port the plaintext listener is bound to (the chosen one when started with port 0), or
   * the TLS listener's when there is no plaintext one.
   */
  public int port() {
    return port;
  }

  /** The port the TLS listener is bound to, or -1 when the server has none. */
  public int tlsPort() {
    return tlsPort;
  }

  /**
   * The TLS engine new TLS connections get, {@code :jdk} or {@code :openssl}, or null when the
   * server has no TLS listener: the listener's engine ({@code :ssl-provider}), but the JDK's
   * while an {@code :ssl-context} is served. Any thread.
   */
  public clojure.lang.Keyword tlsProvider() {
    ServerConfig c = tlsConfig;
    if (c == null) return null;
    boolean openssl = c.sslContext == null
        && TlsOptions.engine(config.sslProvider) == io.netty.handler.ssl.SslProvider.OPENSSL;
    return clojure.lang.Keyword.intern(openssl ? "openssl" : "jdk");
  }

  /**
   * Has new TLS connections use the key material, trust and protocol settings of
   * {@code tls} (its TLS fields only; see {@link ServerConfig}); open connections keep what
   * they negotiated. {@code tls} is loaded and checked first, so a bad one leaves the server
   * as it was. Blocks while it loads; must not be called from an event loop.
   *
   * @throws IllegalArgumentException naming the option when {@code tls} cannot be used
   * @throws IllegalStateException when the server has no TLS listener or has stopped
   */
  public void reloadTls(ServerConfig tls) {
    if (!config.ssl) throw new IllegalStateException("the server has no TLS listener");
    if (stopping.get()) throw new IllegalStateException("the server has stopped");
    // the listener's engine is the start's: the reload's :ssl-provider is not read
    ServerSSLOptions options = TlsOptions.from(tls, config.sslProvider, handshakeTimeoutMs(config));
    await(loops.get(0).updateTls(options), START_TIMEOUT_S * 1000);
    tlsConfig = tls;
  }

  /** The Vert.x instance: an escape hatch for advanced use; donkey owns its life cycle. */
  public Vertx vertx() {
    return vertx;
  }

  /**
   * Stops accepting connections, lets in-flight requests finish for up to the configured
   * shutdown timeout, then closes every connection and releases the event loops and worker
   * threads. Idempotent: later calls return at once (or wait for the first one to finish).
   */
  public void stop() {
    stop(config.shutdownTimeoutMs);
  }

  /**
   * {@link #stop()}, letting in-flight requests finish for up to {@code graceMs} instead of the
   * configured shutdown timeout. A later call while the first is stopping waits for it.
   *
   * @throws IllegalArgumentException when {@code graceMs < 0}
   */
  public void stop(long graceMs) {
    if (graceMs < 0) throw new IllegalArgumentException(":timeout must be >= 0, got " + graceMs);
    if (!stopping.compareAndSet(false, true)) {
      awaitStopped();
      return;
    }
    STOPPING.incrementAndGet();
    if (config.shutdownDelayMs > 0) {
      // not ready from here, but still serving, so that the load balancer, seeing the
      // readiness probe fail, stops sending before the listener closes
      try {
        Thread.sleep(config.shutdownDelayMs);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    release(graceMs);
  }

  /** Servers of this JVM started and not yet stopped, and how many of them are stopping. */
  private static final java.util.concurrent.atomic.AtomicInteger RUNNING =
      new java.util.concurrent.atomic.AtomicInteger();
  private static final java.util.concurrent.atomic.AtomicInteger STOPPING =
      new java.util.concurrent.atomic.AtomicInteger();
  /** True once this server counts among {@link #RUNNING}. */
  private volatile boolean counted;

  /**
   * Any thread: true while a donkey server of this JVM runs and none is stopping: what a
   * readiness probe answers. A stopping server is not ready from the start of its
   * {@code :shutdown-delay}.
   */
  public static boolean ready() {
    return RUNNING.get() > 0 && STOPPING.get() == 0;
  }

  /** {@code "running"}, {@code "stopping"} (draining) or {@code "stopped"}. Any thread. */
  public String status() {
    if (stopped.getCount() == 0) return "stopped";
    return stopping.get() ? "stopping" : "running";
  }

  /** {@code (server)}: {@link #stop()}, for code written for http-kit's stop function. */
  @Override
  public Object invoke() {
    stop();
    return null;
  }

  /** {@code (server {:timeout ms})}: {@link #stop(long)}; no {@code :timeout}: {@link #stop()}. */
  @Override
  public Object invoke(Object opts) {
    if (opts == null) return invoke();
    if (!(opts instanceof IPersistentMap)) {
      throw new IllegalArgumentException("stopping a donkey server takes {:timeout ms}, got "
          + opts);
    }
    IPersistentMap m = (IPersistentMap) opts;
    for (Object k : m) {
      Object key = ((java.util.Map.Entry<?, ?>) k).getKey();
      if (key != TIMEOUT) {
        throw new IllegalArgumentException("stopping a donkey server takes :timeout only, got "
            + key);
      }
    }
    Object t = m.valAt(TIMEOUT);
    if (t == null) return invoke();
    stop(timeoutMs(t));
    return null;
  }

  /** {@code (server :timeout ms)}: {@link #stop(long)}. */
  @Override
  public Object invoke(Object key, Object value) {
    if (key != TIMEOUT) {
      throw new IllegalArgumentException("stopping a donkey server takes :timeout ms, got "
          + key);
    }
    if (value == null) return invoke();
    stop(timeoutMs(value));
    return null;
  }

  private static long timeoutMs(Object t) {
    if (t instanceof Long || t instanceof Integer || t instanceof Short || t instanceof Byte) {
      return ((Number) t).longValue();
    }
    throw new IllegalArgumentException(":timeout must be a whole number of ms, got " + t);
  }

  private void release(long graceMs) {
    for (ServerVerticle v : loops) v.shutdownGraceMs = graceMs;
    try {
      // Undeploying runs every ServerVerticle.stop(): a graceful shutdown of its server.
      await(vertx.close(), graceMs + 10_000);
    } catch (RuntimeException e) {
      System.getLogger("donkey").log(System.Logger.Level.WARNING,
          "donkey: Vert.x did not close cleanly: " + rootMessage(e));
    } finally {
      watchdog.shutdownNow();
      if (accessLog != null) accessLog.close();
      Thread hook = shutdownHook;
      if (hook != null && Thread.currentThread() != hook) {
        try {
          Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException alreadyShuttingDown) {
          // the JVM is exiting; the hook is running or about to
        }
      }
      workers.shutdown();
      try {
        if (!workers.awaitTermination(Math.max(1000, graceMs), TimeUnit.MILLISECONDS)) {
          workers.shutdownNow();
        }
      } catch (InterruptedException e) {
        workers.shutdownNow();
        Thread.currentThread().interrupt();
      }
      if (config.metrics != null) config.metrics.stop();
      if (counted) {
        counted = false;
        RUNNING.decrementAndGet();
        STOPPING.decrementAndGet();
      }
      stopping.set(true);
      stopped.countDown();
    }
  }

  private void awaitStopped() {
    try {
      stopped.await();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Blocks until the server has stopped (the {@code :join? true} behaviour). */
  public void await() throws InterruptedException {
    stopped.await();
  }

  /** Same as {@link #stop()}, for try-with-resources and {@code with-open}. */
  @Override
  public void close() {
    stop();
  }

  @Override
  public String toString() {
    return "#<donkey.Server " + config.host + ":" + port
        + (tlsPort >= 0 && tlsPort != port ? " TLS:" + tlsPort : "")
        + (stopping.get() ? " stopped" : "") + ">";
  }

  private static <T> T await(Future<T> f, long timeoutMs) {
    try {
      return f.toCompletionStage().toCompletableFuture().get(timeoutMs, TimeUnit.MILLISECONDS);
    } catch (ExecutionException e) {
      Throwable c = e.getCause();
      if (c instanceof RuntimeException) throw (RuntimeException) c;
      throw new IllegalStateException(c);
    } catch (TimeoutException e) {
      throw new IllegalStateException("timed out after " + timeoutMs + " ms", e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    }
  }

  static String rootMessage(Throwable t) {
    Throwable c = t;
    while (c.getCause() != null && c.getCause() != c) c = c.getCause();
    return c.getMessage() == null ? c.getClass().getSimpleName() : c.getMessage();
  }
}
