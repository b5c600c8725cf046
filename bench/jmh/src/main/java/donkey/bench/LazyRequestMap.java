package donkey.bench;

import static donkey.ring.RequestMap.BODY;
import static donkey.ring.RequestMap.HEADERS;
import static donkey.ring.RequestMap.PROTOCOL;
import static donkey.ring.RequestMap.QUERY_STRING;
import static donkey.ring.RequestMap.REMOTE_ADDR;
import static donkey.ring.RequestMap.REQUEST_METHOD;
import static donkey.ring.RequestMap.SCHEME;
import static donkey.ring.RequestMap.SERVER_NAME;
import static donkey.ring.RequestMap.SERVER_PORT;
import static donkey.ring.RequestMap.URI;

import clojure.lang.APersistentMap;
import clojure.lang.IMapEntry;
import clojure.lang.IObj;
import clojure.lang.IPersistentCollection;
import clojure.lang.IPersistentMap;
import clojure.lang.ISeq;
import clojure.lang.Keyword;
import clojure.lang.MapEntry;
import clojure.lang.PersistentArrayMap;
import donkey.ring.RequestMap;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.HostAndPort;
import io.vertx.core.net.SocketAddress;
import java.io.InputStream;
import java.util.Iterator;

/**
 * Bench-only LAZY Ring request map: the same ten keys and values as
 * {@link RequestMap#build}, but each value is computed from the Vert.x request the first time
 * it is read, then cached in a field. {@code assoc}, {@code without}, {@code seq},
 * {@code iterator} and {@code withMeta} realise the whole map (all ten values) as the
 * {@link PersistentArrayMap} the eager builder would have made, and work on that.
 *
 * <p>Caching is race-benign: each cache is one reference field, {@code null} meaning "not
 * computed yet" and {@link #NIL} meaning "computed, and it is nil"; two threads may both
 * compute a value, and they compute equal immutable values. It still reads the Vert.x request
 * from whatever thread reads the map, which Vert.x does not promise is safe.
 */
public final class LazyRequestMap extends APersistentMap implements IObj {
  private static final long serialVersionUID = 1L;

  private static final Object NIL = new Object();
  private static final Keyword HTTP = Keyword.intern("http");
  private static final Keyword HTTPS = Keyword.intern("https");
  private static final int COUNT = 10;

  private final transient HttpServerRequest req;
  private final transient InputStream body;
  private final boolean trustForwardedFor;

  private Object serverPort;
  private Object serverName;
  private Object remoteAddr;
  private Object uri;
  private Object queryString;
  private Object scheme;
  private Object method;
  private Object protocol;
  private Object headers;
  private PersistentArrayMap realized;

  public LazyRequestMap(HttpServerRequest req, InputStream body, boolean trustForwardedFor) {
    this.req = req;
    this.body = body;
    this.trustForwardedFor = trustForwardedFor;
  }

  private static Object mask(Object v) {
    return v == null ? NIL : v;
  }

  private static Object unmask(Object v) {
    return v == NIL ? null : v;
  }

  // ---- the ten values, each computed once ----------------------------------------------

  private Object serverPort() {
    Object v = serverPort;
    if (v == null) {
      SocketAddress local = req.localAddress();
      HostAndPort authority = req.authority();
      int port = authority != null && authority.port() >= 0 ? authority.port() : local.port();
      serverPort = v = Integer.valueOf(port);
    }
    return v;
  }

  private Object serverName() {
    Object v = serverName;
    if (v == null) {
      HostAndPort authority = req.authority();
      serverName = v = mask(authority != null ? authority.host() : req.localAddress().hostAddress());
    }
    return unmask(v);
  }

  private Object remoteAddr() {
    Object v = remoteAddr;
    if (v == null) {
      String remote = null;
      if (trustForwardedFor) remote = firstForwardedFor(req.headers().get("x-forwarded-for"));
      if (remote == null) remote = req.remoteAddress().hostAddress();
      remoteAddr = v = mask(remote);
    }
    return unmask(v);
  }

  private Object uri() {
    Object v = uri;
    if (v == null) uri = v = mask(req.path());
    return unmask(v);
  }

