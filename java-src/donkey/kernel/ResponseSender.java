package donkey.kernel;

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
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.http.HttpVersion;
import java.lang.System.Logger.Level;
import java.util.concurrent.RejectedExecutionException;

/**
 * Sends a handler's response: picks the thread for its body kind, then one call per kind
 * ({@link ResponseWriter}). A fixed body the event loop answered is ended there at once; one a
 * pool worker answered is prepared on the worker and ended by the loop's {@link Outbox} in a
 * batch; other fixed bodies and files are written from the thread that has them (Vert.x queues
 * writes from other threads and drains them on the loop in batches with one flush); streamed
 * bodies from a pool worker, which waits while the client does not read; channel bodies are
 * opened on the loop; a WebSocket listener's handshake is answered on the loop
 * ({@link WebSocketUpgrade}).
 *
 * <p>Threading: as each method says. Stateless: what a response needs between threads lives in
 * its {@link Exchange}.
 */
final class ResponseSender {
  private static final System.Logger LOG = System.getLogger("donkey");

  private ResponseSender() {}

  /**
   * Any thread: sends {@code response} from the right thread for its body.
   *
   * <p>One method, the write from the calling thread included, on purpose: at its size C2 will
   * not inline it into the handler's dispatch, so the response path below it (the response
   * map's headers, Vert.x's end and write queue) is compiled once, as its own unit, instead of
   * again inside each larger unit that reaches C2 before it while the JIT warms up.
   * donkey.jit-shape-test guards it.
   */
  static void send(Exchange x, Object response) {
    ServerVerticle loop = x.loop();
    ResponseMap.Kind kind;
    try {
      kind = ResponseMap.classify(response, loop.config.streamablePred);
    } catch (Throwable t) {
      ResponseMap.discard(response);
      ErrorAnswers.fail(x, t);
      return;
    }
    IPersistentMap r = (IPersistentMap) response;
    boolean onLoop = Thread.currentThread() == loop.thread;
    if (kind == ResponseMap.Kind.STREAM) {
      // streamed by a worker, which waits while the client does not read: never by the event
      // loop, nor by the thread that called respond (an application's callback or go-block
      // pool, which a client that stops reading must not hold)
      if (loop.workers.isWorkerThread()) {
        stream(x, r);
      } else {
        try {
          loop.workers.execute(() -> stream(x, r));
        } catch (RejectedExecutionException e) {
          ResponseMap.discard(r);
          x.onLoop(() -> ErrorAnswers.closeWith(x, 503, "Service Unavailable"));
        }
      }
      return;
    }
    if (kind == ResponseMap.Kind.FIXED && onLoop) {
      // the loop's own fixed answer (a non-blocking handler's, the common one): written here,
      // with no end handler
      if (closed(x)) return;
      try {
        endFixed(x, r);
        x.endedOnLoop();
      } catch (Throwable t) {
        ErrorAnswers.fail(x, t);
      }
      return;
    }
    if (kind == ResponseMap.Kind.FIXED && loop.workers.isWorkerThread()) {
      prepare(x, r);
      return;
    }
    if (kind == ResponseMap.Kind.WEBSOCKET) {
      WebSocketUpgrade.later(x, r);
      return;
    }
    if (kind == ResponseMap.Kind.CHANNEL && !onLoop) {
      // a channel body is opened on the loop: sent again from there
      x.onLoop(() -> send(x, r));
      return;
    }
    // a fixed body from another thread, a file, or a channel body on the loop: written from
    // this thread, with Vert.x's end handler doing the end's bookkeeping
    if (closed(x)) return;
    try {
      x.watchEnd();
      if (kind == ResponseMap.Kind.FIXED) {
        endFixed(x, r);
        return;
      }
      HttpServerResponse resp = x.response();
      ResponseWriter.writeHead(resp, r, loop.answers.date(), loop.serverHeader, x);
      markCompression(x, resp.getStatusCode());
      int framing = framing(x, resp.getStatusCode());
      Object b = r.valAt(ResponseMap.BODY);
      if (kind == ResponseMap.Kind.FILE) {
        file(x, resp, (java.io.File) b, framing, onLoop);
      } else {
        boolean http10 = http10(x);
        if (framing == Framing.BODY && http10) closing(x); // delimited by the close
        ResponseChannel.open(resp, (StreamingBody) b, framing, http10, () -> closeGracefully(x),
            () -> ErrorAnswers.abort(x));
      }
    } catch (Throwable t) {
      ErrorAnswers.fail(x, t);
    }
  }

