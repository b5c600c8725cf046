package donkey.kernel;

import clojure.lang.AFn;
import clojure.lang.IFn;
import clojure.lang.IPersistentMap;
import donkey.ring.BodyBuffer;
import donkey.ring.BodyInputStream;
import donkey.ring.Framing;
import donkey.ring.RequestMap;
import donkey.ring.ResponseChannel;
import donkey.ring.ResponseOutputStream;
import donkey.ring.ResponseWriter;
import donkey.ring.StreamingBody;
import donkey.route.Route;
import donkey.route.Router;
import io.vertx.core.Context;
import io.vertx.core.Handler;
import io.vertx.core.MultiMap;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.http.HttpVersion;
import java.io.IOException;
import java.io.InputStream;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;

/**
 * One request from arrival to the end of its response: reads the body, builds the Ring request,
 * runs the handler in its mode, and writes what it answered (or the error it caused).
 *
 * <p>Threading: created and started on the connection's event loop. A sync handler runs on the
 * worker pool; an async handler runs on the event loop and its {@code respond}/{@code raise}
 * (this object and a {@link Raise}) may be called from any thread, once: the first call wins,
 * later ones are logged and ignored. A fixed body a pool worker answered is prepared on the
 * worker and ended on the loop through its {@link Outbox}; other fixed bodies and files are
 * written from the thread that answered (Vert.x queues writes from other threads onto the
 * loop); streamed bodies from a worker thread; channel bodies are opened on the event loop.
 */
final class Exchange extends AFn implements WorkerPool.Queued, Handler<Void> {
  private static final System.Logger LOG = System.getLogger("donkey");
  private static final String ERROR_500 = "Internal Server Error";
  /** Body bytes read and dropped after an early error answer before the connection is closed. */
  private static final long DRAIN_LIMIT = 4L * 1024 * 1024;

