package donkey.benchring;

import donkey.codec.Accept;
import donkey.codec.ContentType;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.*;

/**
 * The Content-Type and Accept questions the middleware and the router ask per request, on the
 * values browsers and clients send: their time, and (with -prof gc) that they allocate nothing.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@State(Scope.Benchmark)
@Fork(1)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class ContentTypeBench {
  String json;
  String form;
  String accept;

  @Setup
  public void setup() {
    // not compile-time constants
    json = new String("application/json; charset=utf-8");
    form = new String("application/x-www-form-urlencoded; charset=UTF-8");
    accept = new String("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8");
    check(isJson() && isForm(), "media types");
    check(formCharset() == StandardCharsets.UTF_8, "charset");
    check(acceptQuality() == 0.8, "Accept quality");
  }

  private static void check(boolean ok, String what) {
    if (!ok) throw new IllegalStateException("ContentTypeBench: wrong " + what);
  }

  /** wrap-json-body's question. */
  @Benchmark
  public boolean isJson() {
    return ContentType.isJson(json);
  }

  /** wrap-params' question. */
  @Benchmark
  public boolean isForm() {
    return ContentType.is(form, "application", "x-www-form-urlencoded");
  }

  /** The charset of a form body. */
  @Benchmark
  public Charset formCharset() {
    return ContentType.charset(form);
  }

  /** A browser's Accept against a route that :produces application/json. */
  @Benchmark
  public double acceptQuality() {
    return Accept.quality(accept, "application/json");
  }
}
