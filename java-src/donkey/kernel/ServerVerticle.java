package donkey.kernel;

import donkey.kernel.compression.ResponseCompression;
import donkey.kernel.config.ServerConfig;
import donkey.kernel.http2.Http2Limits;
import donkey.kernel.internals.ConnectionCount;
import donkey.kernel.internals.VertxInternals;
import donkey.kernel.log.AccessLog;
import donkey.kernel.metrics.ServerMetrics;
import donkey.kernel.tls.TlsContextFactory;
import donkey.kernel.tls.TlsOptions;
import donkey.kernel.websocket.WebSockets;
import donkey.kernel.workers.WorkerPool;
import donkey.kernel.workers.Workers;
import donkey.ring.Proxies;
import donkey.ring.RequestMap;
import donkey.route.PathMemo;
import io.netty.channel.EventLoop;
import io.netty.handler.codec.http.TooLongHttpHeaderException;
import io.netty.handler.codec.http.TooLongHttpLineException;
import io.netty.util.AsciiString;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerConfig;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.ServerSSLOptions;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The HTTP servers of one event loop: plaintext on the port, TLS on the TLS port, or both. Every
 * instance listens on the same host and ports; Vert.x spreads connections over them, and both
 * listeners hand their connections and requests to the same methods. Per-loop state lives here
 * and is only written by this loop; its timer refreshes the JVM's shared {@code Date} value
 * ({@link HttpDate}).
 */
final class ServerVerticle extends VerticleBase {
  final ServerConfig config;
  /** The threads (platform or virtual) that run sync handlers; shared by the server's loops. */
  final WorkerPool workers;
  /** Where {@link #workers} leave finished responses for this loop; set in start. */
  volatile Outbox outbox;
  final CharSequence serverHeader;
  /** The kernel's own text answers, with this server's Date and Server settings. */
  final PlainAnswers answers;
  /** The server's access log, or null without :access-log. */
  final AccessLog accessLog;
  /** The proxies whose forwarding headers are read, or null without :trusted-proxies. */
  final Proxies proxies;
  /** The server's metrics, or null without :metrics. */
  final ServerMetrics metrics;
  /** True with an access log or metrics: each request's start and end are recorded. */
  final boolean observed;
  /** Which responses Vert.x may compress; null with :compression? off. */
  final ResponseCompression compression;
  /** The checks of each request head; loop-confined scratch. */
  final HeadCheck headCheck = new HeadCheck();
  /** The route table's answer for the last literal path routed here; loop-confined. */
  final PathMemo pathMemo = new PathMemo();
  /** The verticle whose event loop the current thread is, for {@link RequestScope}. */
  private static final ThreadLocal<ServerVerticle> LOOP = new ThreadLocal<>();
  private final int port;
  /** The TLS listener's port. */
  private final int tlsPort;
  /** The TLS listener's options, or null for no TLS listener. */
  private final ServerSSLOptions tls;
  /**
   * How long {@link #stop} lets in-flight requests finish, in ms: the configured shutdown
   * timeout, or what {@link Server#stop(long)} was given (set before it closes Vert.x).
   */
  volatile long shutdownGraceMs;
  /** This verticle's event-loop context; set in {@link #start}. */
  volatile io.vertx.core.Context eventLoop;
  /** The thread of {@link #eventLoop}; set in {@link #start}. */
  volatile Thread thread;
  /**
   * The request whose non-blocking handler this loop is running now, or null: written by the
   * loop with opaque stores (plain moves on x86, never elided; no fence and no clock read per
   * request), read by the watchdog thread ({@link #running()}), which times it itself.
   */
  @SuppressWarnings("unused") // accessed through RUNNING
  private Exchange running;
  private static final java.lang.invoke.VarHandle RUNNING;

