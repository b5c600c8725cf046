package donkey.bench;

import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.ServerWebSocket;
import java.util.LinkedHashSet;
import java.util.Set;

/**
 * The WebSocket bench's ceiling (bench/websocket.sh): Vert.x 5's own WebSocket server, one
 * event loop, no framework, with the same two endpoints as donkey's bench app
 * ({@code donkey.bench.ws-app}). Messages are handled as the Ring API hands them over: a text
 * message arrives as a String and is sent back as one.
 *
 * <ul>
 *   <li>{@code /echo}: every text message is sent back.
 *   <li>{@code /broadcast}: a text message starting with {@code broadcast} is sent to every
 *       socket open on this endpoint, the sender included.
 *   <li>any other path upgrades to an idle socket; {@code GET /plaintext} answers as
 *       {@link RawVertx} does, so the bench scripts' readiness check works unchanged.
 * </ul>
 *
 * <p>Threading: every handler runs on the one event loop, so the set of open sockets needs no
 * lock. Usage: {@code java -cp ... donkey.bench.RawVertxWebSocket PORT}
 */
public final class RawVertxWebSocket {
  private final Set<ServerWebSocket> listeners = new LinkedHashSet<>();

  private RawVertxWebSocket() {}

  private void accept(ServerWebSocket ws) {
    switch (ws.path()) {
      case "/echo":
        ws.textMessageHandler(ws::writeTextMessage);
        break;
      case "/broadcast":
        listeners.add(ws);
        ws.closeHandler(v -> listeners.remove(ws));
        ws.textMessageHandler(text -> {
          if (text.startsWith("broadcast")) {
            for (ServerWebSocket each : listeners) each.writeTextMessage(text);
          }
        });
        break;
      default:
        break;
    }
  }

  public static void main(String[] args) throws Exception {
    int port = args.length > 0 ? Integer.parseInt(args[0]) : 8080;
    Vertx vertx = Vertx.vertx(new VertxOptions().setEventLoopPoolSize(1));
    RawVertxWebSocket app = new RawVertxWebSocket();
    vertx.createHttpServer(new HttpServerOptions().setPort(port).setHost("127.0.0.1")
            .setTcpNoDelay(true))
        .webSocketHandler(app::accept)
        .requestHandler(req -> RawVertx.serve(req, req.response(), "Thu, 01 Jan 1970 00:00:00 GMT"))
        .listen()
        .await();
    System.out.println("raw-vertx-ws listening on 127.0.0.1:" + port);
  }
}
