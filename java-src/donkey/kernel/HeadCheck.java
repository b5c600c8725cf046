package donkey.kernel;

import donkey.kernel.internals.VertxInternals;
import donkey.ring.HeaderLines;
import donkey.ring.RequestMap;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.util.AsciiString;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpVersion;
import java.util.Iterator;
import java.util.Map;

/**
 * The checks a request head gets before it is routed (RFC 9110, RFC 9112), beyond what
 * Vert.x's decoder already refuses:
 * <ul>
 *   <li>the request target: origin-form ({@code /path?query}), absolute-form with a valid
 *       authority and no userinfo, or {@code *} for OPTIONS; no control character or space
 *       (400);
 *   <li>the method: CONNECT (donkey makes no tunnels) and a standard method spelled in another
 *       case, which a front end would pass as an unknown method while a handler sees the
 *       standard one, get 501;
 *   <li>the header lines: none without a name; on HTTP/1.1 exactly one Host, whose value is
 *       an RFC 3986 {@code host[:port]} (IP literals checked against their grammars) (400).
 * </ul>
 * A head that fails is answered ({@link #status}) and its connection closed. One pass over the
 * header lines, which also picks up the framing headers the kernel reads next and whether the
 * client asked to close the connection.
 *
 * <p>Threading: one instance per event loop, used by that loop only; its fields describe the
 * head {@link #check} saw last.
 */
final class HeadCheck {
  /** The status of the answer when {@link #check} refused the head: 400 or 501. */
  int status;
  /** The first Content-Length line's value, or null. */
  String contentLength;
  /** The first Transfer-Encoding line's value, or null. */
  String transferEncoding;
  /** True when a Connection line lists {@code close}: the connection ends with this request. */
  boolean close;
  /** True when an Upgrade line lists {@code websocket}. */
  boolean websocket;
  /**
   * The request's path and query string, as Vert.x's {@code path()} and {@code query()} give
   * them (the query null when there is none), when {@link #check} let it through.
   */
  String path;
  String query;
  /** The first Host line's value and the number of Host lines, as the scan found them. */
  private String host;
  private int hosts;
  /**
   * The request target and Host value this loop last found valid: the next request on a
   * connection usually repeats them, and an equal String is valid without a second scan.
   * The target's path and query string come with it, so a repeated target is not scanned
   * for its {@code ?} again, and its path is the same instance each time (which the route
   * table's memo compares by identity: {@link donkey.route.PathMemo}).
   */
  private String validTarget;
  private String validPath;
  private String validQuery;
  private String validHost;

  /**
   * Event loop: checks {@code req}'s head.
   *
   * @param conn the state of {@code req}'s connection, or null when it is not tracked
   * @return null when it may be served, else the reason for the answer ({@link #status}), to
   *     send as it is
   */
  String check(HttpServerRequest req, ConnectionGuard.State conn) {
    contentLength = null;
    transferEncoding = null;
    close = false;
    websocket = false;
    status = 400;
    HttpMethod method = req.method();
    if (!isCommon(method)) {
      String refused = unusual(method);
      if (refused != null) {
        status = 501;
        return refused;
      }
    }
    String uri = req.uri();
    if (uri.equals(validTarget)) {
      path = validPath;
      query = validQuery;
    } else {
      String bad = target(uri, method);
      if (bad != null) return bad;
      path = req.path();
      query = req.query();
      // "*" is valid for OPTIONS alone, so it is never taken as valid for what follows
      if (!uri.equals("*")) {
        validTarget = uri;
        validPath = path;
        validQuery = query;
      }
    }
    return headerLines(req.headers(), req.version(), uri, conn);
  }

  /** True when the head {@link #check} saw last had a Host line. */
  boolean hasHost() {
    return hosts != 0;
  }

  /**
   * True when {@code host} is a valid Host value ({@link #isAuthority}); not an empty one: an
   * http or https URI with an empty host is invalid (RFC 9110 4.2.1).
   */
  boolean validHost(String host) {
    if (host.equals(validHost)) return true;
    if (!isAuthority(host)) return false;
    validHost = host;
    return true;
  }

