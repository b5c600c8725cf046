package donkey.kernel.websocket;

import donkey.kernel.config.Durations;
import io.netty.handler.codec.http.websocketx.WebSocketFrame;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The bound on what a {@link WebSocket} has handed to Netty and Netty has not yet written: the
 * payload bytes of those frames, counted from the send until the write completes. Past
 * {@code :ws-max-queued-bytes} (an empty queue always takes one frame, whatever its size) a
 * frame is refused, or its sender waits for room. Also holds whether the socket still sends,
 * so that a sender waiting for room is woken, and refused, by the close.
 *
 * <p>Threading: every method from any thread. A lock rather than a monitor, so that a virtual
 * thread waiting for room does not pin its carrier (Java 21 to 23).
 */
final class WebSocketSendQueue {
  private final long max;
  /** True from the handshake's end until a close is sent or received or the connection ends. */
  private volatile boolean open;
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition room = lock.newCondition();
  /** Payload bytes handed to Netty and not yet written. */
  private long queued;
  /** When bytes last left the queue while a sender waited (System.nanoTime). */
  private long writtenAt;
  /** Threads in {@link #reserve} waiting for room. */
  private int waiting;

  /** Longest a sender waits for room, in nanoseconds; 0 for no bound. */
  private final long maxWaitNanos;

  /**
   * @param maxWaitMs longest a sender waits for room before it is refused; 0 for no bound
   *     (only when every timeout of the server is off)
   */
  WebSocketSendQueue(long maxQueuedBytes, long maxWaitMs) {
    this.max = maxQueuedBytes;
    this.maxWaitNanos = Durations.nanos(maxWaitMs);
  }

  /** Any thread: true while frames can be sent. */
  boolean isOpen() {
    return open;
  }

  /** Event loop, once the handshake is done: frames can be sent. */
  void open() {
    open = true;
  }

  /** Any thread: bytes counted and not yet written. */
  long queuedBytes() {
    lock.lock();
    try {
      return queued;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Any thread: counts {@code f}'s payload as queued, waiting for room when {@code wait}.
   * Releases the frame and throws when it cannot be queued: the socket is closed (or closes
   * while this waits), the queue is full and {@code wait} is false, the client has taken
   * nothing for the longest wait, or the wait is interrupted.
   */
  void reserve(WebSocketFrame f, boolean wait) throws IOException {
    long n = f.content().readableBytes();
    long since = 0;
    lock.lock();
    try {
      while (true) {
        if (!open) {
          f.release();
          throw new IOException("the WebSocket is closed");
        }
        if (queued == 0 || queued + n <= max) {
          queued += n;
          return;
        }
        if (!wait) {
          f.release();
          throw new IOException("the WebSocket's send queue is full (" + queued
              + " bytes not yet taken by the client; :ws-max-queued-bytes " + max + ")");
        }
        long now = System.nanoTime();
        if (since == 0) since = now;
        // the wait is bounded from the client's last progress: a slow reader is waited for
        long left = maxWaitNanos == 0 ? Long.MAX_VALUE
            : Math.max(since, writtenAt) + maxWaitNanos - now;
        if (left <= 0) {
          f.release();
          throw new IOException("the WebSocket's client took nothing for "
              + (maxWaitNanos / 1_000_000) + " ms while this send waited for room");
        }
        waiting++;
        try {
          room.awaitNanos(left);
        } catch (InterruptedException e) {
          f.release();
          Thread.currentThread().interrupt();
          throw new InterruptedIOException("interrupted while waiting to send");
        } finally {
          waiting--;
        }
      }
    } finally {
      lock.unlock();
    }
  }

  /** Any thread (the loop, as writes complete): {@code n} reserved bytes have left the queue. */
  void written(long n) {
    lock.lock();
    try {
      queued -= n;
      if (waiting > 0) {
        writtenAt = System.nanoTime();
        room.signalAll();
      }
    } finally {
      lock.unlock();
    }
  }

  /** Any thread: closed for sending: wakes the senders waiting for room, which then throw. */
  void shut() {
    open = false;
    lock.lock();
    try {
      if (waiting > 0) room.signalAll();
    } finally {
      lock.unlock();
    }
  }
}
