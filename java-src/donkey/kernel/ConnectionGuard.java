package donkey.kernel;

import donkey.kernel.config.Durations;
import donkey.kernel.config.ServerConfig;
import donkey.kernel.http2.Http2Session;
import donkey.kernel.internals.ByteCount;
import donkey.kernel.internals.ConnectionCount;
import donkey.kernel.internals.ConnectionInput;
import donkey.kernel.internals.VertxInternals;
import donkey.kernel.metrics.ServerMetrics;
import donkey.ring.Proxies;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.SocketAddress;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

/**
 * The connections of one event loop: enforces {@code :max-connections} (shared by every loop
 * of a server), {@code :header-timeout} (a connection must deliver its first request head
 * within that time of opening, and each later one within that time of its first byte, so a
 * client trickling header bytes, slowloris-style, cannot hold a connection forever; between
 * requests a keep-alive connection waits {@code :idle-timeout}, which load balancers rely on), {@code :request-timeout} (a handler
 * that has not answered in time gets its client a 503), {@code :body-timeout} for bodies read
 * before the handler runs (a body that stops arriving for that long gets a 408) and
 * {@code :idle-timeout} (a connection on which no byte has moved either way for that long is
 * closed: a keep-alive connection between requests, or one whose response is stuck because
 * the client stopped reading; never one that is still owed a response). The
 * timeouts are checked by a sweep every {@link #sweepPeriodMs} rather than a timer per
 * request, which would cost more than the rest of a small request's bookkeeping; the idle
 * check in particular replaces Netty's IdleStateHandler, which costs a promise and a listener
 * on every write.
 *
 * <p>A plaintext connection is counted toward {@code :max-connections} here, at its accept. A
 * TLS one is counted when its listener accepts it ({@link VertxInternals#countAtAccept}):
 * Vert.x hands it over only once its handshake is done, and connections that never finish one
 * must not pile up beyond the limit meanwhile.
 *
 * <p>Threading: every method runs on the owning event loop, except that {@link #count} is
 * shared between loops (atomic).
 *
 * <p>One class past 450 lines: each limit and timeout above reads and writes the one
 * per-connection {@link State} it owns, and one sweep checks them all.
 */
final class ConnectionGuard {
  /**
   * A time not read yet: set on the request path instead of {@code System.nanoTime()} (a clock
   * read per request shows on pipelined plaintext), and replaced by the time of the first sweep
   * that sees it. A timeout thus counts from
   * up to one sweep period after the event, never before it: it fires between its limit and
   * that plus two sweep periods (a sweep period is at most a quarter of the shortest timeout).
   */
  static final long UNSTAMPED = Long.MIN_VALUE;

  /** Per-connection state; loop-confined. */
  static final class State {
    int started;
    int ended;
    /** When the connection last became idle: its accept, or its last response's end. */
    long idleSince = System.nanoTime();
    /** The socket's reads, counted before decoding; null when the pipeline is not known. */
    ConnectionInput input;
    /** {@link #input}'s count when the last response ended. */
    long readsAtEnd;
    /** When the sweep first saw the next request head begin to arrive; 0 before. */
    long headSince;
    /**
     * The name instances of the Host and Connection lines of this connection's last request
     * ({@link HeadCheck}), or null.
     */
    CharSequence hostName;
    CharSequence connectionName;
    /** The request being served (HTTP/1.x serves one at a time per connection), or null. */
    Exchange current;
    /**
     * HTTP/2: the streams in progress, which the connection serves side by side ({@link
     * #current} stays null); null on an HTTP/1.x connection.
     */
    ArrayList<Exchange> streams;
    /**
     * During an {@link Outbox} drain, the connection's prepared responses, linked through
     * {@link Exchange#linkPrepared}; null between drains.
     */
    Exchange preparedHead;
    Exchange preparedTail;
    /** HTTP/2: what the request path needs of the connection; null on HTTP/1.x. */
    Http2Session h2;
    /** The peer's address, formatted once, at accept (null when the socket has none). */
    String remoteAddress;
    /** The local address, taken at accept (null when the socket has none). */
    SocketAddress localAddress;
    /** True for a TLS connection, taken at accept (Vert.x searches the pipeline per call). */
    boolean ssl;
    /** Counted when the listener accepted it, and released when its channel closes. */
    boolean countedAtAccept;
    /** True when the peer is a trusted proxy: its requests' forwarding headers are read. */
    boolean proxied;
    /** With metrics: the protocol it was counted under ({@link ServerMetrics#HTTP_1}, ...). */
    int protocol;
    /**
     * The client's certificate on a TLS connection whose client presented one when asked,
     * else null; taken at accept, once the handshake is done ({@code :ssl-client-cert}).
     */
    java.security.cert.X509Certificate clientCert;
    /** Set once an answer said Connection: close; requests read after it are not served. */
    boolean closing;
    /** Set by the connection's close handler. */
    boolean closed;
    /**
     * Set when the client has shut down its side: the requests it sent are answered, then the
     * connection is closed.
     */
    boolean inputShut;
    /**
     * The idle check's last look: the request it saw (null once a response has ended but
     * still flushes), that request's bytes moved, the channel's unflushed bytes and the
     * progress of the message being written, and when any of them last changed.
     */
    Exchange watched;
    long moved;
    long pending;
    long progress;
    long movedAt;