  /**
   * The header lines as Netty decoded them: {@link #host}, {@link #hosts} and the framing and
   * connection fields, then the Host checks. Names are compared with Netty's own AsciiString
   * constants: the same instance when the decoder hands out its constant for a well-known
   * name, else a comparison of bytes, where a String would be read char by char (which the
   * interpreter and C1 pay for per request). A connection's decoder hands out the same
   * name instance for Host and for Connection on each of its requests (its own constant for
   * the usual casing): the instance that matched is kept on the connection, and the next
   * request's line with that very instance needs no comparison.
   *
   * <p>Kept over C2's inlining size ({@code donkey.jit-shape-test}), so it is compiled on its
   * own: a request shape the JIT has not seen yet (a Connection line, a browser's dozen
   * headers) then deoptimizes this scan alone, not the request path that calls it, whose
   * recompile would find its callees already compiled apart and call them instead.
   *
   * @return null, or the reason for a 400
   */
  private String headerLines(MultiMap lines, HttpVersion version, String uri,
                             ConnectionGuard.State conn) {
    // the decoded lines themselves, in order, without a String made of each name
    Iterator<Map.Entry<CharSequence, CharSequence>> it = VertxInternals.lines(lines);
    String host = null;
    int hosts = 0;
    if (it == null) {
      String bad = scan(lines);
      if (bad != null) return bad;
      host = this.host;
      hosts = this.hosts;
    } else {
      CharSequence hostName = conn == null ? null : conn.hostName;
      CharSequence connectionName = conn == null ? null : conn.connectionName;
      while (it.hasNext()) {
        Map.Entry<CharSequence, CharSequence> line = it.next();
        CharSequence name = line.getKey();
        int n = name.length();
        if (n == 4) {
          boolean isHost = name == hostName;
          if (!isHost && AsciiString.contentEqualsIgnoreCase(name, HttpHeaderNames.HOST)) {
            isHost = true;
            hostName = name;
          }
          if (isHost && hosts++ == 0) host = line.getValue().toString();
        } else if (n == 10) {
          boolean isConnection = name == connectionName;
          if (!isConnection
              && AsciiString.contentEqualsIgnoreCase(name, HttpHeaderNames.CONNECTION)) {
            isConnection = true;
            connectionName = name;
          }
          if (isConnection) close |= listsClose(line.getValue());
        } else if (n == 7) {
          if (AsciiString.contentEqualsIgnoreCase(name, HttpHeaderNames.UPGRADE)) {
            websocket |= HeaderLines.lists(line.getValue(), "websocket");
          }
        } else if (n == 14) {
          if (contentLength == null
              && AsciiString.contentEqualsIgnoreCase(name, HttpHeaderNames.CONTENT_LENGTH)) {
            contentLength = line.getValue().toString();
          }
        } else if (n == 17) {
          if (transferEncoding == null
              && AsciiString.contentEqualsIgnoreCase(name, HttpHeaderNames.TRANSFER_ENCODING)) {
            transferEncoding = line.getValue().toString();
          }
        } else if (n == 0) {
          return "Bad Request: a header line without a name";
        }
      }
      this.host = host;
      this.hosts = hosts;
      if (conn != null) {
        conn.hostName = hostName;
        conn.connectionName = connectionName;
      }
    }
    if (hosts > 1) return "Bad Request: more than one Host header";
    if (hosts == 0) {
      if (version == HttpVersion.HTTP_1_1) return "Bad Request: no Host header";
    } else if (!validHost(host) && !(host.isEmpty() && absoluteForm(uri))) {
      // (an absolute-form target names the host itself; Host is then ignored: RFC 9112 3.2.2)
      return "Bad Request: invalid Host header";
    }
    return null;
  }

