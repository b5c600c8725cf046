package donkey.kernel;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The executors that run sync (blocking) handlers: a fixed pool of platform threads, or one
 * virtual thread per task on a JVM that has them. Tasks are unordered: N threads serve N slow
 * requests at once.
 */
final class Workers {
  private Workers() {}

  /** True when this JVM can start virtual threads (Java 21+). */
  static boolean virtualThreadsAvailable() {
    return Runtime.version().feature() >= 21;
  }

  /**
   * A fixed pool of {@code n} daemon platform threads named {@code donkey-worker-N}.
   *
   * @throws IllegalArgumentException when {@code n < 1}
   */
  static ExecutorService platform(int n) {
    if (n < 1) throw new IllegalArgumentException(":worker-threads must be >= 1, got " + n);
    AtomicInteger ids = new AtomicInteger();
    ThreadFactory tf = r -> {
      Thread t = new Thread(r, "donkey-worker-" + ids.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
    ThreadPoolExecutor pool =
        new ThreadPoolExecutor(n, n, 60, TimeUnit.SECONDS, new LinkedBlockingQueue<>(), tf);
    pool.allowCoreThreadTimeOut(true);
    return pool;
  }

  /**
   * {@code Executors.newVirtualThreadPerTaskExecutor()}, looked up at run time so the kernel
   * still compiles and loads on Java 17.
   *
   * @throws IllegalStateException on a JVM without virtual threads
   */
  static ExecutorService virtual() {
    if (!virtualThreadsAvailable()) {
      throw new IllegalStateException(
          ":virtual-threads? needs Java 21 or later; this JVM is " + Runtime.version());
    }
    try {
      return (ExecutorService) MethodHandles.publicLookup()
          .findStatic(java.util.concurrent.Executors.class, "newVirtualThreadPerTaskExecutor",
              MethodType.methodType(ExecutorService.class))
          .invoke();
    } catch (Throwable t) {
      throw new IllegalStateException("could not create a virtual-thread executor", t);
    }
  }
}
