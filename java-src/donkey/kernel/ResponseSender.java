package donkey.kernel;

import clojure.lang.AFn;
import clojure.lang.IPersistentMap;
import donkey.kernel.compression.ResponseCompression;
import donkey.ring.Framing;
import donkey.ring.ResponseChannel;
import donkey.ring.ResponseMap;
import donkey.ring.ResponseOutputStream;
import donkey.ring.ResponseWriter;
import donkey.ring.StreamingBody;
import io.vertx.core.MultiMap;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.http.HttpVersion;
import java.lang.System.Logger.Level;
import java.util.concurrent.RejectedExecutionException;

/**
 * The response-writing part of an {@link Exchange}: sends a handler's response, picking the
 * thread for its body kind, then one call per kind ({@link ResponseWriter}). A fixed body the
 * event loop answered is ended there at once; one a pool worker answered is prepared on the
 * worker and ended by the loop's {@link Outbox} in a batch; other fixed bodies and files are
 * written from the thread that has them (Vert.x queues writes from other threads and drains
 * them on the loop in batches with one flush); streamed bodies from a pool worker, which waits
 * while the client does not read; channel bodies are opened on the loop; a WebSocket
 * listener's handshake is answered on the loop ({@link WebSocketUpgrade}).
 *
 * <p>An exchange is one object; its parts are layered classes, each in its own file, so each
 * concern reads on its own while every transition stays a method of the one owner: this class
 * holds what identifies the request and what a worker prepared for the loop,
 * {@link ErrorAnswers} the kernel's own answers, {@link Admission} the way to the handler, and
 * {@link Exchange} the answered-once state and the transitions that claim it. Nothing here
 * claims: these methods write an answer the exchange has claimed already.
 *
 * <p>Threading: as each method says. The final fields are set at construction, on the event
 * loop, and published with the exchange.
 */
abstract class ResponseSender extends AFn implements ResponseWriter.LastResponse {
  private static final System.Logger LOG = System.getLogger("donkey");

  /** The event loop (verticle) the request arrived on. */
  final ServerVerticle loop;
  final HttpServerRequest req;
  final HttpServerResponse resp;
  /** The connection's state (loop-confined); null for a connection the guard does not track. */
  final ConnectionGuard.State connection;
  /**
   * True for a request on an HTTP/2 stream: what would end an HTTP/1.x connection (an answer
   * to bad input, an abort) ends the stream instead, which the connection's other streams do
   * not notice.
   */
  final boolean h2;
  /** The body a worker prepared for {@link #endPrepared} (null for an empty body). */
  private Buffer prepared;
  /** The status a worker prepared for {@link #endPrepared}. */
  private int preparedStatus;
  /** A file body a worker opened for {@link #endPrepared} (its head set), else null. */
  private java.io.File preparedFile;
  private java.nio.channels.FileChannel preparedChannel;
  private int preparedFraming;

  ResponseSender(ServerVerticle loop, HttpServerRequest req, ConnectionGuard.State connection) {
    this.loop = loop;
    this.req = req;
    this.resp = req.response();
    this.connection = connection;
    this.h2 = req.version() == HttpVersion.HTTP_2;
  }

  /** Any thread, once claimed: answers with {@code t} ({@link ErrorAnswers#fail}). */
  abstract void fail(Throwable t);

  /** Event loop, once claimed: answers, then closes ({@link ErrorAnswers#closeWith}). */
  abstract void closeWith(int status, String message);

  /** Any thread: stops the request at once ({@link ErrorAnswers#abort}). */
  abstract void abort();

  /** Has the response's end do the exchange's bookkeeping ({@link Exchange#watchEnd}). */
  abstract void watchEnd();

  /** Event loop, right after it ended the response ({@link Exchange#endedOnLoop}). */
  abstract void endedOnLoop();

  /**
   * This exchange, as the classes that hold one take it (the connection's state, the outbox,
   * Vert.x's handlers): the layers are one object, of which {@link Exchange} is the class.
   */
  abstract Exchange self();

  /** True when this request's handler is an async (non-blocking) one. */
  abstract boolean async();

  /** True unless the matched route turned response compression off. */
  abstract boolean compresses();

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
  io.vertx.core.http.HttpConnection connection() {
    return req.connection();
  }