    /** HTTP/2: stream {@code x} has started. */
    void streamStarted(Exchange x) {
      streams.add(x);
    }

    /**
     * The response to {@code e}, a request of this connection, has ended. (Vert.x may already
     * have started the next pipelined request, which is then {@link #current} and stays so.)
     */
    void responseEnded(Exchange e) {
      ended++;
      if (current == e) current = null;
      if (streams != null) streams.remove(e);
      idleSince = UNSTAMPED;
      if (input != null) readsAtEnd = input.count();
      // (a pipelined request read before the client's end has started by now, see above)
      if (inputShut) closeIfDone(e.connection());
    }

    /**
     * The client shut down its side of {@code c}, this connection: it sends nothing more. A
     * request whose head and body have arrived is still answered, then the connection is
     * closed.
     */
    private void inputShut(HttpConnection c) {
      inputShut = true;
      closeIfDone(c);
    }

    /**
     * After the client's end: closes {@code c} once nothing is in progress, and at once when
     * the request in progress is still reading a body that can no longer arrive (the decoder
     * drops an incomplete body quietly when the connection stays open for the answer).
     */
    private void closeIfDone(HttpConnection c) {
      if (started == ended) {
        c.close();
      } else if (current != null && !current.requestEnded()) {
        abort(c);
      }
    }

    /**
     * A request head has arrived: counted, and true when it is to be served; false for one
     * read behind an answer that closes the connection, which is never served (and counted as
     * ended at once).
     */
    boolean arrived() {
      started++;
      if (closing) {
        ended++;
        return false;
      }
      return true;
    }

    /** An answer says Connection: close: requests read after it are not served. */
    void closeAfterAnswer() {
      closing = true;
    }

    /** True once an answer said Connection: close ({@link #closeAfterAnswer}). */
    boolean isClosing() {
      return closing;
    }

    /** HTTP/1.x: {@code x} is the request the connection now serves. */
    void serving(Exchange x) {
      current = x;
    }

    /** {@code x} left HTTP (it became a WebSocket): the connection no longer serves it. */
    void leftHttp(Exchange x) {
      if (current == x) current = null;
    }

    /**
     * An {@link Outbox} drain: queues {@code x}, one of this connection's prepared responses,
     * behind the others; true for the drain's first, which puts the connection among those to
     * release.
     */
    boolean addPrepared(Exchange x) {
      if (preparedTail == null) {
        preparedHead = preparedTail = x;
        return true;
      }
      preparedTail.linkPrepared(x);
      preparedTail = x;
      return false;
    }

    /** An {@link Outbox} drain: the first of the queued prepared responses; the queue empties. */
    Exchange takePrepared() {
      Exchange x = preparedHead;
      preparedHead = preparedTail = null;
      return x;
    }
  }

  /** How often the sweep runs: a quarter of the shortest timeout, within 50..1000 ms. */
  static long sweepPeriodMs(ServerConfig config) {
    long shortest = Long.MAX_VALUE;
    for (long t : new long[] {config.headerTimeoutMs, config.requestTimeoutMs,
        config.resolvedAsyncTimeoutMs(), config.idleTimeoutMs, config.bodyTimeoutMs}) {
      if (t > 0) shortest = Math.min(shortest, t);
    }
    return Math.max(50, Math.min(1000, shortest / 4));
  }

