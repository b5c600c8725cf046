package donkey.kernel.metrics;

import donkey.kernel.workers.WorkerPool;
import donkey.route.Route;

/**
 * What the kernel reports to a metrics library while it serves ({@code :metrics}): requests
 * with their route, status and time, the answers the kernel gives on its own, connections by
 * protocol, bytes, WebSocket sessions and the worker pool. The kernel holds one per server,
 * or none (null) when metrics are off, and then calls nothing: no implementation is loaded.
 * {@code donkey.metrics} implements it on Micrometer; the kernel knows no metrics library.
 *
 * <p>Threading: every method may be called from any of the server's event loops, and
 * {@link #kernelAnswered} and {@link #bytesWritten} from worker threads too; implementations
 * are thread-safe and must not block. {@link #start} and {@link #stop} run once each, on the
 * thread that starts or stops the server.
 */
public interface ServerMetrics {
  /** A connection speaking HTTP/1.x (TLS or not), for {@link #connectionOpened}. */
  int HTTP_1 = 0;
  /** A cleartext HTTP/2 connection. */
  int H2C = 1;
  /** An HTTP/2 connection over TLS. */
  int H2 = 2;
  /** A connection that became a WebSocket. */
  int WEBSOCKET = 3;

  /**
   * The server starts: register what is read from the server, such as the worker pool.
   *
   * @param routeTable true when the server serves a route table, false for a single handler
   *     (whose requests all end with a null route)
   */
  void start(WorkerPool workers, boolean routeTable);

  /** The server has stopped: take this server's meters out of the registry. */
  void stop();

  /** A request's head has arrived and its handling begins. */
  void requestStarted();

  /**
   * The request {@link #requestStarted} reported is over, once.
   *
   * @param route the route that took it, or null when none did (404, 405, a refusal before
   *     routing) or the server has no route table
   * @param method its method as sent (any token)
   * @param status the status answered, or 0 when the connection closed before the answer ended
   * @param nanos from its head's arrival to the end of its answer
   */
  void requestEnded(Route route, String method, int status, long nanos);

  /**
   * The kernel answered a request itself, with {@code status}: a malformed or refused request,
   * no route, a timeout, a body too large, a full queue, a handler that failed.
   */
  void kernelAnswered(int status);

  /** A connection of {@code protocol} ({@link #HTTP_1}, ...) is open. */
  void connectionOpened(int protocol);

  /** A connection {@link #connectionOpened} reported has closed or changed protocol. */
  void connectionClosed(int protocol);

  /** A connection was closed at its accept: the server was at {@code :max-connections}. */
  void connectionRefused();

  /** The kernel reset an HTTP/2 stream. */
  void streamReset();

  /** {@code n} bytes were read from a connection's socket. */
  void bytesRead(long n);

  /** {@code n} bytes were written to a connection's socket. */
  void bytesWritten(long n);
}
