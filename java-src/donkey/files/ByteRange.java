package donkey.files;

import io.netty.util.AsciiString;

/**
 * A {@code Range: bytes=...} header read against a file's length (RFC 9110 14.1.2): the one
 * range to serve, first and last byte inclusive. Several ranges that overlap or touch merge
 * into one; ones that stay apart, or more than a limit, are not served as ranges (the whole
 * file is, which RFC 9110 14.2 allows a server to send instead). Stateless.
 */
final class ByteRange {
  /** No range of the header is satisfiable: 416. */
  static final long[] UNSATISFIABLE = new long[0];

  private ByteRange() {}

  /**
   * The range to serve: {@code {first, last}}; {@link #UNSATISFIABLE}; or null to send the
   * whole file (not a bytes range, a syntax error, several ranges apart, or more than
   * {@code max}).
   */
  static long[] single(String header, long length, int max) {
    String v = header.trim();
    if (!AsciiString.regionMatchesAscii(v, true, 0, "bytes=", 0, 6)) return null;
    String[] specs = v.substring(6).split(",", -1);
    if (specs.length > max) return null;
    long first = -1;
    long last = -1;
    boolean any = false;
    for (String spec : specs) {
      String s = spec.trim();
      if (s.isEmpty()) continue;
      int dash = s.indexOf('-');
      if (dash < 0) return null;
      long a;
      long b;
      try {
        if (dash == 0) {
          long suffix = digits(s.substring(1));
          if (suffix == 0) { // unsatisfiable on its own
            any = true;
            continue;
          }
          a = Math.max(0, length - suffix);
          b = length - 1;
        } else {
          a = digits(s.substring(0, dash));
          String end = s.substring(dash + 1);
          b = end.isEmpty() ? length - 1 : Math.min(digits(end), length - 1);
          if (!end.isEmpty() && digits(end) < a) return null; // invalid: ignored
        }
      } catch (NumberFormatException e) {
        return null;
      }
      any = true;
      if (a >= length) continue; // unsatisfiable
      if (first < 0) {
        first = a;
        last = b;
      } else if (a <= last + 1 && b >= first - 1) {
        first = Math.min(first, a);
        last = Math.max(last, b);
      } else {
        return null;
      }
    }
    if (!any) return null;
    return first < 0 ? UNSATISFIABLE : new long[] {first, last};
  }

  /** A run of ASCII digits as a non-negative long. */
  private static long digits(String s) {
    if (s.isEmpty() || s.length() > 18) throw new NumberFormatException(s);
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c < '0' || c > '9') throw new NumberFormatException(s);
    }
    return Long.parseLong(s);
  }
}