  private final ServerVerticle loop;
  private final HttpServerRequest req;
  private final HttpServerResponse resp;
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
  /** An async handler's body while it arrives, read before the handler runs; else null. */
  private BodyBuffer body;
  private boolean rejected;
  /** Run once when this request is over ({@link RequestScope}); loop-confined, null if none. */
  private ArrayList<Runnable> atEnd;
  private final ConnectionGuard.State connection;
  /** The streamed body of a blocking handler's request, or null. */
  private BodyInputStream bodyStream;
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
  }

  /**
   * Has Vert.x call {@link #handle} when the response ends, for a response not ended by
   * {@link #endedOnLoop}'s callers: one taken lock per call (Vert.x's setter synchronizes on
   * the connection), so the common fixed response ended on the loop does without. Called by
   * the thread that will end the response, before it does; the response is not written yet.
   */
  private void watchEnd() {
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
  private void endedOnLoop() {
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
    if (connection != null) ConnectionGuard.responseEnded(connection, this);
    BodyInputStream in = bodyStream;
    if (in != null) in.discardRest();
    runAtEnd();
  }

  /**
   * Event loop: the connection closed while this request was in progress: nothing more can be
   * sent for it.
   */
  void connectionClosed() {
    runAtEnd();
  }

  /** Event loop: has {@code action} run once this request is over ({@link RequestScope}). */
  void atEnd(Runnable action) {
    if (atEnd == null) atEnd = new ArrayList<>(2);
    atEnd.add(action);
  }

  private void runAtEnd() {
    ArrayList<Runnable> actions = atEnd;
    if (actions == null) return;
    atEnd = null;
    for (Runnable r : actions) {
      try {
        r.run();
      } catch (Throwable t) {
        LOG.log(Level.ERROR, "an action at the end of " + where() + " failed", t);
      }
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
    if (connection != null) connection.current = this;
    HeadCheck check = loop.headCheck;
    String bad = check.check(req);
    if (bad != null) {
      answered = 1;
      closeWith(400, bad);
      return;
    }
    // A request without framing headers has no body, and needs no other header of the kernel
    // unless the routes negotiate media types: its headers are scanned only if the handler
    // reads :headers (LazyRequestMap). Otherwise the one pass picks up every value needed,
    // with repeated headers joined.
    String cl = check.contentLength;
    String te = check.transferEncoding;
    if (cl != null || te != null || cfg.router != null && cfg.router.needsMediaTypes()) {
      head = RequestMap.scan(req.headers());
      cl = head.contentLength;
      te = head.transferEncoding;
    }
    boolean chunked = te != null;
    // (repeated Transfer-Encoding or Content-Length headers arrive joined with ',')
    if (chunked && (cl != null || !"chunked".equalsIgnoreCase(te.trim()))) {
      // RFC 9112 6.1/6.3: only a lone "chunked" is framing we can trust; anything else
      // (another coding, a list, Content-Length beside it) is how requests get smuggled.
      answered = 1;
      closeWith(400, "Bad Request: unsupported or ambiguous Transfer-Encoding");
      return;
    }
    if (!route(cfg, cl != null || chunked)) return;
    long length = 0;
    if (cl != null) {
      try {
        length = Long.parseLong(cl.trim());
      } catch (NumberFormatException e) {
        length = -1;
      }
      if (length < 0) {
        answered = 1;
        closeWith(400, "Bad Request: invalid Content-Length");
        return;
      }
    }
    if (length == 0 && !chunked) {
      dispatch(null);
      return;
    }
    // an async handler's body is read whole into one array first
    long limit = async ? Math.min(cfg.maxBodySize, BodyBuffer.MAX) : cfg.maxBodySize;
    if (length > limit) {
      answered = 1;
      if (length - limit > DRAIN_LIMIT) {
        closeWith(413, "Payload Too Large");
      } else {
        rejectBody(413, "Payload Too Large");
      }
      return;
    }
    if (head.expect != null && "100-continue".equalsIgnoreCase(head.expect.trim())) {
      resp.writeContinue();
    }
    if (async) {
      bufferBody(chunked ? -1 : length, limit);
    } else {
      streamBody(cfg);
    }
  }

  /**
   * Event loop: a handler on the event loop cannot wait for its body, so the body is read whole
   * (up to {@code limit}) before the handler runs, into memory that grows with the bytes that
   * arrive ({@link BodyBuffer}). A body that stops arriving for {@code :body-timeout} gets 408
   * ({@link ConnectionGuard#sweep}), one that grows past the limit 413.
   */
  private void bufferBody(long declared, long limit) {
    BodyBuffer b = new BodyBuffer(declared, limit);
    body = b;
    req.exceptionHandler(t -> {
      // a broken body (bad chunk framing) or a vanished client: nothing to dispatch
      rejected = true;
      body = null;
      if (ANSWERED.compareAndSet(this, 0, 1)) closeWith(400, "Bad Request: malformed request body");
    });
    req.handler(chunk -> {
      if (rejected) return;
      if (!b.append(chunk)) {
        body = null;
        answered = 1;
        rejectBody(413, "Payload Too Large");
      }
    });
    req.endHandler(v -> {
      if (rejected || answered != 0) return;
      body = null;
      dispatch(b.stream());
    });
  }

  /**
   * Event loop (the connection sweep): the body read before an async handler stopped arriving
   * for {@code :body-timeout}; answers 408 and closes the connection.
   */
  void bodyTimedOut() {
    if (!ANSWERED.compareAndSet(this, 0, 1)) return;
    rejected = true;
    body = null;
    closeWith(408, "Request Timeout: the request body stopped arriving");
  }

  /** True while the body is read before the (async) handler runs: not dispatched yet. */
  boolean awaitsBody() {
    return body != null;
  }

  /** The connection this request came on. */
  HttpConnection connection() {
    return req.connection();
  }

  /** Event loop: true once the whole request, body included, has arrived. */
  boolean requestEnded() {
    return req.isEnded();
  }

  /** True when this request's handler is an async (non-blocking) one. */
  boolean async() {
    return async;
  }

  /**
   * Event loop: a blocking handler runs at once and reads its body as it arrives, with flow
   * control ({@link BodyInputStream}). A body that grows past {@code :max-body-size} is
   * answered 413 (the handler's reads fail); what the handler leaves unread is discarded once
   * the response has been sent.
   */
  private void streamBody(ServerConfig cfg) {
    BodyInputStream in = new BodyInputStream(req, loop.eventLoop, cfg.bodyTimeoutMs, () -> {
      // claimed here, on the reading thread, before its read fails: the handler's own answer
      // to that failure comes later and is dropped
      if (ANSWERED.compareAndSet(this, 0, 1)) {
        onLoop(() -> closeWith(408, "Request Timeout: the request body stopped arriving"));
      }
    });
    bodyStream = in;
    watchEnd();
    long[] received = {0};
    req.exceptionHandler(t -> {
      // A broken body (bad chunk framing) or a vanished client ends the request. The answer is
      // claimed before the handler's reads fail, so whatever the handler answers to that
      // failure is dropped instead of racing the connection's close.
      boolean first = ANSWERED.compareAndSet(this, 0, 1);
      in.fail(new IOException("the request body could not be read: "
          + (t.getMessage() != null ? t.getMessage() : t.getClass().getSimpleName()), t));
      if (first) closeWith(400, "Bad Request: malformed request body");
    });
    req.handler(chunk -> {
      received[0] += chunk.length();
      if (received[0] > cfg.maxBodySize) {
        if (!rejected) {
          rejected = true;
          boolean first = ANSWERED.compareAndSet(this, 0, 1);
          in.fail(new IOException("the request body is larger than :max-body-size ("
              + cfg.maxBodySize + " bytes)"));
          if (first) {
            rejectBody(413, "Payload Too Large");
          } else {
            req.connection().close();
          }
        }
        return;
      }
      in.offer(chunk);
    });
    req.endHandler(v -> in.end());
    dispatch(in);
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
  private void dispatch(InputStream in) {
    ServerConfig cfg = loop.config;
    // the connection's addresses (and whether it is TLS) are taken once, at accept, not looked
    // up here: Vert.x's lazy address fields (and a first-request branch of ours) would be
    // compiled out during warm-up and deoptimize the whole compiled read path when new
    // connections come (see ConnectionGuard.requestStarted)
    ConnectionGuard.State c = connection;
    request = c != null
        ? RequestMap.build(req, head, in, cfg.trustForwardedFor, pathParams, c.remoteAddress,
            c.localAddress, c.ssl)
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
        complete(r);
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
      complete(response);
    }
  }

  /**
   * The {@code respond} callback of an async handler. Called on the loop while the handler
   * runs (the common case), it only keeps the response: {@link #dispatch} writes it when the
   * handler returns, three calls shallower, so that the JIT inlines Vert.x's write path into
   * the request's compiled code instead of stopping at its inlining depth limit. The bytes go
   * out no later: Vert.x flushes the loop's writes after it has read what was ready. From any
   * other thread, or later on the loop, the response is written at once.
   */
  @Override
  public Object invoke(Object response) {
    if (ANSWERED.compareAndSet(this, 0, 1)) {
      if (Thread.currentThread() == loop.thread && inHandler) {
        given = response;
        hasGiven = true;
      } else {
        complete(response);
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

  /** True while the handler has not answered. */
  boolean unanswered() {
    return answered == 0;
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
      ConnectionGuard.abort(req.connection());
    } else if (onTimeout != null) {
      TimeoutAnswer answer = new TimeoutAnswer();
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

  /**
   * The {@code respond} and {@code raise} given to the {@code :async-timeout-handler}: the
   * request is already claimed by the timeout, so these write its answer, the first call only.
   */
  private final class TimeoutAnswer extends AFn {
    private volatile int called;
    final IFn raise = new AFn() {
      @Override
      public Object invoke(Object error) {
        if (once()) {
          fail(error instanceof Throwable ? (Throwable) error
              : new IllegalArgumentException("raise called with " + error));
        }
        return null;
      }
    };

    private boolean once() {
      synchronized (this) {
        if (called != 0) return false;
        called = 1;
        return true;
      }
    }

    @Override
    public Object invoke(Object response) {
      if (once()) {
        complete(response);
      } else {
        late(response, null);
      }
      return null;
    }
  }

  /** Any thread: a response or failure that came after the request was already answered. */
  private void late(Object response, Throwable error) {
    if (error != null) {
      LOG.log(Level.WARNING, "the handler for " + where() + " failed after the request had been "
          + "answered (timeout, body error or an earlier respond/raise)", error);
    } else {
      LOG.log(Level.WARNING, "a response for {0} came after the request had been answered "
          + "(timeout, body error or an earlier respond/raise); dropped", where());
    }
    ResponseWriter.discard(response);
  }


  /** Any thread: sends a handler's response from the right thread for its body. */
  private void complete(Object response) {
    ResponseWriter.Kind kind;
    try {
      kind = ResponseWriter.classify(response, loop.config.streamablePred);
    } catch (Throwable t) {
      ResponseWriter.discard(response);
      fail(t);
      return;
    }
    IPersistentMap r = (IPersistentMap) response;
    if (kind == ResponseWriter.Kind.STREAM) {
      if (Context.isOnEventLoopThread()) {
        try {
          loop.workers.execute(() -> stream(r));
        } catch (RejectedExecutionException e) {
          ResponseWriter.discard(r);
          onLoop(() -> closeWith(503, "Service Unavailable"));
        }
      } else {
        stream(r);
      }
    } else if (kind == ResponseWriter.Kind.CHANNEL) {
      onLoop(() -> writeNow(r, kind));
    } else if (kind == ResponseWriter.Kind.FIXED && Thread.currentThread() == loop.thread) {
      // the loop's own fixed answer (a non-blocking handler's, the common one): written here,
      // one call shallower than writeNow, as this path's depth decides how much of Vert.x's
      // write the JIT inlines into it; the end's bookkeeping then needs no end handler
      if (closed()) return;
      try {
        endFixed(r);
        endedOnLoop();
      } catch (Throwable t) {
        fail(t);
      }
    } else if (kind == ResponseWriter.Kind.FIXED && loop.workers.isWorkerThread()) {
      prepare(r);
    } else {
      // A fixed body or a file is written from the thread that has it: Vert.x queues writes
      // from other threads and drains them on the loop in batches with one flush, where a
      // task per response would flush once per response.
      writeNow(r, kind);
    }
  }

  /**
   * Any thread but the loop for a FIXED body (the event loop for a CHANNEL body): writes a
   * fixed, file or channel body, with Vert.x's end handler doing the end's bookkeeping.
   */
  private void writeNow(IPersistentMap r, ResponseWriter.Kind kind) {
    if (closed()) return;
    try {
      watchEnd();
      if (kind == ResponseWriter.Kind.FIXED) {
        endFixed(r);
        return;
      }
      ResponseWriter.writeHead(resp, r, loop.answers.date(), loop.serverHeader);
      int framing = framing(resp.getStatusCode());
      Object b = r.valAt(ResponseWriter.BODY);
      if (kind == ResponseWriter.Kind.FILE) {
        ResponseWriter.sendFile(resp, (java.io.File) b, framing);
      } else {
        if (framing == Framing.BODY && http10()) closing(); // delimited by the close
        ResponseChannel.open(resp, (StreamingBody) b, framing, http10(), this::closeGracefully,
            () -> ConnectionGuard.abort(req.connection()));
      }
    } catch (Throwable t) {
      fail(t);
    }
  }

  /**
   * The thread that owns the response: sets the status and headers of a fixed response and
   * ends it.
   *
   * @throws IllegalArgumentException as {@link ResponseWriter#writeFixed}, with nothing sent
   */
  private void endFixed(IPersistentMap r) {
    int status = ResponseWriter.status(r.valAt(ResponseWriter.STATUS));
    Buffer b = ResponseWriter.writeFixed(resp, r, loop.answers.date(), loop.serverHeader,
        framing(status));
    ResponseWriter.status(resp, status);
    // (not ResponseWriter.end: one call less on the loop's path, see complete)
    if (b == null) {
      resp.end();
    } else {
      resp.end(b);
    }
  }

  /** How a response with {@code status} to this request is framed ({@link Framing#of}). */
  private int framing(int status) {
    return Framing.of(status, req.method() == HttpMethod.HEAD);
  }

  /** True for an HTTP/1.0 request: a body of unknown length is delimited by the close. */
  private boolean http10() {
    return req.version() == HttpVersion.HTTP_1_0;
  }

  /**
   * Any thread: the connection closes after this response, so requests read behind it are not
   * served (a task on the loop, queued before the response's end is).
   */
  private void closing() {
    if (connection != null) onLoop(() -> connection.closing = true);
  }

  /** Any thread: closes the connection once what was written has gone out. */
  private void closeGracefully() {
    closing();
    req.connection().close();
  }

  /**
   * Worker thread: sets the headers and serializes the body of a fixed response here, then
   * hands it to the loop's {@link Outbox}, which sets its status and ends it in a batch with
   * others.
   */
  private void prepare(IPersistentMap r) {
    // Nothing here takes the connection's lock (closed(), setStatusCode): a worker holding
    // it would contend with the loop, and a contended lock is inflated and slower for the
    // loop ever after. A closed connection is seen by endPrepared.
    try {
      preparedStatus = ResponseWriter.status(r.valAt(ResponseWriter.STATUS));
      prepared = ResponseWriter.writeFixed(resp, r, loop.answers.date(), loop.serverHeader,
          framing(preparedStatus));
    } catch (Throwable t) {
      fail(t);
      return;
    }
    loop.outbox.add(this);
  }

  /** Event loop (an {@link Outbox} drain): ends the response {@link #prepare} made. */
  void endPrepared() {
    if (closed()) return;
    Buffer b = prepared;
    prepared = null;
    try {
      ResponseWriter.status(resp, preparedStatus);
      ResponseWriter.end(resp, b);
      endedOnLoop();
    } catch (Throwable t) {
      fail(t);
    }
  }

  /**
   * Any thread: true once the connection has closed. On the loop this reads the connection's
   * loop-confined flag instead of {@link HttpServerResponse#closed()}, which takes the
   * connection's lock (one lock per response on the request path). The flag is set by the
   * connection's close handler, which may run a moment after Vert.x marks the response closed:
   * a response written in between is dropped by Vert.x (its write fails on the closed channel),
   * as it would be had the close come just after the check.
   */
  private boolean closed() {
    ConnectionGuard.State c = connection;
    return c != null && Thread.currentThread() == loop.thread ? c.closed : resp.closed();
  }

  /**
   * Worker thread: streams a blocking body with flow control. The handler's framing headers
   * are the kernel's to decide ({@link ResponseOutputStream}): an invalid Content-Length gets
   * a 500 before anything is sent.
   */
  private void stream(IPersistentMap r) {
    if (resp.closed()) {
      ResponseWriter.discard(r);
      return;
    }
    ResponseOutputStream os = null;
    try {
      watchEnd();
      ResponseWriter.writeHead(resp, r, loop.answers.date(), loop.serverHeader);
      MultiMap h = resp.headers();
      long declared = Framing.declared(h);
      h.remove(HttpHeaders.CONTENT_LENGTH);
      h.remove(HttpHeaders.TRANSFER_ENCODING);
      os = new ResponseOutputStream(resp, framing(resp.getStatusCode()), declared, http10(),
          this::closing, this::closeGracefully, where(), loop.config.outputBufferSize);
      // an async handler's StreamableResponseBody may hand the stream on and return: the
      // response then ends when the stream is closed (Ring's async contract)
      ResponseWriter.stream(resp, r, os, loop.config.streamableWriter, async);
    } catch (Throwable t) {
      ResponseWriter.discard(r);
      if (os != null && os.committed()) {
        if (!resp.closed()) {
          LOG.log(Level.ERROR, "response body of " + where() + " failed after the head was sent;"
              + " closing the connection", t);
        }
        ConnectionGuard.abort(req.connection());
      } else {
        fail(t);
      }
    }
  }

  /**
   * Any thread: logs a handler failure once and, if nothing was sent yet, answers with the
   * configured error handler's response, or a plain 500 when there is none (or it fails too).
   */
  private void fail(Throwable t) {
    LOG.log(Level.ERROR, "handler failed for " + where(), t);
    onLoop(() -> {
      if (resp.closed() || resp.ended()) return;
      if (resp.headWritten()) {
        ConnectionGuard.abort(req.connection());
        return;
      }
      watchEnd();
      ResponseWriter.clearHeaders(resp);
      IFn onError = loop.config.errorHandler;
      if (onError != null && request != null) {
        try {
          Object r = onError.invoke(request, t);
          if (ResponseWriter.classify(r, null) == ResponseWriter.Kind.FIXED) {
            endFixed((IPersistentMap) r);
            return;
          }
          LOG.log(Level.ERROR, "the :error-handler for " + where()
              + " returned a response whose body is not a String, byte[] or nil; sending 500");
        } catch (Throwable e) {
          LOG.log(Level.ERROR, "the :error-handler failed for " + where(), e);
        }
        ResponseWriter.clearHeaders(resp);
      }
      plain(500, ERROR_500);
    });
  }

  /**
   * Event loop: answers {@code status} at once, then reads and drops the rest of the request
   * body, so the client (which may still be sending) gets to read the answer: closing a socket
   * with unread input would reset the connection and lose it. Past {@link #DRAIN_LIMIT} dropped
   * bytes the connection is closed after all.
   */
  private void rejectBody(int status, String message) {
    rejected = true;
    long[] dropped = {0};
    req.handler(chunk -> {
      dropped[0] += chunk.length();
      if (dropped[0] > DRAIN_LIMIT) req.connection().close();
    });
    if (resp.closed() || resp.ended()) return;
    ResponseWriter.clearHeaders(resp);
    plain(status, message);
  }

  /** Event loop: answers {@code status} with a short text body and closes the connection. */
  private void closeWith(int status, String message) {
    if (connection != null) connection.closing = true;
    if (resp.closed() || resp.ended()) {
      req.connection().close();
      return;
    }
    watchEnd();
    String allow = resp.headers().get(HttpHeaders.ALLOW);
    ResponseWriter.clearHeaders(resp);
    if (allow != null) resp.putHeader(HttpHeaders.ALLOW, allow);
    // Vert.x would wait for the rest of the request before closing; requests already read
    // behind this one are dropped (ServerVerticle skips a closing connection's requests).
    loop.answers.end(resp, status, message, true).onComplete(v -> req.connection().close());
  }

  /** Event loop: answers {@code status} with a short text body; the connection stays. */
  private void plain(int status, String message) {
    watchEnd();
    loop.answers.end(resp, status, message, false);
  }

  /**
   * Runs {@code r} on this request's event loop: now when already there, else as a task. When
   * the loop has already shut down (a handler finishing after {@code stop} gave up on it), the
   * connection is gone and there is nothing left to write: the task is dropped and logged.
   */
  private void onLoop(Runnable r) {
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
