package donkey.ring;

import clojure.lang.IPersistentMap;
import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;
import clojure.lang.PersistentHashMap;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.HostAndPort;
import io.vertx.core.net.SocketAddress;
import java.io.InputStream;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

/**
 * Builds the Ring request map (SPEC 1.x) from a Vert.x request, eagerly, as a persistent map.
 *
 * <p>Threading: called on the request's event loop, which owns the Vert.x request. The map it
 * returns is immutable and may be handed to any thread.
 *
 * <p>Bad input: the Vert.x decoder has already rejected malformed request lines and headers
 * with 400/414/431 before a request reaches this class.
 */
public final class RequestMap {
  public static final Keyword SERVER_PORT = Keyword.intern("server-port");
  public static final Keyword SERVER_NAME = Keyword.intern("server-name");
  public static final Keyword REMOTE_ADDR = Keyword.intern("remote-addr");
  public static final Keyword URI = Keyword.intern("uri");
  public static final Keyword QUERY_STRING = Keyword.intern("query-string");
  public static final Keyword SCHEME = Keyword.intern("scheme");
  public static final Keyword REQUEST_METHOD = Keyword.intern("request-method");
  public static final Keyword PROTOCOL = Keyword.intern("protocol");
  public static final Keyword HEADERS = Keyword.intern("headers");
  public static final Keyword BODY = Keyword.intern("body");
  public static final Keyword SSL_CLIENT_CERT = Keyword.intern("ssl-client-cert");
  public static final Keyword PATH_PARAMS = Keyword.intern("path-params");

  static final Keyword HTTP = Keyword.intern("http");
  static final Keyword HTTPS = Keyword.intern("https");

  private static final Keyword GET = Keyword.intern("get");
  private static final Keyword POST = Keyword.intern("post");
  private static final Keyword PUT = Keyword.intern("put");
  private static final Keyword DELETE = Keyword.intern("delete");
  private static final Keyword HEAD = Keyword.intern("head");
  private static final Keyword OPTIONS = Keyword.intern("options");
  private static final Keyword PATCH = Keyword.intern("patch");

  /** Header maps with more distinct names than this are built through a hash map. */
  private static final int SMALL_HEADERS = 16;

  private RequestMap() {}

  /** {@link #build(HttpServerRequest, InputStream, boolean, IPersistentMap, String)} without a cached peer address. */
  public static IPersistentMap build(HttpServerRequest req, InputStream body,
                                     boolean trustForwardedFor, IPersistentMap pathParams) {
    return build(req, body, trustForwardedFor, pathParams, null);
  }

  /**
   * The Ring request map of {@code req}.
   *
   * @param body the request body, or null when the request has none
   * @param trustForwardedFor take {@code :remote-addr} from X-Forwarded-For when present
   * @param pathParams the {@code :path-params} of a route match, or null without a route table
   * @param peer the socket peer's address when the caller has it cached, else null
   */
  public static IPersistentMap build(HttpServerRequest req, InputStream body,
                                     boolean trustForwardedFor, IPersistentMap pathParams,
                                     String peer) {
    MultiMap headers = req.headers();
    HostAndPort authority = req.authority();
    String serverName;
    int serverPort;
    if (authority != null && authority.port() >= 0) {
      serverName = authority.host();
      serverPort = authority.port();
    } else {
      SocketAddress local = req.localAddress();
      serverName = authority != null ? authority.host() : local.hostAddress();
      serverPort = local.port();
    }
    String remote = null;
    if (trustForwardedFor) remote = firstForwardedFor(headers.get("x-forwarded-for"));
    if (remote == null) remote = peer != null ? peer : req.remoteAddress().hostAddress();

    Object[] kv = new Object[pathParams == null ? 20 : 22];
    kv[0] = SERVER_PORT;
    kv[1] = Integer.valueOf(serverPort);
    kv[2] = SERVER_NAME;
    kv[3] = serverName;
    kv[4] = REMOTE_ADDR;
    kv[5] = remote;
    kv[6] = URI;
    kv[7] = req.path();
    kv[8] = QUERY_STRING;
    kv[9] = req.query();
    kv[10] = SCHEME;
    kv[11] = req.isSSL() ? HTTPS : HTTP;
    kv[12] = REQUEST_METHOD;
    kv[13] = method(req.method());
    kv[14] = PROTOCOL;
    kv[15] = protocol(req.version());
    kv[16] = HEADERS;
    kv[17] = headers(headers);
    kv[18] = BODY;
    kv[19] = body;
    if (pathParams != null) {
      kv[20] = PATH_PARAMS;
      kv[21] = pathParams;
    }
    return new PersistentArrayMap(kv);
  }

  /** The lower-case keyword of an HTTP method; the common ones are not re-interned. */
  public static Keyword method(HttpMethod m) {
    switch (m.name()) {
      case "GET": return GET;
      case "POST": return POST;
      case "PUT": return PUT;
      case "DELETE": return DELETE;
      case "HEAD": return HEAD;
      case "OPTIONS": return OPTIONS;
      case "PATCH": return PATCH;
      default: return Keyword.intern(m.name().toLowerCase(Locale.ROOT));
    }
  }

  static String protocol(HttpVersion v) {
    switch (v) {
      case HTTP_1_0: return "HTTP/1.0";
      case HTTP_1_1: return "HTTP/1.1";
      default: return "HTTP/2.0";
    }
  }

  /**
   * Ring's {@code :headers}: lower-case names; a repeated header's values joined with
   * {@code ","} in arrival order, except {@code cookie}, joined with {@code "; "}.
   */
  public static IPersistentMap headers(MultiMap in) {
    int n = in.size();
    if (n == 0) return PersistentArrayMap.EMPTY;
    if (n > SMALL_HEADERS) return bigHeaders(in);
    Object[] kv = new Object[n * 2];
    int len = 0;
    for (Map.Entry<String, String> e : in) {
      String name = HeaderNames.lower(e.getKey());
      int at = -1;
      for (int i = 0; i < len; i += 2) {
        if (name.equals(kv[i])) { at = i; break; }
      }
      if (at < 0) {
        kv[len++] = name;
        kv[len++] = e.getValue();
      } else {
        kv[at + 1] = join(name, (String) kv[at + 1], e.getValue());
      }
    }
    if (len < kv.length) {
      Object[] exact = new Object[len];
      System.arraycopy(kv, 0, exact, 0, len);
      kv = exact;
    }
    return len <= 16 ? new PersistentArrayMap(kv) : PersistentHashMap.create(kv);
  }

  private static IPersistentMap bigHeaders(MultiMap in) {
    HashMap<String, String> acc = new HashMap<>();
    for (Map.Entry<String, String> e : in) {
      String name = HeaderNames.lower(e.getKey());
      String old = acc.get(name);
      acc.put(name, old == null ? e.getValue() : join(name, old, e.getValue()));
    }
    return PersistentHashMap.create(acc);
  }

  private static String join(String name, String a, String b) {
    return a + ("cookie".equals(name) ? "; " : ",") + b;
  }

  private static String firstForwardedFor(String xff) {
    if (xff == null) return null;
    int comma = xff.indexOf(',');
    String first = (comma < 0 ? xff : xff.substring(0, comma)).trim();
    return first.isEmpty() ? null : first;
  }
}
