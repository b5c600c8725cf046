package donkey.kernel;

import clojure.lang.IFn;
import clojure.lang.IPersistentMap;
import donkey.kernel.config.ServerConfig;
import donkey.ring.ResponseMap;
import donkey.ring.ResponseWriter;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerRequest;
import java.lang.System.Logger.Level;

/**
 * The part of an {@link Exchange} that writes what the kernel sends in place of its handler's
 * response: for a handler's failure, the route table's {@code :error-handler} answer or a plain
 * 500; for a timeout, 503 or the {@code :async-timeout-handler}'s answer; for what the kernel
 * refuses, a short text answer ({@link PlainAnswers}) that closes the connection or keeps it.
 * The exchange has claimed its answer before any of these runs; these decide only what is sent
 * and what becomes of the connection: on HTTP/1.x it is closed, gracefully or at once; on
 * HTTP/2 only the request's stream is reset.
 *
 * <p>Threading: {@link #fail} and {@link #abort} from any thread; the rest on the request's
 * event loop.
 */
abstract class ErrorAnswers extends ResponseSender {
  private static final System.Logger LOG = System.getLogger("donkey");
  static final String ERROR_500 = "Internal Server Error";

  ErrorAnswers(ServerVerticle loop, HttpServerRequest req, ConnectionGuard.State connection) {
    super(loop, req, connection);
  }

  /** The Ring request, or null before dispatch. */
  abstract IPersistentMap ringRequest();

  /**
   * Any thread, once claimed: logs a handler failure once and, if nothing was sent yet, answers
   * with the configured error handler's response, or a plain 500 when there is none (or it
   * fails too).
   */
  @Override
  final void fail(Throwable t) {
    LOG.log(Level.ERROR, "handler failed for " + where(), t);
    onLoop(() -> {
      if (resp.closed() || resp.ended()) return;
      if (resp.headWritten()) {
        abort();
        return;
      }
      watchEnd();
      ResponseWriter.clearHeaders(resp);
      if (!sendError(loop.config.errorHandler, ringRequest(), t)) {
        ResponseWriter.clearHeaders(resp);
        plain(500, ERROR_500);
      }
    });
  }

  /**
   * Event loop: answers a failed request with what the route table's {@code :error-handler}
   * ({@code (fn [request throwable])}) returns, when there is one and it returns a fixed
   * response; false (nothing sent) otherwise, for the caller's plain 500. Headers are already
   * cleared.
   */
  private boolean sendError(IFn onError, IPersistentMap request, Throwable t) {
    if (onError == null || request == null) return false;
    try {
      Object r = onError.invoke(request, t);
      if (ResponseMap.classify(r, null) == ResponseMap.Kind.FIXED) {
        endFixed((IPersistentMap) r);
        return true;
      }
      LOG.log(Level.ERROR, "the :error-handler for " + where()
          + " returned a response whose body is not a String, byte[] or nil; sending 500");
    } catch (Throwable e) {
      LOG.log(Level.ERROR, "the :error-handler failed for " + where(), e);
    }
    return false;
  }

  /**
   * Event loop, once claimed: answers {@code status} with a short text body and closes the
   * connection; requests already read behind this one are dropped (ServerVerticle skips a
   * closing connection's requests). On HTTP/2 the stream alone ends ({@link #closeConnection}).
   */
  @Override
  final void closeWith(int status, String message) {
    if (connection != null && !h2) connection.closeAfterAnswer();
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
   * Event loop, once claimed: answers {@code status} with a short text body; the connection
   * stays.
   */
  final void keepConnection(int status, String message) {
    keepConnection(status, message, null, null);
  }

  /**
   * Event loop, once claimed: as {@link #keepConnection(int, String)}, with the header
   * {@code name} (when not null) set to {@code value}: a refused WebSocket handshake names the
   * version the server speaks.
   */
  final void keepConnection(int status, String message, String name, String value) {
    if (resp.closed() || resp.ended()) return;
    ResponseWriter.clearHeaders(resp);
    if (name != null) resp.putHeader(name, value);
    plain(status, message);
  }

  /**
   * Event loop, once claimed: answers {@code status} with a short text body on the response as
   * it is.
   */
  final void plain(int status, String message) {
    watchEnd();
    loop.answers.end(resp, status, message, false);
  }

  /**
   * Any thread, after this request's last answer: an HTTP/1.x connection is closed once what
   * was written has gone out; an HTTP/2 stream whose request is still arriving is reset with
   * NO_ERROR, which asks the client to stop sending it (RFC 9113 8.1).
   */
  final void closeConnection() {
    if (!h2) {
      req.connection().close();
    } else if (!req.isEnded()) {
      resp.reset(0);
      if (loop.metrics != null) loop.metrics.streamReset();
    }
  }

  /**
   * Any thread: stops this request at once, what was sent of its response being lost: an
   * HTTP/1.x connection is closed without flushing, an HTTP/2 stream reset (INTERNAL_ERROR).
   */
  @Override
  final void abort() {
    if (h2) {
      resp.reset(2);
      if (loop.metrics != null) loop.metrics.streamReset();
    } else {
      ConnectionGuard.abort(req.connection());
    }
  }

  /**
   * Event loop (the connection sweep), once the timeout has claimed this request: answers 503,
   * or with what the {@code :async-timeout-handler} answers for an async handler
   * ({@link TimeoutAnswer}). The handler's thread is not interrupted; whatever it answers later
   * is dropped and logged.
   */
  final void answerTimeout() {
    ServerConfig cfg = loop.config;
    boolean async = async();
    IFn onTimeout = async ? cfg.asyncTimeoutHandler : null;
    LOG.log(Level.WARNING, "the handler for {0} did not respond within {1} ms; {2}", where(),
        async ? cfg.resolvedAsyncTimeoutMs() : cfg.requestTimeoutMs,
        onTimeout != null ? "calling the :async-timeout-handler" : "answered 503");
    if (resp.headWritten()) {
      abort();
    } else if (onTimeout != null) {
      TimeoutAnswer answer = new TimeoutAnswer(this);
      try {
        onTimeout.invoke(ringRequest(), answer, answer.raise);
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
  abstract void late(Object response, Throwable error);
}
