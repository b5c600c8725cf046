package donkey.kernel;

import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.net.HostAndPort;

/**
 * What an HTTP/2 request needs beyond an HTTP/1.x one on its way to its handler: its stream
 * counted on its connection and ended by the stream's close (a client's reset included), a
 * Host from its {@code :authority}, and whether its body has all arrived before Vert.x says
 * so. What this needs of the connection is its {@link donkey.kernel.http2.Http2Session}.
 *
 * <p>Threading: the connection's event loop.
 */
final class Http2Streams {
  private Http2Streams() {}

  /**
   * As {@code x}, an HTTP/2 request, arrives: counts it among its connection's streams, and
   * has its stream's close end it.
   */
  static void started(Exchange x) {
    x.connection.streamStarted(x);
    // after its response ended, or reset by either side before that; Vert.x calls the
    // response's close handler on the loop, and the exchange ends a stream once
    x.response().closeHandler(x);
  }

  /**
   * After the head check of {@code x}, an HTTP/2 request without a Host line: its Host from
   * its {@code :authority}, as a gateway to HTTP/1.1 would give it (RFC 9113 8.3.1), since
   * Ring handlers and middleware read the host from {@code :headers}. (A Host sent beside an
   * {@code :authority} Vert.x has checked names the same host and port.)
   *
   * @return null, or the reason for a 400 when the authority is not a valid Host value
   */
  static String hostFromAuthority(Exchange x, HeadCheck check) {
    HostAndPort a = x.request().authority();
    if (a == null) return null;
    ConnectionGuard.State c = x.connection;
    String host = c != null && c.h2 != null ? c.h2.hostText(a) : a.toString();
    if (!check.validHost(host)) return "Bad Request: invalid :authority";
    // (no Host line to replace)
    x.request().headers().add(HttpHeaders.HOST, host);
    return null;
  }

  /**
   * Whether the client has sent all of {@code x}, an HTTP/2 request: Vert.x runs the request
   * handler before it marks a request that came in one HEADERS frame ended.
   */
  static boolean ended(Exchange x) {
    ConnectionGuard.State c = x.connection;
    HttpServerRequest req = x.request();
    return c != null && c.h2 != null ? c.h2.remoteEnded(req) : req.isEnded();
  }
}
