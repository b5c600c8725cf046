package donkey.kernel.internals;

import donkey.kernel.metrics.ServerMetrics;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufHolder;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.ChannelPromise;
import io.netty.channel.FileRegion;
import io.vertx.core.http.HttpConnection;

/**
 * Counts the bytes a connection's socket reads and writes, for {@code :metrics}: first in the
 * channel's pipeline, so it sees what crosses the socket (TLS records, not plaintext) and
 * keeps counting after the connection becomes a WebSocket. One instance serves every
 * connection of a server.
 *
 * <p>Threading: the connection's event loop; {@link ServerMetrics} takes the counts from any.
 */
@ChannelHandler.Sharable
public final class ByteCount extends ChannelDuplexHandler {
  private final ServerMetrics metrics;

  public ByteCount(ServerMetrics metrics) {
    this.metrics = metrics;
  }

  /** Event loop, at accept: puts this first in {@code c}'s pipeline (nothing without one). */
  public void install(HttpConnection c) {
    ChannelPipeline p = VertxInternals.pipeline(c);
    if (p != null && p.get("donkey-bytes") == null) p.addFirst("donkey-bytes", this);
  }

  @Override
  public void channelRead(ChannelHandlerContext ctx, Object msg) {
    long n = size(msg);
    if (n > 0) metrics.bytesRead(n);
    ctx.fireChannelRead(msg);
  }

  @Override
  public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
    long n = size(msg);
    if (n > 0) metrics.bytesWritten(n);
    ctx.write(msg, promise);
  }

  private static long size(Object msg) {
    if (msg instanceof ByteBuf) return ((ByteBuf) msg).readableBytes();
    if (msg instanceof ByteBufHolder) return ((ByteBufHolder) msg).content().readableBytes();
    if (msg instanceof FileRegion) return ((FileRegion) msg).count();
    return 0;
  }
}
