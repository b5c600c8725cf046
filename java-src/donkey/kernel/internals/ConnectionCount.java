package donkey.kernel.internals;

import donkey.kernel.metrics.ServerMetrics;
import java.lang.System.Logger.Level;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A server's open connections against {@code :max-connections} (0: no limit), shared by every
 * event loop's {@code ConnectionGuard} and by the TLS listener's accept hook
 * ({@link VertxInternals#countAtAccept}), so that both kinds of connection draw on one limit.
 *
 * <p>Threading: any thread (atomic); the acceptor thread and every event loop call it.
 */
public final class ConnectionCount {
  private static final System.Logger LOG = System.getLogger("donkey");

  private final int max;
  private final AtomicInteger open = new AtomicInteger();
  /** When a refusal was last logged; a racy read only lets an extra warning through. */
  private volatile long lastRefusalLog;

  /** Told of each refused connection, or null. */
  private final ServerMetrics metrics;

  /** @param metrics told of each connection refused, or null */
  public ConnectionCount(int max, ServerMetrics metrics) {
    this.max = max;
    this.metrics = metrics;
  }

  /**
   * Counts a new connection and returns true, or returns false (counting nothing) when the
   * server is at its limit; the caller then closes the connection at once.
   */
  public boolean admit() {
    int n = open.incrementAndGet();
    if (max <= 0 || n <= max) return true;
    open.decrementAndGet();
    if (metrics != null) metrics.connectionRefused();
    long now = System.nanoTime();
    if (now - lastRefusalLog > 1_000_000_000L) {
      lastRefusalLog = now;
      LOG.log(Level.WARNING, "refusing connections over :max-connections ({0})", max);
    }
    return false;
  }

  /** A connection {@link #admit} counted has closed. */
  public void release() {
    open.decrementAndGet();
  }

  /** Open connections of the whole server. */
  public int open() {
    return open.get();
  }
}
