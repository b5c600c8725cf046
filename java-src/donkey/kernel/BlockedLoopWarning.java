package donkey.kernel;

import donkey.kernel.config.Durations;
import java.util.List;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Warns, once per occurrence, when a non-blocking handler has held its event loop longer than
 * {@code :blocked-warning} ms, naming the route (Vert.x's own blocked-thread warning only shows
 * a stack). The loop only publishes which request it is running ({@link
 * ServerVerticle#running()}: no clock read on the request path); this check times a request
 * from the first look that sees it, so a warning comes between {@code :blocked-warning} and
 * that plus two check periods after the handler started. A request's handler runs once, so
 * seeing the same request at two looks means the loop was held the whole time in between.
 *
 * <p>Threading: {@link #check} runs on the server's watchdog thread only.
 */
final class BlockedLoopWarning {
  private final List<ServerVerticle> loops;
  private final long limitNanos;
  private final Exchange[] seen;
  private final long[] seenAt;
  private final Exchange[] warned;

  private BlockedLoopWarning(List<ServerVerticle> loops, int eventLoops, long limitMs) {
    this.loops = loops;
    this.limitNanos = Durations.nanos(limitMs);
    this.seen = new Exchange[eventLoops];
    this.seenAt = new long[eventLoops];
    this.warned = new Exchange[eventLoops];
  }

  /**
   * Looks at {@code loops} (of {@code eventLoops} event loops) every quarter of
   * {@code limitMs}, between 50 ms and 1 s, on {@code watchdog}.
   */
  static void schedule(ScheduledExecutorService watchdog, List<ServerVerticle> loops,
                       int eventLoops, long limitMs) {
    BlockedLoopWarning w = new BlockedLoopWarning(loops, eventLoops, limitMs);
    long every = Math.max(50, Math.min(1000, limitMs / 4));
    watchdog.scheduleWithFixedDelay(w::check, every, every, TimeUnit.MILLISECONDS);
  }

  private void check() {
    long now = System.nanoTime();
    for (int i = 0; i < loops.size() && i < warned.length; i++) {
      Exchange e = loops.get(i).running();
      if (e != seen[i]) {
        seen[i] = e;
        seenAt[i] = now;
        continue;
      }
      if (e == null || e == warned[i]) continue;
      long held = now - seenAt[i];
      if (held > limitNanos) {
        warned[i] = e;
        System.getLogger("donkey").log(System.Logger.Level.WARNING,
            "an event loop has been blocked for at least " + held / 1_000_000 + " ms by the "
            + "non-blocking handler of " + e.handlerName() + " serving " + e.where()
            + "; non-blocking handlers must not block (use :handler-mode :blocking)");
      }
    }
  }
}