  /**
   * Sends a file body whose head is set: opened on this thread, sent from the loop. A worker
   * hands the open file back with its other finished responses ({@link Outbox}), another
   * thread in a task of its own: Vert.x's writes from another thread would each be a task.
   */
  private static void file(Exchange x, HttpServerResponse resp, java.io.File f, int framing,
                           boolean onLoop) {
    java.nio.channels.FileChannel ch = ResponseWriter.openFile(f, framing);
    if (onLoop) {
      ResponseWriter.sendOpened(resp, f, ch, framing);
    } else if (x.loop().workers.isWorkerThread()) {
      x.preparedFile(f, ch, framing);
      x.loop().outbox.add(x);
    } else {
      x.onLoop(() -> sendPreparedFile(x, f, ch, framing));
    }
  }

  /** Event loop: sends the file {@link #file} opened, or closes it when the client has gone. */
  static void sendPreparedFile(Exchange x, java.io.File f, java.nio.channels.FileChannel ch,
                               int framing) {
    if (closed(x)) {
      ResponseWriter.closeQuietly(ch);
      return;
    }
    try {
      ResponseWriter.sendOpened(x.response(), f, ch, framing);
    } catch (Throwable t) {
      ErrorAnswers.fail(x, t);
    }
  }

  /**
   * The thread that owns the response: sets the status and headers of a fixed response and
   * ends it.
   *
   * @throws IllegalArgumentException as {@link ResponseWriter#writeFixed}, with nothing sent
   */
  static void endFixed(Exchange x, IPersistentMap r) {
    HttpServerResponse resp = x.response();
    int status = ResponseMap.status(r.valAt(ResponseMap.STATUS));
    Buffer b = ResponseWriter.writeFixed(resp, r, x.loop().answers.date(), x.loop().serverHeader,
        framing(x, status), x);
    markCompression(x, status);
    ResponseWriter.status(resp, status);
    if (b == null) {
      resp.end();
    } else {
      resp.end(b);
    }
  }

  /**
   * Event loop: answers a failed request with what the route table's {@code :error-handler}
   * ({@code (fn [request throwable])}) returns, when there is one and it returns a fixed
   * response; false (nothing sent) otherwise, for the caller's plain 500. Headers are already
   * cleared.
   */
  static boolean sendError(Exchange x, clojure.lang.IFn onError, IPersistentMap request,
                           Throwable t) {
    if (onError == null || request == null) return false;
    try {
      Object r = onError.invoke(request, t);
      if (ResponseMap.classify(r, null) == ResponseMap.Kind.FIXED) {
        endFixed(x, (IPersistentMap) r);
        return true;
      }
      LOG.log(Level.ERROR, "the :error-handler for " + x.where()
          + " returned a response whose body is not a String, byte[] or nil; sending 500");
    } catch (Throwable e) {
      LOG.log(Level.ERROR, "the :error-handler failed for " + x.where(), e);
    }
    return false;
  }

  /**
   * Worker thread: sets the headers and serializes the body of a fixed response here, then
   * hands it to the loop's {@link Outbox}, which sets its status and ends it in a batch with
   * others ({@link #endPrepared}).
   */
  private static void prepare(Exchange x, IPersistentMap r) {
    // Nothing here takes the connection's lock (closed(), setStatusCode): a worker holding
    // it would contend with the loop, and a contended lock is inflated and slower for the
    // loop ever after. A closed connection is seen by endPrepared.
    try {
      int status = ResponseMap.status(r.valAt(ResponseMap.STATUS));
      x.prepared(ResponseWriter.writeFixed(x.response(), r, x.loop().answers.date(),
          x.loop().serverHeader, framing(x, status), x), status);
      markCompression(x, status);
    } catch (Throwable t) {
      ErrorAnswers.fail(x, t);
      return;
    }
    x.loop().outbox.add(x);
  }

