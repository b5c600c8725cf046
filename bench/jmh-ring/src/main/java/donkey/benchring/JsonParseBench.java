package donkey.benchring;

import clojure.lang.IFn;
import clojure.lang.IPersistentMap;
import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;
import donkey.codec.Json;
import java.io.ByteArrayInputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.*;

/**
 * Parsing a ~5 KB JSON request body from bytes, keys as keywords: donkey's Json.read against
 * cheshire.core/parse-stream over an InputStreamReader, and against ring-json 0.4.0's own
 * wrap-json-body path (its private read-json: slurp the body, then parse-string).
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@State(Scope.Benchmark)
@Fork(1)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class JsonParseBench {
  byte[] body;
  IFn parseStream;
  IFn readJson;
  IPersistentMap readJsonOpts;
  static final Keyword BODY = Keyword.intern("body");
  IPersistentMap requestBase;

  /** A realistic request body: a page of user records with nested objects and arrays. */
  static String body() {
    StringBuilder sb = new StringBuilder();
    sb.append("{\"page\":1,\"per_page\":16,\"total\":1234,\"generated\":\"2024-05-17T10:21:33Z\",\"users\":[");
    String[] cities = {"S\u00e3o Paulo", "Berlin", "Tokyo", "Nairobi", "Lyon", "Austin"};
    for (int i = 0; i < 16; i++) {
      if (i > 0) sb.append(',');
      sb.append("{\"id\":").append(1000 + i)
          .append(",\"name\":\"User ").append(i).append(" Example\"")
          .append(",\"email\":\"user").append(i).append("@example.com\"")
          .append(",\"active\":").append(i % 3 != 0)
          .append(",\"score\":").append(i * 7.25 + 0.5)
          .append(",\"manager\":").append(i % 4 == 0 ? "null" : String.valueOf(1000 + i / 4))
          .append(",\"roles\":[\"user\"").append(i % 2 == 0 ? ",\"admin\"" : "").append(']')
          .append(",\"address\":{\"street\":\"").append(i * 11).append(" Main St\",\"city\":\"")
          .append(cities[i % cities.length]).append("\",\"zip\":\"").append(10000 + i * 37)
          .append("\",\"geo\":{\"lat\":").append(-23.55 + i).append(",\"lng\":").append(-46.63 + i)
          .append("}}")
          .append(",\"orders\":[{\"id\":").append(i * 10).append(",\"total\":").append(19.99 + i)
          .append(",\"items\":[1,2,3]},{\"id\":").append(i * 10 + 1).append(",\"total\":")
          .append(5.5 * i).append(",\"items\":[]}]")
          .append('}');
    }
    sb.append("]}");
    return sb.toString();
  }

  @Setup
  public void setup() {
    Clj.checkClojureVersion();
    body = body().getBytes(StandardCharsets.UTF_8);
    System.err.println("[setup] JSON body bytes = " + body.length);
    parseStream = Clj.var("cheshire.core", "parse-stream");
    readJson = Clj.var("ring.middleware.json", "read-json"); // private; called through its var
    readJsonOpts = (IPersistentMap) Clj.read("{:keywords? true}");
    requestBase = (IPersistentMap) Clj.read("{:headers {\"content-type\" \"application/json\"}}");

    Object d = donkey();
    Clj.checkEqual("parsed JSON (cheshire parse-stream)", d, cheshireParseStream());
    Object[] r = ((java.util.List<?>) ringJson040()).toArray();
    if (!Boolean.TRUE.equals(r[0])) throw new IllegalStateException("ring-json says invalid");
    Clj.checkEqual("parsed JSON (ring-json read-json)", d, r[1]);
    // and it round-trips
    Clj.checkEqual("JSON round trip", d, Json.read(new ByteArrayInputStream(Json.writeBytes(d)), true, false));
    System.err.println("[setup] parsed JSON equal");
  }

  @Benchmark
  public Object donkey() {
    return Json.read(new ByteArrayInputStream(body), true, false);
  }

  /** cheshire.core/parse-stream with keyword keys over an InputStreamReader. */
  @Benchmark
  public Object cheshireParseStream() {
    return parseStream.invoke(
        new InputStreamReader(new ByteArrayInputStream(body), StandardCharsets.UTF_8), true);
  }

  /** ring-json 0.4.0's read-json (what wrap-json-body runs): content-type check, slurp, parse-string. */
  @Benchmark
  public Object ringJson040() {
    return readJson.invoke(requestBase.assoc(BODY, new ByteArrayInputStream(body)), readJsonOpts);
  }
}
