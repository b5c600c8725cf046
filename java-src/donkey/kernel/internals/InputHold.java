package donkey.kernel.internals;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;

/**
 * Keeps, unread, the bytes a client sends behind a request that asks for a WebSocket, in the
 * HTTP decoder's place ({@link VertxInternals#holdInput}). Whether that request becomes a
 * WebSocket is known only once its handler has answered, and by then an HTTP decoder would
 * have read the client's first frames as the start of another request, and lost them. When
 * the hold leaves the pipeline, what it kept goes on to the handler after it: the WebSocket
 * frame decoder once the socket is open ({@link VertxInternals#releaseInput}), or a new HTTP
 * decoder when the request was answered over HTTP ({@link VertxInternals#resumeHttp}).
 *
 * <p>Reading pauses while bytes are kept, so what the hold keeps is bounded by what one read
 * of the socket brings; whoever takes the bytes turns reading back on.
 *
 * <p>Threading: the connection's event loop.
 */
public final class InputHold extends ChannelInboundHandlerAdapter {
  static final String NAME = "donkey-input-hold";

  private CompositeByteBuf kept;
  /** True once the WebSocket handshake is done: the WebSocket takes the bytes, not HTTP. */
  boolean toWebSocket;
  /** True when this hold turned reading off. */
  boolean pausedReading;

  @Override
  public void channelRead(ChannelHandlerContext ctx, Object msg) {
    if (!(msg instanceof ByteBuf)) {
      // the end of the request the decoder had already decoded
      ctx.fireChannelRead(msg);
      return;
    }
    if (kept == null) kept = ctx.alloc().compositeBuffer();
    kept.addComponent(true, (ByteBuf) msg);
    if (!pausedReading) {
      pausedReading = true;
      ctx.channel().config().setAutoRead(false);
    }
  }

  @Override
  public void handlerRemoved(ChannelHandlerContext ctx) {
    CompositeByteBuf b = kept;
    kept = null;
    if (b == null) return;
    if (ctx.channel().isActive() && b.isReadable()) {
      ctx.fireChannelRead(b);
      ctx.fireChannelReadComplete();
    } else {
      b.release();
    }
  }
}
