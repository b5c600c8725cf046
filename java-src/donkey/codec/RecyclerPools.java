package donkey.codec;

import com.fasterxml.jackson.core.util.BufferRecycler;
import com.fasterxml.jackson.core.util.JsonRecyclerPools;
import com.fasterxml.jackson.core.util.RecyclerPool;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;

/**
 * Jackson's buffer recycling for a server whose handlers run on platform threads (event loops,
 * workers) and on virtual threads. Jackson's default keeps one {@link BufferRecycler} per
 * thread: right for long-lived platform threads, but a full set of fresh buffers (about 16 KB)
 * allocated per virtual thread, which often lives for one request, or is one of thousands
 * parked in slow handlers. This pool keeps the per-thread recycler for platform threads and
 * shares a bounded pool among virtual threads.
 *
 * <p>Threading: any thread; the shared part is lock-free.
 */
public final class RecyclerPools {
  private RecyclerPools() {}

  /** {@code Thread::isVirtual}, or null on a JVM before 21 (no virtual threads there). */
  private static final MethodHandle IS_VIRTUAL = isVirtualHandle();

  private static MethodHandle isVirtualHandle() {
    try {
      return MethodHandles.publicLookup().findVirtual(Thread.class, "isVirtual",
          MethodType.methodType(boolean.class));
    } catch (ReflectiveOperationException e) {
      return null;
    }
  }

  /** True when {@code t} is a virtual thread. */
  static boolean isVirtual(Thread t) {
    if (IS_VIRTUAL == null) return false;
    try {
      return (boolean) IS_VIRTUAL.invokeExact(t);
    } catch (Throwable e) {
      return false;
    }
  }

  /**
   * A new pool: per-thread recyclers for platform threads, one shared pool for virtual ones
   * (a recycler acquired and released on one virtual thread is handed to the next one).
   */
  public static RecyclerPool<BufferRecycler> threadAware() {
    return new ThreadAware();
  }

  private static final class ThreadAware implements RecyclerPool<BufferRecycler> {
    private static final long serialVersionUID = 1L;
    private final RecyclerPool<BufferRecycler> perThread = JsonRecyclerPools.threadLocalPool();
    /** Bounded: recyclers held by reads blocked on slow uploads are not kept once returned. */
    private final RecyclerPool<BufferRecycler> shared = JsonRecyclerPools.newBoundedPool(
        Math.max(16, 4 * Runtime.getRuntime().availableProcessors()));

    private RecyclerPool<BufferRecycler> forCurrentThread() {
      return isVirtual(Thread.currentThread()) ? shared : perThread;
    }

    /** The recycler is linked to the sub-pool it came from, which takes it back. */
    @Override
    public BufferRecycler acquireAndLinkPooled() {
      return forCurrentThread().acquireAndLinkPooled();
    }

    @Override
    public BufferRecycler acquirePooled() {
      return forCurrentThread().acquirePooled();
    }

    @Override
    public void releasePooled(BufferRecycler r) {
      forCurrentThread().releasePooled(r);
    }
  }
}
