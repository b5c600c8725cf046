package donkey.kernel.http2;

import donkey.kernel.config.ServerConfig;
import io.vertx.core.http.Http2Settings;

/**
 * The HTTP/2 settings the server announces, from its options: the limits a client is told
 * up front, and which Netty then enforces on each frame (a larger frame, more open streams or a
 * larger header block than announced is a protocol error that ends the stream or the
 * connection).
 */
public final class Http2Limits {
  private Http2Limits() {}

  /**
   * The initial SETTINGS of every HTTP/2 connection. The header list size is
   * {@code :max-header-size}, as for HTTP/1.x heads; the HPACK table stays at the protocol's
   * 4 KiB, so a client's compressed headers cannot claim more of the server's memory than that
   * per connection. No server push.
   */
  public static Http2Settings settings(ServerConfig config) {
    return new Http2Settings()
        .setMaxConcurrentStreams(config.h2MaxConcurrentStreams)
        .setMaxFrameSize(config.h2MaxFrameSize)
        .setInitialWindowSize(config.h2InitialWindowSize)
        .setMaxHeaderListSize(config.maxHeaderSize)
        .setHeaderTableSize(Http2Settings.DEFAULT_HEADER_TABLE_SIZE)
        .setPushEnabled(false);
  }
}
