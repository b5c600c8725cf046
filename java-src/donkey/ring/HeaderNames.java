package donkey.ring;

import java.util.Locale;

/**
 * Lower-cases request header names without allocating for the names browsers, curl, load
 * generators and proxies send: a small open-addressed table of canonical lower-case names,
 * looked up case-insensitively. Other names fall back to {@link String#toLowerCase}.
 *
 * <p>Threading: immutable after class initialisation; any thread.
 */
final class HeaderNames {
  private static final String[] COMMON = {
    "accept", "accept-charset", "accept-encoding", "accept-language", "access-control-request-headers",
    "access-control-request-method", "authorization", "cache-control", "connection",
    "content-encoding", "content-length", "content-type", "cookie", "date", "dnt", "expect",
    "forwarded", "from", "host", "if-match", "if-modified-since", "if-none-match", "if-range",
    "if-unmodified-since", "keep-alive", "origin", "pragma", "priority", "proxy-authorization",
    "range", "referer", "sec-ch-ua", "sec-ch-ua-mobile", "sec-ch-ua-platform", "sec-fetch-dest",
    "sec-fetch-mode", "sec-fetch-site", "sec-fetch-user", "sec-websocket-extensions",
    "sec-websocket-key", "sec-websocket-protocol", "sec-websocket-version", "te", "trailer",
    "transfer-encoding", "upgrade", "upgrade-insecure-requests", "user-agent", "via",
    "x-correlation-id", "x-csrf-token", "x-forwarded-for", "x-forwarded-host",
    "x-forwarded-port", "x-forwarded-proto", "x-real-ip", "x-request-id", "x-requested-with",
  };
  private static final int MASK = 255;
  private static final String[] TABLE = new String[MASK + 1];

  static {
    for (String name : COMMON) {
      int i = hash(name) & MASK;
      while (TABLE[i] != null) i = (i + 1) & MASK;
      TABLE[i] = name;
    }
  }

  private HeaderNames() {}

  /** ASCII case-insensitive hash: the same for "Content-Type" and "content-type". */
  private static int hash(String s) {
    int h = 0;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c >= 'A' && c <= 'Z') c += 32;
      h = 31 * h + c;
    }
    return h ^ (h >>> 16);
  }

  /** {@code name} in lower case; a shared instance for the common names. */
  static String lower(String name) {
    int i = hash(name) & MASK;
    for (String candidate; (candidate = TABLE[i]) != null; i = (i + 1) & MASK) {
      if (candidate.length() == name.length() && candidate.equalsIgnoreCase(name)) return candidate;
    }
    return name.toLowerCase(Locale.ROOT);
  }
}
