package donkey.kernel;

import donkey.ring.ResponseWriter;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerResponse;
import java.lang.System.Logger.Level;

/**
 * What the kernel sends for a request in place of its handler's response: for a handler's
 * failure, the route table's {@code :error-handler} answer or a plain 500; for what the kernel
 * refuses, a short text answer ({@link PlainAnswers}) that closes the connection or keeps it.
 * The caller has claimed the answer ({@link Exchange#claim}); these decide only what is sent
 * and what becomes of the connection.
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
        x.abort();
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
   * connection's requests). On HTTP/2 the stream alone ends ({@link Exchange#closeConnection}).
   */
  static void closeWith(Exchange x, int status, String message) {
    if (x.connection != null && !x.h2) x.connection.closing = true;
    HttpServerResponse resp = x.response();
    if (resp.closed() || resp.ended()) {
      x.closeConnection();
      return;
    }
    x.watchEnd();
    String allow = resp.headers().get(HttpHeaders.ALLOW);
    ResponseWriter.clearHeaders(resp);
    if (allow != null) resp.putHeader(HttpHeaders.ALLOW, allow);
    x.loop().answers.end(resp, status, message, !x.h2).onComplete(v -> x.closeConnection());
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
}
