package donkey.bench;

import static donkey.ring.RequestMap.BODY;
import static donkey.ring.RequestMap.HEADERS;
import static donkey.ring.RequestMap.PATH_PARAMS;
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
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.HostAndPort;
import io.vertx.core.net.SocketAddress;
import java.io.InputStream;
import java.util.Iterator;

/**
 * Bench-only LAZY Ring request map: the same ten keys (eleven with {@code :path-params}) and
 * values as {@link RequestMap#build}, but each value is computed from the Vert.x request the
 * first time it is read, then cached in a field. {@code assoc}, {@code without}, {@code seq},
 * {@code iterator} and {@code withMeta} realise the whole map (every value) as the
 * {@link PersistentArrayMap} the eager builder would have made, and work on that.
 *
 * <p>{@code :headers}, and {@code :server-name}/{@code :server-port} (which come from the Host
 * header), need the one pass over the headers ({@link RequestMap#scan}); the caller may pass a
 * {@link RequestMap.Head} it already has, as the kernel's Exchange does.
 *
 * <p>Caching is race-benign: each cache is one reference field, {@code null} meaning "not
 * computed yet" and {@link #NIL} meaning "computed, and it is nil"; two threads may both
 * compute a value, and they compute equal immutable values. (Not quite for a {@code Head}
 * scanned here: its picked fields are not final, so a racing reader could see one half-built;
 * a real implementation would scan on the event loop or publish it safely.) It still reads the
 * Vert.x request from whatever thread reads the map, which Vert.x does not promise is safe.
 */
public final class LazyRequestMap extends APersistentMap implements IObj {
  private static final long serialVersionUID = 1L;

  private static final Object NIL = new Object();
  private static final Keyword HTTP = Keyword.intern("http");
  private static final Keyword HTTPS = Keyword.intern("https");

  private final transient HttpServerRequest req;
  private final transient InputStream body;
  private final boolean trustForwardedFor;
  private final IPersistentMap pathParams;
  private final String peer;

  private Object serverPort;
  private Object serverName;
  private Object remoteAddr;
  private Object uri;
  private Object queryString;
  private Object scheme;
  private Object method;
  private Object protocol;
  private RequestMap.Head head;
  private PersistentArrayMap realized;

  /** Same arguments as {@code RequestMap.build(req, body, trustForwardedFor, pathParams)}. */
  public LazyRequestMap(HttpServerRequest req, InputStream body, boolean trustForwardedFor,
                        IPersistentMap pathParams) {
    this(req, null, body, trustForwardedFor, pathParams, null);
  }

  /**
   * Same arguments as {@code RequestMap.build(req, head, body, trustForwardedFor, pathParams,
   * peer)}; {@code head} may be null, then the headers are scanned when first needed.
   */
  public LazyRequestMap(HttpServerRequest req, RequestMap.Head head, InputStream body,
                        boolean trustForwardedFor, IPersistentMap pathParams, String peer) {
    this.req = req;
    this.head = head;
    this.body = body;
    this.trustForwardedFor = trustForwardedFor;
    this.pathParams = pathParams;
    this.peer = peer;
  }

  private static Object mask(Object v) {
    return v == null ? NIL : v;
  }

  private static Object unmask(Object v) {
    return v == NIL ? null : v;
  }

  // ---- the ten values, each computed once ----------------------------------------------

  /** The scanned headers: given by the caller, or scanned on first need. */
  private RequestMap.Head head() {
    RequestMap.Head h = head;
    if (h == null) head = h = RequestMap.scan(req.headers());
    return h;
  }

  private Object serverPort() {
    Object v = serverPort;
    if (v == null) {
      authority();
      v = serverPort;
    }
    return v;
  }

  private Object serverName() {
    Object v = serverName;
    if (v == null) {
      authority();
      v = serverName;
    }
    return unmask(v);
  }

  /** :server-name and :server-port, by RequestMap.build's rules (Host header first). */
  private void authority() {
    String name = null;
    int port = -1;
    String host = head().host;
    if (host != null && req.uri().startsWith("/")) {
      int colon = host.lastIndexOf(':');
      if (colon > 0 && host.indexOf(']', colon) < 0) {
        name = host.substring(0, colon);
        port = parsePort(host, colon + 1);
      } else {
        name = host;
      }
      if (name.length() > 1 && name.charAt(0) == '[' && name.endsWith("]")) {
        name = name.substring(1, name.length() - 1);
      }
    } else {
      HostAndPort authority = req.authority();
      if (authority != null) {
        name = authority.host();
        port = authority.port();
      }
    }
    if (name == null || name.isEmpty() || port < 0) {
      SocketAddress local = req.localAddress();
      if (name == null || name.isEmpty()) name = local.hostAddress();
      if (port < 0) port = local.port();
    }
    serverName = mask(name);
    serverPort = Integer.valueOf(port);
  }

  private static int parsePort(String s, int from) {
    int n = s.length() - from;
    if (n < 1 || n > 5) return -1;
    int port = 0;
    for (int i = from; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c < '0' || c > '9') return -1;
      port = port * 10 + (c - '0');
    }
    return port <= 65535 ? port : -1;
  }

  private Object remoteAddr() {
    Object v = remoteAddr;
    if (v == null) {
      String remote = null;
      if (trustForwardedFor) remote = firstForwardedFor(head().forwardedFor);
      if (remote == null) remote = peer != null ? peer : req.remoteAddress().hostAddress();
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
    return head().headers;
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
      Object[] kv = new Object[pathParams == null ? 20 : 22];
      kv[0] = SERVER_PORT;
      kv[1] = serverPort();
      kv[2] = SERVER_NAME;
      kv[3] = serverName();
      kv[4] = REMOTE_ADDR;
      kv[5] = remoteAddr();
      kv[6] = URI;
      kv[7] = uri();
      kv[8] = QUERY_STRING;
      kv[9] = queryString();
      kv[10] = SCHEME;
      kv[11] = scheme();
      kv[12] = REQUEST_METHOD;
      kv[13] = method();
      kv[14] = PROTOCOL;
      kv[15] = protocol();
      kv[16] = HEADERS;
      kv[17] = headers();
      kv[18] = BODY;
      kv[19] = body;
      if (pathParams != null) {
        kv[20] = PATH_PARAMS;
        kv[21] = pathParams;
      }
      realized = m = new PersistentArrayMap(kv);
    }
    return m;
  }

  private boolean isKey(Object key) {
    return key == REQUEST_METHOD || key == URI || key == HEADERS || key == QUERY_STRING
        || key == REMOTE_ADDR || key == SCHEME || key == SERVER_NAME || key == SERVER_PORT
        || key == PROTOCOL || key == BODY || (key == PATH_PARAMS && pathParams != null);
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
    if (key == PATH_PARAMS && pathParams != null) return pathParams;
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
    return pathParams == null ? 10 : 11;
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
