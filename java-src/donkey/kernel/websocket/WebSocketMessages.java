package donkey.kernel.websocket;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.handler.codec.http.websocketx.ContinuationWebSocketFrame;
import io.netty.handler.codec.http.websocketx.TextWebSocketFrame;
import io.netty.handler.codec.http.websocketx.WebSocketFrame;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * Makes a {@link WebSocket}'s data frames into messages: a String for text, a heap ByteBuffer
 * for binary, within {@code :ws-max-text-size} / {@code :ws-max-binary-size}. Netty's decoder
 * has already checked the frame order (a continuation only inside a message, no new message
 * inside one) and the UTF-8 validator the text, so what is left here is the size of a whole
 * message and its bytes.
 *
 * <p>Fragments are copied, not kept: a retained fragment would pin the whole read buffer it was
 * sliced from. A message of one frame is made from the frame itself.
 *
 * <p>Threading: confined to the socket's event loop.
 */
final class WebSocketMessages {
  /** What {@link #add} returns for a frame that takes its message over the limit. */
  static final Object TOO_BIG = new Object();

  private final int maxText;
  private final int maxBinary;
  /** The message being reassembled: its kind and its size so far. */
  private boolean text;
  private long size;
  /** Its bytes (null: none, or a message of one frame). */
  private ByteBuf fragments;

  WebSocketMessages(int maxText, int maxBinary) {
    this.maxText = maxText;
    this.maxBinary = maxBinary;
  }

  /**
   * Adds text, binary or continuation frame {@code f} (the caller still owns it): returns the
   * message it completes, null when more fragments are to come, or {@link #TOO_BIG} (the
   * fragments so far are then dropped).
   */
  Object add(WebSocketFrame f, ByteBufAllocator alloc) {
    if (!(f instanceof ContinuationWebSocketFrame)) {
      text = f instanceof TextWebSocketFrame;
      size = 0;
    }
    ByteBuf content = f.content();
    size += content.readableBytes();
    int limit = text ? maxText : maxBinary;
    if (size > limit) {
      drop();
      return TOO_BIG;
    }
    if (f.isFinalFragment() && fragments == null) return message(content);
    if (fragments == null) {
      fragments = alloc.heapBuffer(Math.min(limit, Math.max(256, content.readableBytes())), limit);
    }
    fragments.writeBytes(content);
    if (!f.isFinalFragment()) return null;
    try {
      return message(fragments);
    } finally {
      drop();
    }
  }

  /** The size in bytes of the message {@link #add} returned last. */
  long size() {
    return size;
  }

  /** Why {@link #add} returned {@link #TOO_BIG}, as a close reason. */
  String tooBig() {
    return (text ? "text" : "binary") + " message over " + (text ? maxText : maxBinary)
        + " bytes";
  }

  /** Releases the fragments of a message that will not be finished. */
  void drop() {
    if (fragments != null) {
      fragments.release();
      fragments = null;
    }
  }

  private Object message(ByteBuf b) {
    return text ? b.toString(StandardCharsets.UTF_8) : bytes(b);
  }

  /** A heap copy of {@code b}'s readable bytes, which the listener may keep. */
  static ByteBuffer bytes(ByteBuf b) {
    ByteBuffer bb = ByteBuffer.allocate(b.readableBytes());
    b.getBytes(b.readerIndex(), bb);
    bb.flip();
    return bb;
  }
}