  private final ServerConfig config;
  private final ConnectionCount count;
  private final Map<HttpConnection, State> connections = new IdentityHashMap<>();

  /** @param proxies the trusted proxies, or null for none */
  ConnectionGuard(ServerConfig config, ConnectionCount count, Proxies proxies) {
    this.config = config;
    this.count = count;
    this.proxies = proxies;
    this.metrics = config.metrics;
    this.byteCount = metrics == null ? null : new ByteCount(metrics);
  }

  /** The server's metrics, or null without {@code :metrics}. */
  private final ServerMetrics metrics;
  /** The proxies whose forwarding headers are read, or null. */
  private final Proxies proxies;
  /** With metrics: counts each connection's socket bytes. */
  private final ByteCount byteCount;

  /** This loop's outbox (its flushes are batched per connection); set at start. */
  Outbox outbox;
  /**
   * Run after each batch of an HTTP/2 connection's input has been handled, or null; set at
   * start ({@link ServerVerticle#readDone}).
   */
  Runnable readDone;

  /**
   * A connection was accepted: refuses it (closes it at once) when over the limit, else tracks
   * it and returns its state (null when refused).
   */
  State accept(HttpConnection c) {
    boolean ssl = c.isSsl();
    boolean counted = VertxInternals.countedAtAccept(c);
    if (!counted && !count.admit()) {
      c.close();
      return null;
    }
    State s = new State();
    SocketAddress peer = c.remoteAddress();
    s.remoteAddress = peer == null ? null : peer.hostAddress();
    s.proxied = proxies != null && proxies.trusts(s.remoteAddress);
    s.localAddress = c.localAddress();
    s.ssl = ssl;
    s.countedAtAccept = counted;
    if (s.ssl) s.clientCert = VertxInternals.clientCertificate(c);
    // the responses workers finish together leave in one write per connection
    outbox.batchFlushes(c, s);
    if (c.protocolVersion() == HttpVersion.HTTP_2) {
      s.streams = new ArrayList<>();
      s.h2 = Http2Session.of(c);
      if (readDone != null) VertxInternals.afterReads(c, readDone);
    }
    // on HTTP/1.x, a client's half-close ends its requests (HTTP/2 ends its input with GOAWAY)
    s.input = VertxInternals.watchInput(c, s.streams != null ? null : () -> s.inputShut(c));
    connections.put(c, s);
    if (metrics != null) {
      s.protocol = s.streams == null ? ServerMetrics.HTTP_1 : ssl ? ServerMetrics.H2 : ServerMetrics.H2C;
      metrics.connectionOpened(s.protocol);
      byteCount.install(c);
    }
    c.closeHandler(v -> {
      s.closed = true;
      if (connections.remove(c) != null) {
        if (!s.countedAtAccept) count.release();
        if (metrics != null) metrics.connectionClosed(s.protocol);
      }
      Exchange x = s.current;
      if (x != null) x.connectionClosed();
      if (s.streams != null) {
        for (Exchange e : s.streams.toArray(new Exchange[0])) e.connectionClosed();
      }
    });
    return s;
  }

  /**
   * {@code c} has become a WebSocket on {@code channel}: it leaves this guard's timeouts (its
   * socket has timeouts of its own) but still counts toward {@code :max-connections} until
   * the channel closes. Vert.x's close handler, which did the count for HTTP, no longer runs:
   * its handler has left the pipeline.
   */
  void upgraded(HttpConnection c, io.netty.channel.Channel channel) {
    State s = connections.remove(c);
    // a connection counted at its accept is released by its channel's close already
    if (s != null && !s.countedAtAccept) {
      channel.closeFuture().addListener(f -> count.release());
    }
    if (s != null && metrics != null) {
      metrics.connectionClosed(s.protocol);
      metrics.connectionOpened(ServerMetrics.WEBSOCKET);
      channel.closeFuture().addListener(f -> metrics.connectionClosed(ServerMetrics.WEBSOCKET));
    }
  }

