package donkey.kernel;

import clojure.lang.AFn;
import clojure.lang.IFn;
import clojure.lang.IPersistentMap;
import donkey.kernel.config.ServerConfig;
import donkey.kernel.workers.WorkerPool;
import donkey.ring.RequestMap;
import donkey.ring.ResponseMap;
import donkey.route.Route;
import io.vertx.core.Handler;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerRequest;
import java.io.InputStream;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;

/**
 * One request from arrival to the end of its response, as a small state machine: admitted
 * ({@link Admission}: its head checked, routed, its body read), its Ring request built and its
 * handler run in the handler's mode, and it is answered exactly once: by the handler's
 * response ({@link ResponseSender}), by its failure or the kernel's own answer to bad input
 * ({@link ErrorAnswers}), or by a timeout ({@link ErrorAnswers#answerTimeout}); the
 * connection's bookkeeping then runs when the response ends, with the actions registered to
 * run when the request is over ({@link #atEnd}).
 *
 * <p>The classes named above are this object's layers, one concern to a file; this class,
 * the last, owns the answered-once state. Every transition that answers is a method here that
 * claims the request first ({@link #claim}, private), so a second answer is dropped and logged
 * ({@link #late}); the layers below write an answer only once it is claimed.
 *
 * <p>Past 400 lines because the sync, async and timeout paths all turn on the answered-once
 * fields here.
 *
 * <p>Threading: created and started on the connection's event loop. A sync handler runs on the
 * worker pool; an async handler runs on the event loop and its {@code respond}/{@code raise}
 * (this object and a {@link Raise}) may be called from any thread, once: the first call wins,
 * later ones are logged and ignored. {@link #answered} is the one field written by several
 * threads (by compare-and-set); the rest is handed between threads by the worker pool, the
 * outbox or Vert.x, each of which publishes it.
 */
final class Exchange extends Admission implements WorkerPool.Queued, Handler<Void> {
  private static final System.Logger LOG = System.getLogger("donkey");

  /** HTTP/2, loop-confined: true once the stream's end was counted on its connection. */
  private boolean streamDone;
  /** 1 once the request has been answered (response, failure, timeout or error status). */
  private volatile int answered;
  private static final AtomicIntegerFieldUpdater<Exchange> ANSWERED =
      AtomicIntegerFieldUpdater.newUpdater(Exchange.class, "answered");
  /** The Ring request, built at dispatch; null before. */
  private IPersistentMap request;
  /** Run once when this request is over ({@link #atEnd}); loop-confined, null if none. */
  private ArrayList<Runnable> atEnd;
  /** Set when the {@link #atEnd} actions run: the request is over. Loop-confined. */
  private boolean over;
  /**
   * When the handler was started (System.nanoTime()), for {@code :request-timeout}; 0 before
   * dispatch. A non-blocking handler's request holds {@link ConnectionGuard#UNSTAMPED} until
   * the connection sweep first sees it and stamps its own time (loop-confined, like the sweep).
   */
  private long dispatchedAt;
  /** When a worker started this sync exchange (System.nanoTime()), 0 while it is queued. */
  private volatile long startedAt;
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
  /** The next prepared response of this connection in an {@link Outbox} drain. */
  private Exchange nextPrepared;
  /**
   * With an access log or metrics: when the request arrived (System.nanoTime(), and epoch ms
   * for the access log).
   */
  private long logStart;
  private long logStartMillis;
  /** Loop-confined: true once the access log and the metrics have this request. */
  private boolean logged;

  /** The {@code raise} callback of an async handler (made only for async handlers). */
  private final class Raise extends AFn {
    @Override
    public Object invoke(Object error) {
      raise(error instanceof Throwable ? (Throwable) error
          : new IllegalArgumentException("raise called with " + error));
      return null;
    }
  }

  Exchange(ServerVerticle loop, HttpServerRequest req, ConnectionGuard.State connection) {
    super(loop, req, connection);
    if (loop.observed) {
      logStart = System.nanoTime();
      if (loop.accessLog != null) logStartMillis = System.currentTimeMillis();
      if (loop.metrics != null) loop.metrics.requestStarted();
    }
  }

  /**
   * Event loop, once, when the request is over (its response ended, its connection closed
   * first, or it became a WebSocket): its line in the access log, and its end in the metrics.
   *
   * @param answered false when the connection closed before the answer ended
   */
  private void observeEnd(int status, boolean answered) {
    if (logged) return;
    logged = true;
    long took = System.nanoTime() - logStart;
    Route r = route();
    if (loop.accessLog != null) {
      ConnectionGuard.State c = connection;
      loop.accessLog.record(logStartMillis, c != null ? c.remoteAddress : null,
          req.method().name(), req.uri(), RequestMap.protocol(req.version()),
          status, resp.bytesWritten(), took, r != null ? r.describe() : null);
    }
    if (loop.metrics != null) {
      loop.metrics.requestEnded(r, req.method().name(), answered ? status : 0, took);
    }
  }

