package donkey.kernel;

import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.AbstractExecutorService;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * The platform threads that run sync handlers: up to {@code max} threads, of which only as many
 * as there are cores are kept running while they keep up, and more are woken as soon as queued
 * work stops moving.
 *
 * <p>Why not a {@code ThreadPoolExecutor}: its queue wakes a parked thread for every task that
 * finds others parked, and each woken thread wakes the next while tasks remain, so a batch of
 * fast requests spreads over dozens of threads that take turns on the same cores: two context
 * switches per request, which cost more than a small handler itself (measured: 0.7 switches per
 * request and 0.39 x raw Vert.x on JSON with 50 threads on one core). Here a task wakes a thread
 * only when fewer than {@code target} threads are running; running threads drain the queue and
 * park when it is empty.
 *
 * <p>Blocking handlers are not serialized behind one another: a monitor thread looks at the
 * queue every {@code stallNanos} and, when the task at its head has not moved for a whole
 * period (every running thread is busy or blocked), wakes one more thread per waiting task, up
 * to {@code max}. So N slow requests still run on N threads at once, after a delay of at most
 * two periods; the monitor sleeps while the pool is idle.
 *
 * <p>Threading: {@link #execute} may be called from any thread (it is called from event
 * loops); tasks run on the pool's threads, in no particular order. Threads idle for
 * {@code keepAliveNanos} exit and are started again when needed.
 */
final class WorkerPool extends AbstractExecutorService {
  private static final System.Logger LOG = System.getLogger("donkey");
  private static final int RUNNING = 0;
  private static final int SHUTDOWN = 1;
  private static final int STOP = 2;

  private final String name;
  private final ThreadFactory factory;
  private final int max;
  private final int target;
  private final long stallNanos;
  private final long keepAliveNanos;
  private final ConcurrentLinkedQueue<Runnable> queue = new ConcurrentLinkedQueue<>();
  /** Parked workers, most recently parked first (its stack and caches are warmest). */
  private final ConcurrentLinkedDeque<Worker> idle = new ConcurrentLinkedDeque<>();
  private final Set<Worker> workers = ConcurrentHashMap.newKeySet();
  /** The event loops' outboxes: woken by a worker before it parks, or by the monitor. */
  private final List<Outbox> outboxes = new CopyOnWriteArrayList<>();
  /** Workers not parked: running a task, looking for one, or about to park. */
  private final AtomicInteger active = new AtomicInteger();
  /** Workers started and not exited. */
  private final AtomicInteger threads = new AtomicInteger();
  private volatile int state = RUNNING;
  private volatile boolean monitorParked;
  private final Thread monitor;
  private final Object termination = new Object();
  private boolean terminated;

  /**
   * @param name the pool's name, for messages; the monitor thread is {@code name-monitor}
   * @param factory makes the worker threads (platform or virtual; it names them)
   * @param max most threads
   * @param target threads kept running without a stall (clamped to 1..max)
   * @param stallNanos how long the queue's head may wait before more threads are woken
   * @param keepAliveNanos how long an idle thread waits for work before it exits
   * @throws IllegalArgumentException when {@code max < 1}
   */
  WorkerPool(String name, ThreadFactory factory, int max, int target, long stallNanos,
             long keepAliveNanos) {
    if (max < 1) throw new IllegalArgumentException(":worker-threads must be >= 1, got " + max);
    this.name = name;
    this.factory = factory;
    this.max = max;
    this.target = Math.max(1, Math.min(max, target));
    this.stallNanos = stallNanos;
    this.keepAliveNanos = keepAliveNanos;
    monitor = new Thread(this::monitor, name + "-monitor");
    monitor.setDaemon(true);
    monitor.start();
  }

  /**
   * Queues {@code task}; wakes or starts a thread when fewer than {@code target} are running.
   *
   * @throws RejectedExecutionException after {@link #shutdown}
   */
  @Override
  public void execute(Runnable task) {
    if (task == null) throw new NullPointerException("task");
    if (state != RUNNING) throw new RejectedExecutionException(name + " is shut down");
    queue.offer(task);
    if (active.get() < target) wakeOne();
  }

  /**
   * Registers an event loop's outbox: a worker wakes every registered outbox that holds
   * responses before it parks, and the monitor wakes one whose oldest response has waited a
   * stall period (its worker went on to a slow task). Called once per loop at start.
   */
  void register(Outbox o) {
    outboxes.add(o);
  }

  /** The pool whose worker the current thread is, or null. */
  private static final ThreadLocal<WorkerPool> CURRENT = new ThreadLocal<>();

  /** True when the calling thread is one of this pool's workers. */
  boolean isWorkerThread() {
    return CURRENT.get() == this;
  }

  /** Wakes a parked worker, or starts one below {@code max}; false when neither is possible. */
  private boolean wakeOne() {
    Worker w = idle.pollFirst();
    if (w != null) {
      activate();
      w.permit = true;
      LockSupport.unpark(w.thread);
      return true;
    }
    for (;;) {
      int n = threads.get();
      if (n >= max) return false;
      if (threads.compareAndSet(n, n + 1)) break;
    }
    activate();
    Worker started = new Worker();
    workers.add(started);
    started.thread.start();
    return true;
  }

