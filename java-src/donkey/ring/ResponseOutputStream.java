package donkey.ring;

import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpServerResponse;
import java.io.IOException;
import java.io.OutputStream;

/**
 * An OutputStream over a Vert.x response, with flow control: a write blocks while the
 * connection's write queue is full, so a slow reader slows the writer instead of growing the
 * heap.
 *
 * <p>Threading: must be used from one blocking-capable thread (a worker or virtual thread),
 * never from an event loop, since writes wait for the socket to drain.
 *
 * <p>The response head is committed on the first {@link #flush()} or when the buffer first
 * fills. A body that is closed before that is sent with a {@code Content-Length}; otherwise it
 * is sent chunked (unless the handler set {@code Content-Length} itself). Writing after the
 * client went away throws {@link IOException}.
 */
public final class ResponseOutputStream extends OutputStream {
  /** The buffer's size when the server is not told otherwise ({@code :output-buffer-size}). */
  public static final int BUFFER = 16 * 1024;

  private final HttpServerResponse resp;
  private final boolean head;
  private final Object lock = new Object();
  private final byte[] buf;
  private int count;
  private boolean committed;
  private boolean closed;

  /** @param head true for a HEAD request: nothing after the head is sent */
  public ResponseOutputStream(HttpServerResponse resp, boolean head) {
    this(resp, head, BUFFER);
  }

  /**
   * @param head true for a HEAD request: nothing after the head is sent
   * @param bufferSize bytes held before the head is committed and they are sent; a body that
   *     fits is sent with a Content-Length
   * @throws IllegalArgumentException when {@code bufferSize < 1}
   */
  public ResponseOutputStream(HttpServerResponse resp, boolean head, int bufferSize) {
    if (bufferSize < 1) throw new IllegalArgumentException("bufferSize must be >= 1");
    this.resp = resp;
    this.head = head;
    this.buf = new byte[bufferSize];
  }

  /** True when this answers a HEAD request. */
  public boolean head() {
    return head;
  }

  /** True once the status and headers have gone to the client. */
  public boolean committed() {
    return committed;
  }

  @Override
  public void write(int b) throws IOException {
    ensureOpen();
    if (count == buf.length) drain();
    buf[count++] = (byte) b;
  }

  @Override
  public void write(byte[] b, int off, int len) throws IOException {
    ensureOpen();
    if (len >= buf.length) {
      drain();
      send(Buffer.buffer().appendBytes(b, off, len));
      return;
    }
    if (len > buf.length - count) drain();
    System.arraycopy(b, off, buf, count, len);
    count += len;
  }

  @Override
  public void flush() throws IOException {
    ensureOpen();
    drain();
  }

  @Override
  public void close() throws IOException {
    if (closed) return;
    closed = true;
    if (!committed) {
      committed = true;
      if (!head && count > 0) {
        resp.end(Buffer.buffer().appendBytes(buf, 0, count));
      } else {
        resp.end();
      }
      return;
    }
    drain();
    resp.end();
  }

  private void ensureOpen() throws IOException {
    if (closed) throw new IOException("response stream is closed");
    if (resp.closed()) throw new IOException("client closed the connection");
  }

  /** Commits the head if needed and sends what is buffered. */
  private void drain() throws IOException {
    if (!committed) {
      committed = true;
      if (!resp.headers().contains("content-length")) resp.setChunked(true);
    }
    if (count > 0) {
      Buffer chunk = Buffer.buffer().appendBytes(buf, 0, count);
      count = 0;
      send(chunk);
    }
  }

  private void send(Buffer chunk) throws IOException {
    if (head) return;
    awaitWritable();
    resp.write(chunk);
  }

  /** Blocks while the connection cannot take more; fails when the client is gone. */
  private void awaitWritable() throws IOException {
    if (!resp.writeQueueFull()) return;
    resp.drainHandler(v -> {
      synchronized (lock) {
        lock.notifyAll();
      }
    });
    synchronized (lock) {
      while (resp.writeQueueFull()) {
        if (resp.closed()) throw new IOException("client closed the connection");
        try {
          lock.wait(100);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IOException("interrupted while waiting for the client to read", e);
        }
      }
    }
    if (resp.closed()) throw new IOException("client closed the connection");
  }
}
