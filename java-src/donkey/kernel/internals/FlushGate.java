package donkey.kernel.internals;

import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelOutboundHandlerAdapter;
import io.netty.channel.ChannelPromise;

/**
 * A pipeline handler between Vert.x and the socket that lets flushes through unless its
 * policy holds them; a close sends what is held first (Vert.x closes right after a last
 * response). Event loop.
 */
public final class FlushGate extends ChannelOutboundHandlerAdapter {
  static final String NAME = "donkey-flush";

  private final FlushPolicy policy;
  private ChannelHandlerContext ctx;
  private boolean holding;

  FlushGate(FlushPolicy policy) {
    this.policy = policy;
  }

  @Override
  public void flush(ChannelHandlerContext ctx) {
    if (policy.hold()) {
      this.ctx = ctx;
      holding = true;
    } else {
      ctx.flush();
    }
  }

  @Override
  public void close(ChannelHandlerContext ctx, ChannelPromise promise) {
    if (holding) ctx.flush();
    ctx.close(promise);
  }

  @Override
  public void handlerRemoved(ChannelHandlerContext ctx) {
    // taken out for a WebSocket: what it held goes out now
    if (holding) {
      holding = false;
      ctx.flush();
    }
  }

  /** Sends the held flush (nothing once the gate has left the pipeline). */
  public void release() {
    holding = false;
    if (ctx != null && !ctx.isRemoved()) ctx.flush();
  }
}
