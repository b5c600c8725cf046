package donkey.bench;

import clojure.lang.IFn;
import clojure.lang.IPersistentMap;
import clojure.lang.RT;
import donkey.ring.RequestMap;
import donkey.ring.ResponseWriter;
import io.vertx.core.MultiMap;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpHeaders;
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

/**
 * Writing a response, and the whole per-request path of the Ring layer, without a socket:
 * what donkey adds per request on top of what raw Vert.x does, in ns and bytes.
 *
 * <ul>
 *   <li>{@code write_*}: the TechEmpower plaintext and JSON responses written into a
 *       {@link FakeResponse} by {@link ResponseWriter} ({@code writeFixed} + {@code end}),
 *       against {@code write_raw*}, which call {@code bench/java/.../RawVertx.java}'s own code
 *       (four {@code headers().add} and {@code end(Buffer)}) to the same fake response.
 *       {@code write_plaintextFreshHeaders} makes a new {@code :headers} map per response, so
 *       it shows the path for a map not seen before (no compiled header plan).
 *   <li>{@code path_*}: one whole request as the kernel serves it on the event loop, socket
 *       excepted: scan the headers, build the Ring request map, call a Clojure handler that
 *       reads {@code :uri} and {@code :request-method} and returns the response map, then
 *       write it; against {@code path_raw*}, RawVertx's handler on the same fake exchange.
 * </ul>
 *
 * <p>The difference of a donkey benchmark and its raw twin is the Ring layer's cost per
 * request (the project's target: at most 1 KiB allocated).
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@State(Scope.Thread)
@Fork(value = 1, jvmArgsAppend = {"-Xms1g", "-Xmx1g"})
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class ResponseBench {
  private static final CharSequence DATE =
      HttpHeaders.createOptimized("Mon, 23 Nov 2026 13:30:00 GMT");
  private static final CharSequence SERVER = HttpHeaders.createOptimized("donkey");
  /** The bench's responses do not close their connection: nothing to tell. */
  private static final ResponseWriter.LastResponse LAST = () -> { };

  private FakeResponse resp;
  private HttpServerRequest req;
  /** (fn [] response): the bench app's response makers, compiled by Clojure. */
  private IFn plaintext;
  private IFn plaintextFreshHeaders;
  private IFn json;
  /** (fn [] response): a 20-item list of mixed-type records, as an API answers. */
  private IFn jsonNested;
  /** (fn [request] response): a handler that routes on :uri as a Ring app would. */
  private IFn handler;

  @Setup
  public void setup() {
    resp = new FakeResponse();
    req = new FakeRequest(FakeRequest.wrkHeaders());
    IFn eval = RT.var("clojure.core", "eval");
    IFn read = RT.var("clojure.core", "read-string");
    eval.invoke(read.invoke("(do (def plaintext-headers {\"Content-Type\" \"text/plain\"})"
        + " (def json-headers {\"Content-Type\" \"application/json\"}))"));
    plaintext = (IFn) eval.invoke(read.invoke(
        "(fn [] {:status 200 :headers plaintext-headers :body \"Hello, World!\"})"));
    plaintextFreshHeaders = (IFn) eval.invoke(read.invoke(
        "(fn [] {:status 200 :headers {\"Content-Type\" (str \"text/\" \"plain\")}"
            + " :body \"Hello, World!\"})"));
    json = (IFn) eval.invoke(read.invoke(
        "(let [hello \"Hello, World!\"]"
            + " (fn [] {:status 200 :headers json-headers :body {\"message\" (str hello)}}))"));
    jsonNested = (IFn) eval.invoke(read.invoke(
        "(let [items (vec (for [i (range 20)] {\"id\" i \"name\" (str \"item-\" i)"
            + " \"price\" (+ i 0.5) \"active\" (even? i) \"tags\" [\"a\" \"b\"]"
            + " \"owner\" {\"id\" (* 7 i) \"login\" \"someone\"}}))]"
            + " (fn [] {:status 200 :headers json-headers :body {\"items\" items \"count\" 20}}))"));
    handler = (IFn) eval.invoke(read.invoke(
        "(fn [request] (case (:uri request)"
            + " \"/plaintext\" {:status 200 :headers plaintext-headers :body \"Hello, World!\"}"
            + " {:status 404 :body \"Not Found\"}))"));
    // what each writes must be what the server sends
    write((IPersistentMap) plaintext.invoke());
    check(resp.getStatusCode() == 200 && "text/plain".equals(resp.headers().get("content-type"))
        && resp.headers().get("date") != null, "plaintext head");
    resp.clear();
    long before = resp.sent;
    write((IPersistentMap) json.invoke());
    check(resp.sent - before == "{\"message\":\"Hello, World!\"}".length()
        && "application/json".equals(resp.headers().get("content-type")), "json");
    resp.clear();
    before = resp.sent;
    path();
    check(resp.sent - before == 13 && resp.getStatusCode() == 200, "whole path");
  }

  private static void check(boolean ok, String what) {
    if (!ok) throw new IllegalStateException("ResponseBench self-check failed: " + what);
  }

  private void write(IPersistentMap r) {
    // as the kernel's ResponseSender.endFixed
    int status = donkey.ring.ResponseMap.status(r.valAt(donkey.ring.ResponseMap.STATUS));
    Buffer b = ResponseWriter.writeFixed(resp, r, DATE, SERVER, donkey.ring.Framing.BODY, LAST);
    ResponseWriter.status(resp, status);
    ResponseWriter.end(resp, b);
  }

  /** Exchange's path for a request without a body: the framing look-ups, the lazy map. */
  private void path() {
    MultiMap lines = req.headers();
    if (lines.get(HttpHeaders.CONTENT_LENGTH) != null
        || lines.get(HttpHeaders.TRANSFER_ENCODING) != null) {
      throw new IllegalStateException("the bench's request has no body");
    }
    IPersistentMap request = RequestMap.build(req, null, null, false, null, "127.0.0.1");
    write((IPersistentMap) handler.invoke(request));
  }

  @Benchmark
  public FakeResponse write_plaintext() {
    write((IPersistentMap) plaintext.invoke());
    return resp.clear();
  }

  @Benchmark
  public FakeResponse write_plaintextFreshHeaders() {
    write((IPersistentMap) plaintextFreshHeaders.invoke());
    return resp.clear();
  }

  @Benchmark
  public FakeResponse write_rawPlaintext() {
    RawVertx.plaintext(resp, DATE);
    return resp.clear();
  }

  @Benchmark
  public FakeResponse write_json() {
    write((IPersistentMap) json.invoke());
    return resp.clear();
  }

  /**
   * A nested JSON body: maps, vectors, strings, longs, doubles and booleans mixed, so the
   * writer's type tests see every class at once (the plaintext and JSON benchmarks above see
   * one each, and the JIT folds their tests to one class comparison).
   */
  @Benchmark
  public FakeResponse write_jsonNested() {
    write((IPersistentMap) jsonNested.invoke());
    return resp.clear();
  }

  @Benchmark
  public FakeResponse write_rawJson() throws Exception {
    RawVertx.json(resp, DATE);
    return resp.clear();
  }

  @Benchmark
  public FakeResponse path_plaintext() {
    path();
    return resp.clear();
  }

  @Benchmark
  public FakeResponse path_rawPlaintext() {
    RawVertx.serve(req, resp, DATE);
    return resp.clear();
  }
}
