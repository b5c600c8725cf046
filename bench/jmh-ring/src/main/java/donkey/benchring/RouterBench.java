package donkey.benchring;

import clojure.lang.AFn;
import clojure.lang.IFn;
import donkey.route.Route;
import donkey.route.Router;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.*;

/**
 * donkey's router over a 50-route table (30 literal paths, 15 ":param" paths, 5 literal paths
 * restricted to methods), compiled once; one benchmark per kind of match. Ring itself has no
 * router, so there is no Ring side here.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@State(Scope.Benchmark)
@Fork(1)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class RouterBench {
  static final String[] NONE = new String[0];

  Router router;
  String literalPath;
  String paramPath;
  String methodPath;
  String missingPath;

  static List<Route> routes() {
    IFn h = new AFn() {
      @Override
      public Object invoke(Object req) {
        return null;
      }
    };
    List<Route> rs = new ArrayList<>();
    String[] areas = {"users", "orders", "products", "invoices", "teams", "projects"};
    // 30 literal paths
    for (int i = 0; i < 30; i++) {
      rs.add(new Route("/api/v1/" + areas[i % areas.length] + "/list" + i, false, NONE, NONE,
          NONE, h, Route.Mode.BLOCKING));
    }
    // 15 parameterised paths, the deepest last
    String[] params = {
        "/api/v1/users/:id", "/api/v1/orders/:id", "/api/v1/products/:id",
        "/api/v1/invoices/:id", "/api/v1/teams/:id", "/api/v1/projects/:id",
        "/api/v1/users/:id/profile", "/api/v1/teams/:tid/members/:mid",
        "/api/v1/projects/:pid/tasks/:tid", "/api/v1/products/:id/reviews/:rid",
        "/api/v1/invoices/:id/lines/:line", "/api/v2/users/:id", "/api/v2/orders/:id/items",
        "/api/v1/teams/:tid/projects/:pid/tasks/:task",
        "/api/v1/users/:id/orders/:oid"};
    for (String p : params) rs.add(new Route(p, false, NONE, NONE, NONE, h, Route.Mode.BLOCKING));
    // 5 with methods
    rs.add(new Route("/api/v1/login", false, new String[] {"POST"}, NONE, NONE, h, Route.Mode.BLOCKING));
    rs.add(new Route("/api/v1/logout", false, new String[] {"POST"}, NONE, NONE, h, Route.Mode.BLOCKING));
    rs.add(new Route("/api/v1/session", false, new String[] {"GET", "DELETE"}, NONE, NONE, h, Route.Mode.BLOCKING));
    rs.add(new Route("/api/v1/upload", false, new String[] {"PUT"}, NONE, NONE, h, Route.Mode.BLOCKING));
    rs.add(new Route("/api/v1/search", false, new String[] {"GET", "POST"}, NONE, NONE, h, Route.Mode.BLOCKING));
    if (rs.size() != 50) throw new IllegalStateException("expected 50 routes, got " + rs.size());
    return rs;
  }

  @Setup
  public void setup() {
    Clj.checkClojureVersion();
    router = Router.compile(routes());
    literalPath = new String("/api/v1/products/list20");
    paramPath = new String("/api/v1/users/123/orders/456");
    methodPath = new String("/api/v1/login");
    missingPath = new String("/api/v1/nope/1/2");

    Router.Match m = literalHit();
    check("literal hit", m.status == 0 && m.route != null && m.pathParams.count() == 0, m);
    m = paramHit();
    check("param hit", m.status == 0 && m.route != null, m);
    Clj.checkEqual("path params", m.pathParams, Clj.read("{:id \"123\" :oid \"456\"}"));
    m = methodNotAllowed();
    check("405", m.status == 405 && "POST".equals(m.allow), m);
    m = notFound();
    check("404", m.status == 404, m);
    System.err.println("[setup] router matches as expected");
  }

  private static void check(String what, boolean ok, Router.Match m) {
    if (!ok) {
      throw new IllegalStateException(what + ": unexpected match status=" + m.status
          + " route=" + m.route + " params=" + m.pathParams + " allow=" + m.allow);
    }
  }

  @Benchmark
  public Router.Match literalHit() {
    return router.match("GET", literalPath, null, null);
  }

  @Benchmark
  public Router.Match paramHit() {
    return router.match("GET", paramPath, null, null);
  }

  @Benchmark
  public Router.Match methodNotAllowed() {
    return router.match("DELETE", methodPath, null, "application/json");
  }

  @Benchmark
  public Router.Match notFound() {
    return router.match("GET", missingPath, null, null);
  }
}
