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
 * Checks, before any measurement, that the kernel's lazy request map ({@link RequestMap#build})
 * is the same Ring map as {@link RequestMap#buildEager}: a benchmark of two maps that differ would mean nothing.
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
    same(RequestMap.buildEager(req, null, null, false, null, null), RequestMap.build(req, null, null, false, null, null), "plain");
    same(RequestMap.buildEager(req, null, body, false, null, null), RequestMap.build(req, null, body, false, null, null), "body");
    MultiMap h = FakeRequest.browserHeaders();
    h.add("X-Forwarded-For", "10.1.2.3, 127.0.0.1");
    h.add("Cookie", "b=2");
    h.add("Accept", "*/*");
    FakeRequest xff = new FakeRequest(h);
    same(RequestMap.buildEager(xff, null, null, true, null, null), RequestMap.build(xff, null, null, true, null, null), "xff");
    same(RequestMap.buildEager(xff, null, null, false, null, null), RequestMap.build(xff, null, null, false, null, null), "no-xff");

    IPersistentMap pp = PersistentArrayMap.createAsIfByAssoc(new Object[] {Keyword.intern("id"), "7"});
    same(RequestMap.buildEager(req, null, body, false, pp, null), RequestMap.build(req, null, body, false, pp, null), "path-params");
    IPersistentMap withPp = RequestMap.build(req, null, null, false, pp, null);
    check(withPp.count() == 14 && withPp.valAt(RequestMap.PATH_PARAMS) == pp, "path-params key");

    // The deprecated keys: present with nil without the headers, values with them.
    IPersistentMap plain = RequestMap.build(req, null, null, false, null, null);
    check(plain.containsKey(RequestMap.CONTENT_TYPE) && plain.valAt(RequestMap.CONTENT_TYPE) == null
        && plain.containsKey(RequestMap.CONTENT_LENGTH) && plain.valAt(RequestMap.CONTENT_LENGTH) == null
        && plain.containsKey(RequestMap.CHARACTER_ENCODING)
        && plain.valAt(RequestMap.CHARACTER_ENCODING) == null, "deprecated keys without a body");
    MultiMap withBody = FakeRequest.browserHeaders();
    withBody.add("Content-Type", "text/plain; charset=\"UTF-8\"");
    withBody.add("Content-Length", "5");
    FakeRequest wb = new FakeRequest(withBody);
    same(RequestMap.buildEager(wb, null, body, false, null, null), RequestMap.build(wb, null, body, false, null, null),
        "content headers");
    IPersistentMap cm = RequestMap.build(wb, null, body, false, null, null);
    check("text/plain; charset=\"UTF-8\"".equals(cm.valAt(RequestMap.CONTENT_TYPE))
        && Long.valueOf(5).equals(cm.valAt(RequestMap.CONTENT_LENGTH))
        && "UTF-8".equals(cm.valAt(RequestMap.CHARACTER_ENCODING)), "deprecated keys with a body");

    // :server-name/:server-port come from the Host header: the lazy map must follow.
    String[] hosts = {"example.org", "example.org:9000", "[::1]:8443", "[::1]", "h:99999", ":80"};
    for (String host : hosts) {
      MultiMap hh = FakeRequest.browserHeaders();
      hh.set("Host", host);
      FakeRequest r = new FakeRequest(hh);
      same(RequestMap.buildEager(r, null, null, false, null, null), RequestMap.build(r, null, null, false, null, null),
          "Host " + host);
    }
    MultiMap noHost = FakeRequest.browserHeaders();
    noHost.remove("Host");
    FakeRequest nh = new FakeRequest(noHost);
    same(RequestMap.buildEager(nh, null, null, false, null, null), RequestMap.build(nh, null, null, false, null, null),
        "no Host");
    // The kernel's overload: a Head scanned beforehand, and a cached peer address.
    RequestMap.Head head = RequestMap.scan(xff.headers());
    same(RequestMap.buildEager(xff, head, null, true, null, "10.9.9.9"),
        RequestMap.build(xff, head, null, true, null, "10.9.9.9"), "head xff");
    same(RequestMap.buildEager(xff, head, null, false, null, "10.9.9.9"),
        RequestMap.build(xff, head, null, false, null, "10.9.9.9"), "head peer");

    // Operations that realise the lazy map.
    Keyword k = Keyword.intern("query-params");
    IPersistentMap e = RequestMap.buildEager(req, null, null, false, null, null);
    check(Util.equiv(e.assoc(k, "x"), RequestMap.build(req, null, null, false, null, null).assoc(k, "x")), "assoc");
    check(Util.equiv(e.without(RequestMap.BODY),
        RequestMap.build(req, null, null, false, null, null).without(RequestMap.BODY)), "without");
    check(Util.equiv(RT.seq(e), RT.seq(RequestMap.build(req, null, null, false, null, null))), "seq order");
    IPersistentMap l = RequestMap.build(req, null, null, false, null, null);
    check(l.valAt(k) == null && l.valAt(k, "nf") == "nf" && !l.containsKey(k)
        && l.entryAt(k) == null, "missing key");
    check(l.containsKey(RequestMap.BODY) && l.entryAt(RequestMap.BODY) != null, "nil-valued key");
    check(RT.get(l.valAt(RequestMap.HEADERS), "host").equals("localhost:8080"), "host header");
    check(((clojure.lang.IFn) l).invoke(RequestMap.URI).equals("/plaintext"), "IFn");
    check(l.equals(e) && e.equals(l) && l.hashCode() == e.hashCode()
        && Util.hasheq(l) == Util.hasheq(e), "equals/hash");
  }

  private static void same(IPersistentMap eager, IPersistentMap lazy, String what) {
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
    if (!ok) throw new IllegalStateException("RequestMap.build differs from RequestMap.buildEager: " + what);
  }
}
