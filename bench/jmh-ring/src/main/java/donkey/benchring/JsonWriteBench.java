package donkey.benchring;

import clojure.lang.IFn;
import donkey.codec.Json;
import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.*;

/**
 * Serializing a 10-element vector of user maps (keyword keys) to UTF-8 JSON bytes: donkey's
 * Json.writeBytes against cheshire.core/generate-string (what ring-json's wrap-json-response
 * calls) plus the String-to-UTF-8 conversion the server then needs.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@State(Scope.Benchmark)
@Fork(1)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class JsonWriteBench {
  Object users;
  IFn generateString;

  static String usersEdn() {
    StringBuilder sb = new StringBuilder("[");
    for (int i = 0; i < 10; i++) {
      sb.append("{:id ").append(i + 1)
          .append(" :name \"User ").append(i).append(i == 3 ? " Jo\u00e3o" : "").append('"')
          .append(" :email \"user").append(i).append("@example.com\"")
          .append(" :active ").append(i % 3 != 0)
          .append(" :roles [\"user\"").append(i % 2 == 0 ? " \"admin\"" : "").append(']')
          .append(" :created \"2024-0").append(1 + i % 9).append("-1").append(i)
          .append("T08:30:00Z\"}\n");
    }
    return sb.append(']').toString();
  }

  @Setup
  public void setup() {
    Clj.checkClojureVersion();
    users = Clj.read(usersEdn());
    generateString = Clj.var("cheshire.core", "generate-string");
    byte[] d = donkey();
    byte[] r = cheshire();
    System.err.println("[setup] JSON bytes donkey=" + d.length + " cheshire=" + r.length);
    if (!Arrays.equals(d, r)) {
      System.err.println("[setup] note: byte output differs; comparing parsed values");
    }
    Clj.checkEqual("donkey write round trip", users, Json.read(new ByteArrayInputStream(d), true, false));
    Clj.checkEqual("cheshire write round trip", users, Json.read(new ByteArrayInputStream(r), true, false));
    System.err.println("[setup] JSON writes round-trip");
  }

  @Benchmark
  public byte[] donkey() {
    return Json.writeBytes(users);
  }

  @Benchmark
  public byte[] cheshire() {
    return ((String) generateString.invoke(users)).getBytes(StandardCharsets.UTF_8);
  }
}
