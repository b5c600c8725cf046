package donkey.kernel;

import donkey.kernel.internals.FlushGate;
import donkey.kernel.internals.FlushPolicy;
import donkey.kernel.internals.VertxInternals;
import donkey.kernel.workers.WorkerPool;
import io.netty.channel.EventLoop;
import io.vertx.core.http.HttpConnection;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Responses that workers have prepared for one event loop, handed over in batches: a worker
 * adds each response it finishes and wakes the loop once, when it runs out of work (or the
 * pool's monitor does, when a response has waited a stall period behind a busy worker). The
 * loop then ends every waiting response in one task and flushes them together.
 *
 * <p>Why: a response ended from a worker is a task on the loop, and a loop parked in
 * {@code epoll_wait} is woken for it; on a busy core the woken loop preempts the worker, writes
 * that one response and parks again, so each request costs two context switches. Batching the
 * hand-back (and the hand-off, {@link ServerVerticle#handOff}) makes it two per batch.
 *
 * <p>The responses of one drain also leave in one write per connection: Vert.x flushes every
 * write made outside a read at once, so the responses to a connection's pipelined requests
 * would each cost a write system call; {@link #batchFlushes} puts a handler in the
 * connection's pipeline that holds those flushes until the drain ends.
 *
 * <p>Threading: {@link #add} and {@link #wake} from any thread (workers, the monitor);
 * {@link #drain} and {@link #batchFlushes} run on the loop.
 */
final class Outbox implements WorkerPool.HandBack {
  private static final System.Logger LOG = System.getLogger("donkey");

  private final EventLoop loop;
  private final ConcurrentLinkedQueue<Exchange> ready = new ConcurrentLinkedQueue<>();
  /** True from a wake until its drain has started: one task queued at a time. */
  private final AtomicBoolean scheduled = new AtomicBoolean();
  /** When the oldest response not yet covered by a wake was added (System.nanoTime()). */
  private volatile long since;
  private final Runnable drain = this::drain;
  /** The connections with responses in the running drain, in first-added order. */
  private final ArrayList<ConnectionGuard.State> groups = new ArrayList<>();
  /** True while {@link #drain} runs (loop-confined). */
  private boolean draining;
  /** Connections whose flush is held: during this drain, or carried over (loop-confined). */
  private final ArrayList<FlushHolder> held = new ArrayList<>();
  /** True while a flush is carried over drains; {@link #carriedDue} is then meaningful. */
  private volatile boolean carrying;
  /** When the earliest carried flush must be looked at again (System.nanoTime()). */
  private volatile long carriedDue;

  /**
   * The longest a pipelined response is held for the ones after it (see {@link #releaseHeld}),
   * reached only when those wait for a worker (an overloaded pool) rather than run: a held
   * flush whose next request runs on a worker for {@link Workers#STALL_MS} is sent at once.
   * Long enough for a deep pipeline of fast handlers to leave in one write even when a busy
   * loop takes several drain cycles to run them; shorter holds split it into several writes.
   */
  static final long MAX_HOLD_MS = 20;
  private final long maxHoldNanos;

  /** How long the next pipelined request may have run on a worker for a flush to wait. */
  private final long youngNanos;

  Outbox(EventLoop loop, long maxHoldNanos, long youngNanos) {
    this.loop = loop;
    this.maxHoldNanos = maxHoldNanos;
    this.youngNanos = youngNanos;
  }

  /** Any thread: queues a prepared exchange; the loop is not woken yet (see {@link #wake}). */
  void add(Exchange e) {
    if (ready.isEmpty()) since = System.nanoTime();
    ready.offer(e);
  }

  /** Any thread: has the loop end what is waiting, unless nothing is or a drain is queued. */
  @Override
  public void wake() {
    if (ready.isEmpty() && !carrying) return;
    if (scheduled.get() || !scheduled.compareAndSet(false, true)) return;
    try {
      loop.execute(drain);
    } catch (RejectedExecutionException e) {
      // the loop has shut down: its connections are gone with it, and so are these responses
      LOG.log(Level.DEBUG, "the server stopped before {0} prepared responses could be written",
          ready.size());
      ready.clear();
      carrying = false;
      scheduled.set(false);
    }
  }

  /**
   * Any thread: true when a response has waited at least {@code nanos} without a wake, or a
   * flush has been held for {@link #maxHoldNanos}.
   */
  @Override
  public boolean overdue(long now, long nanos) {
    if (scheduled.get()) return false;
    return !ready.isEmpty() && now - since >= nanos || carrying && now - carriedDue >= 0;
  }

  /** Any thread: true when no response waits here and no flush is carried. */
  @Override
  public boolean quiet() {
    return ready.isEmpty() && !carrying;
  }

  /** Event loop: ends what is ready now, unless a drain is running already. */
  void drainNow() {
    if (!draining && !ready.isEmpty()) drain();
  }

  /**
   * Event loop: ends every prepared response: HTTP/1.x ones in the order they were added, then
   * HTTP/2 ones connection by connection (each connection's in order), releasing each
   * connection's flush after its last. An HTTP/2 connection's writes then reach the socket
   * while its streams' state is still in the cache: taken in the order workers finished, a
   * drain of a few thousand responses had every connection's entries go cold before its
   * flush. An HTTP/1.x connection has one response in a drain at most, and releasing flushes
   * before the drain's end made its pipelined requests leave one write each, at a fifth of
   * the throughput.
   */
  private void drain() {
    scheduled.set(false);
    draining = true;
    try {
      Exchange e;
      while ((e = ready.poll()) != null) {
        ConnectionGuard.State c = e.connection;
        if (c == null || !e.h2) {
          e.endPrepared();
        } else if (c.addPrepared(e)) {
          groups.add(c);
        }
      }
      for (int i = 0; i < groups.size(); i++) {
        Exchange x = groups.get(i).takePrepared();
        while (x != null) {
          Exchange next = x.unlinkNext();
          x.endPrepared();
          x = next;
        }
        releaseHeld();
      }
    } finally {
      groups.clear();
      draining = false;
      releaseHeld();
    }
  }

  /**
   * Event loop: flushes the connections held during the drain, except those whose next
   * pipelined request is already with the workers and not slow: their response follows
   * shortly and leaves in the same write, as a pipelined batch does on the non-blocking path.
   * A flush is carried while its next request waits in the queue or has run for less than
   * {@link #youngNanos}, and for at most {@link #maxHoldNanos} in all; the pool's monitor
   * wakes a drain when either time is up, so a slow handler delays the answer before it by
   * about {@link #youngNanos} plus a monitor tick.
   */
  private void releaseHeld() {
    if (held.isEmpty()) return;
    long now = System.nanoTime();
    long due = 0;
    int kept = 0;
    for (int i = 0; i < held.size(); i++) {
      FlushHolder h = held.get(i);
      Exchange next = h.state.current;
      long started;
      if (next != null && next.onWorker()
          && ((started = next.startedAt()) == 0 || now - started < youngNanos)
          && now - h.heldSince < maxHoldNanos) {
        // look again when the hold is up, or when the next request may have become slow
        long d = h.heldSince + maxHoldNanos;
        long young = (started == 0 ? now : started) + youngNanos;
        if (young - d < 0) d = young;
        if (kept++ == 0 || d - due < 0) due = d;
        held.set(kept - 1, h);
      } else {
        h.release();
      }
    }
    held.subList(kept, held.size()).clear();
    carriedDue = due;
    carrying = kept > 0;
  }

  /** Event loop: holds {@code c}'s flushes during drains (see the class comment). */
  void batchFlushes(HttpConnection c, ConnectionGuard.State state) {
    FlushHolder h = new FlushHolder(state);
    h.gate = VertxInternals.gateFlushes(c, h);
  }

  /** Passes flushes on, except during a drain, where each connection's is held once. */
  private final class FlushHolder implements FlushPolicy {
    final ConnectionGuard.State state;
    FlushGate gate;
    private boolean holding;
    long heldSince;

    FlushHolder(ConnectionGuard.State state) {
      this.state = state;
    }

    @Override
    public boolean hold() {
      if (!draining) return false;
      if (!holding) {
        holding = true;
        heldSince = System.nanoTime();
        held.add(this);
      }
      return true;
    }

    void release() {
      holding = false;
      gate.release();
    }
  }
}
