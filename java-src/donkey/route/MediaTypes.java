package donkey.route;

import java.util.Locale;

/**
 * Media-type matching for {@code :consumes} (the request's Content-Type) and content
 * negotiation for {@code :produces} (the request's Accept header, with wildcards and q-values
 * as browsers and curl send them). Stateless; any thread.
 */
final class MediaTypes {
  private MediaTypes() {}

  /** Validates a media type or range at route compile time. */
  static void checkRange(String range, Route r) {
    int slash = range.indexOf('/');
    if (slash <= 0 || slash == range.length() - 1 || range.indexOf('/', slash + 1) >= 0
        || range.indexOf(';') >= 0 || range.indexOf(' ') >= 0) {
      throw r.invalid("bad media type \"" + range + "\" (expected type/subtype)");
    }
  }

  /** The media type of a Content-Type value without parameters, lower-case; null for none. */
  static String essence(String contentType) {
    if (contentType == null) return null;
    int semi = contentType.indexOf(';');
    String t = (semi < 0 ? contentType : contentType.substring(0, semi)).trim();
    return t.isEmpty() ? null : t.toLowerCase(Locale.ROOT);
  }

  /** True when media range {@code range} (any, {@code type/}-wildcard or exact) covers {@code type}. */
  static boolean covers(String range, String type) {
    if (range.equals("*/*") || range.equals(type)) return true;
    if (range.endsWith("/*")) {
      int n = range.length() - 1;
      return type.length() > n && type.regionMatches(0, range, 0, n);
    }
    return false;
  }

  /**
   * The quality the Accept header gives {@code type}: the q of the most specific range that
   * covers it, 0 when none does. A missing or empty Accept accepts everything with q=1.
   */
  static double quality(String accept, String type) {
    if (accept == null || accept.isBlank()) return 1.0;
    double best = 0;
    int bestSpecificity = -1;
    int i = 0;
    int n = accept.length();
    while (i < n) {
      int comma = accept.indexOf(',', i);
      if (comma < 0) comma = n;
      int semi = accept.indexOf(';', i);
      int rangeEnd = semi >= 0 && semi < comma ? semi : comma;
      String range = accept.substring(i, rangeEnd).trim().toLowerCase(Locale.ROOT);
      if (!range.isEmpty() && covers(range, type)) {
        int specificity = range.equals("*/*") ? 0 : range.endsWith("/*") ? 1 : 2;
        if (specificity > bestSpecificity) {
          bestSpecificity = specificity;
          best = q(accept, rangeEnd, comma);
        }
      }
      i = comma + 1;
    }
    return best;
  }

  /** The q parameter between {@code from} and {@code to}; 1 when absent, 0 when unparsable. */
  private static double q(String accept, int from, int to) {
    int p = from;
    while (p < to) {
      int semi = accept.indexOf(';', p);
      if (semi < 0 || semi >= to) break;
      int next = accept.indexOf(';', semi + 1);
      if (next < 0 || next > to) next = to;
      String param = accept.substring(semi + 1, next).trim();
      if (param.length() > 2 && (param.charAt(0) == 'q' || param.charAt(0) == 'Q')
          && param.charAt(1) == '=') {
        try {
          double v = Double.parseDouble(param.substring(2).trim());
          return v < 0 || v > 1 || Double.isNaN(v) ? 0 : v;
        } catch (NumberFormatException e) {
          return 0;
        }
      }
      p = next;
    }
    return 1.0;
  }
}
