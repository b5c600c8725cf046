package donkey.files;

/**
 * The validators' side of conditional requests (RFC 9110 13.1): entity-tag lists compared
 * strongly or weakly, and {@code If-Range}. Stateless.
 */
final class Validators {
  private Validators() {}

  /**
   * Whether an {@code If-Range} lets the range apply (RFC 9110 13.1.5): none, a strong ETag
   * equal to the file's, or a date equal to its Last-Modified.
   */
  static boolean ifRange(String ifRange, String etag, String lastModified) {
    if (ifRange == null) return true;
    String v = ifRange.trim();
    if (v.startsWith("\"")) return v.equals(etag);
    if (v.startsWith("W/")) return false;
    return v.equals(lastModified);
  }

  /**
   * Whether an If-Match or If-None-Match list names {@code etag}: {@code *}, or an entity tag
   * equal to it, strongly (If-Match) or weakly ({@code W/} ignored, If-None-Match).
   */
  static boolean matches(String list, String etag, boolean strong) {
    String v = list.trim();
    if (v.equals("*")) return true;
    int i = 0;
    int n = v.length();
    while (i < n) {
      while (i < n && (v.charAt(i) == ',' || v.charAt(i) == ' ' || v.charAt(i) == '\t')) i++;
      if (i >= n) break;
      boolean weak = false;
      if (v.startsWith("W/", i)) {
        weak = true;
        i += 2;
      }
      if (i >= n || v.charAt(i) != '"') return false; // not a list of entity tags
      int close = v.indexOf('"', i + 1);
      if (close < 0) return false;
      String tag = v.substring(i, close + 1);
      if (tag.equals(etag) && !(strong && weak)) return true;
      i = close + 1;
    }
    return false;
  }
}
