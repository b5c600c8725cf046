package donkey.ring;

import clojure.lang.IFn;
import io.vertx.core.MultiMap;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The open end of a {@link StreamingBody} response: send chunks as they are produced, close
 * when done. When the client goes away, {@link #send} returns false and the on-close
 * callbacks run, so producers stop cleanly.
 *
 * <p>Threading: every method may be called from any thread; chunks sent from one thread
 * arrive in order (send from one thread at a time to keep an order across threads). Sends do
 * not block: check {@link #writable()} (or register {@link #onDrain}) to follow a slow reader.
 * A producer that does not is stopped at the body's limit of bytes queued for the client
 * ({@link StreamingBody#maxQueued}): the connection is closed, {@link #send} returns false and
 * the on-close callbacks run, so a client that stops reading cannot grow the heap.
 */
public final class ResponseChannel {
  private static final System.Logger LOG = System.getLogger("donkey");

  private final HttpServerResponse resp;
  /** Closes the connection after the response, for a body delimited by the close; or null. */
  private final Runnable closeAfter;
  /** Closes the connection at once, for a client that is too far behind. */
  private final Runnable abort;
  private final long maxQueued;
  private final List<IFn> onClose = new ArrayList<>();
  private boolean closed;
  /** Bytes handed to Vert.x and not yet written to the socket (guarded by this). */
  private long queued;

  ResponseChannel(HttpServerResponse resp, Runnable closeAfter, Runnable abort, long maxQueued) {
    this.resp = resp;
    this.closeAfter = closeAfter;
    this.abort = abort;
    this.maxQueued = maxQueued;
  }

  /**
   * Sends {@code data} (a String, sent as UTF-8, or a byte[]) as one chunk, flushed at once.
   *
   * @return false when the channel is closed (the chunk was not sent)
   * @throws IllegalArgumentException for another type of data
   */
  public boolean send(Object data) {
    Buffer chunk;
    if (data instanceof String) {
      chunk = Buffer.buffer(((String) data).getBytes(StandardCharsets.UTF_8));
    } else if (data instanceof byte[]) {
      chunk = Buffer.buffer((byte[]) data);
    } else {
      throw new IllegalArgumentException("send a String or byte[], not "
          + (data == null ? "nil" : data.getClass().getName()));
    }
    int n = chunk.length();
    synchronized (this) {
      if (closed || resp.closed()) return false;
      if (n == 0) return true;
      if (queued + n > maxQueued) {
        closed = true;
      } else {
        queued += n;
        resp.write(chunk).onComplete(v -> written(n));
        return true;
      }
    }
    LOG.log(System.Logger.Level.WARNING, "a streamed response''s client fell {0} bytes behind;"
        + " closing its connection", maxQueued);
    abort.run();
    closed();
    return false;
  }

  private synchronized void written(int n) {
    queued -= n;
  }

  /** True until the response has been closed by {@link #close} or by the client. */
  public synchronized boolean isOpen() {
    return !closed && !resp.closed();
  }

  /** True while the connection can take more without queueing in memory. */
  public boolean writable() {
    return !resp.writeQueueFull();
  }

  /** Calls {@code f} (no arguments) once the queued chunks have been written out. */
  public void onDrain(IFn f) {
    resp.drainHandler(v -> f.invoke());
  }

  /**
   * Calls {@code f} (no arguments) once, when the channel closes for any reason; at once when
   * it is already closed.
   */
  public void onClose(IFn f) {
    boolean now;
    synchronized (this) {
      now = closed;
      if (!now) onClose.add(f);
    }
    if (now) f.invoke();
  }

  /** Ends the response (the final chunk); idempotent. */
  public void close() {
    synchronized (this) {
      if (!closed) {
        closed = true;
        if (!resp.closed() && !resp.ended()) {
          io.vertx.core.Future<Void> ended = resp.end();
          if (closeAfter != null) ended.onComplete(v -> closeAfter.run());
        }
      }
    }
    closed();
  }

  /** The response is over (ended here or the connection closed): runs the callbacks once. */
  void closed() {
    List<IFn> callbacks;
    synchronized (this) {
      closed = true;
      if (onClose.isEmpty()) return;
      callbacks = new ArrayList<>(onClose);
      onClose.clear();
    }
    for (IFn f : callbacks) {
      try {
        f.invoke();
      } catch (Throwable t) {
        System.getLogger("donkey").log(System.Logger.Level.ERROR, "an on-close callback failed", t);
      }
    }
  }

  /**
   * Event loop: sends the head and hands a new channel to the body's on-open fn. The body is
   * chunked, or to an HTTP/1.0 client delimited by closing the connection. A response that has
   * no body (HEAD, 204, 205, 304) gets the head only and on-open is not called.
   *
   * @param framing {@link Framing#of} the response
   * @param http10 true when the request was HTTP/1.0
   * @param closeConnection closes the connection gracefully, once the response is written
   * @param abort closes the connection at once
   */
  public static void open(HttpServerResponse resp, StreamingBody body, int framing,
                          boolean http10, Runnable closeConnection, Runnable abort) {
    MultiMap h = resp.headers();
    if (framing != Framing.BODY) {
      Framing.setBodyless(h, framing, -1, -1);
      resp.end();
      return;
    }
    h.remove(HttpHeaders.TRANSFER_ENCODING);
    h.remove(HttpHeaders.CONTENT_LENGTH);
    ResponseChannel ch = new ResponseChannel(resp, http10 ? closeConnection : null, abort,
        body.maxQueued);
    resp.closeHandler(v -> ch.closed());
    if (http10) {
      // (Vert.x would answer an HTTP/1.0 keep-alive with keep-alive: set after it does)
      resp.headersEndHandler(v -> h.set(HttpHeaders.CONNECTION, HttpHeaders.CLOSE));
      resp.write(Buffer.buffer());
    } else {
      resp.setChunked(true);
      resp.writeHead();
    }
    body.onOpen.invoke(ch);
  }
}
