package donkey.bench;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.Locale;
import java.util.Map;

/**
 * The bench's ceiling: the TechEmpower plaintext and JSON endpoints written directly on
 * Vert.x 5, one event loop, no framework. Same transport and server options as donkey's
 * kernel leaves at their defaults (NIO, TCP_NODELAY), same {@code Date}/{@code Server} headers,
 * JSON serialized with Jackson on every request.
 *
 * <p>Usage: {@code java -cp ... donkey.bench.RawVertx PORT}
 */
public final class RawVertx {
  private static final DateTimeFormatter DATE_FORMAT =
      DateTimeFormatter.ofPattern("EEE, dd MMM yyyy HH:mm:ss 'GMT'", Locale.US);
  private static final CharSequence SERVER = HttpHeaders.createOptimized("raw-vertx");
  private static final CharSequence TEXT_PLAIN = HttpHeaders.createOptimized("text/plain");
  private static final CharSequence APPLICATION_JSON =
      HttpHeaders.createOptimized("application/json");
  private static final Buffer HELLO = Buffer.buffer("Hello, World!");
  private static final CharSequence HELLO_LENGTH =
      HttpHeaders.createOptimized(Integer.toString(HELLO.length()));
  private static final ObjectMapper MAPPER = new ObjectMapper();

  /** Refreshed once a second by an event-loop timer; read only on the same event loop. */
  private CharSequence date = now();

  private RawVertx() {}

  private static CharSequence now() {
    return HttpHeaders.createOptimized(DATE_FORMAT.format(ZonedDateTime.now(ZoneOffset.UTC)));
  }

  private void handle(HttpServerRequest req) {
    serve(req, req.response(), date);
  }

  /**
   * The whole handler: GET /plaintext and GET /json, 405 for other methods, 404 elsewhere.
   * Public so that the JMH benchmarks ({@code bench/jmh}) measure this code, not a copy.
   * Event loop.
   */
  public static void serve(HttpServerRequest req, HttpServerResponse resp, CharSequence date) {
    String path = req.path();
    if (req.method() != HttpMethod.GET) {
      resp.setStatusCode(405).end();
    } else if ("/plaintext".equals(path)) {
      plaintext(resp, date);
    } else if ("/json".equals(path)) {
      try {
        json(resp, date);
      } catch (JsonProcessingException e) {
        resp.setStatusCode(500).end();
      }
    } else {
      resp.setStatusCode(404).end();
    }
  }

  /** The plaintext response: four header lines and a constant body. */
  public static void plaintext(HttpServerResponse resp, CharSequence date) {
    resp.headers()
        .add(HttpHeaders.CONTENT_TYPE, TEXT_PLAIN)
        .add(HttpHeaders.CONTENT_LENGTH, HELLO_LENGTH)
        .add(HttpHeaders.SERVER, SERVER)
        .add(HttpHeaders.DATE, date);
    resp.end(HELLO);
  }

  /**
   * The JSON response: a new map serialized by Jackson per call; throws, having written
   * nothing, if Jackson fails.
   */
  public static void json(HttpServerResponse resp, CharSequence date)
      throws JsonProcessingException {
    byte[] json = MAPPER.writeValueAsBytes(Map.of("message", "Hello, World!"));
    resp.headers()
        .add(HttpHeaders.CONTENT_TYPE, APPLICATION_JSON)
        .add(HttpHeaders.CONTENT_LENGTH, Integer.toString(json.length))
        .add(HttpHeaders.SERVER, SERVER)
        .add(HttpHeaders.DATE, date);
    resp.end(Buffer.buffer(json));
  }

  public static void main(String[] args) throws Exception {
    int port = args.length > 0 ? Integer.parseInt(args[0]) : 8080;
    Vertx vertx = Vertx.vertx(new VertxOptions().setEventLoopPoolSize(1));
    RawVertx app = new RawVertx();
    // The server is created from main, so Vert.x gives it an event-loop context; the timer is
    // scheduled on that same context so `date` is only ever touched by the one loop.
    vertx.runOnContext(v -> vertx.setPeriodic(1000, id -> app.date = now()));
    vertx.createHttpServer(new HttpServerOptions().setPort(port).setHost("127.0.0.1")
            .setTcpNoDelay(true))
        .requestHandler(app::handle)
        .listen()
        .await();
    System.out.println("raw-vertx listening on 127.0.0.1:" + port);
  }
}
