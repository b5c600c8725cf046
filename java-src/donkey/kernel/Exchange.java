package donkey.kernel;

import clojure.lang.AFn;
import clojure.lang.IFn;
import clojure.lang.IPersistentMap;
import donkey.ring.RequestMap;
import donkey.ring.ResponseMap;
import donkey.ring.ResponseWriter;
import donkey.route.Route;
import donkey.route.Router;
import io.vertx.core.Handler;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.http.HttpVersion;
import java.io.InputStream;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;

/**
 * One request from arrival to the end of its response, as a small state machine: its head is
 * checked ({@link HeadCheck}) and routed, its body read ({@link RequestBody}), its Ring request
 * built and its handler run in the handler's mode, and it is answered exactly once: by the
 * handler's response ({@link ResponseSender}), by its failure, by a timeout, or by the kernel's
 * own answer to bad input ({@link PlainAnswers}); the connection's bookkeeping then runs when
 * the response ends.
 *
 * <p>Threading: created and started on the connection's event loop. A sync handler runs on the
 * worker pool; an async handler runs on the event loop and its {@code respond}/{@code raise}
 * (this object and a {@link Raise}) may be called from any thread, once: the first call wins,
 * later ones are logged and ignored. {@link #answered} is the one field written by several
 * threads (by compare-and-set); the rest is handed between threads by the worker pool, the
 * outbox or Vert.x, each of which publishes it.
 */
final class Exchange extends AFn implements WorkerPool.Queued, Handler<Void> {
  private static final System.Logger LOG = System.getLogger("donkey");
  private static final String ERROR_500 = "Internal Server Error";

  private final ServerVerticle loop;
  private final HttpServerRequest req;
  private final HttpServerResponse resp;
  /** The connection's state (loop-confined); null for a connection the guard does not track. */
  final ConnectionGuard.State connection;
  /**
   * True for a request on an HTTP/2 stream: what would end an HTTP/1.x connection (an answer
   * to bad input, an abort) ends the stream instead, which the connection's other streams do
   * not notice.
   */
  final boolean h2;
  /** HTTP/2, loop-confined: true once the stream's end was counted on its connection. */
  private boolean streamDone;
  /** 1 once the request has been answered (response, failure, timeout or error status). */
  private volatile int answered;
  private static final AtomicIntegerFieldUpdater<Exchange> ANSWERED =
      AtomicIntegerFieldUpdater.newUpdater(Exchange.class, "answered");
  private IPersistentMap request;
  /**
   * The request's headers, scanned once: here when the kernel needs one of them (a body's
   * framing, media-type routing), else null and left to the request map.
   */
  private RequestMap.Head head;
  /** The handler this request runs: the server's, or the matched route's. */
  private IFn handler;
  private boolean async;
  private IPersistentMap pathParams;
  /** The matched route, or null without a route table. */
  private Route route;
  /** The request's body, or null when it has none. */
  private RequestBody body;
  /** Run once when this request is over ({@link RequestScope}); loop-confined, null if none. */
  private ArrayList<Runnable> atEnd;
  /** Set when the {@link #atEnd} actions run: the request is over. Loop-confined. */
  private boolean over;
  /**
   * When the handler was started (System.nanoTime()), for {@code :request-timeout}; 0 before
   * dispatch. A non-blocking handler's request holds {@link ConnectionGuard#UNSTAMPED} until
   * the connection sweep first sees it and stamps its own time (loop-confined, like the sweep).
   */
  long dispatchedAt;
  /** When a worker started this sync exchange (System.nanoTime()), 0 while it is queued. */
  volatile long startedAt;
  /** Set on the loop when {@code :request-timeout} answered this request. */
  private volatile boolean timedOut;
  /** True once {@link #watchEnd} registered this as the response's end handler. */
  private boolean endWatched;
  /** True when the connection closes after this response ({@link #closeAfterResponse}). */
  private volatile boolean closeAfter;
  /**
   * Loop-confined: true while {@link #dispatch} runs this exchange's non-blocking handler. A
   * response the handler gives meanwhile, on the loop, is kept in {@link #given} and written
   * once the handler has returned (see {@link #invoke}).
   */
  private boolean inHandler;
  /** True when {@link #given} holds a response (which may be nil) to write after the handler. */
  private boolean hasGiven;
  private Object given;
  /** The body a worker prepared for {@link #endPrepared} (null for an empty body). */
  private Buffer prepared;
  /** The status a worker prepared for {@link #endPrepared}. */
  private int preparedStatus;

