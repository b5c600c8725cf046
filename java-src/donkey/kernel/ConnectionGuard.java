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
 * of a server) and {@code :header-timeout} (a connection must deliver each complete request
 * head within that time of opening or of its previous response, so a client trickling header
 * bytes, slowloris-style, cannot hold a connection forever).
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
  }

  private final ServerConfig config;
  private final AtomicInteger open;
  private final Map<HttpConnection, State> connections = new IdentityHashMap<>();
  private long lastRefusalLog;

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
    });
  }

  /** A request head arrived on {@code c}; returns its state (null when untracked). */
  State requestStarted(HttpConnection c) {
    State s = connections.get(c);
    if (s != null) s.started++;
    return s;
  }

  /** The response to a request of {@code s} has ended. */
  static void responseEnded(State s) {
    s.ended++;
    s.idleSince = System.nanoTime();
  }

  /** Closes connections that have waited too long for a complete request head. */
  void sweep() {
    long limit = config.headerTimeoutMs * 1_000_000L;
    if (limit <= 0 || connections.isEmpty()) return;
    long now = System.nanoTime();
    List<HttpConnection> late = null;
    for (Map.Entry<HttpConnection, State> e : connections.entrySet()) {
      State s = e.getValue();
      if (s.started == s.ended && now - s.idleSince > limit) {
        if (late == null) late = new ArrayList<>();
        late.add(e.getKey());
      }
    }
    if (late != null) {
      for (HttpConnection c : late) c.close();
    }
  }

  /** Open connections of the whole server. */
  int openConnections() {
    return open.get();
  }
}