  /**
   * Event loop: the request became a WebSocket (its 101 is being written): it is over without
   * an HTTP response end.
   */
  void becameWebSocket() {
    if (loop.observed) observeEnd(101, true);
    over();
  }

  /**
   * Any thread: claims the answer; false when the request was already answered. Only this
   * class claims: every transition that answers is a method here.
   */
  private boolean claim() {
    return ANSWERED.compareAndSet(this, 0, 1);
  }

  /**
   * Any thread: claims the answer, then sends {@code status} with {@code reason} as a short
   * text body (on the loop) and closes the connection after it (the stream alone on HTTP/2);
   * nothing when the request has been answered already.
   *
   * @return true when this call answered
   */
  @Override
  boolean refuse(int status, String reason) {
    if (!claim()) return false;
    onLoop(() -> closeWith(status, reason));
    return true;
  }

  /**
   * Event loop: claims the answer, then sends {@code status} with {@code reason} as a short
   * text body, with an {@code Allow} header when {@code allow} is not null; the connection is
   * closed after it when {@code close} (a body that would follow is not read), else kept.
   *
   * @return true when this call answered
   */
  @Override
  boolean refuse(int status, String reason, String allow, boolean close) {
    if (!claim()) return false;
    if (allow != null) resp.putHeader(HttpHeaders.ALLOW, allow);
    if (close) {
      closeWith(status, reason);
    } else {
      plain(status, reason);
    }
    return true;
  }

  /**
   * Any thread: the request's body could not be read (bad chunk framing, a vanished client):
   * claims the answer and, on HTTP/1.x, answers 400 and closes the connection. An HTTP/2
   * stream whose body fails is being reset (by its client, or with the protocol error's
   * code): nothing is sent, since an answer would replace that code with NO_ERROR.
   *
   * @return true when this call claimed the answer
   */
  @Override
  boolean bodyBroke() {
    if (!claim()) return false;
    if (!h2) onLoop(() -> closeWith(400, "Bad Request: malformed request body"));
    return true;
  }

  /**
   * Any thread: claims the answer, then runs {@code answer} on the loop to write it, for an
   * answer whose writing belongs to another class (a refused body that is drained first).
   *
   * @return true when this call claimed the answer; false, and {@code answer} not run, when
   *     the request was answered already
   */
  @Override
  boolean answerWith(Runnable answer) {
    if (!claim()) return false;
    onLoop(answer);
    return true;
  }

  /** True once the request has been answered. */
  @Override
  boolean answered() {
    return answered != 0;
  }

  /** True while the handler has not answered. */
  boolean unanswered() {
    return answered == 0;
  }

  /** The Ring request, or null before dispatch. */
  @Override
  IPersistentMap ringRequest() {
    return request;
  }

  /** When the handler was started ({@link #dispatchedAt}); 0 before dispatch. */
  long dispatchedAt() {
    return dispatchedAt;
  }

  /**
   * Event loop (the connection sweep): a non-blocking handler's start not timed yet
   * ({@link ConnectionGuard#UNSTAMPED}) takes {@code now}, the sweep's time.
   */
  void stamp(long now) {
    if (dispatchedAt == ConnectionGuard.UNSTAMPED) dispatchedAt = now;
  }

  /** When a worker started this sync exchange (System.nanoTime()), 0 while it is queued. */
  long startedAt() {
    return startedAt;
  }

  /** Event loop, an {@link Outbox} drain: links {@code next} behind this prepared response. */
  void linkPrepared(Exchange next) {
    nextPrepared = next;
  }

  /** Event loop, an {@link Outbox} drain: the next prepared response, unlinked. */
  Exchange unlinkNext() {
    Exchange n = nextPrepared;
    nextPrepared = null;
    return n;
  }

  /**
   * Event loop: has {@code action} run once this request is over (its response ended, its
   * connection closed, or it became a WebSocket); at once when it is already. An action that
   * throws is logged.
   */
  @Override
  void atEnd(Runnable action) {
    if (over) {
      runAction(action);
      return;
    }
    if (atEnd == null) atEnd = new ArrayList<>(2);
    atEnd.add(action);
  }

  /** Event loop: true once this request is over ({@link #atEnd}). */
  boolean isOver() {
    return over;
  }

