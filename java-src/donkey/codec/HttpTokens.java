package donkey.codec;

/**
 * The lexical pieces of HTTP header values (RFC 9110 5.6): whitespace, tokens, and ASCII
 * comparison ignoring case, for {@link ContentType}, {@link Accept} and the request map's
 * {@code Forwarded} header. Stateless; any thread.
 */
public final class HttpTokens {
  private HttpTokens() {}

  /** The token characters (RFC 9110 5.6.2) as bits: 0-63 in the first, 64-127 in the second. */
  private static final long TCHAR_LOW = bits(0);
  private static final long TCHAR_HIGH = bits(64);

  private static long bits(int from) {
    String tchars = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    long b = 0;
    for (char c : tchars.toCharArray()) {
      if (c >= from && c < from + 64) b |= 1L << (c - from);
    }
    return b;
  }

  /** The first index from {@code i} on that is not a space or a tab. */
  public static int skipOws(String v, int i) {
    int n = v.length();
    while (i < n) {
      char c = v.charAt(i);
      if (c != ' ' && c != '\t') break;
      i++;
    }
    return i;
  }

  /** The index after the token that starts at {@code i} ({@code i} when none does). */
  public static int tokenEnd(String v, int i) {
    int n = v.length();
    while (i < n) {
      char c = v.charAt(i);
      if (c < 64 ? (TCHAR_LOW >>> c & 1) == 0 : c >= 128 || (TCHAR_HIGH >>> (c - 64) & 1) == 0) {
        break;
      }
      i++;
    }
    return i;
  }

  /** True when {@code v} has {@code s} at {@code at}, ignoring the case of ASCII letters. */
  static boolean matches(String v, int at, String s) {
    return at + s.length() <= v.length() && equalsIgnoreCase(v, at, s, 0, s.length());
  }

  /**
   * {@code a[ai, ai + len)} equals {@code b[bi, bi + len)} ignoring the case of ASCII letters
   * (media types, parameter names and charset names are ASCII; String.regionMatches folds
   * Unicode case, at several times the cost).
   */
  static boolean equalsIgnoreCase(String a, int ai, String b, int bi, int len) {
    for (int k = 0; k < len; k++) {
      char x = a.charAt(ai + k);
      char y = b.charAt(bi + k);
      if (x != y) {
        char lx = (char) (x | 0x20);
        if (lx != (y | 0x20) || lx < 'a' || lx > 'z') return false;
      }
    }
    return true;
  }
}
