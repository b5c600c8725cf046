package donkey.ring;

import clojure.lang.ISeq;
import clojure.lang.Named;
import clojure.lang.RT;
import clojure.lang.Seqable;
import io.netty.util.AsciiString;
import io.vertx.core.MultiMap;
import java.util.Map;

/**
 * A handler's {@code :headers} map set on a Vert.x header map, checked on the way: names must
 * be tokens (RFC 9110 5.6.2) and values free of control characters but HTAB (RFC 9110 5.5),
 * so that no handler can inject a header line or a response.
 *
 * <p>Threading: stateless.
 */
public final class HeaderLines {
  private HeaderLines() {}

  /** A flag of {@link #apply}: the handler set {@code Content-Length} or {@code Transfer-Encoding}. */
  static final int FRAMING = 1;
  /** A flag of {@link #apply}: a {@code Connection} line lists {@code close}. */
  static final int CLOSE = 2;

  /**
   * Sets {@code headers} on {@code out}: a String value set, a seq value one line per element,
   * nil skipped, other values by their {@code toString}; a name set again case-insensitively
   * replaces the earlier one.
   *
   * @return {@link #FRAMING} and {@link #CLOSE} as they apply, else 0
   * @throws IllegalArgumentException when {@code headers} is not a map, a name is not a token
   *     or a value has a control character, with {@code out} possibly half set
   */
  static int apply(MultiMap out, Object headers) {
    if (!(headers instanceof Map)) {
      throw new IllegalArgumentException(":headers must be a map, got " + headers.getClass().getName());
    }
    int flags = 0;
    for (Object o : ((Map<?, ?>) headers).entrySet()) {
      Map.Entry<?, ?> e = (Map.Entry<?, ?>) o;
      String name = name(e.getKey());
      if (isFraming(name)) flags |= FRAMING;
      boolean connection = name.length() == 10 && name.equalsIgnoreCase("connection");
      Object v = e.getValue();
      if (v instanceof String) {
        out.set(name, value(name, (String) v));
        if (connection && lists((String) v, "close")) flags |= CLOSE;
      } else if (v instanceof Iterable || v instanceof ISeq || v instanceof Seqable) {
        out.remove(name);
        for (ISeq s = RT.seq(v); s != null; s = s.next()) {
          String line = value(name, String.valueOf(s.first()));
          out.add(name, line);
          if (connection && lists(line, "close")) flags |= CLOSE;
        }
      } else if (v != null) {
        String line = value(name, v.toString());
        out.set(name, line);
        if (connection && lists(line, "close")) flags |= CLOSE;
      }
    }
    return flags;
  }

  /** True for Content-Length and Transfer-Encoding, whose values the kernel decides. */
  private static boolean isFraming(String name) {
    return name.length() == 14 && name.equalsIgnoreCase("content-length")
        || name.length() == 17 && name.equalsIgnoreCase("transfer-encoding");
  }

  private static String name(Object k) {
    // String first: it is final, so the test is one class compare, where a failing interface
    // test (Named) would scan String's interfaces on every header before JDK 23
    String name = k instanceof String ? (String) k
        : k instanceof Named ? ((Named) k).getName() : String.valueOf(k);
    if (name.isEmpty()) throw new IllegalArgumentException("empty response header name");
    for (int i = 0; i < name.length(); i++) {
      if (!isTokenChar(name.charAt(i))) {
        throw new IllegalArgumentException("invalid response header name " + quote(name));
      }
    }
    return name;
  }

  private static boolean isTokenChar(char c) {
    if (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') return true;
    return c < 127 && "!#$%&'*+-.^_`|~".indexOf(c) >= 0;
  }

  private static String value(String name, String v) {
    for (int i = 0; i < v.length(); i++) {
      char c = v.charAt(i);
      if (c < ' ' && c != '\t' || c == 0x7f) {
        throw new IllegalArgumentException("response header " + name
            + (c == '\r' || c == '\n' ? " has a CR or LF in its value (header injection refused)"
                : " has a control character in its value"));
      }
    }
    return v;
  }

  /** True when a comma-separated list of tokens has {@code token}, in any case. */
  public static boolean lists(CharSequence v, String token) {
    int n = v.length();
    int t = token.length();
    if (v instanceof String) {
      // the usual value is one token with no blanks around it ("keep-alive"): one comparison
      String s = (String) v;
      if (n == 0) return false;
      char first = s.charAt(0);
      char last = s.charAt(n - 1);
      if (first != ' ' && first != '\t' && first != ',' && last != ' ' && last != '\t'
          && s.indexOf(',') < 0) {
        return n == t && AsciiString.regionMatchesAscii(s, true, 0, token, 0, t);
      }
    }
    int i = 0;
    while (i < n) {
      while (i < n && (v.charAt(i) == ' ' || v.charAt(i) == '\t' || v.charAt(i) == ',')) i++;
      int start = i;
      while (i < n && v.charAt(i) != ',') i++;
      int end = i;
      while (end > start && (v.charAt(end - 1) == ' ' || v.charAt(end - 1) == '\t')) end--;
      if (end - start == t && AsciiString.regionMatchesAscii(v, true, start, token, 0, t)) {
        return true;
      }
    }
    return false;
  }
  private static String quote(String s) {
    return '"' + (s.length() > 64 ? s.substring(0, 64) + "..." : s) + '"';
  }
}
