package donkey.ring;

import io.vertx.core.buffer.Buffer;
import java.io.ByteArrayInputStream;
import java.io.InputStream;

/**
 * A request body read whole before its handler runs (an async handler's): its bytes in one
 * array that grows with the bytes that arrive, never ahead of them to the length the client
 * declared, so a request head alone costs nothing and a client can make the server hold no
 * more than twice what it sent (or {@link #SMALL} bytes, for a body that size).
 *
 * <p>Threading: filled by the event loop; the stream it gives is read by the handler after.
 */
public final class BodyBuffer {
  /** A declared length up to this is allocated at once: a small body is one exact array. */
  static final int SMALL = 16 * 1024;
  /** The largest array the JVM reliably makes. */
  public static final int MAX = Integer.MAX_VALUE - 8;

  private final long declared;
  private final long limit;
  private byte[] bytes;
  private int size;

  /**
   * @param declared the Content-Length, or -1 for a chunked body
   * @param limit the most bytes it may hold (at most {@link #MAX})
   */
  public BodyBuffer(long declared, long limit) {
    this.declared = declared;
    this.limit = Math.min(limit, MAX);
  }

  /**
   * Event loop: appends {@code chunk}.
   *
   * @return false, appending nothing, when the body would pass the limit
   */
  public boolean append(Buffer chunk) {
    int n = chunk.length();
    long needed = (long) size + n;
    if (needed > limit) return false;
    if (n == 0) return true;
    if (bytes == null || needed > bytes.length) grow((int) needed);
    chunk.getBytes(0, n, bytes, size);
    size += n;
    return true;
  }

  private void grow(int needed) {
    long cap;
    if (bytes == null) {
      cap = declared >= 0 && declared <= SMALL ? declared : Math.max(needed, SMALL);
    } else {
      cap = Math.max(needed, 2L * bytes.length);
    }
    cap = Math.min(cap, declared >= 0 ? Math.min(declared, limit) : limit);
    byte[] b = new byte[(int) Math.max(cap, needed)];
    if (size > 0) System.arraycopy(bytes, 0, b, 0, size);
    bytes = b;
  }

  /** The bytes appended so far. */
  public int size() {
    return size;
  }

  /** The body as a stream (supporting mark and reset), without copying it. */
  public InputStream stream() {
    return bytes == null ? new ByteArrayInputStream(new byte[0])
        : new ByteArrayInputStream(bytes, 0, size);
  }
}