  /** {@link #headerLines}'s scan for a header map that is not Netty's: its String view. */
  private String scan(MultiMap lines) {
    String host = null;
    int hosts = 0;
    for (Map.Entry<String, String> line : lines) {
      String name = line.getKey();
      if (name.isEmpty()) return "Bad Request: a header line without a name";
      if (name.equalsIgnoreCase("host") && hosts++ == 0) host = line.getValue();
      if (name.equalsIgnoreCase("connection")) close |= listsClose(line.getValue());
      if (name.equalsIgnoreCase("upgrade")) websocket |= HeaderLines.lists(line.getValue(), "websocket");
      if (contentLength == null && name.equalsIgnoreCase("content-length")) {
        contentLength = line.getValue();
      }
      if (transferEncoding == null && name.equalsIgnoreCase("transfer-encoding")) {
        transferEncoding = line.getValue();
      }
    }
    this.host = host;
    this.hosts = hosts;
    return null;
  }

  /** The methods Vert.x hands out as its own constants: nothing more to check. */
  private static boolean isCommon(HttpMethod m) {
    return m == HttpMethod.GET || m == HttpMethod.POST || m == HttpMethod.PUT
        || m == HttpMethod.DELETE || m == HttpMethod.HEAD || m == HttpMethod.OPTIONS
        || m == HttpMethod.PATCH;
  }

  private static final String[] STANDARD = {"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS",
      "PATCH", "TRACE", "CONNECT"};

  /**
   * The reason a method other than the common ones is refused (501), or null: CONNECT, and
   * a standard method in another case (methods are case-sensitive, RFC 9110 9.1).
   */
  private static String unusual(HttpMethod m) {
    String name = m.name();
    if (name.equals("CONNECT")) return "Not Implemented: CONNECT";
    for (String s : STANDARD) {
      if (name.equalsIgnoreCase(s) && !name.equals(s)) {
        return "Not Implemented: methods are case-sensitive";
      }
    }
    return null;
  }

  /**
   * Null when {@code uri} is a request target donkey serves (RFC 9112 3.2): origin-form,
   * absolute-form with a valid authority, or {@code *} for OPTIONS; else the reason for a 400.
   */
  private static String target(String uri, HttpMethod method) {
    for (int i = 0; i < uri.length(); i++) {
      char c = uri.charAt(i);
      if (c <= ' ' || c == 0x7f) return "Bad Request: invalid character in the request target";
    }
    if (uri.startsWith("/")) return null;
    if (uri.equals("*")) {
      return method == HttpMethod.OPTIONS ? null : "Bad Request: * is a target for OPTIONS only";
    }
    String authority = RequestMap.absoluteAuthority(uri);
    if (authority == null) return "Bad Request: invalid request target";
    if (!isAuthority(authority)) {
      return "Bad Request: invalid authority in the request target";
    }
    return null;
  }

  /** True for an absolute-form target (one {@link #target} let through). */
  private static boolean absoluteForm(String uri) {
    return !uri.startsWith("/") && !uri.equals("*");
  }

  /** True when a Connection value (a comma-separated list of options) lists {@code close}. */
  static boolean listsClose(CharSequence v) {
    return HeaderLines.lists(v, "close");
  }



  /**
   * True when {@code s} is an RFC 3986 {@code host [ ":" port ]}: an IP literal in brackets
   * (IPv6, with an RFC 6874 zone, or IPvFuture), or a registered name or IPv4 address
   * (unreserved characters, percent-encodings and sub-delimiters), with an optional decimal
   * port up to 65535. No userinfo; not empty.
   */
  static boolean isAuthority(String s) {
    int n = s.length();
    if (n == 0) return false;
    int i = 0;
    if (s.charAt(0) == '[') {
      int close = s.indexOf(']');
      if (close < 0 || !isIpLiteral(s, 1, close)) return false;
      i = close + 1;
    } else {
      for (; i < n; i++) {
        char c = s.charAt(i);
        if (c < 128 && REG_NAME[c]) continue;
        if (c == ':') break;
        if (c != '%' || !isPctEncoded(s, i)) return false;
        i += 2;
      }
      if (i == 0) return false; // a port without a host
    }
    if (i == n) return true;
    if (s.charAt(i) != ':') return false;
    int digits = n - i - 1;
    if (digits == 0) return true; // "host:" is allowed by RFC 3986 (an empty port)
    if (digits > 5) return false;
    int port = 0;
    for (int j = i + 1; j < n; j++) {
      char c = s.charAt(j);
      if (c < '0' || c > '9') return false;
      port = port * 10 + (c - '0');
    }
    return port <= 65535;
  }