  /** Event loop (an {@link Outbox} drain): ends the response {@link #prepare} made. */
  static void endPrepared(Exchange x, Buffer body, int status) {
    if (closed(x)) return;
    try {
      ResponseWriter.status(x.response(), status);
      ResponseWriter.end(x.response(), body);
      x.endedOnLoop();
    } catch (Throwable t) {
      ErrorAnswers.fail(x, t);
    }
  }

  /**
   * Worker thread: streams a blocking body with flow control. The handler's framing headers
   * are the kernel's to decide ({@link ResponseOutputStream}): an invalid Content-Length gets
   * a 500 before anything is sent.
   */
  private static void stream(Exchange x, IPersistentMap r) {
    HttpServerResponse resp = x.response();
    if (resp.closed()) {
      ResponseMap.discard(r);
      return;
    }
    ServerVerticle loop = x.loop();
    ResponseOutputStream os = null;
    try {
      x.watchEnd();
      ResponseWriter.writeHead(resp, r, loop.answers.date(), loop.serverHeader, x);
      markCompression(x, resp.getStatusCode());
      MultiMap h = resp.headers();
      long declared = Framing.declared(h);
      h.remove(HttpHeaders.CONTENT_LENGTH);
      h.remove(HttpHeaders.TRANSFER_ENCODING);
      os = new ResponseOutputStream(resp, framing(x, resp.getStatusCode()), declared, http10(x),
          () -> closing(x), () -> closeGracefully(x), x.where(), loop.config.outputBufferSize);
      // an async handler's StreamableResponseBody may hand the stream on and return: the
      // response then ends when the stream is closed (Ring's async contract)
      ResponseWriter.stream(resp, r, os, loop.config.streamableWriter, x.async());
    } catch (Throwable t) {
      ResponseMap.discard(r);
      if (os != null && os.committed()) {
        if (!resp.closed()) {
          LOG.log(Level.ERROR, "response body of " + x.where() + " failed after the head was"
              + " sent; closing the connection", t);
        }
        ErrorAnswers.abort(x);
      } else {
        ErrorAnswers.fail(x, t);
      }
    }
  }

  /**
   * The thread writing the head, once its headers are set: whether Vert.x may compress the
   * response ({@link ResponseCompression#mark}); nothing with {@code :compression?} off.
   */
  private static void markCompression(Exchange x, int status) {
    ResponseCompression c = x.loop().compression;
    if (c != null) {
      c.mark(x.response().headers(), status, x.request().method() == HttpMethod.HEAD,
          x.compresses());
    }
  }

  /** How a response with {@code status} to this request is framed ({@link Framing#of}). */
  private static int framing(Exchange x, int status) {
    return Framing.of(status, x.request().method() == HttpMethod.HEAD);
  }

  /** True for an HTTP/1.0 request: a body of unknown length is delimited by the close. */
  private static boolean http10(Exchange x) {
    return x.request().version() == HttpVersion.HTTP_1_0;
  }

  /**
   * Any thread: the connection closes after this response, so requests read behind it are not
   * served (a task on the loop, queued before the response's end is).
   */
  private static void closing(Exchange x) {
    ConnectionGuard.State c = x.connection;
    if (c != null && !x.h2) x.onLoop(c::closeAfterAnswer);
  }

  /**
   * Any thread: closes the connection once what was written has gone out; on HTTP/2, where a
   * response ends at its stream's end, one that needs this was cut short: its stream is reset.
   */
  private static void closeGracefully(Exchange x) {
    if (x.h2) {
      ErrorAnswers.abort(x);
      return;
    }
    closing(x);
    x.request().connection().close();
  }

  /**
   * Any thread: true once the connection has closed. On the loop this reads the connection's
   * loop-confined flag instead of {@link HttpServerResponse#closed()}, which takes the
   * connection's lock (one lock per response on the request path). The flag is set by the
   * connection's close handler, which may run a moment after Vert.x marks the response closed:
   * a response written in between is dropped by Vert.x (its write fails on the closed channel),
   * as it would be had the close come just after the check.
   */
  private static boolean closed(Exchange x) {
    ConnectionGuard.State c = x.connection;
    return c != null && Thread.currentThread() == x.loop().thread ? c.closed
        : x.response().closed();
  }
}
