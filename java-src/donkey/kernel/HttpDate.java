package donkey.kernel;

import io.netty.util.AsciiString;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.Locale;

/** Formats the IMF-fixdate of RFC 9110 section 5.6.7 ({@code Sun, 06 Nov 1994 08:49:37 GMT}). */
final class HttpDate {
  private static final DateTimeFormatter FORMAT =
      DateTimeFormatter.ofPattern("EEE, dd MMM yyyy HH:mm:ss 'GMT'", Locale.US);

  private HttpDate() {}

  /** The current time as an HTTP date, as a pre-encoded header value. */
  static CharSequence now() {
    return AsciiString.cached(FORMAT.format(ZonedDateTime.now(ZoneOffset.UTC)));
  }
}
