package donkey.kernel.http2;

import donkey.kernel.internals.VertxInternals;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.net.HostAndPort;

/**
 * One HTTP/2 connection as the request path needs it beyond what Vert.x's API gives: whether a
 * stream's request has all arrived, and the Host text of its streams' {@code :authority}.
 *
 * <p>Threading: confined to the connection's event loop.
 */
public final class Http2Session {
  /** Netty's view of the connection's streams, or null when the pipeline is not Netty's. */
  private final io.netty.handler.codec.http2.Http2Connection streams;
  /** The last stream's :authority and its text. */
  private HostAndPort authority;
  private String authorityText;

  private Http2Session(io.netty.handler.codec.http2.Http2Connection streams) {
    this.streams = streams;
  }

  /** Event loop, at accept: the session of {@code c}, an HTTP/2 connection. */
  public static Http2Session of(HttpConnection c) {
    return new Http2Session(VertxInternals.http2(c));
  }

  /**
   * Whether the client has sent all of {@code req}, a request on one of this connection's
   * streams: Vert.x runs the request handler before it marks a request that came in one
   * HEADERS frame ended, while Netty's stream state already says so.
   */
  public boolean remoteEnded(HttpServerRequest req) {
    return streams != null ? VertxInternals.remoteEnded(streams, (int) req.streamId())
        : req.isEnded();
  }

  /**
   * {@code a}, a stream's {@code :authority}, as the text of a Host line. A connection's
   * streams usually name the same authority, so the text is made once per connection.
   */
  public String hostText(HostAndPort a) {
    if (!a.equals(authority)) {
      authority = a;
      authorityText = a.toString();
    }
    return authorityText;
  }
}
