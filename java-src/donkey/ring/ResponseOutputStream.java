package donkey.ring;

import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerResponse;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.System.Logger.Level;

/**
 * An OutputStream over a Vert.x response, with flow control: a write blocks while the
 * connection's write queue is full, so a slow reader slows the writer instead of growing the
 * heap.
 *
 * <p>Threading: used by one blocking-capable thread at a time (a worker or virtual thread, or
 * a thread the body hands the stream to), never from an event loop, since writes wait for the
 * socket to drain.
 *
 * <p>Framing is the kernel's ({@link Framing}). The response head is committed on the first
 * {@link #flush()} or when the buffer first fills. A body that is closed before that is sent
 * with a {@code Content-Length}; otherwise with the handler's declared Content-Length, or
 * chunked, or, to an HTTP/1.0 client, delimited by closing the connection. A declared length
 * is enforced: bytes past it are dropped and the connection is closed after the response; a
 * body that ends short of it gets a 500 when nothing was sent yet ({@link #close} throws
 * {@link IllegalStateException}), else {@link #close} throws {@link IOException} and the caller
 * must close the connection, so the client sees an incomplete response rather than a wrong
 * one. A response that has no body (HEAD, 204, 205, 304) discards what is written. Writing
 * after the client went away throws {@link IOException}.
 */
public final class ResponseOutputStream extends OutputStream {
  private static final System.Logger LOG = System.getLogger("donkey");
  /** The buffer's size when the server is not told otherwise ({@code :output-buffer-size}). */
  public static final int BUFFER = 16 * 1024;

  private final HttpServerResponse resp;
  private final int framing;
  /** The handler's Content-Length, or -1. */
  private final long declared;
  /** True for an HTTP/1.0 request: a body of unknown length is delimited by the close. */
  private final boolean http10;
  /** Said once this stream knows the connection must close after the response. */
  private final Runnable closing;
  /** Closes the connection once the response has been written out. */
  private final Runnable closeConnection;
  /** {@code GET /path}, for log lines. */
  private final String where;
  private final Object lock = new Object();
  private final byte[] buf;
  private int count;
  /** Body bytes taken so far (buffered or sent); never past {@link #declared}. */
  private long taken;
  /** True once the body tried to write past {@link #declared}. */
  private boolean overrun;
  private boolean closeDelimited;
  private boolean committed;
  private boolean closed;

  /**
   * @param framing {@link Framing#of} the response
   * @param declared the Content-Length the handler set ({@link Framing#declared}), or -1; the
   *     caller has removed the handler's framing headers from {@code resp}
   * @param http10 true when the request was HTTP/1.0 (no chunked encoding)
   * @param closing called (once, from the writing thread) as soon as this stream knows the
   *     connection will close after the response, so that no request read behind it is served
   * @param closeConnection closes the connection gracefully, once the response is written
   * @param where the request, {@code GET /path}, for log lines
   * @param bufferSize bytes held before the head is committed and they are sent; a body that
   *     fits is sent with a Content-Length
   * @throws IllegalArgumentException when {@code bufferSize < 1}
   */
  public ResponseOutputStream(HttpServerResponse resp, int framing, long declared,
                              boolean http10, Runnable closing, Runnable closeConnection,
                              String where, int bufferSize) {
    if (bufferSize < 1) throw new IllegalArgumentException("bufferSize must be >= 1");
    this.resp = resp;
    this.framing = framing;
    this.declared = declared;
    this.http10 = http10;
    this.closing = closing;
    this.closeConnection = closeConnection;
    this.where = where;
    this.buf = new byte[bufferSize];
  }

  /** True when nothing written is sent (HEAD, 204, 205, 304). */
  public boolean discards() {
    return framing != Framing.BODY;
  }

  /** True once the status and headers have gone to the client. */
  public boolean committed() {
    return committed;
  }