  private void activate() {
    if (active.incrementAndGet() == 1 && monitorParked) LockSupport.unpark(monitor);
  }

  private final class Worker implements Runnable {
    final Thread thread;
    volatile boolean permit;

    Worker() {
      thread = factory.newThread(this);
    }

    @Override
    public void run() {
      CURRENT.set(WorkerPool.this);
      try {
        for (;;) {
          Runnable task = queue.poll();
          if (task != null) {
            runTask(task);
            continue;
          }
          if (state != RUNNING) {
            active.decrementAndGet();
            return;
          }
          if (!park()) return;
        }
      } finally {
        workers.remove(this);
        threads.decrementAndGet();
        tryTerminate();
      }
    }

    /**
     * Parks until woken ({@code active} counted by the waker), or reclaims itself when work
     * or a shutdown arrived meanwhile.
     *
     * @return false when the thread should exit (idle for {@code keepAliveNanos}; it is no
     *     longer counted as active)
     */
    private boolean park() {
      for (Outbox o : outboxes) o.wake();
      permit = false;
      idle.addFirst(this);
      active.decrementAndGet();
      // a task queued after our poll may have seen us still active and woken nobody
      if ((!queue.isEmpty() || state != RUNNING) && idle.remove(this)) {
        active.incrementAndGet();
        return true;
      }
      long deadline = System.nanoTime() + keepAliveNanos;
      while (!permit) {
        long left = deadline - System.nanoTime();
        if (left <= 0 && idle.remove(this)) return false;
        // (a waker that already took us off the idle list sets permit at once)
        LockSupport.parkNanos(this, left > 0 ? left : 1_000_000);
      }
      // Woken by an event loop that is still reading: let it finish its iteration (and queue
      // the rest of its batch) before taking work, instead of preempting it on a shared core.
      Thread.yield();
      return true;
    }
  }

  private void runTask(Runnable task) {
    try {
      task.run();
    } catch (Throwable t) {
      LOG.log(Level.ERROR, "a task on " + Thread.currentThread().getName() + " failed", t);
    }
    if (state != STOP) Thread.interrupted();  // an interrupt meant for the task ends with it
  }

  /**
   * The monitor thread: while any worker runs, checks every {@code stallNanos} whether the
   * queue's head is the one it saw last time; if so, no task was taken for a whole period, and
   * one more thread is woken per waiting task (up to {@code max}).
   */
  private void monitor() {
    Runnable seen = null;
    while (!isTerminated()) {
      if (active.get() == 0 && queue.isEmpty()) {
        monitorParked = true;
        if (active.get() == 0 && queue.isEmpty() && !isTerminated()) LockSupport.park(this);
        monitorParked = false;
        seen = null;
        continue;
      }
      LockSupport.parkNanos(this, stallNanos);
      long now = System.nanoTime();
      for (Outbox o : outboxes) {
        if (o.overdue(now, stallNanos)) o.wake();
      }
      Runnable head = queue.peek();
      if (head != null && head == seen) {
        int waiting = 0;
        for (Runnable r : queue) {
          if (++waiting >= max) break;
        }
        for (int i = 0; i < waiting && wakeOne(); i++) {
          // one more running thread per waiting task
        }
        seen = null;
      } else {
        seen = head;
      }
    }
  }

  @Override
  public void shutdown() {
    if (state == RUNNING) state = SHUTDOWN;
    wakeIdle();
    tryTerminate();
  }

  @Override
  public List<Runnable> shutdownNow() {
    state = STOP;
    List<Runnable> left = new ArrayList<>();
    Runnable r;
    while ((r = queue.poll()) != null) left.add(r);
    for (Worker w : workers) w.thread.interrupt();
    wakeIdle();
    tryTerminate();
    return left;
  }

  private void wakeIdle() {
    Worker w;
    while ((w = idle.pollFirst()) != null) {
      activate();
      w.permit = true;
      LockSupport.unpark(w.thread);
    }
    LockSupport.unpark(monitor);
  }

  private void tryTerminate() {
    if (state == RUNNING || threads.get() != 0 || !queue.isEmpty()) return;
    synchronized (termination) {
      terminated = true;
      termination.notifyAll();
    }
    LockSupport.unpark(monitor);
  }

  @Override
  public boolean isShutdown() {
    return state != RUNNING;
  }

  @Override
  public boolean isTerminated() {
    synchronized (termination) {
      return terminated;
    }
  }

  @Override
  public boolean awaitTermination(long timeout, TimeUnit unit) throws InterruptedException {
    long deadline = System.nanoTime() + unit.toNanos(timeout);
    synchronized (termination) {
      while (!terminated) {
        long left = deadline - System.nanoTime();
        if (left <= 0) return false;
        TimeUnit.NANOSECONDS.timedWait(termination, left);
      }
      return true;
    }
  }
}
