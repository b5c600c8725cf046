package donkey.bench;

import clojure.lang.IPersistentMap;
import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;
import clojure.lang.RT;
import clojure.lang.Util;
import donkey.ring.RequestMap;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpServerRequest;
import java.io.ByteArrayInputStream;
import java.io.InputStream;

/**
 * Checks, before any measurement, that {@link LazyRequestMap} is the same Ring map as
 * {@link RequestMap#build}: a benchmark of two maps that differ would mean nothing.
 * Run by the benchmark's setup; also runnable alone (java -cp benchmarks.jar donkey.bench.SelfCheck).
 */
public final class SelfCheck {
  private SelfCheck() {}

  public static void main(String[] args) {
    run(new FakeRequest());
    System.out.println("SelfCheck: lazy and eager request maps agree");
  }

  public static void run(HttpServerRequest req) {
    InputStream body = new ByteArrayInputStream(new byte[0]);
    same(RequestMap.build(req, null, false, null), new LazyRequestMap(req, null, false, null), "plain");
    same(RequestMap.build(req, body, false, null), new LazyRequestMap(req, body, false, null), "body");
    MultiMap h = FakeRequest.browserHeaders();
    h.add("X-Forwarded-For", "10.1.2.3, 127.0.0.1");
    h.add("Cookie", "b=2");
    h.add("Accept", "*/*");
    FakeRequest xff = new FakeRequest(h);
    same(RequestMap.build(xff, null, true, null), new LazyRequestMap(xff, null, true, null), "xff");
    same(RequestMap.build(xff, null, false, null), new LazyRequestMap(xff, null, false, null), "no-xff");

    IPersistentMap pp = PersistentArrayMap.createAsIfByAssoc(new Object[] {Keyword.intern("id"), "7"});
    same(RequestMap.build(req, body, false, pp), new LazyRequestMap(req, body, false, pp), "path-params");
    LazyRequestMap withPp = new LazyRequestMap(req, null, false, pp);
    check(withPp.count() == 11 && withPp.valAt(RequestMap.PATH_PARAMS) == pp, "path-params key");

    // :server-name/:server-port come from the Host header: the lazy map must follow.
    String[] hosts = {"example.org", "example.org:9000", "[::1]:8443", "[::1]", "h:99999", ":80"};
    for (String host : hosts) {
      MultiMap hh = FakeRequest.browserHeaders();
      hh.set("Host", host);
      FakeRequest r = new FakeRequest(hh);
      same(RequestMap.build(r, null, false, null), new LazyRequestMap(r, null, false, null),
          "Host " + host);
    }
    MultiMap noHost = FakeRequest.browserHeaders();
    noHost.remove("Host");
    FakeRequest nh = new FakeRequest(noHost);
    same(RequestMap.build(nh, null, false, null), new LazyRequestMap(nh, null, false, null),
        "no Host");
    // The kernel's overload: a Head scanned beforehand, and a cached peer address.
    RequestMap.Head head = RequestMap.scan(xff.headers());
    same(RequestMap.build(xff, head, null, true, null, "10.9.9.9"),
        new LazyRequestMap(xff, head, null, true, null, "10.9.9.9"), "head xff");
    same(RequestMap.build(xff, head, null, false, null, "10.9.9.9"),
        new LazyRequestMap(xff, head, null, false, null, "10.9.9.9"), "head peer");

    // Operations that realise the lazy map.
    Keyword k = Keyword.intern("query-params");
    IPersistentMap e = RequestMap.build(req, null, false, null);
    check(Util.equiv(e.assoc(k, "x"), new LazyRequestMap(req, null, false, null).assoc(k, "x")), "assoc");
    check(Util.equiv(e.without(RequestMap.BODY),
        new LazyRequestMap(req, null, false, null).without(RequestMap.BODY)), "without");
    check(Util.equiv(RT.seq(e), RT.seq(new LazyRequestMap(req, null, false, null))), "seq order");
    LazyRequestMap l = new LazyRequestMap(req, null, false, null);
    check(l.valAt(k) == null && l.valAt(k, "nf") == "nf" && !l.containsKey(k)
        && l.entryAt(k) == null, "missing key");
    check(l.containsKey(RequestMap.BODY) && l.entryAt(RequestMap.BODY) != null, "nil-valued key");
    check(RT.get(l.valAt(RequestMap.HEADERS), "host").equals("localhost:8080"), "host header");
    check(l.invoke(RequestMap.URI).equals("/plaintext"), "IFn");
    check(l.equals(e) && e.equals(l) && l.hashCode() == e.hashCode()
        && Util.hasheq(l) == Util.hasheq(e), "equals/hash");
  }

  private static void same(IPersistentMap eager, LazyRequestMap lazy, String what) {
    check(lazy.count() == eager.count(), what + ": count");
    for (Object o : eager) {
      java.util.Map.Entry<?, ?> en = (java.util.Map.Entry<?, ?>) o;
      check(lazy.containsKey(en.getKey()), what + ": containsKey " + en.getKey());
      check(Util.equiv(lazy.valAt(en.getKey()), en.getValue()),
          what + ": " + en.getKey() + " = " + lazy.valAt(en.getKey()) + ", eager " + en.getValue());
    }
    check(Util.equiv(eager, lazy) && Util.equiv(lazy, eager), what + ": equiv");
  }

  private static void check(boolean ok, String what) {
    if (!ok) throw new IllegalStateException("LazyRequestMap differs from RequestMap.build: " + what);
  }
}