  /**
   * A request head arrived on {@code c}; returns its state (null when untracked). Only for a
   * connection whose requests do not come through the per-connection handler
   * {@link ServerVerticle} installs at accept, which has the state at hand: this identity
   * look-up (the identity hash of a connection object Vert.x synchronizes on all the time) is
   * expensive per request.
   *
   * <p>A plain look-up, without a last-connection shortcut: with one request per connection
   * in flight the shortcut would rarely hit, and a branch the JIT has seen untaken costs a
   * recompilation of the read path on the loop's core the first time it is taken.
   */
  State requestStarted(HttpConnection c) {
    return connections.get(c);
  }

  /**
   * Event loop, as the server stops accepting: each HTTP/1.x connection's request in progress
   * is answered with {@code Connection: close} and the connection closed after it; requests
   * read behind it are not served. (Idle connections are Vert.x's to close; HTTP/2 ones get
   * its GOAWAY.)
   */
  void closeAfterAnswers() {
    for (State s : connections.values()) {
      if (s.streams != null) continue;
      Exchange x = s.current;
      if (x != null) x.closeAfterResponse();
      s.closeAfterAnswer();
    }
  }

  /**
   * Closes connections that have waited too long for a complete request head or been idle
   * too long, answers 408 for bodies that stopped arriving before their handler could run, and
   * 503 for requests whose handler has not answered within {@code :request-timeout} (or the
   * async timeout, for a non-blocking handler).
   */
  void sweep() {
    if (connections.isEmpty()) return;
    Sweep w = new Sweep(config);
    for (Map.Entry<HttpConnection, State> e : connections.entrySet()) {
      HttpConnection c = e.getKey();
      State s = e.getValue();
      long pending = VertxInternals.pendingWriteBytes(c);
      if (s.started == s.ended && pending == 0) {
        // between requests, nothing left to send
        s.watched = null;
        s.movedAt = 0;
        if (w.between(s)) w.late.add(c);
        continue;
      }
      long progress = VertxInternals.writeProgress(c);
      if (s.streams != null) {
        sweepStreams(w, c, s, pending, progress);
        continue;
      }
      // a request in progress (its body being read, its handler running, its response
      // being written), or an ended response whose bytes are still flushing
      Exchange x = s.started == s.ended ? null : s.current;
      if (x != null) x.stamp(w.now);
      long quiet = quietFor(s, x, x == null ? 0 : x.bytesMoved(), pending, progress, w.now);
      if (x != null && x.unanswered()) {
        // owed a response: never idle; its body or its handler has a limit of its own
        if (!w.owed(x, quiet)) w.stuck.add(c);
      } else if (w.idleLimit > 0 && quiet > w.idleLimit) {
        w.stuck.add(c);
      }
    }
    // nothing in flight on a late connection: a graceful close is immediate
    for (HttpConnection c : w.late) c.close();
    for (HttpConnection c : w.stuck) abort(c);
    for (Exchange x : w.stuckStreams) x.abort();
    for (Exchange x : w.timedOut) x.timedOut();
    for (RequestBody b : w.bodyLate) b.timedOut();
  }

  /**
   * The checks of an HTTP/2 connection with streams in progress: each stream owed a response
   * has its body and handler limits, as an HTTP/1.x request does; the connection is idle when
   * nothing moved on any of its streams for {@code :idle-timeout} while none is owed one.
   */
  private static void sweepStreams(Sweep w, HttpConnection c, State s, long pending,
                                   long progress) {
    long moved = 0;
    for (Exchange x : s.streams) {
      moved += x.bytesMoved();
      x.stamp(w.now);
    }
    long quiet = quietFor(s, null, moved, pending, progress, w.now);
    boolean owed = false;
    for (Exchange x : s.streams) {
      if (x.unanswered()) {
        owed = true;
        if (!w.owed(x, quiet)) w.stuckStreams.add(x);
      }
    }
    if (!owed && w.idleLimit > 0 && quiet > w.idleLimit) w.stuck.add(c);
  }

