package donkey.kernel;

import io.vertx.core.http.HttpConnection;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The connections of one event loop: enforces {@code :max-connections} (shared by every loop
 * of a server), {@code :header-timeout} (a connection must deliver each complete request head
 * within that time of opening or of its previous response, so a client trickling header bytes,
 * slowloris-style, cannot hold a connection forever) and {@code :request-timeout} (a handler
 * that has not answered in time gets its client a 503). Both timeouts are checked by a sweep
 * every {@link #sweepPeriodMs} rather than a timer per request, which would cost more than
 * the rest of a small request's bookkeeping.
 *
 * <p>Threading: every method runs on the owning event loop, except that {@link #open} is
 * shared between loops (atomic).
 */
final class ConnectionGuard {
  private static final System.Logger LOG = System.getLogger("donkey");

  /** Per-connection state; loop-confined. */
  static final class State {
    int started;
    int ended;
    long idleSince = System.nanoTime();
    /** The request being served (HTTP/1.x serves one at a time per connection), or null. */
    Exchange current;
    /** The peer's address, formatted once per connection. */
    String remoteAddress;
    /** Set once an answer said Connection: close; requests read after it are not served. */
    boolean closing;
  }

  /** How often the sweep runs: a quarter of the shortest timeout, within 50..1000 ms. */
  static long sweepPeriodMs(ServerConfig config) {
    long shortest = Long.MAX_VALUE;
    if (config.headerTimeoutMs > 0) shortest = config.headerTimeoutMs;
    if (config.requestTimeoutMs > 0) shortest = Math.min(shortest, config.requestTimeoutMs);
    return Math.max(50, Math.min(1000, shortest / 4));
  }

  private final ServerConfig config;
  private final AtomicInteger open;
  private final Map<HttpConnection, State> connections = new IdentityHashMap<>();
  private long lastRefusalLog;
  /** A one-entry cache of the last lookup: pipelined requests arrive on the same connection. */
  private HttpConnection lastConnection;
  private State lastState;

  ConnectionGuard(ServerConfig config, AtomicInteger open) {
    this.config = config;
    this.open = open;
  }

  /** A connection was accepted: refuse it (close at once) when over the limit, else track it. */
  void accept(HttpConnection c) {
    int n = open.incrementAndGet();
    if (config.maxConnections > 0 && n > config.maxConnections) {
      open.decrementAndGet();
      long now = System.nanoTime();
      if (now - lastRefusalLog > 1_000_000_000L) {
        lastRefusalLog = now;
        LOG.log(Level.WARNING, "refusing connections over :max-connections ({0})",
            config.maxConnections);
      }
      c.close();
      return;
    }
    State s = new State();
    connections.put(c, s);
    c.closeHandler(v -> {
      if (connections.remove(c) != null) open.decrementAndGet();
      if (lastConnection == c) {
        lastConnection = null;
        lastState = null;
      }
    });
  }

  /** A request head arrived on {@code c}; returns its state (null when untracked). */
  State requestStarted(HttpConnection c) {
    State s;
    if (c == lastConnection) {
      s = lastState;
    } else {
      s = connections.get(c);
      lastConnection = c;
      lastState = s;
    }
    if (s != null) s.started++;
    return s;
  }

  /** The response to a request of {@code s} has ended. */
  static void responseEnded(State s) {
    s.ended++;
    s.current = null;
    s.idleSince = System.nanoTime();
  }

  /**
   * Closes connections that have waited too long for a complete request head, and answers 503
   * for requests whose handler has not answered within {@code :request-timeout}.
   */
  void sweep() {
    if (connections.isEmpty()) return;
    long headerLimit = config.headerTimeoutMs * 1_000_000L;
    long requestLimit = config.requestTimeoutMs * 1_000_000L;
    long now = System.nanoTime();
    List<HttpConnection> late = null;
    List<Exchange> timedOut = null;
    for (Map.Entry<HttpConnection, State> e : connections.entrySet()) {
      State s = e.getValue();
      if (s.started == s.ended) {
        if (headerLimit > 0 && now - s.idleSince > headerLimit) {
          if (late == null) late = new ArrayList<>();
          late.add(e.getKey());
        }
      } else {
        Exchange x = s.current;
        if (requestLimit > 0 && x != null && x.unanswered() && now - x.dispatchedAt > requestLimit) {
          if (timedOut == null) timedOut = new ArrayList<>();
          timedOut.add(x);
        }
      }
    }
    if (late != null) {
      for (HttpConnection c : late) c.close();
    }
    if (timedOut != null) {
      for (Exchange x : timedOut) x.timedOut();
    }
  }

  /** Open connections of the whole server. */
  int openConnections() {
    return open.get();
  }
}
