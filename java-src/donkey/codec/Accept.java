package donkey.codec;

/**
 * Accept lists (RFC 9110 12.5.1), read with {@link ContentType}'s grammar: what quality a client
 * gives a media type, for the router's {@code :produces} negotiation.
 *
 * <pre>
 *   Accept = #( media-range [ OWS ";" OWS "q=" qvalue ] )
 * </pre>
 *
 * <p>Empty elements are skipped; a malformed element (not a media range, or a malformed
 * parameter) is skipped up to the next comma outside quotes. Allocates nothing. Stateless; any
 * thread.
 */
public final class Accept {
  private Accept() {}

  /**
   * The quality an Accept header gives {@code mediaType} (lower-case {@code type/subtype}): the
   * {@code q} of the most specific range that covers it (exact, then {@code type/*}, then
   * {@code *}{@code /*}; the first of equals), 0 when none does. A missing or blank Accept
   * accepts everything with 1. A {@code q} that is not a number from 0 to 1 counts as 0.
   */
  public static double quality(String accept, String mediaType) {
    if (accept == null) return 1.0;
    int n = accept.length();
    if (HttpTokens.skipOws(accept, 0) == n) return 1.0;
    int slash = mediaType.indexOf('/');
    double best = 0;
    int bestSpecificity = -1;
    int i = 0;
    while (i < n) {
      int s = HttpTokens.skipOws(accept, i);
      if (s == n) break;
      if (accept.charAt(s) == ',') {
        i = s + 1;
        continue;
      }
      int e = ContentType.subtypeEnd(accept, s, ContentType.LIST);
      if (e < 0) {
        i = elementEnd(accept, s) + 1;
        continue;
      }
      int specificity = specificity(accept, s, e, mediaType, slash);
      double q = 1.0;
      boolean seenQ = false;
      int p = e;
      long r;
      while ((r = ContentType.step(accept, p, ContentType.LIST)) >= 0) {
        int ns = (int) (r >>> 32);
        int ve = (int) r;
        boolean isQ = (accept.charAt(ns) | 0x20) == 'q'
            && HttpTokens.tokenEnd(accept, ns) == ns + 1;
        if (isQ && !seenQ) {
          seenQ = true;
          q = qvalue(accept, ContentType.valueStart(accept, ns + 1), ve);
        }
        p = ve;
      }
      if (r != ContentType.END) {
        i = elementEnd(accept, p) + 1;
        continue;
      }
      if (specificity > bestSpecificity) {
        bestSpecificity = specificity;
        best = q;
      }
      i = HttpTokens.skipOws(accept, p) + 1; // past the comma, or past the end
    }
    return best;
  }

  /** 2 exact, 1 {@code type/*}, 0 {@code *}{@code /*}, -1 not covering or not a valid range. */
  private static int specificity(String v, int s, int e, String type, int slash) {
    int rs = v.indexOf('/', s);
    boolean anySub = e == rs + 2 && v.charAt(rs + 1) == '*';
    if (rs == s + 1 && v.charAt(s) == '*') return anySub ? 0 : -1;
    if (rs - s != slash || !HttpTokens.equalsIgnoreCase(v, s, type, 0, slash)) return -1;
    if (anySub) return 1;
    int sl = type.length() - slash - 1;
    boolean exact = e - rs - 1 == sl && HttpTokens.equalsIgnoreCase(v, rs + 1, type, slash + 1, sl);
    return exact ? 2 : -1;
  }

  /** A weight, {@code 0} to {@code 1} with decimals; 0 for anything else (also Accept-Encoding's). */
  static double qvalue(String v, int from, int to) {
    if (v.charAt(from) == '"') {
      from++;
      to--;
    }
    long whole = 0;
    long fraction = 0;
    long scale = 1;
    boolean digits = false;
    boolean point = false;
    for (int k = from; k < to; k++) {
      char c = v.charAt(k);
      if (c >= '0' && c <= '9') {
        digits = true;
        if (!point) {
          whole = Math.min(whole * 10 + (c - '0'), 10);
        } else if (scale < 1_000_000_000L) {
          fraction = fraction * 10 + (c - '0');
          scale *= 10;
        }
      } else if (c == '.' && !point) {
        point = true;
      } else {
        return 0;
      }
    }
    double q = whole + (double) fraction / scale;
    return digits && q <= 1 ? q : 0;
  }

  /** The index of the comma ending the element that {@code i} is in (quote-aware), or the end. */
  private static int elementEnd(String v, int i) {
    int n = v.length();
    boolean quoted = false;
    for (; i < n; i++) {
      char c = v.charAt(i);
      if (quoted) {
        if (c == '\\') i++;
        else if (c == '"') quoted = false;
      } else if (c == '"') {
        quoted = true;
      } else if (c == ',') {
        return i;
      }
    }
    return n;
  }
}
