package donkey.kernel.websocket;

import donkey.kernel.workers.WorkerPool;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The listener callbacks of one sync handler's {@link WebSocket} on the worker pool: one at a
 * time, in the order they were queued, each batch on one worker (a socket never holds more
 * than one). It counts the messages and bytes that wait, so that the socket stops reading while
 * a slow listener falls behind (past {@link #BACKLOG_MESSAGES} or {@link #BACKLOG_BYTES}) and
 * reads again once it has caught up to a quarter of both: the queue of a socket is bounded by
 * one read past those marks, whatever the client sends.
 *
 * <p>Threading: {@link #add} and {@link #resume} on the socket's event loop; the tasks on a
 * worker; {@code wake} on the worker that brought the backlog down. A batch started from the
 * loop is queued without a wake-up of its own ({@code handOff}); one that a worker queues
 * again, because more came while it ran, wakes a worker itself.
 */
final class WebSocketCallbacks implements Runnable {
  /** Messages waiting past which the socket stops reading. */
  static final int BACKLOG_MESSAGES = 64;
  /** Bytes waiting past which the socket stops reading. */
  static final long BACKLOG_BYTES = 1024 * 1024;
  /** Tasks run in one go before the worker is handed back to the pool. */
  private static final int BATCH = 64;

  private final WorkerPool workers;
  /**
   * Event loop: queues this for the workers without waking one; the loop wakes one for all
   * it queued in the same iteration ({@link WebSockets#handOff}).
   */
  private final java.util.function.Consumer<Runnable> handOff;
  /** Has the loop call {@link #resume}; runs at most once until that call. */
  private final Runnable wake;
  private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
  private final AtomicBoolean scheduled = new AtomicBoolean();
  private final AtomicInteger messages = new AtomicInteger();
  private final AtomicLong bytes = new AtomicLong();
  /** Set while a {@code wake} is on its way to the loop. */
  private final AtomicBoolean waking = new AtomicBoolean();
  /** True while the socket's reading is paused for this backlog (written on the loop). */
  private volatile boolean paused;

  WebSocketCallbacks(WorkerPool workers, java.util.function.Consumer<Runnable> handOff,
                     Runnable wake) {
    this.workers = workers;
    this.handOff = handOff;
    this.wake = wake;
  }

  /**
   * Event loop: queues {@code task}, counted as a message of {@code size} bytes when
   * {@code counted} (on-close, the last, is not). Returns true when the socket must stop
   * reading now; it then waits for {@link #resume} to say it may read again.
   */
  boolean add(Runnable task, long size, boolean counted) {
    Runnable r = task;
    boolean pause = false;
    if (counted) {
      messages.incrementAndGet();
      bytes.addAndGet(size);
      if (!paused && over()) {
        paused = true;
        pause = true;
      }
      r = () -> {
        try {
          task.run();
        } finally {
          done(size);
        }
      };
    }
    tasks.add(r);
    if (scheduled.compareAndSet(false, true)) {
      // the messages of many sockets arrive in one read: one worker wake-up for all of them
      try {
        handOff.accept(this);
      } catch (RejectedExecutionException e) {
        run();
      }
    }
    return pause;
  }

  /** Event loop, after {@code wake}: true when the socket may read again. */
  boolean resume() {
    waking.set(false);
    if (paused && !over()) {
      paused = false;
      return true;
    }
    return false;
  }

  private boolean over() {
    return messages.get() > BACKLOG_MESSAGES || bytes.get() > BACKLOG_BYTES;
  }

  private void done(long size) {
    int m = messages.decrementAndGet();
    long b = bytes.addAndGet(-size);
    if (paused && m <= BACKLOG_MESSAGES / 4 && b <= BACKLOG_BYTES / 4
        && waking.compareAndSet(false, true)) {
      wake.run();
    }
  }

  /** A worker, more callbacks queued while it ran: another batch. */
  private void submit() {
    try {
      workers.execute(this);
    } catch (RejectedExecutionException e) {
      // the pool has stopped (the server is going down): the callbacks still run, here
      run();
    }
  }

  /** A worker: runs a batch of the queued callbacks. */
  @Override
  public void run() {
    for (int i = 0; i < BATCH; i++) {
      Runnable r = tasks.poll();
      if (r == null) break;
      r.run();
    }
    scheduled.set(false);
    if (!tasks.isEmpty() && scheduled.compareAndSet(false, true)) submit();
  }
}
