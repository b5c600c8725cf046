package donkey.kernel.websocket;

import donkey.kernel.config.Durations;
import donkey.kernel.config.ServerConfig;
import donkey.kernel.workers.WorkerPool;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;
import java.util.function.Consumer;

/**
 * One event loop's WebSockets: the sockets its connections became, what they need of the loop
 * (the server's options, and how a sync listener's callbacks reach the workers), their idle
 * and ping sweep, and their close when the server stops. The kernel's HTTP side checks the
 * handshake and hands the connection over through {@link #open} and {@link #opened}.
 *
 * <p>Threading: confined to its event loop, like the connections it holds.
 */
public final class WebSockets {
  final ServerConfig config;
  /**
   * Queues a sync listener's batch of callbacks for the workers, woken once for everything the
   * loop queued in the same iteration; throws RejectedExecutionException once the pool has
   * shut down.
   */
  final Consumer<Runnable> handOff;
  /** The loop's open sockets (on-open has run, on-close has not). */
  final Set<WebSocketSession> open = Collections.newSetFromMap(new IdentityHashMap<>());

  /**
   * @param handOff queues a task for the workers without waking one (the loop wakes them once
   *     per iteration)
   */
  public WebSockets(ServerConfig config, Consumer<Runnable> handOff) {
    this.config = config;
    this.handOff = handOff;
  }

  /**
   * Event loop, once the handshake has been checked: a socket on {@code channel} for
   * {@code listener}, not open yet. Its callbacks run on {@code workers}, one at a time, or on
   * the loop when {@code workers} is null (a non-blocking handler's socket).
   *
   * @param where the request line's target, for log lines
   */
  public WebSocket socket(Channel channel, WebSocketListener listener, WorkerPool workers,
                          String where) {
    return new WebSocket(this, channel, listener, workers, where);
  }

  /** The Netty handler that takes the connection's HTTP handler's place for {@code ws}. */
  public static ChannelHandler handler(WebSocket ws) {
    return ws.session;
  }

  /**
   * Event loop, once the handshake's 101 has been written: {@code ws} starts reading (frames
   * the client sent behind its upgrade request first) and its on-open runs.
   */
  public static void opened(WebSocket ws, long now) {
    ws.session.opened(now);
  }

  /**
   * How often the loop sweeps its sockets: a quarter of the shorter of {@code :ws-idle-timeout}
   * and {@code :ws-ping-interval}, within 50..1000 ms; 0 when both are off.
   */
  public static long sweepPeriodMs(ServerConfig config) {
    long shortest = Long.MAX_VALUE;
    if (config.wsIdleTimeoutMs > 0) shortest = config.wsIdleTimeoutMs;
    if (config.wsPingIntervalMs > 0) shortest = Math.min(shortest, config.wsPingIntervalMs);
    if (shortest == Long.MAX_VALUE) return 0;
    return Math.max(50, Math.min(1000, shortest / 4));
  }

  /** Event loop: the idle and ping checks of the open sockets ({@link WebSocketSession#sweep}). */
  public void sweep() {
    if (open.isEmpty()) return;
    long now = System.nanoTime();
    long idle = Durations.nanos(config.wsIdleTimeoutMs);
    long ping = Durations.nanos(config.wsPingIntervalMs);
    for (WebSocketSession ws : open.toArray(new WebSocketSession[0])) ws.sweep(now, idle, ping);
  }

  /**
   * Event loop, as the server stops: sends every open socket a close with {@code code}; each
   * connection ends when its client answers, or when the close's wait is up.
   */
  public void closeAll(int code, String reason) {
    for (WebSocketSession ws : open.toArray(new WebSocketSession[0])) {
      ws.closeLocally(code, reason);
    }
  }
}