  /** The {@code raise} callback of an async handler (made only for async handlers). */
  private final class Raise extends AFn {
    @Override
    public Object invoke(Object error) {
      Throwable t = error instanceof Throwable ? (Throwable) error
          : new IllegalArgumentException("raise called with " + error);
      if (ANSWERED.compareAndSet(Exchange.this, 0, 1)) {
        fail(t);
      } else {
        late(null, t);
      }
      return null;
    }
  }

  Exchange(ServerVerticle loop, HttpServerRequest req, ConnectionGuard.State connection) {
    this.loop = loop;
    this.req = req;
    this.resp = req.response();
    this.connection = connection;
    this.h2 = req.version() == HttpVersion.HTTP_2;
  }

  ServerVerticle loop() {
    return loop;
  }

  HttpServerRequest request() {
    return req;
  }

  HttpServerResponse response() {
    return resp;
  }

  /** The connection this request came on. */
  HttpConnection connection() {
    return req.connection();
  }

  /** Any thread: claims the answer; false when the request was already answered. */
  boolean claim() {
    return ANSWERED.compareAndSet(this, 0, 1);
  }

  /** True once the request has been answered. */
  boolean answered() {
    return answered != 0;
  }

  /** True while the handler has not answered. */
  boolean unanswered() {
    return answered == 0;
  }

  /** True when this request's handler is an async (non-blocking) one. */
  boolean async() {
    return async;
  }

  /**
   * Has Vert.x call {@link #handle} when the response ends, for a response not ended by
   * {@link #endedOnLoop}'s callers: one taken lock per call (Vert.x's setter synchronizes on
   * the connection), so the common fixed response ended on the loop does without. Called by
   * the thread that will end the response, before it does; the response is not written yet.
   */
  void watchEnd() {
    if (!endWatched) {
      endWatched = true;
      resp.endHandler(this);
    }
  }

  /**
   * Event loop, right after this loop ended the response itself: the bookkeeping of
   * {@link #handle}, unless Vert.x has just done it ({@link #watchEnd}). Vert.x calls an end
   * handler at the same point, after the write (and after it started the next pipelined
   * request), so the order is the one an end handler would see.
   */
  void endedOnLoop() {
    if (!endWatched) handle(null);
  }

  /**
   * The response has ended (Vert.x's end handler). Vert.x calls it on the thread that ended the
   * response, which is a worker for streamed bodies and files; the connection's state is
   * loop-confined, so the bookkeeping runs on the loop.
   */
  @Override
  public void handle(Void ended) {
    if (Thread.currentThread() != loop.thread) {
      onLoop(() -> handle(null));
      return;
    }
    if (h2) {
      if (streamDone) return;
      streamDone = true;
    }
    if (connection != null) ConnectionGuard.responseEnded(connection, this);
    RequestBody b = body;
    if (b != null) b.discardRest();
    runAtEnd();
    if (closeAfter) req.connection().close();
  }

  /**
   * Event loop: the connection closed while this request was in progress: nothing more can be
   * sent for it.
   */
  void connectionClosed() {
    runAtEnd();
  }

  /**
   * Event loop: this request's HTTP/2 stream has closed: after its response ended, or reset
   * by either side before that, when its end is counted here. (Vert.x calls the response's
   * close handler on the loop.)
   */
  private void streamClosed() {
    if (!streamDone) handle(null);
  }

