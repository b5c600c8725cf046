package donkey.kernel.workers;

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
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * The threads (platform or virtual) that run sync handlers: up to {@code max} threads, of which
 * only as many as there are cores are kept running while they keep up, and more are woken as
 * soon as queued work waits too long.
 *
 * <p>Why not a {@code ThreadPoolExecutor}: its queue wakes a parked thread for every task that
 * finds others parked, and each woken thread wakes the next while tasks remain, so a batch of
 * fast requests spreads over dozens of threads that take turns on the same cores: two context
 * switches per request, which cost more than a small handler itself. Here a task wakes a
 * thread only when fewer than {@code target} threads are running; running threads drain the
 * queue and park when it is empty.
 *
 * <p>Blocking handlers are not serialized behind one another: a monitor thread looks at the
 * queue every {@code stallNanos}; when the task at its head has waited that long, it counts
 * the running threads stuck in a task for that long (blocked, or slow) and wakes one more
 * thread for each, at most one per waiting task and up to {@code max}, so that {@code target}
 * threads keep taking work. N slow requests thus run on N threads at once after a delay of two
 * or three periods (a thread must look blocked at two ticks: see {@link #stuck}). Handlers
 * that block often but each time briefly (a database round trip per request) are never stuck
 * that long; they count by how many workers in a task the OS finds asleep, averaged over the
 * recent looks, so the pool grows until {@code target} of them keep running. When no thread
 * is stuck or mostly asleep the cores are just busy and no thread is added. The monitor
 * sleeps while the pool is idle, ticks every period while tasks or prepared responses wait,
 * and every {@link #QUIET_TICKS} periods while threads run but nothing waits (a long streamed
 * response, say), so a task queued then waits up to that long to be looked at.
 *
 * <p>Threading: {@link #execute} may be called from any thread (it is called from event
 * loops); tasks run on the pool's threads, in no particular order, each with its interrupt
 * status cleared. Threads idle for {@code keepAliveNanos} exit and are started again when
 * needed, except the first {@code min}, which are started with the pool and stay; threads are
 * reused across tasks, so ThreadLocal values a task leaves behind are seen by later tasks on
 * that thread (as with any pool).
 *
 * <p>With a {@code maxQueued} bound, {@link #enqueueBounded} refuses a task once
 * {@code max + maxQueued} tasks are queued or running: the kernel answers such a request 503
 * at once rather than let it wait behind a backlog. Without one nothing is counted.
 *
 * <p>Public for donkey's own tests and benchmarks; it is the kernel's, with no compatibility
 * promise outside it.
 *
 * <p>One class because the pool's size, its queue, its parked threads and its wake-ups are one
 * state, changed with atomic operations by every worker and event loop together.
 */
public final class WorkerPool extends AbstractExecutorService {
  private static final System.Logger LOG = System.getLogger("donkey");
  private static final int RUNNING = 0;
  private static final int SHUTDOWN = 1;
  private static final int STOP = 2;

  private final String name;
  private final ThreadFactory factory;
  private final boolean virtual;
  private final int max;
  /** Threads started with the pool that never exit for idleness (at most {@code max}). */
  private final int min;
  /** With {@link #pending}: tasks over {@code max} that may wait; 0 = no bound. */
  private final int maxQueued;
  /** Tasks queued or running, counted only when there is a {@code maxQueued} bound, else null. */
  private final AtomicInteger pending;
  private final int target;
  private final long stallNanos;
  /**
   * The monitor's tick, in stall periods, while nothing waits (an empty queue, nothing waiting
   * to be handed back, no flush carried) though workers run: nothing can be late then, and each
   * timed wake-up costs the shared core time. A request queued meanwhile is looked at within
   * this many periods instead of one.
   */
  static final int QUIET_TICKS = 4;
  /** How many workers in a task the monitor samples, per look, for the share asleep. */
  private static final int SHARE_SAMPLE = 16;

  /**
   * Tasks that averaged under this (wall time, nanoseconds) are short: what a handler that
   * neither computes much nor waits takes. An event loop may give its core to workers running
   * such tasks ({@code ServerVerticle.flushHandoff}), never to ones that compute for long.
   */
  public static final long SHORT_TASK_NANOS = 50_000;
  private final long keepAliveNanos;
  private final ConcurrentLinkedQueue<Queued> queue = new ConcurrentLinkedQueue<>();
  /** Parked workers, most recently parked first (its stack and caches are warmest). */
  private final ConcurrentLinkedDeque<Worker> idle = new ConcurrentLinkedDeque<>();
  private final Set<Worker> workers = ConcurrentHashMap.newKeySet();
  /** Where finished work waits for the event loops: woken by a worker before it parks. */
  private final List<HandBack> handBacks = new CopyOnWriteArrayList<>();
  /** Workers not parked: running a task, looking for one, or about to park. */
  private final AtomicInteger active = new AtomicInteger();
  /** Workers started and not exited. */
  private final AtomicInteger threads = new AtomicInteger();
  /**
   * A moving average (weight 1/8) of how long the pool's tasks ran, wall time in nanoseconds.
   * Written by workers after each task (plain release stores: concurrent workers may lose
   * each other's updates, which a moving average does not mind), read by event loops.
   */
  private final AtomicLong taskNanos = new AtomicLong();
  /**
   * Monitor thread only: the share of the workers in a task that the OS found asleep,
   * averaged over the monitor's recent looks at a late queue (each look weighs an eighth).
   */
  private double asleepShare;
  private volatile int state = RUNNING;
  private volatile boolean monitorParked;
  private final Thread monitor;
  private final Object termination = new Object();
  private boolean terminated;

  /**
   * @param name the pool's name, for messages; the monitor thread is {@code name-monitor}
   * @param factory makes the worker threads (platform or virtual; it names them)
   * @param virtual true when {@code factory} makes virtual threads
   * @param max most threads
   * @param target threads kept running without a stall (clamped to 1..max)
   * @param stallNanos how long the queue's head may wait before more threads are woken
   * @param keepAliveNanos how long an idle thread waits for work before it exits
   * @throws IllegalArgumentException when {@code max < 1}
   */
  public WorkerPool(String name, ThreadFactory factory, boolean virtual, int max, int target,
                    long stallNanos, long keepAliveNanos) {
    this(name, factory, virtual, max, 0, 0, target, stallNanos, keepAliveNanos);
  }

  /**
   * As the seven-argument constructor, plus:
   *
   * @param min threads kept while idle (clamped to 0..max); started by {@link #prestart}
   * @param maxQueued tasks over {@code max} that {@link #enqueueBounded} lets wait (0 = no bound)
   * @throws IllegalArgumentException when {@code max < 1} or {@code maxQueued < 0}
   */
  public WorkerPool(String name, ThreadFactory factory, boolean virtual, int max, int min,
                    int maxQueued, int target, long stallNanos, long keepAliveNanos) {
    if (max < 1) throw new IllegalArgumentException(":worker-threads must be >= 1, got " + max);
    if (maxQueued < 0) {
      throw new IllegalArgumentException(":max-queued-requests must be >= 0, got " + maxQueued);
    }
    this.name = name;
    this.virtual = virtual;
    this.factory = factory;
    this.max = max;
    this.min = Math.max(0, Math.min(max, min));
    this.maxQueued = maxQueued;
    this.pending = maxQueued > 0 ? new AtomicInteger() : null;
    this.target = Math.max(1, Math.min(max, target));
    this.stallNanos = stallNanos;
    this.keepAliveNanos = keepAliveNanos;
    monitor = new Thread(this::monitor, name + "-monitor");
    monitor.setDaemon(true);
    monitor.start();
  }

  /**
   * Where workers leave finished work for another thread to pick up (an event loop's
   * {@code Outbox}): the pool wakes it when a worker is about to park, and its monitor when
   * what waits there is overdue. Any thread.
   */
  public interface HandBack {
    /** Has the other thread pick up what waits, unless nothing does or it is already due to. */
    void wake();

    /** True when something has waited at least {@code nanos} without a wake. */
    boolean overdue(long now, long nanos);

    /** True when nothing waits. */
    boolean quiet();
  }

  /** A task that knows when it was queued (System.nanoTime()); others are stamped here. */
  public interface Queued extends Runnable {
    long queuedAt();

    /** A worker is about to run this task (called on that worker, {@code at} from nanoTime). */
    default void started(long at) {}
  }

  private static final class Stamped implements Queued {
    private final Runnable task;
    private final long at = System.nanoTime();

    Stamped(Runnable task) {
      this.task = task;
    }

    @Override
    public long queuedAt() {
      return at;
    }

    @Override
    public void run() {
      task.run();
    }
  }

  /**
   * Queues {@code task}; wakes or starts a thread when fewer than {@code target} are running.
   *
   * @throws RejectedExecutionException after {@link #shutdown}
   */
  @Override
  public void execute(Runnable task) {
    enqueue(task);
    signal();
  }

  /**
   * Queues {@code task} without waking a thread, for a caller that queues a batch and then
   * calls {@link #signal} once. A worker woken for the first task of a batch may take the core
   * from the thread still queueing the rest (Linux preempts a waker for a thread that has
   * slept, and a virtual worker's carrier does not give the core back when the worker yields),
   * find one task, run it, park, and be woken again for the next: a batch taken a request at a
   * time.
   *
   * @throws RejectedExecutionException after {@link #shutdown}
   */
  public void enqueue(Runnable task) {
    if (task == null) throw new NullPointerException("task");
    if (state != RUNNING) throw new RejectedExecutionException(name + " is shut down");
    if (pending != null) pending.incrementAndGet();
    queue.offer(task instanceof Queued ? (Queued) task : new Stamped(task));
  }

  /**
   * {@link #enqueue}, for a new request: refused when the pool has a {@code maxQueued} bound
   * and {@code max + maxQueued} tasks are already queued or running. Any thread (event loops).
   *
   * @throws RejectedExecutionException over the bound, or after {@link #shutdown}
   */
  public void enqueueBounded(Runnable task) {
    AtomicInteger p = pending;
    if (p == null) {
      enqueue(task);
      return;
    }
    if (task == null) throw new NullPointerException("task");
    if (state != RUNNING) throw new RejectedExecutionException(name + " is shut down");
    // counted by compare-and-set, so loops submitting at once cannot overshoot the bound
    long limit = (long) max + maxQueued;
    for (;;) {
      int n = p.get();
      if (n >= limit) {
        throw new RejectedExecutionException(name + ": " + maxQueued
            + " requests already wait for " + max + " busy threads");
      }
      if (p.compareAndSet(n, n + 1)) break;
    }
    queue.offer(task instanceof Queued ? (Queued) task : new Stamped(task));
  }

  /**
   * Starts the {@code min} threads kept while idle; they park until there is work. Called once,
   * by whoever made the pool, after the constructor (a constructor does not start threads that
   * could see it half-made).
   */
  public void prestart() {
    for (int i = threads.get(); i < min; i++) {
      if (!startWorker()) return;
    }
  }

  /** Wakes or starts a thread when fewer than {@code target} are running: after {@link #enqueue}. */
  public void signal() {
    if (active.get() < target) wakeOne();
  }

  /**
   * Registers where an event loop picks up finished work: a worker wakes every registered one
   * before it parks, and the monitor wakes one whose oldest item has waited a stall period (its
   * worker went on to a slow task). Called once per loop at start.
   */
  public void register(HandBack h) {
    handBacks.add(h);
  }

  /** True when the workers are virtual threads. */
  public boolean virtual() {
    return virtual;
  }

  /** Workers not parked: running a task, or about to look for one or park. Any thread. */
  public int busy() {
    return active.get();
  }

  /**
   * Tasks waiting for a worker; counted by walking the queue, so for an occasional reading
   * (a metrics scrape), not per task. Any thread.
   */
  public int queued() {
    return queue.size();
  }

  /** Workers started and not exited. */
  public int threadCount() {
    return threads.get();
  }

  /** True while the monitor thread rests: no worker runs and nothing is queued. */
  public boolean monitorResting() {
    return monitorParked;
  }

  /**
   * Any thread: the moving average of how long this pool's recent tasks ran (wall time, so a
   * handler waiting on I/O counts its wait), in nanoseconds; 0 before the first task, and
   * always 0 for virtual workers (nothing reads it for them: the loop does not yield to them).
   */
  public long recentTaskNanos() {
    return taskNanos.get();
  }

  /** The pool whose worker the current thread is, or null. */
  private static final ThreadLocal<WorkerPool> CURRENT = new ThreadLocal<>();

  /** True when the calling thread is one of this pool's workers. */
  public boolean isWorkerThread() {
    return CURRENT.get() == this;
  }

  /** Wakes a parked worker, or starts one below {@code max}; false when neither is possible. */
  private boolean wakeOne() {
    return wakeParked() || startWorker();
  }

  /** Starts a worker below {@code max}, counted active; false at {@code max} or on failure. */
  private boolean startWorker() {
    int n;
    for (;;) {
      n = threads.get();
      if (n >= max) return false;
      if (threads.compareAndSet(n, n + 1)) break;
    }
    activate();
    try {
      // The first min threads stay. Those never exit for idleness, so while fewer than min
      // threads exist they are all such threads, and the new one is one too.
      Worker started = new Worker(n < min);
      workers.add(started);
      started.thread.start();
    } catch (Throwable t) {
      // (out of memory or threads): undo the counts, or the pool would think it has capacity
      // it does not and the monitor would never rest
      active.decrementAndGet();
      threads.decrementAndGet();
      LOG.log(Level.ERROR, name + " could not start a thread", t);
      return false;
    }
    return true;
  }

  private void activate() {
    if (active.incrementAndGet() == 1 && monitorParked) LockSupport.unpark(monitor);
  }

  private final class Worker implements Runnable {
    final Thread thread;
    /** One of the {@code min} threads that stay while idle. */
    final boolean core;
    volatile boolean permit;
    /** When the task this worker runs started (System.nanoTime()), 0 between tasks. */
    volatile long taskStart;
    /**
     * The {@link #taskStart} of the task the monitor last saw this worker blocked in, else 0.
     * Read and written by the monitor thread only.
     */
    long blockedIn;
    /**
     * What the OS says of a platform worker on Linux, else null: opened and closed by the
     * worker itself (when it starts and ends), read by the monitor thread.
     */
    volatile OsThreads.Stat stat;

    Worker(boolean core) {
      this.core = core;
      thread = factory.newThread(this);
    }

    @Override
    public void run() {
      CURRENT.set(WorkerPool.this);
      if (!virtual) stat = OsThreads.self();
      try {
        for (;;) {
          Queued task = queue.poll();
          if (task != null) {
            long at = System.nanoTime();
            taskStart = at;
            task.started(at);
            runTask(task);
            taskStart = 0;
            if (pending != null) pending.decrementAndGet();
            if (!virtual) { // only event loops over platform workers read it
              long avg = taskNanos.get();
              taskNanos.lazySet(avg + ((System.nanoTime() - at - avg) >> 3));
            }
            continue;
          }
          if (state != RUNNING) {
            for (HandBack h : handBacks) h.wake();
            active.decrementAndGet();
            return;
          }
          if (!park()) return;
        }
      } finally {
        workers.remove(this);
        OsThreads.Stat st = stat;
        if (st != null) st.close();
        threads.decrementAndGet();
        // a task queued while this thread was leaving found no idle thread and, at max, could
        // not start one: it is this thread's to hand on
        if (state == RUNNING && !queue.isEmpty()) wakeOne();
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
      for (HandBack h : handBacks) h.wake();
      permit = false;
      idle.addFirst(this);
      active.decrementAndGet();
      // A task queued after our poll may have seen us still active and woken nobody: take
      // ourselves back. Counted active before leaving the idle list: the other way round, a
      // task queued in between finds no thread active and none idle and starts a new one.
      if (!queue.isEmpty() || state != RUNNING) {
        active.incrementAndGet();
        if (idle.remove(this)) return true;
        // a waker took us off the list first and counted us itself: its permit is coming
        active.decrementAndGet();
      }
      long deadline = System.nanoTime() + keepAliveNanos;
      while (!permit) {
        if (core) {
          // kept however long it idles; a waker (or shutdown) sets permit and unparks it
          LockSupport.park(this);
        } else {
          long left = deadline - System.nanoTime();
          if (left <= 0 && idle.remove(this)) return false;
          // (a waker that already took us off the idle list sets permit at once)
          LockSupport.parkNanos(this, left > 0 ? left : 1_000_000);
        }
        // an interrupt would make every park return at once: a spinning idle thread
        if (state != STOP) Thread.interrupted();
      }
      // A platform worker takes its work at once: the loop queues its whole batch before it
      // wakes one (ServerVerticle.flushHandoff), so there is no rest of a batch to wait for.
      // A virtual worker yields first, which resubmits it to the scheduler behind the loop's
      // carrier work, which it would otherwise delay.
      if (virtual) Thread.yield();
      return true;
    }
  }

  private void runTask(Runnable task) {
    // an interrupt meant for an earlier task must not fail this one
    if (state != STOP) Thread.interrupted();
    try {
      task.run();
    } catch (Throwable t) {
      LOG.log(Level.ERROR, "a task on " + Thread.currentThread().getName() + " failed", t);
    }
  }

  /**
   * The monitor thread: while any worker runs, checks every {@code stallNanos} how long the
   * task at the queue's head has waited; from {@code stallNanos} on, wakes one more thread per
   * thread stuck in a task that long, at most one per waiting task (up to {@code max}).
   */
  private void monitor() {
    long nextTick = stallNanos;
    while (!isTerminated()) {
      if (active.get() == 0 && queue.isEmpty()) {
        monitorParked = true;
        if (active.get() == 0 && queue.isEmpty() && !isTerminated()) LockSupport.park(this);
        monitorParked = false;
        continue;
      }
      LockSupport.parkNanos(this, nextTick);
      long now = System.nanoTime();
      boolean quiet = true;
      for (HandBack h : handBacks) {
        if (h.overdue(now, stallNanos)) h.wake();
        quiet &= h.quiet();
      }
      Queued head = queue.peek();
      nextTick = quiet && head == null ? QUIET_TICKS * stallNanos : stallNanos;
      // (At max with none idle no thread can be woken, so the running ones are not looked at:
      // asking the OS costs a few microseconds a thread, every tick.)
      if (head != null && now - head.queuedAt() >= stallNanos
          && (threads.get() < max || !idle.isEmpty())) {
        // Requests are late. Threads help only if some of the running ones are stuck in a task
        // (blocked): keep `target` threads that are not, at most one per waiting task. (When
        // none is stuck the cores are simply busy, and more threads would only take turns.)
        int stuck = 0;
        int inTask = 0;
        int asleep = 0;
        for (Worker w : workers) {
          long t = w.taskStart;
          // the OS is asked about a sample of the workers in a task, and about every one long
          // in its task (each answer costs a read of its stat file)
          boolean sampled = t != 0 && inTask < SHARE_SAMPLE;
          boolean b = (sampled || (t != 0 && now - t >= stallNanos)) && blocked(w);
          if (sampled) {
            inTask++;
            if (b) asleep++;
          }
          if (stuck(w, t, now, b)) stuck++;
        }
        // Handlers that block often but briefly (a query per request to a database) are never
        // stuck, yet at any look most of the workers in a task are asleep: that share, averaged
        // over the recent looks, counts as blocked, and brings enough threads to keep `target`
        // running. A share, not a count, so that it holds as the pool grows.
        if (inTask > 0) asleepShare += ((double) asleep / inTask - asleepShare) / 8;
        int running = active.get();
        int blocked = Math.max(stuck, (int) (asleepShare * running + 0.5));
        int more = target - (running - blocked);
        int waiting = 0;
        if (more > 0) {
          for (Queued q : queue) {
            if (++waiting >= more) break;
          }
        }
        for (int i = 0; i < waiting && wakeOne(); i++) {
          // one more running thread per stuck one, while tasks wait
        }
      }
    }
  }

  /**
   * Monitor thread: true when {@code w}, in the task that started at {@code t} (0: none) and
   * {@code blocked} now, has been in that task for at least a stall period and
   * was seen {@link #blocked} at two looks, this one and an earlier one, in that same task. A
   * single look also catches a thread that only paused for a moment (a short sleep or lock
   * wait in the handler, a page fault, a GC safepoint) and would wake a thread for it (a test
   * in workers_test holds this). The price: a really blocked worker gets company one tick
   * later.
   */
  private boolean stuck(Worker w, long t, long now, boolean blocked) {
    if (t == 0 || now - t < stallNanos || !blocked) {
      w.blockedIn = 0;
      return false;
    }
    if (w.blockedIn == t) return true;
    w.blockedIn = t;
    return false;
  }

  /**
   * Monitor thread: true when {@code w}, long in its task, is blocked rather than waiting for a
   * core. Only a blocked thread frees its core, so only then does another thread help; a thread
   * that is merely preempted (on a saturated core the loop, the JIT and the other workers
   * take turns with it for milliseconds at a time) looks just as late, and counting it as
   * stuck would wake a thread per tick under load, all taking turns on the same cores. For a
   * platform thread on Linux the OS's own run state decides ({@link OsThreads.Stat}): running
   * or runnable is not blocked, asleep in the kernel (parked, sleeping, waiting for a lock, or
   * in a socket read) is. Not Java's {@link Thread#getState}: a thread woken from a park or a
   * lock keeps its WAITING or BLOCKED state until it gets a core and runs, so on saturated
   * cores a thread that only waits for a core would look blocked for milliseconds; and a
   * RUNNABLE one may be in native I/O. Where the OS cannot be asked, every such thread counts
   * as blocked. A virtual thread is blocked when it is not RUNNABLE: unparking
   * one makes it RUNNABLE at once, mounted or waiting for a carrier, and its blocking I/O
   * parks it.
   */
  private boolean blocked(Worker w) {
    if (virtual) return w.thread.getState() != Thread.State.RUNNABLE;
    OsThreads.Stat st = w.stat;
    return st == null || !st.running();
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
    Queued r;
    while ((r = queue.poll()) != null) left.add(r instanceof Stamped ? ((Stamped) r).task : r);
    for (Worker w : workers) w.thread.interrupt();
    wakeIdle();
    tryTerminate();
    return left;
  }

  /** Wakes the most recently parked worker; false when none is parked. */
  private boolean wakeParked() {
    Worker w = idle.pollFirst();
    if (w == null) return false;
    activate();
    w.permit = true;
    LockSupport.unpark(w.thread);
    return true;
  }

  private void wakeIdle() {
    while (wakeParked()) {
      // every parked worker, to see the shutdown
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
