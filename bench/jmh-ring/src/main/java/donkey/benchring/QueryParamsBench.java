package donkey.benchring;

import clojure.lang.IFn;
import clojure.lang.IPersistentMap;
import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;
import donkey.codec.FormCodec;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.*;
import org.openjdk.jmh.infra.Blackhole;

/**
 * Query-string parsing: donkey's FormCodec.decode(q, UTF-8, keywords=true) against what Ring
 * 1.8.2's wrap-params + wrap-keyword-params do per request.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@State(Scope.Benchmark)
@Fork(1)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class QueryParamsBench {
  static final String QUERY =
      "name=Ann+Lee&age=42&tags=a&tags=b&city=S%C3%A3o+Paulo&active=true";

  String query;
  IPersistentMap request;
  IFn paramsRequest;
  IFn keywordParamsRequest;
  IFn formDecode;
  static final Keyword PARAMS = Keyword.intern("params");

  @Setup
  public void setup() {
    Clj.checkClojureVersion();
    query = new String(QUERY); // not a compile-time constant
    paramsRequest = Clj.var("ring.middleware.params", "params-request");
    keywordParamsRequest = Clj.var("ring.middleware.keyword-params", "keyword-params-request");
    formDecode = Clj.var("ring.util.codec", "form-decode");
    request = PersistentArrayMap.EMPTY.assoc(Keyword.intern("query-string"), query);

    Object donkey = donkey();
    Object ring = ((IPersistentMap) ring()).valAt(PARAMS);
    Clj.checkEqual("query params", donkey, ring);
    Clj.checkEqual("query params (expected)", donkey, Clj.read(
        "{:name \"Ann Lee\" :age \"42\" :tags [\"a\" \"b\"] :city \"S\u00e3o Paulo\" :active \"true\"}"));
    System.err.println("[setup] query params equal: " + Clj.PR_STR.invoke(donkey));
  }

  @Benchmark
  public Object donkey() {
    return FormCodec.decode(query, StandardCharsets.UTF_8, true);
  }

  /** (-> {:query-string q} params-request keyword-params-request): the middleware per request. */
  @Benchmark
  public Object ring() {
    return keywordParamsRequest.invoke(paramsRequest.invoke(request));
  }

  /** Just ring.util.codec/form-decode (string keys, no request map), for reference. */
  @Benchmark
  public Object ringCodecOnly() {
    return formDecode.invoke(query, "UTF-8");
  }
}
