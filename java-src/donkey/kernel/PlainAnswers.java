package donkey.kernel;

import donkey.kernel.internals.VertxInternals;
import donkey.kernel.metrics.ServerMetrics;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerResponse;
import java.nio.charset.StandardCharsets;

/**
 * The short text answers the kernel makes itself (400, 404, 405, 406, 408, 413, 415, 431, 500,
 * 503, 505, ...): a {@code text/plain} body that says what was wrong, with the server's Date
 * and Server headers, and {@code Connection: close} when the connection ends after it.
 *
 * <p>Threading: immutable; {@link #end} on the thread that owns the response, {@link #raw} on
 * the connection's event loop.
 */
final class PlainAnswers {
  private static final CharSequence TEXT = HttpHeaders.createOptimized("text/plain; charset=utf-8");

  /** The Server header value, or null for none. */
  private final CharSequence server;
  private final boolean date;

  /** Counts each answer, or null without metrics. */
  private final ServerMetrics metrics;

  PlainAnswers(CharSequence server, boolean date, ServerMetrics metrics) {
    this.server = server;
    this.date = date;
    this.metrics = metrics;
  }

  /** The Date header value to send now, or null when the server sends none. */
  CharSequence date() {
    return date ? HttpDate.current() : null;
  }

  /**
   * Sets {@code status} and the answer's headers on {@code resp} (whose other headers the
   * caller has cleared) and ends it with {@code message}.
   *
   * @param close true to say {@code Connection: close} (the caller closes the connection)
   */
  Future<Void> end(HttpServerResponse resp, int status, String message, boolean close) {
    if (metrics != null) metrics.kernelAnswered(status);
    resp.setStatusCode(status);
    MultiMap h = resp.headers();
    if (close) h.set(HttpHeaders.CONNECTION, HttpHeaders.CLOSE);
    if (date) h.set(HttpHeaders.DATE, HttpDate.current());
    if (server != null) h.set(HttpHeaders.SERVER, server);
    h.set(HttpHeaders.CONTENT_TYPE, TEXT);
    return resp.end(message);
  }

  /**
   * Event loop: answers on {@code c} with a whole HTTP/1.1 response written as bytes, then
   * closes it: for a head Vert.x could not parse, whose answer Vert.x would send with the
   * wrong version ({@link VertxInternals#writeRawAndClose}). Closes without an answer when
   * the connection has no HTTP/1.x encoder.
   */
  void raw(HttpConnection c, int status, String message) {
    if (metrics != null) metrics.kernelAnswered(status);
    byte[] body = message.getBytes(StandardCharsets.UTF_8);
    StringBuilder head = new StringBuilder(160)
        .append("HTTP/1.1 ").append(status).append(' ')
        .append(HttpResponseStatus.valueOf(status).reasonPhrase()).append("\r\n")
        .append("content-type: ").append(TEXT).append("\r\n")
        .append("content-length: ").append(body.length).append("\r\n")
        .append("connection: close\r\n");
    if (date) head.append("date: ").append(HttpDate.current()).append("\r\n");
    if (server != null) head.append("server: ").append(server).append("\r\n");
    byte[] h = head.append("\r\n").toString().getBytes(StandardCharsets.ISO_8859_1);
    byte[] all = new byte[h.length + body.length];
    System.arraycopy(h, 0, all, 0, h.length);
    System.arraycopy(body, 0, all, h.length, body.length);
    if (!VertxInternals.writeRawAndClose(c, all)) c.close();
  }
}