  /**
   * Event loop: has {@code action} run once this request is over ({@link RequestScope}); at
   * once when it is over already.
   */
  void atEnd(Runnable action) {
    if (over) {
      runAction(action);
      return;
    }
    if (atEnd == null) atEnd = new ArrayList<>(2);
    atEnd.add(action);
  }

  /**
   * Event loop: has {@code action} run on a pool worker once this request is over (on the
   * loop when the pool has stopped); at once when it is over already.
   */
  void atEndOnWorker(Runnable action) {
    atEnd(() -> {
      try {
        loop.workers.execute(action);
      } catch (java.util.concurrent.RejectedExecutionException stopped) {
        action.run();
      }
    });
  }

  /** Event loop: true once the response has ended or the connection closed. */
  boolean over() {
    return over;
  }

  private void runAtEnd() {
    over = true;
    ArrayList<Runnable> actions = atEnd;
    if (actions == null) return;
    atEnd = null;
    for (Runnable r : actions) runAction(r);
  }

  private void runAction(Runnable r) {
    try {
      r.run();
    } catch (Throwable t) {
      LOG.log(Level.ERROR, "an action at the end of " + where() + " failed", t);
    }
  }

  /**
   * Event loop, while this request's non-blocking handler runs: runs {@code blocking} on a
   * pool worker, then {@code then} back on the loop as part of this request's handler (so
   * {@link RequestScope} works there, and what it throws is raised). When {@code blocking}
   * throws, {@code then} is skipped and the throwable raised.
   *
   * @throws java.util.concurrent.RejectedExecutionException when the pool has stopped
   */
  void offload(Runnable blocking, Runnable then) {
    loop.workers.execute(() -> {
      Throwable failed = null;
      try {
        blocking.run();
      } catch (Throwable t) {
        failed = t;
      }
      Throwable f = failed;
      onLoop(() -> resume(f == null ? then : null, f));
    });
  }

  private void resume(Runnable then, Throwable failed) {
    loop.running(this);
    try {
      if (failed != null) throw failed;
      then.run();
    } catch (Throwable t) {
      new Raise().invoke(t);
    } finally {
      loop.running(null);
    }
  }

  /**
   * Event loop: checks the head ({@link HeadCheck}), routes, reads the body when there is one,
   * then dispatches.
   */
  void start() {
    ServerConfig cfg = loop.config;
    // watched by the idle check from here (its body may be read before dispatch); the request
    // timeout only counts from dispatch (dispatchedAt)
    if (connection != null) {
      if (h2) {
        ConnectionGuard.streamStarted(connection, this);
        resp.closeHandler(v -> streamClosed());
        hostFromAuthority();
      } else {
        connection.current = this;
      }
    }
    HeadCheck check = loop.headCheck;
    String bad;
    try {
      bad = check.check(req);
    } catch (RuntimeException e) {
      LOG.log(Level.ERROR, "the head of " + where() + " could not be checked", e);
      bad = "Bad Request: malformed request";
    }
    if (bad != null) {
      answered = 1;
      closeWith(check.status, bad);
      return;
    }
    // the client's last request (RFC 9112 9.6): no request read behind it is served, and the
    // connection closes after its answer, which says so
    if (check.close) closeAfterResponse();
    try {
      begin(cfg, check);
    } catch (RuntimeException e) {
      // a bug of the kernel's, on input it should have refused: the request still gets an
      // answer, and the connection no further requests
      LOG.log(Level.ERROR, "the request " + where() + " failed before its handler ran", e);
      if (claim()) closeWith(500, ERROR_500);
    }
  }