  private Object queryString() {
    Object v = queryString;
    if (v == null) queryString = v = mask(req.query());
    return unmask(v);
  }

  private Object scheme() {
    Object v = scheme;
    if (v == null) scheme = v = req.isSSL() ? HTTPS : HTTP;
    return v;
  }

  private Object method() {
    Object v = method;
    if (v == null) method = v = RequestMap.method(req.method());
    return v;
  }

  private Object protocol() {
    Object v = protocol;
    if (v == null) protocol = v = protocol(req.version());
    return v;
  }

  private Object headers() {
    Object v = headers;
    if (v == null) {
      MultiMap in = req.headers();
      headers = v = RequestMap.headers(in);
    }
    return v;
  }

  private static String protocol(HttpVersion v) {
    switch (v) {
      case HTTP_1_0: return "HTTP/1.0";
      case HTTP_1_1: return "HTTP/1.1";
      default: return "HTTP/2.0";
    }
  }

  private static String firstForwardedFor(String xff) {
    if (xff == null) return null;
    int comma = xff.indexOf(',');
    String first = (comma < 0 ? xff : xff.substring(0, comma)).trim();
    return first.isEmpty() ? null : first;
  }

  /** The whole map, as RequestMap.build would have built it (same key order). */
  private PersistentArrayMap realized() {
    PersistentArrayMap m = realized;
    if (m == null) {
      realized = m = new PersistentArrayMap(new Object[] {
        SERVER_PORT, serverPort(),
        SERVER_NAME, serverName(),
        REMOTE_ADDR, remoteAddr(),
        URI, uri(),
        QUERY_STRING, queryString(),
        SCHEME, scheme(),
        REQUEST_METHOD, method(),
        PROTOCOL, protocol(),
        HEADERS, headers(),
        BODY, body,
      });
    }
    return m;
  }

  private static boolean isKey(Object key) {
    return key == REQUEST_METHOD || key == URI || key == HEADERS || key == QUERY_STRING
        || key == REMOTE_ADDR || key == SCHEME || key == SERVER_NAME || key == SERVER_PORT
        || key == PROTOCOL || key == BODY;
  }

  // ---- ILookup / Associative -----------------------------------------------------------

  @Override
  public Object valAt(Object key) {
    return valAt(key, null);
  }

  /** Keywords are interned, so identity is Clojure equality here; most-read keys first. */
  @Override
  public Object valAt(Object key, Object notFound) {
    if (key == REQUEST_METHOD) return method();
    if (key == URI) return uri();
    if (key == HEADERS) return headers();
    if (key == QUERY_STRING) return queryString();
    if (key == REMOTE_ADDR) return remoteAddr();
    if (key == SCHEME) return scheme();
    if (key == SERVER_NAME) return serverName();
    if (key == SERVER_PORT) return serverPort();
    if (key == PROTOCOL) return protocol();
    if (key == BODY) return body;
    return notFound;
  }

  @Override
  public boolean containsKey(Object key) {
    return isKey(key);
  }

  @Override
  public IMapEntry entryAt(Object key) {
    return isKey(key) ? MapEntry.create(key, valAt(key)) : null;
  }

  @Override
  public int count() {
    return COUNT;
  }

  // ---- everything else works on the realised map ---------------------------------------

  @Override
  public IPersistentMap assoc(Object key, Object val) {
    return realized().assoc(key, val);
  }

  @Override
  public IPersistentMap assocEx(Object key, Object val) {
    return realized().assocEx(key, val);
  }

  @Override
  public IPersistentMap without(Object key) {
    return realized().without(key);
  }

  @Override
  public ISeq seq() {
    return realized().seq();
  }

  @Override
  @SuppressWarnings({"rawtypes", "unchecked"})
  public Iterator iterator() {
    return realized().iterator();
  }

  @Override
  public IPersistentCollection empty() {
    return PersistentArrayMap.EMPTY;
  }

  @Override
  public IPersistentMap meta() {
    return null;
  }

  @Override
  public IObj withMeta(IPersistentMap meta) {
    return realized().withMeta(meta);
  }
}