  /**
   * Runs {@code r} on this request's event loop: now when already there, else as a task. When
   * the loop has already shut down (a handler finishing after {@code stop} gave up on it), the
   * connection is gone and there is nothing left to write: the task is dropped and logged.
   */
  final void onLoop(Runnable r) {
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

  /** {@code GET /path}, for log lines. */
  final String where() {
    return req.method().name() + " " + req.path();
  }

  /**
   * Any thread: sends {@code response} from the right thread for its body.
   *
   * <p>One method, the write from the calling thread included, on purpose: at its size C2 will
   * not inline it into the handler's dispatch, so the response path below it (the response
   * map's headers, Vert.x's end and write queue) is compiled once, as its own unit, instead of
   * again inside each larger unit that reaches C2 before it while the JIT warms up.
   * donkey.jit-shape-test guards it.
   */
  final void send(Object response) {
    ResponseMap.Kind kind;
    try {
      kind = ResponseMap.classify(response, loop.config.streamablePred);
    } catch (Throwable t) {
      ResponseMap.discard(response);
      fail(t);
      return;
    }
    IPersistentMap r = (IPersistentMap) response;
    boolean onLoop = Thread.currentThread() == loop.thread;
    if (kind == ResponseMap.Kind.STREAM) {
      // streamed by a worker, which waits while the client does not read: never by the event
      // loop, nor by the thread that called respond (an application's callback or go-block
      // pool, which a client that stops reading must not hold)
      if (loop.workers.isWorkerThread()) {
        stream(r);
      } else {
        try {
          loop.workers.execute(() -> stream(r));
        } catch (RejectedExecutionException e) {
          ResponseMap.discard(r);
          onLoop(() -> closeWith(503, "Service Unavailable"));
        }
      }
      return;
    }
    if (kind == ResponseMap.Kind.FIXED && onLoop) {
      // the loop's own fixed answer (a non-blocking handler's, the common one): written here,
      // with no end handler
      if (closed()) return;
      try {
        // (ended here, not through a helper: see ResponseWriter.end)
        Buffer b = headFixed(r);
        if (b == null) {
          resp.end();
        } else {
          resp.end(b);
        }
        endedOnLoop();
      } catch (Throwable t) {
        fail(t);
      }
      return;
    }
    if (kind == ResponseMap.Kind.FIXED && loop.workers.isWorkerThread()) {
      prepare(r);
      return;
    }
    if (kind == ResponseMap.Kind.WEBSOCKET) {
      new WebSocketUpgrade(self(), r).later();
      return;
    }
    if (kind == ResponseMap.Kind.CHANNEL && !onLoop) {
      // a channel body is opened on the loop: sent again from there
      onLoop(() -> send(r));
      return;
    }
    // a fixed body from another thread, a file, or a channel body on the loop: written from
    // this thread, with Vert.x's end handler doing the end's bookkeeping
    if (closed()) return;
    try {
      watchEnd();
      if (kind == ResponseMap.Kind.FIXED) {
        ResponseWriter.end(resp, headFixed(r));
        return;
      }
      ResponseWriter.writeHead(resp, r, loop.answers.date(), loop.serverHeader, this);
      markCompression(resp.getStatusCode());
      int framing = framing(resp.getStatusCode());
      Object b = r.valAt(ResponseMap.BODY);
      if (kind == ResponseMap.Kind.FILE) {
        file(resp, (java.io.File) b, framing, onLoop);
      } else {
        boolean http10 = http10();
        if (framing == Framing.BODY && http10) closing(); // delimited by the close
        ResponseChannel.open(resp, (StreamingBody) b, framing, http10, () -> closeGracefully(),
            () -> abort());
      }
    } catch (Throwable t) {
      fail(t);
    }
  }

  /**
   * Sends a file body whose head is set: opened on this thread, sent from the loop. A worker
   * hands the open file back with its other finished responses ({@link Outbox}), another
   * thread in a task of its own: Vert.x's writes from another thread would each be a task.
   */
  private void file(HttpServerResponse resp, java.io.File f, int framing, boolean onLoop) {
    java.nio.channels.FileChannel ch = ResponseWriter.openFile(f, framing);
    if (onLoop) {
      ResponseWriter.sendOpened(resp, f, ch, framing);
    } else if (loop.workers.isWorkerThread()) {
      preparedFile = f;
      preparedChannel = ch;
      preparedFraming = framing;
      loop.outbox.add(self());
    } else {
      onLoop(() -> sendPreparedFile(f, ch, framing));
    }
  }

  /** Event loop: sends the file {@link #file} opened, or closes it when the client has gone. */
  private void sendPreparedFile(java.io.File f, java.nio.channels.FileChannel ch, int framing) {
    if (closed()) {
      ResponseWriter.closeQuietly(ch);
      return;
    }
    try {
      ResponseWriter.sendOpened(resp, f, ch, framing);
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
  final void endFixed(IPersistentMap r) {
    ResponseWriter.end(resp, headFixed(r));
  }

  /**
   * The thread that owns the response: sets the status and headers of a fixed response and
   * returns its body (null for none).
   *
   * @throws IllegalArgumentException as {@link ResponseWriter#writeFixed}, with nothing sent
   */
  private Buffer headFixed(IPersistentMap r) {
    int status = ResponseMap.status(r.valAt(ResponseMap.STATUS));
    Buffer b = ResponseWriter.writeFixed(resp, r, loop.answers.date(), loop.serverHeader,
        framing(status), this);
    markCompression(status);
    ResponseWriter.status(resp, status);
    return b;
  }

  /**
   * Worker thread: sets the headers and serializes the body of a fixed response here, then
   * hands it to the loop's {@link Outbox}, which sets its status and ends it in a batch with
   * others ({@link #endPrepared}).
   */
  private void prepare(IPersistentMap r) {
    // Nothing here takes the connection's lock (closed(), setStatusCode): a worker holding
    // it would contend with the loop, and a contended lock is inflated and slower for the
    // loop ever after. A closed connection is seen by endPrepared.
    try {
      int status = ResponseMap.status(r.valAt(ResponseMap.STATUS));
      prepared = ResponseWriter.writeFixed(resp, r, loop.answers.date(), loop.serverHeader,
          framing(status), this);
      preparedStatus = status;
      markCompression(status);
    } catch (Throwable t) {
      fail(t);
      return;
    }
    loop.outbox.add(self());
  }

  /**
   * Event loop (an {@link Outbox} drain): ends the response a worker prepared, or sends the
   * file it opened; nothing when the client has gone. Ends it itself, not through a helper
   * (see {@link ResponseWriter#end}).
   */
  final void endPrepared() {
    java.io.File f = preparedFile;
    if (f != null) {
      java.nio.channels.FileChannel ch = preparedChannel;
      preparedFile = null;
      preparedChannel = null;
      sendPreparedFile(f, ch, preparedFraming);
      return;
    }
    Buffer b = prepared;
    prepared = null;
    if (closed()) return;
    try {
      ResponseWriter.status(resp, preparedStatus);
      if (b == null) {
        resp.end();
      } else {
        resp.end(b);
      }
      endedOnLoop();
    } catch (Throwable t) {
      fail(t);
    }
  }

  /**
   * Worker thread: streams a blocking body with flow control. The handler's framing headers
   * are the kernel's to decide ({@link ResponseOutputStream}): an invalid Content-Length gets
   * a 500 before anything is sent.
   */
  private void stream(IPersistentMap r) {
    if (resp.closed()) {
      ResponseMap.discard(r);
      return;
    }
    ResponseOutputStream os = null;
    try {
      watchEnd();
      ResponseWriter.writeHead(resp, r, loop.answers.date(), loop.serverHeader, this);
      markCompression(resp.getStatusCode());
      MultiMap h = resp.headers();
      long declared = Framing.declared(h);
      h.remove(HttpHeaders.CONTENT_LENGTH);
      h.remove(HttpHeaders.TRANSFER_ENCODING);
      os = new ResponseOutputStream(resp, framing(resp.getStatusCode()), declared, http10(),
          () -> closing(), () -> closeGracefully(), where(), loop.config.outputBufferSize);
      // an async handler's StreamableResponseBody may hand the stream on and return: the
      // response then ends when the stream is closed (Ring's async contract)
      ResponseWriter.stream(resp, r, os, loop.config.streamableWriter, async());
    } catch (Throwable t) {
      ResponseMap.discard(r);
      if (os != null && os.committed()) {
        if (!resp.closed()) {
          LOG.log(Level.ERROR, "response body of " + where() + " failed after the head was"
              + " sent; closing the connection", t);
        }
        abort();
      } else {
        fail(t);
      }
    }
  }

  /**
   * The thread writing the head, once its headers are set: whether Vert.x may compress the
   * response ({@link ResponseCompression#mark}); nothing with {@code :compression?} off.
   */
  private void markCompression(int status) {
    ResponseCompression c = loop.compression;
    if (c != null) {
      c.mark(resp.headers(), status, req.method() == HttpMethod.HEAD,
          compresses());
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
    ConnectionGuard.State c = connection;
    if (c != null && !h2) onLoop(c::closeAfterAnswer);
  }

  /**
   * Any thread: closes the connection once what was written has gone out; on HTTP/2, where a
   * response ends at its stream's end, one that needs this was cut short: its stream is reset.
   */
  private void closeGracefully() {
    if (h2) {
      abort();
      return;
    }
    closing();
    req.connection().close();
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
    return c != null && Thread.currentThread() == loop.thread ? c.closed
        : resp.closed();
  }
}
