package donkey.kernel.workers;

import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.TimeUnit;

/**
 * The executors that run sync (blocking) handlers: a {@link WorkerPool} of platform threads, or
 * of virtual threads on a JVM that has them. Tasks are unordered: N threads serve N slow
 * requests at once.
 */
public final class Workers {
  private Workers() {}

  /** True when this JVM can start virtual threads (Java 21+). */
  static boolean virtualThreadsAvailable() {
    return Runtime.version().feature() >= 21;
  }

  /**
   * A {@link WorkerPool} of up to {@code n} daemon platform threads named
   * {@code donkey-worker-N}: as many run as there are cores while they keep up, more (up to
   * {@code n}) once the oldest queued request has waited {@link #STALL_MS} ms because running
   * ones are blocked (not merely busy: more threads than cores would only take turns on them).
   * Threads idle for 60 s exit.
   *
   * @throws IllegalArgumentException when {@code n < 1}
   */
  public static WorkerPool platform(int n) {
    return platform(n, 0, 60_000, 0);
  }

  /**
   * {@link #platform(int)} with the server's settings: {@code min} threads started now and
   * kept while idle, others exiting after {@code idleMs} without work, and at most
   * {@code maxQueued} requests waiting once {@code n} are busy (0 = no bound).
   *
   * @throws IllegalArgumentException when {@code n < 1} or {@code maxQueued < 0}
   */
  public static WorkerPool platform(int n, int min, long idleMs, int maxQueued) {
    AtomicInteger ids = new AtomicInteger();
    ThreadFactory tf = r -> {
      Thread t = new Thread(r, "donkey-worker-" + ids.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
    WorkerPool p = pool(tf, false, n, min, maxQueued, idleMs);
    p.prestart();
    return p;
  }

  /**
   * A {@link WorkerPool} whose workers are virtual threads ({@code donkey-vworker-N}), with no
   * practical limit on their number: a blocking handler unmounts its virtual thread, and a
   * request that waits {@link #STALL_MS} ms behind blocked ones gets a new virtual thread, so
   * any number of slow requests run at once. Looked up at run time so the kernel still
   * compiles and loads on Java 17.
   *
   * @throws IllegalStateException on a JVM without virtual threads
   */
  public static WorkerPool virtual() {
    return virtual(60_000);
  }

  /** {@link #virtual()} whose idle threads exit after {@code idleMs} without work. */
  public static WorkerPool virtual(long idleMs) {
    if (!virtualThreadsAvailable()) {
      throw new IllegalStateException(
          ":virtual-threads? needs Java 21 or later; this JVM is " + Runtime.version());
    }
    ThreadFactory tf;
    try {
      Object builder = Thread.class.getMethod("ofVirtual").invoke(null);
      Class<?> ofVirtual = Class.forName("java.lang.Thread$Builder$OfVirtual");
      builder = ofVirtual.getMethod("name", String.class, long.class)
          .invoke(builder, "donkey-vworker-", 1L);
      tf = (ThreadFactory) Class.forName("java.lang.Thread$Builder").getMethod("factory")
          .invoke(builder);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("could not create a virtual-thread factory", e);
    }
    return pool(tf, true, Integer.MAX_VALUE, 0, 0, idleMs);
  }

  private static WorkerPool pool(ThreadFactory tf, boolean virtual, int max, int min,
                                 int maxQueued, long idleMs) {
    return new WorkerPool("donkey-worker", tf, virtual, max, min, maxQueued,
        Runtime.getRuntime().availableProcessors(),
        TimeUnit.MILLISECONDS.toNanos(STALL_MS), TimeUnit.MILLISECONDS.toNanos(idleMs));
  }

  /** How long a queued request may wait for a busy pool before another thread is woken. */
  public static final long STALL_MS = 1;
}