  /** Event loop: the rest of {@link #start}: routing, the body, the dispatch. */
  private void begin(ServerConfig cfg, HeadCheck check) {
    // A request without framing headers has no body, and needs no other header of the kernel
    // unless the routes negotiate media types: its headers are scanned only if the handler
    // reads :headers (LazyRequestMap). Otherwise the one pass picks up every value needed,
    // with repeated headers joined.
    String cl = check.contentLength;
    String te = check.transferEncoding;
    // an HTTP/2 body needs no length: its stream's end delimits it (RFC 9113 8.1)
    boolean unframed = h2 && cl == null && te == null && !streamEnded();
    if (unframed || cl != null || te != null
        || cfg.router != null && cfg.router.needsMediaTypes()) {
      head = RequestMap.scan(req.headers());
      cl = head.contentLength;
      te = head.transferEncoding;
    }
    long length = unframed ? RequestBody.CHUNKED : RequestBody.length(cl, te);
    if (length == RequestBody.REFUSED) {
      answered = 1;
      closeWith(400, te != null ? "Bad Request: unsupported or ambiguous Transfer-Encoding"
          : "Bad Request: invalid Content-Length");
      return;
    }
    if (!route(cfg, length != 0)) return;
    if (length == 0) {
      dispatch(null);
      return;
    }
    // (HTTP/1.0 has no interim answers: RFC 9110 10.1.1 says to ignore the expectation)
    body = RequestBody.read(this, req, length, async,
        head.expect != null && req.version() != HttpVersion.HTTP_1_0
            && "100-continue".equalsIgnoreCase(head.expect.trim()), cfg);
  }

  /**
   * Any thread: this request's answer is the connection's last (the client or the handler
   * said {@code Connection: close}): requests read behind it are not served (a task on the
   * loop, queued before the response's end is), the answer says close, and the connection is
   * closed once it has been sent.
   */
  void closeAfterResponse() {
    // (an HTTP/2 connection is the client's to end; a handler's Connection header is dropped)
    if (closeAfter || h2) return;
    closeAfter = true;
    onLoop(() -> {
      if (connection != null) connection.closing = true;
    });
    if (!resp.headWritten()) {
      resp.headersEndHandler(v -> resp.headers().set(HttpHeaders.CONNECTION, HttpHeaders.CLOSE));
    }
  }

  /** True while the body is read before the (async) handler runs: not dispatched yet. */
  boolean awaitsBody() {
    RequestBody b = body;
    return b != null && b.awaited();
  }

  /**
   * Event loop (the connection sweep): when the body read before an async handler began to be
   * read ({@code now} at the sweep's first look).
   */
  long bodySince(long now) {
    RequestBody b = body;
    return b == null ? now : b.since(now);
  }

  /**
   * Event loop (the connection sweep): the body read before an async handler stopped arriving
   * for {@code :body-timeout}, or did not arrive whole within the handler's timeout; answers
   * 408.
   */
  void bodyTimedOut() {
    RequestBody b = body;
    if (b != null) b.timedOut();
  }

  /** Event loop: true once the whole request, body included, has arrived. */
  boolean requestEnded() {
    return req.isEnded();
  }

  /**
   * Event loop: picks the handler. With a route table, a request no route takes is answered
   * here (404, 405 with Allow, 406, 415, 400 for a bad path parameter) before its body is read.
   *
   * @return false when the request has been answered
   */
  private boolean route(ServerConfig cfg, boolean hasBody) {
    if (cfg.router == null) {
      handler = cfg.handler;
      async = cfg.async;
      return true;
    }
    RequestMap.Head h = head; // null unless the routes negotiate media types (see start)
    Router.Match m = cfg.router.match(req.method().name(), req.path(),
        h == null ? null : h.contentType, h == null ? null : h.accept);
    if (m.status == 0) {
      route = m.route;
      handler = m.route.handler();
      async = m.route.mode() == Route.Mode.NON_BLOCKING;
      pathParams = m.pathParams;
      return true;
    }
    if (m.status == 404 && cfg.notFound != null) {
      handler = cfg.notFound;
      async = false;
      return true;
    }
    answered = 1;
    if (m.allow != null) resp.putHeader(HttpHeaders.ALLOW, m.allow);
    if (hasBody) {
      closeWith(m.status, m.message);
    } else {
      plain(m.status, m.message);
    }
    return false;
  }

