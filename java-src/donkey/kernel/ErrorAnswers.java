package donkey.kernel;

import donkey.ring.ResponseWriter;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerResponse;
import java.lang.System.Logger.Level;

/**
 * What the kernel sends for a request in place of its handler's response: for a handler's
 * failure, the route table's {@code :error-handler} answer or a plain 500; for what the kernel
 * refuses, a short text answer ({@link PlainAnswers}) that closes the connection or keeps it.
 * The exchange has claimed its answer before any of these runs; these decide only what is sent
 * and what becomes of the connection: on HTTP/1.x it is closed, gracefully or at once; on
 * HTTP/2 only the request's stream is reset.
 *
 * <p>Threading: {@link #fail} from any thread; the rest on the request's event loop.
 */
final class ErrorAnswers {
  private static final System.Logger LOG = System.getLogger("donkey");
  static final String ERROR_500 = "Internal Server Error";

  private ErrorAnswers() {}

  /**
   * Any thread: logs a handler failure once and, if nothing was sent yet, answers with the
   * configured error handler's response, or a plain 500 when there is none (or it fails too).
   */
  static void fail(Exchange x, Throwable t) {
    LOG.log(Level.ERROR, "handler failed for " + x.where(), t);
    x.onLoop(() -> {
      HttpServerResponse resp = x.response();
      if (resp.closed() || resp.ended()) return;
      if (resp.headWritten()) {
        abort(x);
        return;
      }
      x.watchEnd();
      ResponseWriter.clearHeaders(resp);
      if (!ResponseSender.sendError(x, x.loop().config.errorHandler, x.ringRequest(), t)) {
        ResponseWriter.clearHeaders(resp);
        plain(x, 500, ERROR_500);
      }
    });
  }

  /**
   * Event loop: answers {@code status} with a short text body and closes the connection;
   * requests already read behind this one are dropped (ServerVerticle skips a closing
   * connection's requests). On HTTP/2 the stream alone ends ({@link #closeConnection}).
   */
  static void closeWith(Exchange x, int status, String message) {
    if (x.connection != null && !x.h2) x.connection.closeAfterAnswer();
    HttpServerResponse resp = x.response();
    if (resp.closed() || resp.ended()) {
      closeConnection(x);
      return;
    }
    x.watchEnd();
    String allow = resp.headers().get(HttpHeaders.ALLOW);
    ResponseWriter.clearHeaders(resp);
    if (allow != null) resp.putHeader(HttpHeaders.ALLOW, allow);
    x.loop().answers.end(resp, status, message, !x.h2).onComplete(v -> closeConnection(x));
  }

  /** Event loop: answers {@code status} with a short text body; the connection stays. */
  static void keepConnection(Exchange x, int status, String message) {
    keepConnection(x, status, message, null, null);
  }

  /**
   * Event loop: as {@link #keepConnection(Exchange, int, String)}, with the header {@code name}
   * (when not null) set to {@code value}: a refused WebSocket handshake names the version the
   * server speaks.
   */
  static void keepConnection(Exchange x, int status, String message, String name,
                             String value) {
    HttpServerResponse resp = x.response();
    if (resp.closed() || resp.ended()) return;
    ResponseWriter.clearHeaders(resp);
    if (name != null) resp.putHeader(name, value);
    plain(x, status, message);
  }

  /** Event loop: answers {@code status} with a short text body on the response as it is. */
  static void plain(Exchange x, int status, String message) {
    x.watchEnd();
    x.loop().answers.end(x.response(), status, message, false);
  }

  /**
   * Any thread, after this request's last answer: an HTTP/1.x connection is closed once what
   * was written has gone out; an HTTP/2 stream whose request is still arriving is reset with
   * NO_ERROR, which asks the client to stop sending it (RFC 9113 8.1).
   */
  static void closeConnection(Exchange x) {
    if (!x.h2) {
      x.connection().close();
    } else if (!x.request().isEnded()) {
      x.response().reset(0);
      if (x.loop().metrics != null) x.loop().metrics.streamReset();
    }
  }

  /**
   * Any thread: stops this request at once, what was sent of its response being lost: an
   * HTTP/1.x connection is closed without flushing, an HTTP/2 stream reset (INTERNAL_ERROR).
   */
  static void abort(Exchange x) {
    if (x.h2) {
      x.response().reset(2);
      if (x.loop().metrics != null) x.loop().metrics.streamReset();
    } else {
      ConnectionGuard.abort(x.connection());
    }
  }
}