  @Override
  public void write(int b) throws IOException {
    ensureOpen();
    if (discards() || !take(1)) return;
    if (count == buf.length) drain();
    buf[count++] = (byte) b;
  }

  @Override
  public void write(byte[] b, int off, int len) throws IOException {
    if (off < 0 || len < 0 || len > b.length - off) throw new IndexOutOfBoundsException();
    ensureOpen();
    if (discards()) return;
    if (declared >= 0 && len > declared - taken) {
      overrun();
      len = (int) (declared - taken);
    }
    if (len == 0) return;
    taken += len;
    if (len >= buf.length) {
      drain();
      send(Buffer.buffer().appendBytes(b, off, len));
      return;
    }
    if (len > buf.length - count) drain();
    System.arraycopy(b, off, buf, count, len);
    count += len;
  }

  /** Counts {@code n} more body bytes; false (and marks the overrun) past the declared length. */
  private boolean take(int n) {
    if (declared >= 0 && taken + n > declared) {
      overrun();
      return false;
    }
    taken += n;
    return true;
  }

  /** The body passed its declared length: the connection closes after the response. */
  private void overrun() {
    if (overrun) return;
    overrun = true;
    closing.run();
  }

  @Override
  public void flush() throws IOException {
    ensureOpen();
    if (!discards()) drain();
  }

  /**
   * Ends the response.
   *
   * @throws IllegalStateException when the body ended short of its declared length and nothing
   *     was sent yet (the caller answers 500 instead)
   * @throws IOException when it ended short after the head was sent (the caller closes the
   *     connection), or the client went away
   */
  @Override
  public void close() throws IOException {
    if (closed) return;
    closed = true;
    if (discards()) {
      committed = true;
      Framing.setBodyless(resp.headers(), framing, -1, declared);
      resp.end();
      return;
    }
    if (!committed) {
      if (declared >= 0 && taken < declared) {
        throw new IllegalStateException("the response body ended after " + taken
            + " of the " + declared + " bytes its Content-Length declared");
      }
      committed = true;
      resp.headers().set(HttpHeaders.CONTENT_LENGTH, Long.toString(taken));
      finish(count > 0 ? resp.end(Buffer.buffer().appendBytes(buf, 0, count)) : resp.end());
      return;
    }
    drain();
    if (declared >= 0 && taken < declared) {
      throw new IOException("the response body ended after " + taken + " of the " + declared
          + " bytes its Content-Length declared");
    }
    finish(resp.end());
  }

  /** After the last write: closes the connection when the framing needs it. */
  private void finish(io.vertx.core.Future<Void> ended) {
    if (overrun) {
      LOG.log(Level.ERROR, "the response body for {0} was longer than its Content-Length ({1}"
          + " bytes); sent that much and closing the connection", where, declared);
    }
    if (overrun || closeDelimited) ended.onComplete(v -> closeConnection.run());
  }

  private void ensureOpen() throws IOException {
    if (closed) throw new IOException("response stream is closed");
    if (resp.closed()) throw new IOException("client closed the connection");
  }

  /** Commits the head if needed and sends what is buffered. */
  private void drain() throws IOException {
    if (!committed) {
      committed = true;
      if (declared >= 0) {
        resp.headers().set(HttpHeaders.CONTENT_LENGTH, Long.toString(declared));
      } else if (http10) {
        // no chunked encoding in HTTP/1.0: the end of the body is the end of the connection,
        // whatever keep-alive the client asked for (Vert.x sets its answer to that first)
        closeDelimited = true;
        closing.run();
        resp.headersEndHandler(v -> resp.headers().set(HttpHeaders.CONNECTION, HttpHeaders.CLOSE));
      } else {
        resp.setChunked(true);
      }
    }
    if (count > 0) {
      Buffer chunk = Buffer.buffer().appendBytes(buf, 0, count);
      count = 0;
      send(chunk);
    }
  }

  private void send(Buffer chunk) throws IOException {
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