  /** Event loop: builds the Ring request and runs the handler in its mode. */
  void dispatch(InputStream in) {
    ServerConfig cfg = loop.config;
    // the connection's addresses (whether it is TLS, its client certificate) are taken
    // once, at accept: per request they would be a look-up each, behind a branch that new
    // connections take
    ConnectionGuard.State c = connection;
    request = c != null
        ? RequestMap.build(req, head, in, cfg.trustForwardedFor, pathParams, c.remoteAddress,
            c.localAddress, c.ssl, c.clientCert)
        : RequestMap.build(req, head, in, cfg.trustForwardedFor, pathParams, null);
    if (async) {
      // no clock read on the event loop's request path: the connection sweep stamps the time
      // when it first sees this request (ConnectionGuard.UNSTAMPED), and the watchdog times
      // the loop itself
      dispatchedAt = ConnectionGuard.UNSTAMPED;
      loop.running(this);
      IFn raise = new Raise();
      inHandler = true;
      try {
        handler.invoke(request, this, raise);
      } catch (Throwable t) {
        raise.invoke(t);
      } finally {
        inHandler = false;
        loop.running(null);
      }
      if (hasGiven) {
        Object r = given;
        given = null;
        hasGiven = false;
        ResponseSender.send(this, r);
      }
    } else {
      // exact: the worker pool's stall detection and the outbox's holds work in milliseconds
      dispatchedAt = System.nanoTime();
      loop.handOff(this);
    }
  }

  /**
   * Event loop: queues this sync exchange for the workers (503 when they refuse it: stopped,
   * or {@code :max-queued-requests} already wait); the loop wakes a worker once its whole batch
   * is queued ({@link WorkerPool#signal}).
   */
  void submit() {
    try {
      loop.workers.enqueueBounded(this);
    } catch (RejectedExecutionException e) {
      if (ANSWERED.compareAndSet(this, 0, 1)) {
        closeWith(503, "Service Unavailable");
      }
    }
  }

  /** When this sync exchange was handed to the workers (its dispatch time). */
  @Override
  public long queuedAt() {
    return dispatchedAt;
  }

  @Override
  public void started(long at) {
    startedAt = at;
  }

  /**
   * Worker thread: runs a sync handler, unless the request timed out (503) while it waited for
   * a worker. (A request answered early for its body, 413 or 400, still runs its handler, whose
   * body reads fail: the handler starts with the head.)
   */
  @Override
  public void run() {
    if (timedOut) return;
    Object response = null;
    Throwable error = null;
    try {
      response = handler.invoke(request);
    } catch (Throwable t) {
      error = t;
    }
    if (!ANSWERED.compareAndSet(this, 0, 1)) {
      late(response, error);
      return;
    }
    if (error != null) {
      fail(error);
    } else {
      ResponseSender.send(this, response);
    }
  }

  /**
   * The {@code respond} callback of an async handler. Called on the loop while the handler
   * runs (the common case), it only keeps the response: {@link #dispatch} writes it when the
   * handler returns. Vert.x starts the next pipelined request from the end of this response's
   * write, so writing it inside the handler would run that request's handler inside this one,
   * which would then carry on with another request marked running ({@link RequestScope}, the
   * watchdog). The bytes go out no later: Vert.x flushes the loop's writes after it has read
   * what was ready. From any other thread, or later on the loop, the response is written at
   * once.
   */
  @Override
  public Object invoke(Object response) {
    if (ANSWERED.compareAndSet(this, 0, 1)) {
      if (Thread.currentThread() == loop.thread && inHandler) {
        given = response;
        hasGiven = true;
      } else {
        ResponseSender.send(this, response);
      }
    } else {
      late(response, null);
    }
    return null;
  }

  /** Event loop: request body bytes read plus response bytes written so far. */
  long bytesMoved() {
    return req.bytesRead() + resp.bytesWritten();
  }

