package donkey.kernel.internals;

import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.socket.ChannelInputShutdownEvent;

/**
 * A connection's input as the kernel watches it ({@link VertxInternals#watchInput}): the
 * number of reads from its socket, and the end of its input. Event loop.
 */
public final class ConnectionInput extends ChannelInboundHandlerAdapter {
  static final String NAME = "donkey-input";
  private final Runnable onInputShutdown;
  private long count;

  ConnectionInput(Runnable onInputShutdown) {
    this.onInputShutdown = onInputShutdown;
  }

  /** The reads so far. */
  public long count() {
    return count;
  }

  @Override
  public void channelRead(ChannelHandlerContext ctx, Object msg) {
    count++;
    ctx.fireChannelRead(msg);
  }

  @Override
  public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
    // the decoder after this handler ends or fails the request in progress first
    ctx.fireUserEventTriggered(evt);
    if (evt == ChannelInputShutdownEvent.INSTANCE && onInputShutdown != null) {
      onInputShutdown.run();
    }
  }
}