  /** Event loop: this request is over: its {@link #atEnd} actions run, once. */
  void over() {
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
   * Has Vert.x call {@link #handle} when the response ends, for a response not ended by
   * {@link #endedOnLoop}'s callers: one taken lock per call (Vert.x's setter synchronizes on
   * the connection), so the common fixed response ended on the loop does without. Called by
   * the thread that will end the response, before it does; the response is not written yet.
   */
  @Override
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
  @Override
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
    if (connection != null) connection.responseEnded(this);
    RequestBody b = body();
    if (b != null) b.discardRest();
    // (an HTTP/1.x response has ended here; an HTTP/2 stream's close handler also runs when
    // the stream is reset unanswered, and only then is ended() asked: it takes a lock)
    if (loop.observed) observeEnd(resp.getStatusCode(), !h2 || resp.ended());
    over();
    if (closeAfter) req.connection().close();
  }

  /**
   * Event loop: the connection closed while this request was in progress: nothing more can be
   * sent for it.
   */
  void connectionClosed() {
    if (loop.observed) observeEnd(resp.getStatusCode(), resp.ended());
    over();
  }

  /**
   * Any thread: this request's answer is the connection's last (the client or the handler
   * said {@code Connection: close}): requests read behind it are not served (a task on the
   * loop, queued before the response's end is), the answer says close, and the connection is
   * closed once it has been sent.
   */
  @Override
  public void closeAfterResponse() {
    // (an HTTP/2 connection is the client's to end; a handler's Connection header is dropped)
    if (closeAfter || h2) return;
    closeAfter = true;
    onLoop(() -> {
      if (connection != null) connection.closeAfterAnswer();
    });
    if (!resp.headWritten()) {
      resp.headersEndHandler(v -> resp.headers().set(HttpHeaders.CONNECTION, HttpHeaders.CLOSE));
    }
  }

  /** Event loop: true once the whole request, body included, has arrived. */
  boolean requestEnded() {
    return req.isEnded();
  }

  /** Event loop: builds the Ring request and runs the handler in its mode. */
  @Override
  void dispatch(InputStream in) {
    ServerConfig cfg = loop.config;
    RequestMap.Head head = head();
    IPersistentMap pathParams = pathParams();
    // the connection's addresses (whether it is TLS, its client certificate) are taken
    // once, at accept: per request they would be a look-up each, behind a branch that new
    // connections take
    ConnectionGuard.State c = connection;
    if (c != null && c.proxied) {
      request = RequestMap.buildForwarded(req, head, in, pathParams,
          loop.proxies.resolve(req.headers(), c.remoteAddress), c.localAddress, c.ssl,
          c.clientCert);
    } else {
      request = c != null
          ? RequestMap.build(req, head, in, cfg.trustForwardedFor, pathParams, c.remoteAddress,
              c.localAddress, c.ssl, c.clientCert, path(), query())
          : RequestMap.build(req, head, in, cfg.trustForwardedFor, pathParams, null);
    }
    if (async()) {
      // no clock read on the event loop's request path: the connection sweep stamps the time
      // when it first sees this request (ConnectionGuard.UNSTAMPED), and the watchdog times
      // the loop itself
      dispatchedAt = ConnectionGuard.UNSTAMPED;
      loop.running(this);
      IFn raise = new Raise();
      inHandler = true;
      try {
        handler().invoke(request, this, raise);
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
        send(r);
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
      refuse(503, "Service Unavailable");
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
      response = handler().invoke(request);
    } catch (Throwable t) {
      error = t;
    }
    if (!claim()) {
      late(response, error);
      return;
    }
    if (error != null) {
      fail(error);
    } else {
      send(response);
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
    if (claim()) {
      if (Thread.currentThread() == loop.thread && inHandler) {
        given = response;
        hasGiven = true;
      } else {
        send(response);
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
    return !async() && answered == 0 && dispatchedAt != 0;
  }

  /**
   * Event loop (the connection sweep): the handler did not answer within
   * {@code :request-timeout} (or the async timeout); the timeout answers
   * ({@link #answerTimeout}) unless the request was answered meanwhile.
   */
  void timedOut() {
    if (!claim()) return;
    timedOut = true;
    answerTimeout();
  }

  /**
   * Any thread: what the handler's {@code raise} does: answers with the failure
   * ({@link #fail}), or logs it when the request was already answered.
   */
  void raise(Throwable t) {
    if (claim()) {
      fail(t);
    } else {
      late(null, t);
    }
  }

  /** Any thread: a response or failure that came after the request was already answered. */
  @Override
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

  /** Event loop: true when the connection has closed (or this request's response ended). */
  boolean gone() {
    ConnectionGuard.State c = connection;
    return c != null ? c.closed : resp.closed();
  }

  /** What runs this request, for log lines: the route, or the server's handler. */
  String handlerName() {
    Route r = route();
    return r != null ? "route " + r : "the server's handler";
  }

  @Override
  Exchange self() {
    return this;
  }

  /**
   * Event loop: runs {@code then} as more of this request's non-blocking handler (a
   * {@link RequestScope#offload} continuation), marked running as the handler was, so what it
   * throws is raised; when the blocking part threw ({@code failed}), {@code then} is skipped
   * and the throwable raised.
   */
  void resume(Runnable then, Throwable failed) {
    loop.running(this);
    try {
      if (failed != null) throw failed;
      then.run();
    } catch (Throwable t) {
      raise(t);
    } finally {
      loop.running(null);
    }
  }
}