  /** True while a worker runs this request's sync handler (its answer is not in yet). */
  boolean onWorker() {
    return !async && answered == 0 && dispatchedAt != 0;
  }

  /**
   * Event loop (the connection sweep): the handler did not answer within
   * {@code :request-timeout} (or the async timeout); answers 503, or with what the
   * {@code :async-timeout-handler} answers for an async handler. The handler's thread is not
   * interrupted; whatever it answers later is dropped and logged.
   */
  void timedOut() {
    if (!ANSWERED.compareAndSet(this, 0, 1)) return;
    timedOut = true;
    ServerConfig cfg = loop.config;
    IFn onTimeout = async ? cfg.asyncTimeoutHandler : null;
    LOG.log(Level.WARNING, "the handler for {0} did not respond within {1} ms; {2}", where(),
        async ? cfg.asyncTimeoutMs() : cfg.requestTimeoutMs,
        onTimeout != null ? "calling the :async-timeout-handler" : "answered 503");
    if (resp.headWritten()) {
      abort();
    } else if (onTimeout != null) {
      TimeoutAnswer answer = new TimeoutAnswer(this);
      try {
        onTimeout.invoke(request, answer, answer.raise);
      } catch (Throwable t) {
        answer.raise.invoke(t);
      }
    } else if (req.isEnded()) {
      ResponseWriter.clearHeaders(resp);
      plain(503, "Service Unavailable: the request timed out");
    } else {
      closeWith(503, "Service Unavailable: the request timed out");
    }
  }

  /** Any thread: a response or failure that came after the request was already answered. */
  void late(Object response, Throwable error) {
    if (error != null) {
      LOG.log(Level.WARNING, "the handler for " + where() + " failed after the request had been "
          + "answered (timeout, body error or an earlier respond/raise)", error);
    } else {
      LOG.log(Level.WARNING, "a response for {0} came after the request had been answered "
          + "(timeout, body error or an earlier respond/raise); dropped", where());
    }
    ResponseMap.discard(response);
  }


  /** Worker thread: keeps what {@link ResponseSender} prepared for {@link #endPrepared}. */
  void prepared(Buffer body, int status) {
    prepared = body;
    preparedStatus = status;
  }

  /** Event loop (an {@link Outbox} drain): ends the response a worker prepared. */
  void endPrepared() {
    Buffer b = prepared;
    prepared = null;
    ResponseSender.endPrepared(this, b, preparedStatus);
  }

  /**
   * Any thread: logs a handler failure once and, if nothing was sent yet, answers with the
   * configured error handler's response, or a plain 500 when there is none (or it fails too).
   */
  void fail(Throwable t) {
    LOG.log(Level.ERROR, "handler failed for " + where(), t);
    onLoop(() -> {
      if (resp.closed() || resp.ended()) return;
      if (resp.headWritten()) {
        abort();
        return;
      }
      watchEnd();
      ResponseWriter.clearHeaders(resp);
      if (!ResponseSender.sendError(this, loop.config.errorHandler, request, t)) {
        ResponseWriter.clearHeaders(resp);
        plain(500, ERROR_500);
      }
    });
  }

  /**
   * Event loop: answers {@code status} with a short text body and closes the connection;
   * requests already read behind this one are dropped (ServerVerticle skips a closing
   * connection's requests).
   */
  void closeWith(int status, String message) {
    if (connection != null && !h2) connection.closing = true;
    if (resp.closed() || resp.ended()) {
      closeConnection();
      return;
    }
    watchEnd();
    String allow = resp.headers().get(HttpHeaders.ALLOW);
    ResponseWriter.clearHeaders(resp);
    if (allow != null) resp.putHeader(HttpHeaders.ALLOW, allow);
    loop.answers.end(resp, status, message, !h2).onComplete(v -> closeConnection());
  }

