package donkey.benchring;

import clojure.lang.IPersistentMap;
import donkey.codec.FormCodec;
import donkey.codec.Json;
import donkey.ring.RequestMap;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpHeaders;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.*;

/**
 * donkey only: decoding maps too wide for the small-map paths, where the codecs build hash
 * maps (and check their keys' hashes): a 40-parameter form, a 40-key JSON object, and a
 * request head of 24 headers. The other benches' inputs stay under those thresholds.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@State(Scope.Benchmark)
@Fork(1)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class WideDecodeBench {
  static final int KEYS = 40;

  String form;
  String json;
  MultiMap headers;

  @Setup
  public void setup() {
    Clj.checkClojureVersion();
    StringBuilder f = new StringBuilder();
    StringBuilder j = new StringBuilder("{");
    for (int i = 0; i < KEYS; i++) {
      if (i > 0) {
        f.append('&');
        j.append(',');
      }
      f.append("field_").append(i).append('=').append("value+").append(i);
      j.append("\"field_").append(i).append("\":").append(i);
    }
    form = f.toString();
    json = j.append('}').toString();
    headers = HttpHeaders.headers();
    String[] names = {"Host", "User-Agent", "Accept", "Accept-Language", "Accept-Encoding",
        "Referer", "Cookie", "Connection", "Upgrade-Insecure-Requests", "Sec-Fetch-Dest",
        "Sec-Fetch-Mode", "Sec-Fetch-Site", "Sec-Fetch-User", "Cache-Control", "Pragma",
        "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Request-Id",
        "X-Amzn-Trace-Id", "Traceparent", "Tracestate", "Authorization", "Content-Type"};
    for (String n : names) headers.add(n, "value-of-" + n.toLowerCase());
    check("form", formStrings(), KEYS);
    check("form keywords", formKeywords(), KEYS);
    check("json", jsonStrings(), KEYS);
    check("json keywords", jsonKeywords(), KEYS);
    check("headers", headerScan(), names.length);
  }

  private static void check(String what, Object m, int count) {
    if (((IPersistentMap) m).count() != count) {
      throw new IllegalStateException(what + ": expected " + count + " keys, got " + Clj.PR_STR.invoke(m));
    }
  }

  @Benchmark
  public Object formStrings() {
    return FormCodec.decode(form, StandardCharsets.UTF_8, false);
  }

  @Benchmark
  public Object formKeywords() {
    return FormCodec.decode(form, StandardCharsets.UTF_8, true);
  }

  @Benchmark
  public Object jsonStrings() {
    return Json.read(json, false, false);
  }

  @Benchmark
  public Object jsonKeywords() {
    return Json.read(json, true, false);
  }

  @Benchmark
  public Object headerScan() {
    return RequestMap.scan(headers).headers;
  }
}
