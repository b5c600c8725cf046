package donkey.kernel;

import clojure.lang.IFn;
import clojure.lang.RT;
import donkey.bench.FakeRequest;
import donkey.bench.FakeResponse;
import donkey.bench.RawVertx;
import donkey.kernel.config.ServerConfig;
import donkey.kernel.internals.ConnectionCount;
import donkey.kernel.workers.WorkerPool;
import donkey.kernel.workers.Workers;
import donkey.route.Route;
import donkey.route.Router;
import io.vertx.core.net.SocketAddress;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The kernel's own per-request path on the event loop, socket excepted, as the server runs it
 * for the bench's non-blocking plaintext and JSON routes: what {@code ServerVerticle}
 * does with a request head ({@link Admission#admit}: the framing look-ups, the route table,
 * the Ring request map, the 3-arity handler and its {@code respond}, the response written, the
 * connection's bookkeeping), against {@code exchange_raw} and {@code exchange_rawJson}, what
 * {@code RawVertx} does with the same request; the {@code Te} pair sends the plaintext
 * request with TechEmpower's header lines (Host, Accept, Connection) in place of Host alone.
 * The JSON route is the bench app's: a new {@code {"message" "Hello, World!"}} map per
 * request, serialized by the kernel's codec. It sits in the kernel's package because the
 * kernel's classes are not public; the request and response are the socketless fakes of
 * {@code donkey.bench}.
 *
 * <p>What this leaves out is the same for both: Vert.x decoding the request and encoding and
 * sending the response.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@State(Scope.Thread)
@Fork(value = 1, jvmArgsAppend = {"-Xms1g", "-Xmx1g"})
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class ExchangeBench {

  private FakeResponse resp;
  private FakeRequest req;
  private FakeRequest jsonReq;
  private FakeRequest teReq;
  private ServerVerticle loop;
  private WorkerPool workers;
  private ConnectionGuard.State connection;
  private CharSequence date;

  @TearDown
  public void tearDown() {
    workers.shutdownNow();
  }

  @Setup
  public void setup() {
    resp = new FakeResponse();
    req = new FakeRequest(FakeRequest.wrkHeaders(), resp);
    jsonReq = new FakeRequest(FakeRequest.wrkHeaders(), resp, "/json");
    teReq = new FakeRequest(FakeRequest.techEmpowerHeaders(), resp);
    IFn eval = RT.var("clojure.core", "eval");
    IFn read = RT.var("clojure.core", "read-string");
    // the bench app's route (bench/src/donkey/bench/app.clj)
    IFn handler = (IFn) eval.invoke(read.invoke(
        "(let [headers {\"Content-Type\" \"text/plain\"} hello \"Hello, World!\"]"
            + " (fn [_request respond _raise]"
            + "   (respond {:status 200 :headers headers :body hello})))"));
    IFn json = (IFn) eval.invoke(read.invoke(
        "(let [headers {\"Content-Type\" \"application/json\"} hello \"Hello, World!\"]"
            + " (fn [_request respond _raise]"
            + "   (respond {:status 200 :headers headers :body {\"message\" hello}})))"));
    ServerConfig cfg = new ServerConfig();
    cfg.router = Router.compile(List.of(
        new Route("/plaintext", false, new String[] {"GET"}, new String[0], new String[0],
            handler, Route.Mode.NON_BLOCKING),
        new Route("/json", false, new String[] {"GET"}, new String[0], new String[0],
            json, Route.Mode.NON_BLOCKING)));
    // the routes are non-blocking, so the pool stays idle (its monitor thread parks); the
    // verticle asks it whether its workers are virtual
    workers = Workers.platform(1);
    loop = new ServerVerticle(cfg, workers, 0, -1, null, new ConnectionCount(cfg.maxConnections, null),
        null);
    loop.thread = Thread.currentThread();
    connection = new ConnectionGuard.State();
    connection.remoteAddress = "127.0.0.1";
    connection.localAddress = SocketAddress.inetSocketAddress(8080, "127.0.0.1");
    HttpDate.refresh();
    date = HttpDate.current();
    long before = resp.sent;
    exchange(req);
    if (resp.sent - before != 13 || resp.getStatusCode() != 200
        || !"text/plain".equals(resp.headers().get("content-type"))
        || connection.current != null || connection.ended != 1) {
      throw new IllegalStateException("ExchangeBench self-check failed (plaintext)");
    }
    resp.clear();
    before = resp.sent;
    exchange(jsonReq);
    // {"message":"Hello, World!"}: 27 bytes
    if (resp.sent - before != 27 || resp.getStatusCode() != 200
        || !"application/json".equals(resp.headers().get("content-type"))
        || connection.current != null || connection.ended != 2) {
      throw new IllegalStateException("ExchangeBench self-check failed (json)");
    }
    resp.clear();
  }

  /** As ServerVerticle.request does with a request head on a keep-alive connection. */
  private void exchange(FakeRequest r) {
    connection.started++;
    new Exchange(loop, r, connection).admit();
  }

  @Benchmark
  public FakeResponse exchange_plaintext() {
    exchange(req);
    return resp.clear();
  }

  @Benchmark
  public FakeResponse exchange_raw() {
    RawVertx.serve(req, resp, date);
    return resp.clear();
  }

  /** The plaintext request with TechEmpower's header lines. */
  @Benchmark
  public FakeResponse exchange_plaintextTe() {
    exchange(teReq);
    return resp.clear();
  }

  @Benchmark
  public FakeResponse exchange_rawTe() {
    RawVertx.serve(teReq, resp, date);
    return resp.clear();
  }

  @Benchmark
  public FakeResponse exchange_json() {
    exchange(jsonReq);
    return resp.clear();
  }

  @Benchmark
  public FakeResponse exchange_rawJson() {
    RawVertx.serve(jsonReq, resp, date);
    return resp.clear();
  }
}
