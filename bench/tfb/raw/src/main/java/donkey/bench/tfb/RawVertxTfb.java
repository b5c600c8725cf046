package donkey.bench.tfb;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.vertx.core.DeploymentOptions;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import io.vertx.pgclient.PgConnectOptions;
import io.vertx.pgclient.PgConnection;
import io.vertx.sqlclient.PreparedQuery;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.RowSet;
import io.vertx.sqlclient.Tuple;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * TechEmpower's seven tests written directly on Vert.x, as its own vertx entry is: a verticle
 * per event loop, each with one PostgreSQL connection of the reactive client opened on that
 * loop, every query of a request in flight at once (pipelining), the updates in one batch.
 * JSON is Vert.x's own ({@link JsonObject}); the Fortunes page is built by hand; test 7 reads a
 * Caffeine cache filled at start-up, as the donkey app does.
 *
 * <p>Usage: {@code java -cp ... donkey.bench.tfb.RawVertxTfb PORT}; the database is
 * hello_world on 127.0.0.1, port TFB_DB_PORT (default 5432); {@code -Dtfb.eventLoops=N}
 * (default: the cores).
 */
public final class RawVertxTfb extends VerticleBase {
  private static final DateTimeFormatter DATE_FORMAT =
      DateTimeFormatter.ofPattern("EEE, dd MMM yyyy HH:mm:ss 'GMT'", Locale.US);
  private static final CharSequence SERVER = HttpHeaders.createOptimized("raw-vertx");
  private static final CharSequence TEXT_PLAIN = HttpHeaders.createOptimized("text/plain");
  private static final CharSequence JSON = HttpHeaders.createOptimized("application/json");
  private static final CharSequence HTML = HttpHeaders.createOptimized("text/html; charset=utf-8");
  private static final Buffer HELLO = Buffer.buffer("Hello, World!");
  private static final String SELECT_WORLD = "SELECT id, randomnumber FROM world WHERE id = $1";
  private static final String UPDATE_WORLD = "UPDATE world SET randomnumber = $1 WHERE id = $2";
  private static final String SELECT_FORTUNES = "SELECT id, message FROM fortune";

  private static volatile CharSequence date = now();
  private static Cache<Integer, JsonObject> cache;

  private final PgConnectOptions db;
  private PgConnection conn;
  private PreparedQuery<RowSet<Row>> selectWorld;
  private PreparedQuery<RowSet<Row>> updateWorld;
  private PreparedQuery<RowSet<Row>> selectFortunes;

  private RawVertxTfb(PgConnectOptions db) {
    this.db = db;
  }

  private static CharSequence now() {
    return HttpHeaders.createOptimized(DATE_FORMAT.format(ZonedDateTime.now(ZoneOffset.UTC)));
  }

  @Override
  public Future<?> start() {
    return PgConnection.connect(vertx, db).compose(c -> {
      conn = c;
      selectWorld = c.preparedQuery(SELECT_WORLD);
      updateWorld = c.preparedQuery(UPDATE_WORLD);
      selectFortunes = c.preparedQuery(SELECT_FORTUNES);
      int port = Integer.parseInt(config().getString("port"));
      return vertx.createHttpServer(new HttpServerOptions())
          .requestHandler(this::handle)
          .listen(port, "127.0.0.1");
    });
  }

  private void handle(HttpServerRequest req) {
    HttpServerResponse resp = req.response();
    resp.headers().add(HttpHeaders.SERVER, SERVER).add(HttpHeaders.DATE, date);
    switch (req.path()) {
      case "/plaintext" -> {
        resp.headers().add(HttpHeaders.CONTENT_TYPE, TEXT_PLAIN);
        resp.end(HELLO);
      }
      case "/json" -> json(resp, new JsonObject().put("message", "Hello, World!").toBuffer());
      case "/db" -> selectWorld.execute(Tuple.of(randomId())).onComplete(ar -> {
        if (ar.failed()) {
          fail(resp, ar.cause());
        } else {
          json(resp, world(ar.result().iterator().next()).toBuffer());
        }
      });
      case "/queries" -> worlds(count(req.getParam("queries"))).onComplete(ar -> {
        if (ar.failed()) {
          fail(resp, ar.cause());
        } else {
          json(resp, new JsonArray(ar.result()).toBuffer());
        }
      });
      case "/updates" -> updates(resp, count(req.getParam("queries")));
      case "/fortunes" -> fortunes(resp);
      case "/cached-queries" -> {
        int n = count(req.getParam("count"));
        JsonArray a = new JsonArray(new ArrayList<>(n));
        for (int i = 0; i < n; i++) a.add(cache.getIfPresent(randomId()));
        json(resp, a.toBuffer());
      }
      default -> resp.setStatusCode(404).end();
    }
  }

  private static int randomId() {
    return 1 + ThreadLocalRandom.current().nextInt(10000);
  }