  /** One sweep's limits (ns), its time, and what it found due. Event loop. */
  private static final class Sweep {
    final long now = System.nanoTime();
    final long requestLimit;
    final long asyncLimit;
    final long idleLimit;
    /** For a request head once it is due (see between): the shorter of header and idle. */
    final long waitLimit;
    /** So they do for a body the kernel reads before its handler runs. */
    final long bodyLimit;
    final List<HttpConnection> late = new ArrayList<>(0);
    final List<HttpConnection> stuck = new ArrayList<>(0);
    final List<Exchange> stuckStreams = new ArrayList<>(0);
    final List<Exchange> timedOut = new ArrayList<>(0);
    final List<RequestBody> bodyLate = new ArrayList<>(0);

    Sweep(ServerConfig config) {
      requestLimit = Durations.nanos(config.requestTimeoutMs);
      asyncLimit = Durations.nanos(config.resolvedAsyncTimeoutMs());
      idleLimit = Durations.nanos(config.idleTimeoutMs);
      waitLimit = shorter(Durations.nanos(config.headerTimeoutMs), idleLimit);
      bodyLimit = shorter(Durations.nanos(config.bodyTimeoutMs), idleLimit);
    }

    /**
     * A connection between requests, nothing left to send: true when it has waited too long.
     * Before its first request the head is due within the wait limit of the accept. After a
     * response it may idle for the idle limit; once bytes of a next head arrive, that head is
     * due within the wait limit of the first sweep that saw them (bytes read before the
     * response ended are not told apart from it: such a connection idles, which it could
     * anyway).
     */
    boolean between(State s) {
      if (s.idleSince == UNSTAMPED) {
        s.idleSince = now;
        s.headSince = 0;
        return false;
      }
      if (s.started == 0 || s.input == null) {
        return waitLimit > 0 && now - s.idleSince > waitLimit;
      }
      if (s.input.count() != s.readsAtEnd) {
        if (s.headSince == 0) {
          s.headSince = now;
          return false;
        }
        return waitLimit > 0 && now - s.headSince > waitLimit;
      }
      return idleLimit > 0 && now - s.idleSince > idleLimit;
    }

    /**
     * The limits of {@code x}, a request owed a response (never idle: its body or its handler
     * has a limit of its own), nothing having moved on its connection for {@code quiet} ns.
     * False when it is stuck: neither reading a body nor dispatched past the wait limit.
     */
    boolean owed(Exchange x, long quiet) {
      RequestBody b = x.body();
      if (b != null && b.awaited()) {
        // a body read before an async handler: the gaps between its bytes are bounded by
        // the body timeout, its whole by the handler's, so a trickle cannot last forever
        long since = b.since(now);
        if (bodyLimit > 0 && quiet > bodyLimit || asyncLimit > 0 && now - since > asyncLimit) {
          bodyLate.add(b);
        }
        return true;
      }
      if (x.dispatchedAt() == 0) {
        // neither reading a body nor dispatched: only a kernel bug leaves a request so; it
        // must not hold its connection
        return !(waitLimit > 0 && quiet > waitLimit);
      }
      long limit = x.async() ? asyncLimit : requestLimit;
      if (limit > 0 && now - x.dispatchedAt() > limit) timedOut.add(x);
      return true;
    }
  }

  /** The shorter of two limits in ns, where 0 or less is none. */
  private static long shorter(long a, long b) {
    return a <= 0 ? b : b <= 0 ? a : Math.min(a, b);
  }

  /**
   * How long nothing has moved on the connection: 0 when something moved since the last sweep
   * (or it is the first to look), else the time since the sweep that first saw its current
   * counts. What counts: the request's bytes read and its response's bytes handed to Vert.x
   * ({@code x} null: none in progress), the channel's unflushed bytes, and the progress of the
   * message being written (a file is one message, and Vert.x counts it as written when it
   * hands it over).
   */
  private static long quietFor(State s, Exchange x, long moved, long pending, long progress,
                               long now) {
    if (s.movedAt == 0 || s.watched != x || s.moved != moved || s.pending != pending
        || s.progress != progress) {
      s.watched = x;
      s.moved = moved;
      s.pending = pending;
      s.progress = progress;
      s.movedAt = now;
      return 0;
    }
    return now - s.movedAt;
  }


  /** Closes {@code c} at once, whatever it is doing ({@link VertxInternals#abort}). */
  static void abort(HttpConnection c) {
    VertxInternals.abort(c);
  }

  /** Open connections of the whole server. */
  int openConnections() {
    return count.open();
  }
}
