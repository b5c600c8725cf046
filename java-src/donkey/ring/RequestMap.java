package donkey.ring;

import clojure.lang.IPersistentMap;
import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;
import clojure.lang.PersistentHashMap;
import donkey.codec.ContentType;
import io.netty.util.AsciiString;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.HostAndPort;
import io.vertx.core.net.SocketAddress;
import java.io.InputStream;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.function.BiConsumer;

/**
 * Builds the Ring request map (SPEC 1.x) from a Vert.x request: {@link #build} makes the
 * {@link LazyRequestMap} handlers get, which leaves the pass over the headers ({@link #scan})
 * until {@code :headers}, {@code :server-name} or {@code :server-port} is first read;
 * {@link #buildEager} makes the same map with every value at once.
 *
 * <p>Threading: called on the request's event loop, which owns the Vert.x request. The map it
 * returns is immutable and may be handed to any thread.
 *
 * <p>Bad input: the Vert.x decoder has already rejected malformed request lines and headers
 * with 400/414/431 before a request reaches this class.
 *
 * <p>Past 450 lines because Ring's keys, the one pass over the headers that feeds them and the
 * rules for the server's name and port are one mapping, read together against the SPEC.
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
  // deprecated in the SPEC since Ring 1.3, still set by Ring's servlet adapter (ring-jetty)
  // and http-kit, and read by older middleware and libraries
  public static final Keyword CONTENT_TYPE = Keyword.intern("content-type");
  public static final Keyword CONTENT_LENGTH = Keyword.intern("content-length");
  public static final Keyword CHARACTER_ENCODING = Keyword.intern("character-encoding");

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

  /**
   * A request's headers as Ring's {@code :headers} map, plus the values the kernel itself
   * needs, picked up in the same single pass so no header is looked up twice.
   *
   * <p>Header names are the client's choice, and names of one {@code String.hashCode} (there
   * are 2^k lower-case ones of 2k characters) would make a hash map quadratic to build: about
   * 700 fit in the default 16 KiB head. A head with more than
   * {@link donkey.codec.KeyHashes#MAX_SHARED} names of one hash, which real clients never send,
   * gets its {@code :headers} as a sorted map instead (a
   * {@link clojure.lang.PersistentTreeMap} ordering names as Strings, and any other key a
   * handler adds after them): as correct a Clojure map, built in O(n log n). The request is
   * served rather than refused because the map is built lazily, possibly on a worker thread,
   * where the kernel can no longer answer 400 itself.
   */
  public static final class Head implements BiConsumer<String, String> {
    public IPersistentMap headers = PersistentArrayMap.EMPTY;
    public String contentLength;
    public String transferEncoding;
    public String contentType;
    public String accept;
    public String expect;
    public String host;
    public String forwardedFor;
    /**
     * Names and values while scanning; null once too many names for a linear scan. A value is
     * a String, or a StringBuilder collecting a repeated header's values (joined once each,
     * not copied again per line).
     */
    private Object[] kv;
    private int len;
    private HashMap<String, Object> big;

    private Head() {
      // Sized by growing, never by MultiMap.size(): on Vert.x 5's HTTP/1.x headers, size()
      // builds a TreeSet of every name.
      kv = new Object[16];
    }

    /** One header line, in arrival order (MultiMap.forEach: no entry objects allocated). */
    @Override
    public void accept(String rawName, String value) {
      String name = HeaderNames.lower(rawName);
      if (big != null) {
        Object old = big.get(name);
        big.put(name, old == null ? value : join(name, old, value));
        return;
      }
      for (int i = 0; i < len; i += 2) {
        if (name.equals(kv[i])) {
          kv[i + 1] = join(name, kv[i + 1], value);
          return;
        }
      }
      if (len == kv.length) {
        if (len == 2 * SMALL_HEADERS) {
          big = new HashMap<>();
          for (int i = 0; i < len; i += 2) big.put((String) kv[i], kv[i + 1]);
          big.put(name, value);
          kv = null;
          len = 0;
          return;
        }
        kv = Arrays.copyOf(kv, len * 2);
      }
      kv[len++] = name;
      kv[len++] = value;
    }

    private Head finish() {
      if (big != null) {
        for (Map.Entry<String, Object> e : big.entrySet()) {
          if (e.getValue() instanceof StringBuilder) e.setValue(e.getValue().toString());
        }
        Object[] names = big.keySet().toArray();
        headers = donkey.codec.KeyHashes.tooManyShared(names, 0, 1, names.length) ? sorted(big)
            : PersistentHashMap.create(big);
        for (Map.Entry<String, Object> e : big.entrySet()) pick(e.getKey(), (String) e.getValue());
        big = null;
        return this;
      }
      Object[] a = kv;
      if (len < a.length) {
        a = new Object[len];
        System.arraycopy(kv, 0, a, 0, len);
      }
      for (int i = 1; i < len; i += 2) {
        if (a[i] instanceof StringBuilder) a[i] = a[i].toString();
      }
      if (len > 0) headers = len <= 16 ? new PersistentArrayMap(a) : PersistentHashMap.create(a);
      for (int i = 0; i < len; i += 2) pick((String) a[i], (String) a[i + 1]);
      kv = null;
      return this;
    }

    /** Header names as Strings first, other keys (a handler's) after them. */
    private static final java.util.Comparator<Object> NAMES_FIRST = (a, b) -> {
      if (a instanceof String) return b instanceof String ? ((String) a).compareTo((String) b) : -1;
      return b instanceof String ? 1 : clojure.lang.Util.compare(a, b);
    };

    private static IPersistentMap sorted(Map<String, Object> all) {
      IPersistentMap m = new clojure.lang.PersistentTreeMap(null, NAMES_FIRST);
      for (Map.Entry<String, Object> e : all.entrySet()) m = m.assoc(e.getKey(), e.getValue());
      return m;
    }

    private void pick(String name, String value) {
      // names come from HeaderNames, so the common ones are these very (interned) instances
      if (name == "content-length") {
        contentLength = value;
      } else if (name == "transfer-encoding") {
        transferEncoding = value;
      } else if (name == "content-type") {
        contentType = value;
      } else if (name == "accept") {
        accept = value;
      } else if (name == "expect") {
        expect = value;
      } else if (name == "host") {
        host = value;
      } else if (name == "x-forwarded-for") {
        forwardedFor = value;
      }
    }
  }

  /** Event loop: one pass over the request's headers. */
  public static Head scan(MultiMap in) {
    Head h = new Head();
    in.forEach(h);
    return h.finish();
  }

  /**
   * The Ring request map of {@code req}: the six-argument {@code build} without a scanned
   * head or a cached peer address.
   */
  public static IPersistentMap build(HttpServerRequest req, InputStream body,
                                     boolean trustForwardedFor, IPersistentMap pathParams) {
    return build(req, null, body, trustForwardedFor, pathParams, null);
  }

  /**
   * The Ring request map of {@code req}: a {@link LazyRequestMap}, whose {@code :headers},
   * {@code :server-name} and {@code :server-port} (and {@code :remote-addr} when
   * {@code trustForwardedFor}) are worked out when first read. Event loop.
   *
   * @param head the request's scanned headers ({@link #scan}) when the caller has them, else
   *     null: they are scanned when the map first needs them
   * @param body the request body, or null when the request has none
   * @param trustForwardedFor take {@code :remote-addr} from X-Forwarded-For when present
   * @param pathParams the {@code :path-params} of a route match, or null without a route table
   * @param peer the socket peer's address when the caller has it cached, else null
   */
  public static IPersistentMap build(HttpServerRequest req, Head head, InputStream body,
                                     boolean trustForwardedFor, IPersistentMap pathParams,
                                     String peer) {
    return build(req, head, body, trustForwardedFor, pathParams,
        peer != null ? peer : req.remoteAddress().hostAddress(), req.localAddress(),
        req.isSSL(), null, req.path(), req.query());
  }

  /**
   * {@link #build(HttpServerRequest, Head, InputStream, boolean, IPersistentMap, String)} with
   * what the kernel takes of the connection once, at accept: its addresses, and whether it is
   * TLS (Vert.x answers {@code isSSL()} by searching the channel's pipeline on every call);
   * and with the request's path and query string, which its head check has worked out.
   *
   * @param peer the socket peer's address
   * @param local the connection's local address
   * @param ssl true when the connection is TLS ({@code :scheme :https})
   * @param clientCert the client's certificate ({@code :ssl-client-cert}, a
   *     {@link java.security.cert.X509Certificate}), or null: the map then has no such key
   * @param path what {@code req.path()} returns
   * @param query what {@code req.query()} returns
   */
  public static IPersistentMap build(HttpServerRequest req, Head head, InputStream body,
                                     boolean trustForwardedFor, IPersistentMap pathParams,
                                     String peer, SocketAddress local, boolean ssl,
                                     Object clientCert, String path, String query) {
    String uri = req.uri();
    HostAndPort absolute = uri.startsWith("/") ? null : targetAuthority(uri);
    return make(req, head, body, pathParams, absolute, local, ssl, peer, trustForwardedFor,
        clientCert, path, query);
  }

  private static IPersistentMap make(HttpServerRequest req, Head head, InputStream body,
                                     IPersistentMap pathParams, HostAndPort absolute,
                                     SocketAddress local, boolean https, String peer,
                                     boolean trustForwardedFor, Object clientCert,
                                     String path, String query) {
    return new LazyRequestMap(req.headers(), head, absolute, local, path, query,
        method(req.method()), https ? HTTPS : HTTP, protocol(req.version()), body,
        pathParams, peer, trustForwardedFor, clientCert);
  }

  /**
   * {@link #build(HttpServerRequest, Head, InputStream, boolean, IPersistentMap, String,
   * SocketAddress, boolean, Object, String, String)} for a request that came through a trusted
   * proxy: {@code :remote-addr}, {@code :scheme}, {@code :server-name} and {@code :server-port}
   * are what {@code f}, its forwarding headers, say, and the socket's where they say nothing. A
   * forwarded scheme or host without a port gives the scheme's default port, unless the Host
   * header that stays names one. Event loop.
   */
  public static IPersistentMap buildForwarded(HttpServerRequest req, Head head,
                                              InputStream body, IPersistentMap pathParams,
                                              Proxies.Forwarded f, SocketAddress local,
                                              boolean ssl, Object clientCert) {
    String uri = req.uri();
    HostAndPort target = uri.startsWith("/") ? null : targetAuthority(uri);
    boolean https = f.https(ssl);
    HostAndPort absolute = f.authority(target != null ? target : req.authority(), local, https);
    return make(req, head, body, pathParams, absolute != null ? absolute : target, local, https,
        f.remote, false, clientCert, req.path(), req.query());
  }


  /**
   * The same map as {@link #build}, with every value worked out now, as a
   * {@link PersistentArrayMap}: what the lazy map turns into for {@code seq} or {@code assoc}
   * (it is that map). Event loop.
   */
  public static IPersistentMap buildEager(HttpServerRequest req, Head head, InputStream body,
                                          boolean trustForwardedFor, IPersistentMap pathParams,
                                          String peer) {
    return ((LazyRequestMap) build(req, head, body, trustForwardedFor, pathParams, peer)).whole();
  }

  /**
   * The request map's entries, in the order {@code seq} shows them (Ring's servlet adapter's
   * order, the deprecated keys after {@code :headers}); {@code :ssl-client-cert} only when
   * {@code clientCert} is not null, {@code :path-params} only when {@code pathParams} is not.
   */
  static IPersistentMap entries(Integer serverPort, String serverName, String remote,
                                String uri, String queryString, Object scheme, Object method,
                                String protocol, IPersistentMap headers, String contentType,
                                Long contentLength, String characterEncoding, InputStream body,
                                IPersistentMap pathParams, Object clientCert) {
    Object[] kv = new Object[26 + (pathParams == null ? 0 : 2) + (clientCert == null ? 0 : 2)];
    kv[0] = SERVER_PORT;
    kv[1] = serverPort;
    kv[2] = SERVER_NAME;
    kv[3] = serverName;
    kv[4] = REMOTE_ADDR;
    kv[5] = remote;
    kv[6] = URI;
    kv[7] = uri;
    kv[8] = QUERY_STRING;
    kv[9] = queryString;
    kv[10] = SCHEME;
    kv[11] = scheme;
    kv[12] = REQUEST_METHOD;
    kv[13] = method;
    kv[14] = PROTOCOL;
    kv[15] = protocol;
    kv[16] = HEADERS;
    kv[17] = headers;
    kv[18] = CONTENT_TYPE;
    kv[19] = contentType;
    kv[20] = CONTENT_LENGTH;
    kv[21] = contentLength;
    kv[22] = CHARACTER_ENCODING;
    kv[23] = characterEncoding;
    kv[24] = BODY;
    kv[25] = body;
    int i = 26;
    if (pathParams != null) {
      kv[i++] = PATH_PARAMS;
      kv[i++] = pathParams;
    }
    if (clientCert != null) {
      kv[i++] = SSL_CLIENT_CERT;
      kv[i] = clientCert;
    }
    return new PersistentArrayMap(kv);
  }

  /** {@code :server-name} and {@code :server-port}, worked out together. Immutable. */
  static final class Authority {
    final String name;
    final Integer port;

    Authority(String name, Integer port) {
      this.name = name;
      this.port = port;
    }
  }

  /**
   * The authority of an absolute-form request target ({@code http://a.example:81/x} gives
   * {@code a.example:81}, userinfo included if the client sent one), or null for any other
   * form of target. Any thread.
   */
  public static String absoluteAuthority(String target) {
    int colon = target.indexOf(':');
    if (colon <= 0 || !target.startsWith("//", colon + 1)) return null;
    for (int i = 0; i < colon; i++) {
      char c = target.charAt(i);
      boolean scheme = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
          || i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.');
      if (!scheme) return null;
    }
    int start = colon + 3;
    int end = start;
    while (end < target.length() && "/?#".indexOf(target.charAt(end)) < 0) end++;
    return target.substring(start, end);
  }

  /**
   * The host and port an absolute-form target names (RFC 9112 3.2.2: they, not the Host
   * header, identify the server), its scheme's default port when it names none; null for
   * another form of target, or an authority that does not parse (the kernel has answered those
   * 400 already).
   */
  static HostAndPort targetAuthority(String target) {
    String a = absoluteAuthority(target);
    if (a == null || a.isEmpty()) return null;
    // (ASCII case only: String's own ignore-case comparison folds other letters into ASCII)
    int defaultPort = AsciiString.regionMatchesAscii(target, true, 0, "https:", 0, 6) ? 443
        : AsciiString.regionMatchesAscii(target, true, 0, "http:", 0, 5) ? 80 : -1;
    return HostAndPort.parseAuthority(a, defaultPort);
  }

  /**
   * {@code :server-name} and {@code :server-port}: from the authority of an absolute-form
   * request target, else from the Host header (RFC 9112 3.2); what is missing or unusable comes
   * from the local socket address. Any thread.
   *
   * @param host the Host header when the target is not absolute-form, else null
   * @param absolute the absolute-form target's authority, else null
   */
  static Authority authority(String host, HostAndPort absolute, SocketAddress local) {
    String serverName = null;
    int serverPort = -1;
    if (absolute != null) {
      serverName = absolute.host();
      serverPort = absolute.port();
    } else if (host != null) {
      int colon = host.lastIndexOf(':');
      if (colon > 0 && host.indexOf(']', colon) < 0) {
        serverName = host.substring(0, colon);
        serverPort = parsePort(host, colon + 1);
      } else {
        serverName = host;
      }
    }
    if (serverName != null && serverName.length() > 1 && serverName.charAt(0) == '['
        && serverName.endsWith("]")) {
      serverName = serverName.substring(1, serverName.length() - 1);
    }
    if (serverName == null || serverName.isEmpty()) serverName = local.hostAddress();
    if (serverPort < 0) serverPort = local.port();
    return new Authority(serverName, Integer.valueOf(serverPort));
  }


  /** The lower-case keyword of an HTTP method; the common ones are not re-interned. */
  public static Keyword method(HttpMethod m) {
    // the commonest by identity first (Vert.x hands out its constants for the methods it
    // knows): no String hash and compare on their requests
    if (m == HttpMethod.GET) return GET;
    if (m == HttpMethod.POST) return POST;
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

  /** The Ring {@code :protocol} of a request of version {@code v}. */
  public static String protocol(HttpVersion v) {
    // compared by identity: a switch on the enum reads a look-up table per call
    if (v == HttpVersion.HTTP_1_1) return "HTTP/1.1";
    return v == HttpVersion.HTTP_1_0 ? "HTTP/1.0" : "HTTP/2.0";
  }

  /**
   * Ring's {@code :headers}: lower-case names; a repeated header's values joined with
   * {@code ","} in arrival order, except {@code cookie}, joined with {@code "; "}.
   */
  public static IPersistentMap headers(MultiMap in) {
    return scan(in).headers;
  }

  /** The digits of {@code s} from {@code from} on as a port 0..65535, or -1. */
  static int parsePort(String s, int from) {
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

  /** {@code old} (a String or the StringBuilder of earlier values) with {@code value} joined. */
  private static StringBuilder join(String name, Object old, String value) {
    StringBuilder sb = old instanceof StringBuilder ? (StringBuilder) old
        : new StringBuilder((String) old);
    return sb.append("cookie".equals(name) ? "; " : ",").append(value);
  }

  /**
   * {@code :content-length}: the Content-Length header as a Long, or null when there is none
   * or it is not a number of bytes. Read the way the kernel reads it before it accepts a body
   * (a request whose Content-Length it cannot read is answered 400 before any handler runs),
   * so a handler only ever sees null for a request without the header (chunked, or no body).
   */
  static Long contentLength(String value) {
    if (value == null) return null;
    try {
      long n = Long.parseLong(value.trim());
      return n >= 0 ? Long.valueOf(n) : null;
    } catch (NumberFormatException e) {
      return null;
    }
  }

  /**
   * {@code :character-encoding}: the value of the {@code charset} parameter of a Content-Type
   * header value, unquoted, as sent (not checked against the charsets this JVM knows, as Ring's
   * {@code ring.util.request/character-encoding} does); null when there is no header, no such
   * parameter or an empty one.
   */
  static String characterEncoding(String contentType) {
    String name = ContentType.param(contentType, "charset");
    return name == null || name.isEmpty() ? null : name;
  }

  /** The first address of an X-Forwarded-For value, or null when it names none. */
  static String firstForwardedFor(String xff) {
    if (xff == null) return null;
    int comma = xff.indexOf(',');
    String first = (comma < 0 ? xff : xff.substring(0, comma)).trim();
    return first.isEmpty() ? null : first;
  }
}
