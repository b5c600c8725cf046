package donkey.kernel;

import io.netty.util.AsciiString;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.net.impl.SocketAddressImpl;
import java.time.Duration;
import java.util.concurrent.ExecutorService;

/**
 * The HTTP server of one event loop. Every instance listens on the same host and port; Vert.x
 * spreads connections over them. Per-loop state (the cached {@code Date} value) lives here and
 * is only written by this loop.
 */
final class ServerVerticle extends VerticleBase {
  final ServerConfig config;
  final ExecutorService workers;
  final CharSequence serverHeader;
  private final int port;
  /** The current HTTP date, refreshed every second by a timer on this loop. */
  volatile CharSequence date;
  /** This verticle's event-loop context; set in {@link #start}. */
  volatile io.vertx.core.Context eventLoop;
  private long timer = -1;
  private HttpServer http;

  ServerVerticle(ServerConfig config, ExecutorService workers, int port) {
    this.config = config;
    this.workers = workers;
    this.port = port;
    this.serverHeader = config.serverHeader == null ? null : AsciiString.cached(config.serverHeader);
  }

  @Override
  public Future<?> start() {
    eventLoop = context;
    date = HttpDate.now();
    timer = vertx.setPeriodic(1000, id -> date = HttpDate.now());
    HttpServerOptions opts = new HttpServerOptions()
        .setMaxInitialLineLength(config.maxInitialLineLength)
        .setMaxHeaderSize(config.maxHeaderSize)
        .setHandle100ContinueAutomatically(false)
        .setTcpNoDelay(true)
        .setIdleTimeout((int) Math.min(Integer.MAX_VALUE, config.idleTimeoutMs))
        .setIdleTimeoutUnit(java.util.concurrent.TimeUnit.MILLISECONDS);
    http = vertx.createHttpServer(opts).requestHandler(r -> new Exchange(this, r).start());
    // A negative port asks Vert.x for one random port shared by every instance that asks for
    // the same negative port; SocketAddress.inetSocketAddress refuses it, the impl does not.
    return http.listen(new SocketAddressImpl(port, config.host));
  }

  /** Stops accepting; in-flight requests get up to the shutdown timeout to finish. */
  @Override
  public Future<?> stop() {
    vertx.cancelTimer(timer);
    return http == null ? Future.succeededFuture()
        : http.shutdown(Duration.ofMillis(config.shutdownTimeoutMs));
  }

  /** The port this loop's server is bound to. */
  int actualPort() {
    return http.actualPort();
  }

}
