package donkey.bench;

import static donkey.ring.RequestMap.HEADERS;
import static donkey.ring.RequestMap.QUERY_STRING;
import static donkey.ring.RequestMap.REMOTE_ADDR;
import static donkey.ring.RequestMap.REQUEST_METHOD;
import static donkey.ring.RequestMap.SCHEME;
import static donkey.ring.RequestMap.URI;

import clojure.lang.ILookup;
import clojure.lang.IPersistentMap;
import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;
import clojure.lang.RT;
import donkey.ring.RequestMap;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpServerRequest;
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
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.Blackhole;

/**
 * Eager ({@link RequestMap#buildEager}) versus lazy ({@link RequestMap#build}, the kernel's)
 * Ring request maps.
 *
 * <ul>
 *   <li>{@code a_build_*}: build the map only;
 *   <li>{@code b_read_*}: build, read the six most used keys through {@link ILookup#valAt} and
 *       do {@code (get headers "host")};
 *   <li>{@code c_assocRead_*}: build, {@code assoc} one key (as wrap-params does), then the
 *       same reads as b;
 *   <li>{@code d_route_*} (extra): build, read {@code :request-method} and {@code :uri} only,
 *       a handler that routes and never looks at headers: lazy's best realistic case;
 *   <li>{@code e_headers_*} (extra, breakdown): the one pass over the headers both variants
 *       share ({@link RequestMap#scan}, which builds {@code :headers}), and
 *       {@link MultiMap#size()} alone, which scan called until it was found to build a
 *       {@code TreeSet} of every name on Vert.x 5's HTTP/1.x headers (what that call cost);
 *   <li>{@code f_*} (extra): the kernel's path for a request without a body, before and after
 *       the lazy map: {@code _eager} as Exchange did it (scan every header, then build),
 *       {@code _lazy} as it does now (two header look-ups for the body's framing, which these
 *       benchmarks leave out, and the scan only when the handler reads {@code :headers}): b's
 *       reads and d's routing-only reads.
 * </ul>
 *
 * <p>The map itself always goes into the Blackhole: in the server it escapes to the handler
 * (stored in the Exchange, handed to a worker thread), so letting escape analysis scalar-replace
 * it here would flatter whichever variant the JIT happens to inline completely.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(1)
@Warmup(iterations = 3, time = 2, timeUnit = TimeUnit.SECONDS)
@Measurement(iterations = 5, time = 2, timeUnit = TimeUnit.SECONDS)
@State(Scope.Benchmark)
public class RequestMapBench {
  private static final Keyword QUERY_PARAMS = Keyword.intern("query-params");
  private static final Object PARAMS =
      PersistentArrayMap.createAsIfByAssoc(new Object[] {"a", "1", "b", "2"});

  private HttpServerRequest req;
  private MultiMap browserHeaders;

  @Setup
  public void setup() {
    req = new FakeRequest();
    browserHeaders = req.headers();
    SelfCheck.run(req);
  }

  private static void read(ILookup m, Blackhole bh) {
    bh.consume(m.valAt(REQUEST_METHOD));
    bh.consume(m.valAt(URI));
    Object headers = m.valAt(HEADERS);
    bh.consume(m.valAt(QUERY_STRING));
    bh.consume(m.valAt(REMOTE_ADDR));
    bh.consume(m.valAt(SCHEME));
    bh.consume(RT.get(headers, "host"));
  }

  // ---- a. build only --------------------------------------------------------------------

  @Benchmark
  public void a_build_eager(Blackhole bh) {
    bh.consume(RequestMap.buildEager(req, null, null, false, null, null));
  }

  @Benchmark
  public void a_build_lazy(Blackhole bh) {
    bh.consume(RequestMap.build(req, null, null, false, null, null));
  }

  // ---- b. build + read six keys + one header ----------------------------------------------

  @Benchmark
  public void b_read_eager(Blackhole bh) {
    IPersistentMap m = RequestMap.buildEager(req, null, null, false, null, null);
    bh.consume(m);
    read(m, bh);
  }

  @Benchmark
  public void b_read_lazy(Blackhole bh) {
    IPersistentMap m = RequestMap.build(req, null, null, false, null, null);
    bh.consume(m);
    read(m, bh);
  }

  // ---- c. build + assoc one key + read ---------------------------------------------------

  @Benchmark
  public void c_assocRead_eager(Blackhole bh) {
    IPersistentMap m = RequestMap.buildEager(req, null, null, false, null, null);
    bh.consume(m);
    IPersistentMap m2 = m.assoc(QUERY_PARAMS, PARAMS);
    bh.consume(m2);
    read(m2, bh);
  }

  @Benchmark
  public void c_assocRead_lazy(Blackhole bh) {
    IPersistentMap m = RequestMap.build(req, null, null, false, null, null);
    bh.consume(m);
    IPersistentMap m2 = m.assoc(QUERY_PARAMS, PARAMS);
    bh.consume(m2);
    read(m2, bh);
  }

  // ---- d. (extra) build + read :request-method and :uri only ----------------------------

  @Benchmark
  public void d_route_eager(Blackhole bh) {
    IPersistentMap m = RequestMap.buildEager(req, null, null, false, null, null);
    bh.consume(m);
    bh.consume(m.valAt(REQUEST_METHOD));
    bh.consume(m.valAt(URI));
  }

  @Benchmark
  public void d_route_lazy(Blackhole bh) {
    IPersistentMap m = RequestMap.build(req, null, null, false, null, null);
    bh.consume(m);
    bh.consume(m.valAt(REQUEST_METHOD));
    bh.consume(m.valAt(URI));
  }

  // ---- e. (extra) the header pass alone ---------------------------------------------------

  @Benchmark
  public void e_headers_scan(Blackhole bh) {
    bh.consume(RequestMap.scan(browserHeaders));
  }

  @Benchmark
  public int e_headers_sizeCallOnly() {
    return browserHeaders.size();
  }

  // ---- f. (extra) the kernel's path: the old eager scan-then-build, and the lazy map -------

  @Benchmark
  public void f_kernelRead_eager(Blackhole bh) {
    RequestMap.Head head = RequestMap.scan(req.headers());
    IPersistentMap m = RequestMap.buildEager(req, head, null, false, null, null);
    bh.consume(m);
    read(m, bh);
  }

  @Benchmark
  public void f_kernelRead_lazy(Blackhole bh) {
    IPersistentMap m = RequestMap.build(req, null, null, false, null, null);
    bh.consume(m);
    read(m, bh);
  }

  @Benchmark
  public void f_kernelRoute_eager(Blackhole bh) {
    RequestMap.Head head = RequestMap.scan(req.headers());
    IPersistentMap m = RequestMap.buildEager(req, head, null, false, null, null);
    bh.consume(m);
    bh.consume(m.valAt(REQUEST_METHOD));
    bh.consume(m.valAt(URI));
  }

  @Benchmark
  public void f_kernelRoute_lazy(Blackhole bh) {
    IPersistentMap m = RequestMap.build(req, null, null, false, null, null);
    bh.consume(m);
    bh.consume(m.valAt(REQUEST_METHOD));
    bh.consume(m.valAt(URI));
  }
}