  static {
    try {
      RUNNING = java.lang.invoke.MethodHandles.lookup()
          .findVarHandle(ServerVerticle.class, "running", Exchange.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  /** Event loop: {@code e} starts (non-null) or ends (null) running its non-blocking handler. */
  void running(Exchange e) {
    RUNNING.setOpaque(this, e);
  }

  /** Any thread (the watchdog): the request whose non-blocking handler the loop runs, or null. */
  Exchange running() {
    return (Exchange) RUNNING.getOpaque(this);
  }
  private final ConnectionGuard guard;
  /** This loop's WebSockets, for the upgrade, the idle sweep and the stop. */
  final WebSockets webSockets;
  /** {@code :ws-allowed-origins} in lower case, or null for any origin. */
  final java.util.Set<String> wsOrigins;
  /**
   * The HTTP/1 decoder settings of this loop's servers, for a decoder that takes over again
   * after a WebSocket request was answered over HTTP ({@link VertxInternals#resumeHttp}); set
   * in start.
   */
  volatile io.vertx.core.http.Http1ServerConfig http1;
  private long wsSweeper = -1;
  /**
   * Sync exchanges dispatched during this loop iteration, handed to the workers together once
   * the loop has read everything that was ready: one worker wake-up per batch instead of one per
   * request. Loop-confined.
   */
  private final ArrayDeque<Exchange> handoff = new ArrayDeque<>();
  private boolean handoffScheduled;
  private final Runnable flushHandoff = this::flushHandoff;
  /** Whether {@link #flushHandoff} may yield the core: platform workers only (see there). */
  private final boolean yieldAfterHandOff;
  private EventLoop netty;
  private long timer = -1;
  private long sweeper = -1;
  /** The plaintext server, or null without one. */
  private HttpServer http;
  /** The TLS server, or null without one. */
  private HttpServer https;

  ServerVerticle(ServerConfig config, WorkerPool workers, int port, int tlsPort,
                 ServerSSLOptions tls, ConnectionCount connections, AccessLog accessLog) {
    this.config = config;
    this.accessLog = accessLog;
    this.metrics = config.metrics;
    this.observed = accessLog != null || metrics != null;
    this.webSockets = new WebSockets(config, this::handOffTask);
    this.workers = workers;
    this.yieldAfterHandOff = !workers.virtual();
    this.port = port;
    this.tlsPort = tlsPort;
    this.tls = tls;
    this.shutdownGraceMs = config.shutdownTimeoutMs;
    this.proxies = config.trustedProxies == null ? null : new Proxies(config.trustedProxies);
    this.guard = new ConnectionGuard(config, connections, proxies);
    this.serverHeader = config.serverHeader == null ? null : AsciiString.cached(config.serverHeader);
    this.answers = new PlainAnswers(serverHeader, config.sendDateHeader, config.metrics);
    this.compression = ResponseCompression.of(config);
    if (config.wsAllowedOrigins == null) {
      this.wsOrigins = null;
    } else {
      this.wsOrigins = new java.util.HashSet<>();
      for (String o : config.wsAllowedOrigins) {
        wsOrigins.add(o.trim().toLowerCase(java.util.Locale.ROOT));
      }
    }
  }

  /** The verticle of the event loop running the calling thread, or null on any other thread. */
  static ServerVerticle current() {
    return LOOP.get();
  }

  @Override
  public Future<?> start() {
    eventLoop = context;
    thread = Thread.currentThread();
    LOOP.set(this);
    netty = VertxInternals.nettyLoop(context);
    Outbox o = new Outbox(netty, TimeUnit.MILLISECONDS.toNanos(Outbox.MAX_HOLD_MS),
        TimeUnit.MILLISECONDS.toNanos(Workers.STALL_MS));
    workers.register(o);
    outbox = o;
    guard.outbox = o;
    if (yieldAfterHandOff) guard.readDone = this::readDone;
    HttpDate.refresh();
    timer = vertx.setPeriodic(1000, id -> HttpDate.refresh());
    sweeper = vertx.setPeriodic(ConnectionGuard.sweepPeriodMs(config), id -> guard.sweep());
    long wsPeriod = WebSockets.sweepPeriodMs(config);
    if (wsPeriod > 0) wsSweeper = vertx.setPeriodic(wsPeriod, id -> webSockets.sweep());
    HttpServerOptions opts = new HttpServerOptions()
        .setMaxInitialLineLength(config.maxInitialLineLength)
        .setMaxHeaderSize(config.maxHeaderSize)
        .setHandle100ContinueAutomatically(false)
        // with h2c on, Vert.x sniffs a connection's first bytes before it hands it over, so
        // such connections are counted and timed from their accept (Server, HandOverDeadline)
        .setHttp2ClearTextEnabled(config.h2c)
        .setInitialSettings(Http2Limits.settings(config))
        .setHttp2ConnectionWindowSize(config.h2ConnectionWindowSize)
        .setHttp2RstFloodMaxRstFramePerWindow(config.h2MaxResets)
        .setHttp2RstFloodWindowDuration(config.h2ResetWindowS)
        .setHttp2RstFloodWindowDurationTimeUnit(TimeUnit.SECONDS)
        // no Vert.x idle timeout: ConnectionGuard's sweep enforces :idle-timeout
        .setTcpNoDelay(true)
        // WebSockets are the kernel's (WebSocketUpgrade), which negotiates compression for an
        // upgrade request alone: with these on, Vert.x puts a WebSocket extension handler in
        // every connection's pipeline, which looks at each request's headers for an upgrade
        // and sits in each response's write path
        .setPerFrameWebSocketCompressionSupported(false)
        .setPerMessageWebSocketCompressionSupported(false);
    ResponseCompression.configure(opts, config);
    http1 = opts.getHttp1Config();
    List<Future<?>> listening = new ArrayList<>(2);
    if (config.http) {
      http = handlers(vertx.createHttpServer(opts));
      listening.add(http.listen(VertxInternals.listenAddress(port, config.host)));
    }
    if (tls != null) {
      // the same HTTP settings, with h2 offered by ALPN when asked for (Vert.x turns ALPN on
      // for a configuration whose versions include HTTP/2), over the engine :ssl-provider
      // chose (checked at start-up, so this cannot throw)
      HttpServerConfig tlsConfig = new HttpServerConfig(
          new HttpServerOptions(opts).setHttp2ClearTextEnabled(false));
      tlsConfig.setVersions(config.h2
          ? new HttpVersion[] {HttpVersion.HTTP_2, HttpVersion.HTTP_1_1, HttpVersion.HTTP_1_0}
          : new HttpVersion[] {HttpVersion.HTTP_1_1, HttpVersion.HTTP_1_0});
      https = handlers(vertx.httpServerBuilder()
          .with(tlsConfig)
          .with(tls)
          .with(TlsContextFactory.engine(TlsOptions.engine(config.sslProvider)))
          .build());
      listening.add(https.listen(VertxInternals.listenAddress(tlsPort, config.host)));
    }
    return Future.all(listening);
  }

  private HttpServer handlers(HttpServer s) {
    return s.connectionHandler(this::accept)
        .requestHandler(this::request)
        .invalidRequestHandler(this::invalid);
  }

  /**
   * Any thread but an event loop's: has new TLS connections use {@code options}; open ones keep
   * what they negotiated. Every loop's TLS server shares one listener, so one update serves
   * them all.
   */
  Future<Boolean> updateTls(ServerSSLOptions options) {
    // Vert.x adds the ALPN protocols to the options it starts with, not to later ones
    return https.updateSSLOptions(alpn(options), true);
  }

  /** {@code options} with this server's ALPN protocols (h2 first) when :h2? is on. */
  private ServerSSLOptions alpn(ServerSSLOptions options) {
    return !config.h2 ? options : options.copy().setUseAlpn(true)
        .setApplicationLayerProtocols(List.of("h2", "http/1.1", "http/1.0"));
  }

  /**
   * Stops accepting; in-flight requests get up to the shutdown timeout to finish, and open
   * WebSockets are closed with 1001 (going away): their connections end when the client
   * answers, or when the shutdown timeout is up.
   */
  @Override
  public Future<?> stop() {
    vertx.cancelTimer(timer);
    vertx.cancelTimer(sweeper);
    if (wsSweeper >= 0) vertx.cancelTimer(wsSweeper);
    webSockets.closeAll(1001, "server shutting down");
    guard.closeAfterAnswers();
    List<Future<?>> shut = new ArrayList<>(2);
    if (http != null) shut.add(http.shutdown(Duration.ofMillis(shutdownGraceMs)));
    if (https != null) shut.add(https.shutdown(Duration.ofMillis(shutdownGraceMs)));
    return Future.all(shut);
  }

  /**
   * Event loop: a connection was accepted. Its requests are then delivered with its state at
   * hand, by a handler of its own that replaces the server-wide one on the HTTP/1.x connection
   * (Vert.x sets that one just before it calls this), so no request looks its connection up.
   */
  private void accept(HttpConnection c) {
    ConnectionGuard.State s = guard.accept(c);
    if (s != null) VertxInternals.handleRequests(c, r -> request(r, s));
  }

  /** Event loop: a request head has arrived on a connection without a handler of its own. */
  private void request(HttpServerRequest r) {
    request(r, guard.requestStarted(r.connection()));
  }

  /**
   * Event loop: a request head has arrived on the connection whose state is {@code s}. A
   * version other than HTTP/1.0 or 1.1 (the decoder lets {@code HTTP/9.9} through, with no
   * version) is answered 505 and the connection closed, as Vert.x's own request handler,
   * which the per-connection one replaces, answers it 501; a version that is not
   * {@code HTTP/} something gets 400.
   */
  private void request(HttpServerRequest r, ConnectionGuard.State s) {
    // (one pipelined behind an answer that closes the connection is never served)
    if (s != null && !s.arrived()) return;
    HttpVersion v = r.version();
    if (v != HttpVersion.HTTP_1_1 && v != HttpVersion.HTTP_1_0 && v != HttpVersion.HTTP_2) {
      if (s != null) s.closeAfterAnswer();
      if (VertxInternals.protocol(r).startsWith("HTTP/")) {
        answerRaw(r, s, 505, "HTTP Version Not Supported");
      } else {
        answerRaw(r, s, 400, "Bad Request: malformed request line");
      }
      return;
    }
    new Exchange(this, r, s).admit();
  }

  /**
   * Event loop: answers a request the decoder could not parse (414 for a request line over
   * {@code :max-initial-line-length}, 431 for headers over {@code :max-header-size}, 400
   * otherwise) with a short text body, then closes the connection; or only closes it when an
   * earlier answer on it already said {@code Connection: close} (what follows such an answer
   * is not read as a request).
   */
  private void invalid(HttpServerRequest r) {
    HttpConnection c = r.connection();
    ConnectionGuard.State s = guard.requestStarted(c);
    if (s != null && s.isClosing()) {
      c.close();
      return;
    }
    if (s != null) s.closeAfterAnswer();
    Throwable cause = r.decoderResult().cause();
    if (cause instanceof TooLongHttpLineException) {
      answerRaw(r, s, 414, "URI Too Long");
    } else if (cause instanceof TooLongHttpHeaderException) {
      answerRaw(r, s, 431, "Request Header Fields Too Large");
    } else {
      answerRaw(r, s, 400, "Bad Request: malformed request line or headers");
    }
  }

  /**
   * Event loop: answers {@code r}, a request that never becomes an exchange, with
   * {@code status} written as bytes ({@link PlainAnswers#raw}), closes its connection and
   * gives it a line in the access log.
   */
  private void answerRaw(HttpServerRequest r, ConnectionGuard.State s, int status,
                         String message) {
    answers.raw(r.connection(), status, message);
    if (accessLog != null) {
      // a version Vert.x does not know is logged as the client wrote it
      String protocol = r.version() != null ? RequestMap.protocol(r.version())
          : VertxInternals.protocol(r);
      accessLog.record(System.currentTimeMillis(), s != null ? s.remoteAddress : null,
          r.method() != null ? r.method().name() : null, r.uri(),
          protocol.isEmpty() ? null : protocol, status, 0, 0, null);
    }
  }

  /**
   * Event loop: queues a sync exchange for the workers. The batch is submitted by a task that
   * Netty runs after this iteration's reads, so every request read in one iteration reaches the
   * workers with a single wake-up.
   */
  void handOff(Exchange e) {
    handoff.add(e);
    if (!handoffScheduled) {
      handoffScheduled = true;
      netty.execute(flushHandoff);
    }
  }

  /**
   * Event loop: queues {@code task} (a sync WebSocket's batch of callbacks) for the workers,
   * which are woken once for everything this loop iteration queued, as {@link #handOff} does
   * for requests.
   *
   * @throws java.util.concurrent.RejectedExecutionException when the pool has shut down
   */
  void handOffTask(Runnable task) {
    workers.enqueue(task);
    if (!handoffScheduled) {
      handoffScheduled = true;
      netty.execute(flushHandoff);
    }
  }

  /**
   * Event loop: queues the iteration's batch and wakes a worker once it is all queued (woken
   * for the first request, a worker can take the core from the loop and find that one alone),
   * then, when the workers are platform threads and their recent tasks were short
   * ({@link WorkerPool#SHORT_TASK_NANOS}), gives the core up once ({@code sched_yield}) before
   * the loop goes back to {@code epoll_wait}.
   *
   * <p>Why: where a worker shares the loop's core, a loop that sleeps in {@code epoll_wait}
   * while the worker runs is woken by each arriving packet and preempts the worker, reads a
   * request or two and sleeps again: two context switches for a few requests. A loop that has
   * yielded is still runnable, so the packets only queue; it runs again when the worker parks
   * or its time slice ends, and then reads everything that arrived. Where no other thread wants
   * the core the yield returns at once (one system call per batch, never a spin). Not for
   * virtual workers, whose carriers are woken through the scheduler's own queue, which the
   * yield does not reach. Only while tasks are short, because the yield's price is the
   * worker's remaining run: until it parks or its slice ends, the loop's other connections
   * wait, which a handler that computes for milliseconds would make long.
   */
  private void flushHandoff() {
    handoffScheduled = false;
    Exchange e;
    while ((e = handoff.poll()) != null) e.submit();
    workers.signal();
    if (yieldAfterHandOff && workers.recentTaskNanos() < WorkerPool.SHORT_TASK_NANOS) {
      Thread.yield();
    }
  }

  /**
   * Event loop, after a read of an HTTP/2 connection: its streams go to the workers now, not
   * with every other connection's at the end of the loop iteration, and what the workers
   * answered meanwhile (the yield lets a worker sharing the core run) is ended at once. One
   * connection's hundred streams then go through handler, response and flush while their
   * state is in the cache, where thousands from every connection at once had gone cold.
   */
  private void readDone() {
    if (handoff.isEmpty()) return;
    flushHandoff();
    outbox.drainNow();
  }

  /**
   * Any thread: runs {@code r} on this loop as a task of its own, after the current one.
   *
   * @throws java.util.concurrent.RejectedExecutionException when the loop has shut down
   */
  void later(Runnable r) {
    netty.execute(r);
  }

  /** Event loop: connection {@code c} has become a WebSocket on {@code channel}. */
  void upgraded(HttpConnection c, io.netty.channel.Channel channel) {
    guard.upgraded(c, channel);
  }

  /** The port this loop's plaintext server is bound to, or -1 without one. */
  int actualPort() {
    return http == null ? -1 : http.actualPort();
  }

  /** The port this loop's TLS server is bound to, or -1 without one. */
  int actualTlsPort() {
    return https == null ? -1 : https.actualPort();
  }

}
