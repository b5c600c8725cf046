package donkey.kernel;

import donkey.ring.RequestMap;
import io.netty.util.AsciiString;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpVersion;
import java.util.Iterator;
import java.util.Map;

/**
 * The checks a request head gets before it is routed (RFC 9112), beyond what Vert.x's decoder
 * already refuses: a request target with a control character or a space; a header line with an
 * empty name; on HTTP/1.1 a missing Host header, more than one, or one whose value is not a
 * {@code host[:port]}; an absolute-form target whose authority is not one (or carries userinfo).
 * A head that fails gets 400 and its connection closed. One pass over the header lines, which
 * also picks up the framing headers the kernel reads next.
 *
 * <p>Threading: one instance per event loop, used by that loop only; its fields describe the
 * head {@link #check} saw last.
 */
final class HeadCheck {
  /** The first Content-Length line's value, or null. */
  String contentLength;
  /** The first Transfer-Encoding line's value, or null. */
  String transferEncoding;
  /** How many Transfer-Encoding lines the head has. */
  int transferEncodings;
  /**
   * The request target and Host value this loop last found valid: the next request on a
   * connection usually repeats them, and an equal String is valid without a second scan.
   */
  private String validTarget = "/";
  private String validHost = "";

  /**
   * Event loop: checks {@code req}'s head.
   *
   * @return null when it may be served, else the reason for the 400, to send as it is
   */
  String check(HttpServerRequest req) {
    contentLength = null;
    transferEncoding = null;
    transferEncodings = 0;
    String uri = req.uri();
    if (!uri.equals(validTarget)) {
      for (int i = 0; i < uri.length(); i++) {
        char c = uri.charAt(i);
        if (c <= ' ' || c == 0x7f) return "Bad Request: invalid character in the request target";
      }
      validTarget = uri;
    }
    String host = null;
    int hosts = 0;
    MultiMap lines = req.headers();
    if (lines instanceof io.netty.handler.codec.http.HttpHeaders) {
      // the decoded lines themselves, in order, without a String made of each name
      Iterator<Map.Entry<CharSequence, CharSequence>> it =
          ((io.netty.handler.codec.http.HttpHeaders) lines).iteratorCharSequence();
      while (it.hasNext()) {
        Map.Entry<CharSequence, CharSequence> line = it.next();
        CharSequence name = line.getKey();
        int n = name.length();
        if (n == 4) {
          if (AsciiString.contentEqualsIgnoreCase(name, "host") && hosts++ == 0) {
            host = line.getValue().toString();
          }
        } else if (n == 14) {
          if (contentLength == null && AsciiString.contentEqualsIgnoreCase(name, "content-length")) {
            contentLength = line.getValue().toString();
          }
        } else if (n == 17) {
          if (AsciiString.contentEqualsIgnoreCase(name, "transfer-encoding")
              && transferEncodings++ == 0) {
            transferEncoding = line.getValue().toString();
          }
        } else if (n == 0) {
          return "Bad Request: a header line without a name";
        }
      }
    } else {
      for (Map.Entry<String, String> line : lines) {
        String name = line.getKey();
        if (name.isEmpty()) return "Bad Request: a header line without a name";
        if (name.equalsIgnoreCase("host") && hosts++ == 0) host = line.getValue();
        if (contentLength == null && name.equalsIgnoreCase("content-length")) {
          contentLength = line.getValue();
        }
        if (name.equalsIgnoreCase("transfer-encoding") && transferEncodings++ == 0) {
          transferEncoding = line.getValue();
        }
      }
    }
    if (hosts > 1) return "Bad Request: more than one Host header";
    if (hosts == 0) {
      if (req.version() == HttpVersion.HTTP_1_1) return "Bad Request: no Host header";
    } else if (!host.equals(validHost)) {
      if (!isAuthority(host, true)) return "Bad Request: invalid Host header";
      validHost = host;
    }
    if (uri.isEmpty() || uri.charAt(0) != '/') {
      String authority = RequestMap.absoluteAuthority(uri);
      if (authority != null && !isAuthority(authority, false)) {
        return "Bad Request: invalid authority in the request target";
      }
    }
    return null;
  }

  /**
   * True when {@code s} is an RFC 3986 {@code host [ ":" port ]}: an IP literal in brackets, or
   * a registered name or IPv4 address (unreserved characters, percent-encodings and
   * sub-delimiters), with an optional decimal port up to 65535. No userinfo.
   *
   * @param mayBeEmpty true where an empty value is valid (a Host header, for a target without
   *     an authority)
   */
  static boolean isAuthority(String s, boolean mayBeEmpty) {
    int n = s.length();
    if (n == 0) return mayBeEmpty;
    int i = 0;
    if (s.charAt(0) == '[') {
      int close = s.indexOf(']');
      if (close < 2) return false;
      for (i = 1; i < close; i++) {
        char c = s.charAt(i);
        if (!(isUnreserved(c) || isSubDelim(c) || c == ':' || c == '%')) return false;
      }
      i = close + 1;
    } else {
      for (; i < n; i++) {
        char c = s.charAt(i);
        if (c < 128 && REG_NAME[c]) continue;
        if (c == ':') break;
        if (c != '%' || i + 2 >= n || hex(s.charAt(i + 1)) < 0 || hex(s.charAt(i + 2)) < 0) {
          return false;
        }
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

  /** The characters of a reg-name besides percent-encodings: unreserved and sub-delims. */
  private static final boolean[] REG_NAME = new boolean[128];

  static {
    for (char c = 0; c < 128; c++) REG_NAME[c] = isUnreserved(c) || isSubDelim(c);
  }

  private static boolean isUnreserved(char c) {
    return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
        || c == '-' || c == '.' || c == '_' || c == '~';
  }

  private static boolean isSubDelim(char c) {
    switch (c) {
      case '!': case '$': case '&': case '\'': case '(': case ')':
      case '*': case '+': case ',': case ';': case '=':
        return true;
      default:
        return false;
    }
  }

  private static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
}
