package donkey.ring;

import io.vertx.core.Context;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpServerRequest;
import java.io.IOException;
import java.io.InputStream;
import java.io.InterruptedIOException;
import java.util.ArrayDeque;

/**
 * The {@code :body} of a request served by a blocking handler: an InputStream fed by the
 * event loop as the body arrives, with flow control. When more than {@link #HIGH_WATER} bytes
 * wait unread, the connection stops reading from the socket; it resumes once the handler has
 * read the queue down to {@link #LOW_WATER}. A large upload therefore never sits in the heap.
 * Each queued chunk counts {@link #CHUNK_COST} bytes more than it holds, what its objects
 * take: a body sent as one-byte chunks would otherwise queue a quarter of a million of them,
 * some 40 MiB of heap for 1.5 MB on the wire.
 *
 * <p>Threading: {@link #offer}, {@link #end} and {@link #fail} run on the request's event
 * loop; the read methods block and run on the handler's (worker or virtual) thread.
 *
 * <p>Bad input: when the client goes away, the body grows past {@code :max-body-size}, no
 * body arrives for {@code :body-timeout} ms while the handler waits (a client trickling its
 * body), or the request was answered (a timeout) before the handler had read all of its body,
 * the next read throws {@link IOException}: a handler never takes part of a body for all of it.
 */
public final class BodyInputStream extends InputStream {
  static final int HIGH_WATER = 256 * 1024;
  static final int LOW_WATER = 64 * 1024;
  /** What a queued chunk's objects cost beside its bytes (the Buffer, its ByteBuf and array). */
  static final int CHUNK_COST = 128;

  private final HttpServerRequest req;
  private final Context loop;
  private final ArrayDeque<Buffer> queue = new ArrayDeque<>();
  /** Bytes queued, plus {@link #CHUNK_COST} per queued chunk. */
  private long queued;
  private boolean paused;
  private boolean ended;
  private IOException error;
  private boolean discard;
  /** True when the rest was discarded before the whole body had been queued and read. */
  private boolean cut;
  private Buffer current;
  private int pos;
  private final long timeoutNanos;
  /** Called (on the reading thread) once, when a read gives up waiting for the body. */
  private final Runnable onTimeout;
  /** When the last chunk arrived (or the stream was created), System.nanoTime(). */
  private long lastData = System.nanoTime();

  /**
   * @param timeoutNanos how long a read waits for more body before it fails (0 = forever)
   * @param onTimeout run on the reading thread, before the read fails, when it gives up
   */
  public BodyInputStream(HttpServerRequest req, Context loop, long timeoutNanos,
                         Runnable onTimeout) {
    this.req = req;
    this.loop = loop;
    this.timeoutNanos = timeoutNanos;
    this.onTimeout = onTimeout;
  }

  /** Event loop: a chunk of the body arrived. */
  public synchronized void offer(Buffer chunk) {
    if (discard || error != null) return;
    queue.add(chunk);
    queued += chunk.length() + CHUNK_COST;
    lastData = System.nanoTime();
    if (!paused && queued > HIGH_WATER) {
      paused = true;
      req.pause();
    }
    notifyAll();
  }

  /** Event loop: the whole body has arrived. */
  public synchronized void end() {
    ended = true;
    notifyAll();
  }

  /** Event loop: the body cannot be completed; readers get {@code why}. */
  public synchronized void fail(IOException why) {
    if (error == null) error = why;
    queue.clear();
    queued = 0;
    notifyAll();
  }

  /**
   * Any thread: the handler has answered; what it did not read is dropped as it arrives so the
   * connection can go on to its next request.
   */
  public void discardRest() {
    boolean resume;
    synchronized (this) {
      if (!discard && !(ended && queue.isEmpty())) cut = true;
      discard = true;
      queue.clear();
      queued = 0;
      resume = paused;
      paused = false;
      notifyAll();
    }
    if (resume) loop.runOnContext(v -> req.resume());
  }

  @Override
  public int read() throws IOException {
    if (!fill()) return -1;
    return current.getByte(pos++) & 0xff;
  }

  @Override
  public int read(byte[] b, int off, int len) throws IOException {
    if (off < 0 || len < 0 || len > b.length - off) throw new IndexOutOfBoundsException();
    if (len == 0) return 0;
    if (!fill()) return -1;
    int n = Math.min(len, current.length() - pos);
    current.getBytes(pos, pos + n, b, off);
    pos += n;
    return n;
  }

  @Override
  public synchronized int available() {
    long n = queued - (long) CHUNK_COST * queue.size()
        + (current == null ? 0 : current.length() - pos);
    return (int) Math.min(Integer.MAX_VALUE, n);
  }

  @Override
  public void close() {
    discardRest();
  }

  /** Makes {@link #current} readable; false at the end of the body. */
  private boolean fill() throws IOException {
    while (current == null || pos >= current.length()) {
      boolean resume = false;
      synchronized (this) {
        while (queue.isEmpty()) {
          if (error != null) throw error;
          if (cut) {
            // a handler still reading when its request was answered (a timeout) must not take
            // what it has read for the whole body
            throw new IOException("the request has been answered; the rest of its body was"
                + " not read");
          }
          if (ended || discard) return false;
          try {
            if (timeoutNanos <= 0) {
              wait();
            } else {
              long left = timeoutNanos - (System.nanoTime() - lastData);
              if (left <= 0) {
                error = new IOException("no request body arrived for " + timeoutNanos / 1_000_000
                    + " ms (:body-timeout)");
                if (onTimeout != null) onTimeout.run();
                throw error;
              }
              wait(Math.max(1, left / 1_000_000));
            }
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException("interrupted while reading the request body");
          }
        }
        if (error != null) throw error;
        current = queue.poll();
        pos = 0;
        queued -= current.length() + CHUNK_COST;
        if (paused && queued < LOW_WATER) {
          paused = false;
          resume = true;
        }
      }
      if (resume) loop.runOnContext(v -> req.resume());
    }
    return true;
  }
}
