package donkey.codec;

import java.util.Locale;

/**
 * Whether an {@code Accept-Encoding} header accepts a content coding (RFC 9110 12.5.3): named
 * with a weight above 0, or covered by {@code *} with one when it is not named;
 * {@code x-gzip} names gzip. Weights are read as {@link Accept} reads them (anything but a
 * number from 0 to 1 is 0). Stateless; any thread.
 */
public final class AcceptEncoding {
  private AcceptEncoding() {}

  /** True when {@code header} (null: none sent) accepts {@code coding} (lower case). */
  public static boolean accepts(String header, String coding) {
    if (header == null) return false;
    double named = -1;
    double star = -1;
    for (String part : header.split(",")) {
      String[] p = part.split(";");
      String name = p[0].trim().toLowerCase(Locale.ROOT);
      double q = 1;
      for (int i = 1; i < p.length; i++) {
        String param = p[i].trim();
        if (param.length() > 2 && (param.charAt(0) | 0x20) == 'q' && param.charAt(1) == '=') {
          q = Accept.qvalue(param, 2, param.length());
        }
      }
      if (name.equals(coding) || coding.equals("gzip") && name.equals("x-gzip")) {
        named = Math.max(named, q);
      } else if (name.equals("*")) {
        star = q;
      }
    }
    return named >= 0 ? named > 0 : star > 0;
  }
}