  /** TechEmpower's rule: 1..500, and 1 for a missing or non-numeric value. */
  private static int count(String v) {
    if (v == null) return 1;
    try {
      return Math.max(1, Math.min(500, Integer.parseInt(v.trim())));
    } catch (NumberFormatException e) {
      return 1;
    }
  }

  private static JsonObject world(Row r) {
    return new JsonObject().put("id", r.getInteger(0)).put("randomNumber", r.getInteger(1));
  }

  private Future<List<JsonObject>> worlds(int n) {
    List<Future<RowSet<Row>>> fs = new ArrayList<>(n);
    for (int i = 0; i < n; i++) fs.add(selectWorld.execute(Tuple.of(randomId())));
    return Future.all(fs).map(all -> {
      List<JsonObject> out = new ArrayList<>(n);
      for (int i = 0; i < n; i++) out.add(world(all.<RowSet<Row>>resultAt(i).iterator().next()));
      return out;
    });
  }

  private void updates(HttpServerResponse resp, int n) {
    worlds(n).compose(rows -> {
      List<Tuple> batch = new ArrayList<>(n);
      for (JsonObject w : rows) w.put("randomNumber", randomId());
      List<JsonObject> sorted = new ArrayList<>(rows);
      sorted.sort(Comparator.comparingInt(w -> w.getInteger("id")));
      for (JsonObject w : sorted) batch.add(Tuple.of(w.getInteger("randomNumber"), w.getInteger("id")));
      return updateWorld.executeBatch(batch).map(v -> rows);
    }).onComplete(ar -> {
      if (ar.failed()) {
        fail(resp, ar.cause());
      } else {
        json(resp, new JsonArray(ar.result()).toBuffer());
      }
    });
  }

  private void fortunes(HttpServerResponse resp) {
    selectFortunes.execute().onComplete(ar -> {
      if (ar.failed()) {
        fail(resp, ar.cause());
        return;
      }
      List<Object[]> rows = new ArrayList<>(16);
      for (Row r : ar.result()) rows.add(new Object[] {r.getInteger(0), r.getString(1)});
      rows.add(new Object[] {0, "Additional fortune added at request time."});
      rows.sort(Comparator.comparing(r -> (String) r[1]));
      StringBuilder b = new StringBuilder(1400);
      b.append("<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
          + "<tr><th>id</th><th>message</th></tr>");
      for (Object[] r : rows) {
        b.append("<tr><td>").append(r[0]).append("</td><td>");
        escape(b, (String) r[1]);
        b.append("</td></tr>");
      }
      b.append("</table></body></html>");
      resp.headers().add(HttpHeaders.CONTENT_TYPE, HTML);
      resp.end(Buffer.buffer(b.toString()));
    });
  }

  private static void escape(StringBuilder b, String s) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '&' -> b.append("&amp;");
        case '<' -> b.append("&lt;");
        case '>' -> b.append("&gt;");
        case '"' -> b.append("&quot;");
        case '\'' -> b.append("&#39;");
        default -> b.append(c);
      }
    }
  }

  private static void json(HttpServerResponse resp, Buffer body) {
    resp.headers().add(HttpHeaders.CONTENT_TYPE, JSON);
    resp.end(body);
  }

  private static void fail(HttpServerResponse resp, Throwable t) {
    resp.setStatusCode(500).end(String.valueOf(t.getMessage()));
  }

  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    int loops = Integer.getInteger("tfb.eventLoops", Runtime.getRuntime().availableProcessors());
    PgConnectOptions db = new PgConnectOptions()
        .setHost("127.0.0.1")
        .setPort(Integer.parseInt(System.getenv().getOrDefault("TFB_DB_PORT", "5432")))
        .setDatabase("hello_world")
        .setUser("benchmarkdbuser")
        .setPassword("benchmarkdbpass")
        .setCachePreparedStatements(true)
        .setPipeliningLimit(100_000);
    Vertx vertx = Vertx.vertx(new VertxOptions().setEventLoopPoolSize(loops));
    // upkeep on the reading thread, as the donkey app's cache does
    cache = Caffeine.newBuilder().maximumSize(20_000).executor(Runnable::run).build();
    PgConnection.connect(vertx, db)
        .compose(c -> c.query("SELECT id, randomnumber FROM world").execute()
            .andThen(ar -> c.close()))
        .map(rows -> {
          for (Row r : rows) cache.put(r.getInteger(0), world(r));
          return rows.size();
        })
        .toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
    vertx.setPeriodic(1000, id -> date = now());
    vertx.deployVerticle(() -> new RawVertxTfb(db),
            new DeploymentOptions().setInstances(loops)
                .setConfig(new JsonObject().put("port", Integer.toString(port))))
        .toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
    System.out.println("raw Vert.x TechEmpower app on 127.0.0.1:" + port);
  }
}