  /** {@code s[from, to)}: an IPv6 address (with an RFC 6874 zone) or an IPvFuture. */
  private static boolean isIpLiteral(String s, int from, int to) {
    if (from >= to) return false;
    char c0 = s.charAt(from);
    if (c0 == 'v' || c0 == 'V') {
      int i = from + 1;
      int hex = i;
      while (i < to && hex(s.charAt(i)) >= 0) i++;
      if (i == hex || i >= to || s.charAt(i) != '.') return false;
      if (++i >= to) return false;
      for (; i < to; i++) {
        char c = s.charAt(i);
        if (!(c < 128 && REG_NAME[c] || c == ':')) return false;
      }
      return true;
    }
    int zone = s.indexOf("%25", from);
    if (zone >= 0 && zone < to) {
      if (zone + 3 >= to) return false;
      for (int i = zone + 3; i < to; i++) {
        char c = s.charAt(i);
        if (c < 128 && UNRESERVED[c]) continue;
        if (c != '%' || !isPctEncoded(s, i)) return false;
        i += 2;
      }
      to = zone;
    }
    return isIpv6(s, from, to);
  }

  /** {@code s[from, to)}: RFC 4291 text form (hex groups, one {@code ::}, a dotted tail). */
  private static boolean isIpv6(String s, int from, int to) {
    int groups = 0;
    boolean elided = false;
    int i = from;
    if (s.startsWith("::", i)) {
      elided = true;
      i += 2;
      if (i == to) return true;
    } else if (i < to && s.charAt(i) == ':') {
      return false;
    }
    while (i < to) {
      int start = i;
      while (i < to && hex(s.charAt(i)) >= 0) i++;
      if (i < to && s.charAt(i) == '.') {
        // an IPv4 tail: the last 32 bits
        if (!isIpv4(s, start, to)) return false;
        groups += 2;
        i = to;
        break;
      }
      int len = i - start;
      if (len < 1 || len > 4) return false;
      groups++;
      if (i == to) break;
      if (s.charAt(i) != ':') return false;
      i++;
      if (i < to && s.charAt(i) == ':') {
        if (elided) return false;
        elided = true;
        i++;
      } else if (i == to) {
        return false; // a trailing single colon
      }
    }
    return elided ? groups <= 7 : groups == 8;
  }

  private static boolean isIpv4(String s, int from, int to) {
    int parts = 0;
    int i = from;
    while (i <= to) {
      int start = i;
      int v = 0;
      while (i < to && s.charAt(i) >= '0' && s.charAt(i) <= '9' && i - start < 3) {
        v = v * 10 + (s.charAt(i) - '0');
        i++;
      }
      if (i == start || v > 255 || (i - start > 1 && s.charAt(start) == '0')) return false;
      parts++;
      if (i == to) break;
      if (s.charAt(i) != '.') return false;
      i++;
    }
    return parts == 4;
  }

  private static boolean isPctEncoded(String s, int i) {
    return i + 2 < s.length() && hex(s.charAt(i + 1)) >= 0 && hex(s.charAt(i + 2)) >= 0;
  }

  /** The characters of a reg-name besides percent-encodings: unreserved and sub-delims. */
  private static final boolean[] REG_NAME = new boolean[128];
  private static final boolean[] UNRESERVED = new boolean[128];

  static {
    for (char c = 0; c < 128; c++) {
      UNRESERVED[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
          || c == '-' || c == '.' || c == '_' || c == '~';
      REG_NAME[c] = UNRESERVED[c] || "!$&'()*+,;=".indexOf(c) >= 0;
    }
  }

  private static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
}