  /**
   * Event loop: gives an HTTP/2 request without a Host field the one its {@code :authority}
   * names, as a gateway to HTTP/1.1 would (RFC 9113 8.3.1): Ring handlers and middleware read
   * the host from {@code :headers}. (Vert.x has checked that a Host sent beside an
   * {@code :authority} names the same host and port.)
   */
  private void hostFromAuthority() {
    io.vertx.core.net.HostAndPort a = req.authority();
    if (a != null && !req.headers().contains(HttpHeaders.HOST)) {
      req.headers().set(HttpHeaders.HOST, a.toString());
    }
  }

  /** Event loop: whether the client has sent all of this HTTP/2 request. */
  private boolean streamEnded() {
    ConnectionGuard.State c = connection;
    return c != null && c.h2 != null ? VertxInternals.remoteEnded(c.h2, (int) req.streamId())
        : req.isEnded();
  }

  /**
   * Any thread, after this request's last answer: an HTTP/1.x connection is closed once what
   * was written has gone out; an HTTP/2 stream whose request is still arriving is reset with
   * NO_ERROR, which asks the client to stop sending it (RFC 9113 8.1).
   */
  void closeConnection() {
    if (!h2) {
      req.connection().close();
    } else if (!req.isEnded()) {
      resp.reset(0);
    }
  }

  /**
   * Any thread: stops this request at once, what was sent of its response being lost: an
   * HTTP/1.x connection is closed without flushing, an HTTP/2 stream reset (INTERNAL_ERROR).
   */
  void abort() {
    if (h2) {
      resp.reset(2);
    } else {
      ConnectionGuard.abort(req.connection());
    }
  }

  /**
   * Event loop: answers a WebSocket handshake the kernel refuses ({@link WebSocketUpgrade}) with
   * {@code status} and a short text body; the connection stays.
   *
   * @param version true to name the WebSocket version the server speaks (a 426)
   */
  void refuseUpgrade(int status, String message, boolean version) {
    if (resp.closed() || resp.ended()) return;
    ResponseWriter.clearHeaders(resp);
    if (version) resp.putHeader("sec-websocket-version", "13");
    plain(status, message);
  }

  /** Event loop: true when the connection has closed (or this request's response ended). */
  boolean gone() {
    ConnectionGuard.State c = connection;
    return c != null ? c.closed : resp.closed();
  }

  /** True when the request has a body (read, or being read). */
  boolean hasBody() {
    return body != null;
  }

  /**
   * Event loop: the connection has become a WebSocket: this request is over (its
   * {@link RequestScope} actions run) without an HTTP response end.
   */
  void upgraded() {
    if (connection != null && connection.current == this) connection.current = null;
    runAtEnd();
  }

  /** Event loop: answers {@code status} with a short text body; the connection stays. */
  void answerKeepingConnection(int status, String message) {
    if (resp.closed() || resp.ended()) return;
    ResponseWriter.clearHeaders(resp);
    plain(status, message);
  }

  private void plain(int status, String message) {
    watchEnd();
    loop.answers.end(resp, status, message, false);
  }

  /**
   * Runs {@code r} on this request's event loop: now when already there, else as a task. When
   * the loop has already shut down (a handler finishing after {@code stop} gave up on it), the
   * connection is gone and there is nothing left to write: the task is dropped and logged.
   */
  void onLoop(Runnable r) {
    // Not Vertx.currentContext(): Vert.x 5 runs request handlers on a duplicate of the loop's
    // context, so comparing contexts would always hop, and a hop costs a flush per response.
    if (Thread.currentThread() == loop.thread) {
      r.run();
      return;
    }
    try {
      loop.eventLoop.runOnContext(v -> r.run());
    } catch (RejectedExecutionException e) {
      LOG.log(Level.DEBUG, "server stopped before the response to {0} could be written", where());
    }
  }

  /** What runs this request, for log lines: the route, or the server's handler. */
  String handlerName() {
    return route != null ? "route " + route : "the server's handler";
  }

  /** {@code GET /path}, for log lines. */
  String where() {
    return req.method().name() + " " + req.path();
  }
}
