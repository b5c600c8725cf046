package donkey.ring;

import clojure.lang.IFn;
import io.vertx.core.buffer.Buffer;
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
 * not block: check {@link #writable()} (or register {@link #onDrain}) to follow a slow reader
 * instead of queueing without bound.
 */
public final class ResponseChannel {
  private final HttpServerResponse resp;
  private final List<IFn> onClose = new ArrayList<>();
  private boolean closed;

  ResponseChannel(HttpServerResponse resp) {
    this.resp = resp;
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
    synchronized (this) {
      if (closed || resp.closed()) return false;
      if (chunk.length() > 0) resp.write(chunk);
      return true;
    }
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
        if (!resp.closed() && !resp.ended()) resp.end();
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
   * Event loop: sends the head (chunked) and hands a new channel to the body's on-open fn. A
   * HEAD request gets the head only and on-open is not called.
   */
  public static void open(HttpServerResponse resp, StreamingBody body, boolean head) {
    resp.headers().remove(io.vertx.core.http.HttpHeaders.CONTENT_LENGTH);
    if (head) {
      resp.end();
      return;
    }
    resp.setChunked(true);
    ResponseChannel ch = new ResponseChannel(resp);
    resp.closeHandler(v -> ch.closed());
    resp.writeHead();
    body.onOpen.invoke(ch);
  }
}
