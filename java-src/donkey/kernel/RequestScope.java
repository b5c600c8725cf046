package donkey.kernel;

/**
 * Work tied to the request being served, for middleware that holds resources a request may
 * outlive its handler's interest in (temp files of an upload, say): an action registered here
 * runs once, on the event loop, when the request is over: its response has been sent, or it was
 * answered by a timeout (a handler that never answers), or its connection closed.
 *
 * <p>Threading: {@link #atEnd} only while a non-blocking (async) handler runs, on its event
 * loop; elsewhere it declines, and the caller cleans up itself (a sync handler's middleware
 * can, in a {@code finally}).
 */
public final class RequestScope {
  private RequestScope() {}

  /**
   * Has {@code action} run once the request whose non-blocking handler the calling thread is
   * running is over. An action that throws is logged.
   *
   * @return false, registering nothing, when the calling thread is not running a non-blocking
   *     donkey handler
   */
  public static boolean atEnd(Runnable action) {
    ServerVerticle loop = ServerVerticle.current();
    Exchange e = loop == null ? null : loop.running();
    if (e == null) return false;
    e.atEnd(action);
    return true;
  }
}
