package donkey.kernel;

import java.util.concurrent.RejectedExecutionException;

/**
 * Work tied to the request being served, for middleware that holds resources a request may
 * outlive its handler's interest in (temp files of an upload, say): an action registered here
 * runs once, on the event loop, when the request is over: its response has been sent, or it was
 * answered by a timeout (a handler that never answers), or its connection closed.
 *
 * <p>Middleware of non-blocking handlers that must block (parse an upload into temp files, say)
 * hands that work to the server's worker pool with {@link #offload} and carries on back on the
 * event loop.
 *
 * <p>Threading: every method only while a non-blocking (async) handler runs, on its event
 * loop; elsewhere they decline, and the caller does the work itself (a sync handler's
 * middleware already runs on a worker, and can clean up in a {@code finally}).
 *
 * <p>The actions and the over flag are the request's {@link Exchange}'s ({@link
 * Exchange#atEnd}): this class keeps no state of its own, and a request that registers
 * nothing costs nothing here.
 */
public final class RequestScope {

  private RequestScope() {}

  /**
   * Has {@code action} run once the request whose non-blocking handler the calling thread is
   * running is over (at once when it is over already). An action that throws is logged.
   *
   * @return false, registering nothing, when the calling thread is not running a non-blocking
   *     donkey handler
   */
  public static boolean atEnd(Runnable action) {
    Exchange e = running();
    if (e == null) return false;
    e.atEnd(action);
    return true;
  }

  /**
   * As {@link #atEnd}, but the action runs on one of the server's worker threads, for one
   * that blocks (deleting files, say); when it throws, the worker logs it.
   *
   * @return false, registering nothing, when the calling thread is not running a non-blocking
   *     donkey handler
   */
  public static boolean atEndOnWorker(Runnable action) {
    Exchange e = running();
    if (e == null) return false;
    ServerVerticle loop = e.loop();
    // on the loop when the pool has stopped
    e.atEnd(() -> {
      try {
        loop.workers.execute(action);
      } catch (RejectedExecutionException stopped) {
        action.run();
      }
    });
    return true;
  }

  /**
   * Runs {@code blocking} on one of the server's worker threads, then {@code then} on the
   * request's event loop, as part of its handler: {@link #atEnd} and {@link #isOver} work
   * there, and a throwable from either is passed to the handler's {@code raise} (when
   * {@code blocking} throws, {@code then} does not run). {@code then} runs even when the request
   * ended meanwhile (timed out, or its client went away), so that it can release what
   * {@code blocking} made; it checks {@link #isOver} before answering.
   *
   * @return false, running nothing, when the calling thread is not running a non-blocking
   *     donkey handler
   * @throws java.util.concurrent.RejectedExecutionException when the server is stopping
   */
  public static boolean offload(Runnable blocking, Runnable then) {
    Exchange e = running();
    if (e == null) return false;
    e.loop().workers.execute(() -> {
      Throwable failed = null;
      try {
        blocking.run();
      } catch (Throwable t) {
        failed = t;
      }
      Throwable f = failed;
      e.onLoop(() -> e.resume(f == null ? then : null, f));
    });
    return true;
  }

  /**
   * True when the request whose non-blocking handler the calling thread runs is already over:
   * answered (by a timeout, say) and sent, or its connection closed. False while it is not,
   * and on any thread not running a non-blocking donkey handler.
   */
  public static boolean isOver() {
    Exchange e = running();
    return e != null && e.isOver();
  }

  /**
   * The Vert.x context of the event loop running the non-blocking handler on the calling
   * thread, or null on any other thread: what a Vert.x client made from the server's Vert.x
   * instance runs its callbacks on when used from the handler.
   */
  public static io.vertx.core.Context context() {
    Exchange e = running();
    return e == null ? null : e.loop().eventLoop;
  }

  private static Exchange running() {
    ServerVerticle loop = ServerVerticle.current();
    return loop == null ? null : loop.running();
  }
}
