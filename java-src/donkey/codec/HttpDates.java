package donkey.codec;

import java.time.Instant;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Locale;

/**
 * HTTP dates (RFC 9110 5.6.7): written as IMF-fixdate ({@code Sun, 06 Nov 1994 08:49:37 GMT}),
 * read in that form and the two obsolete ones a recipient must still accept (RFC 850 and
 * asctime). Stateless; any thread.
 */
public final class HttpDates {
  private static final DateTimeFormatter IMF_FIXDATE =
      DateTimeFormatter.ofPattern("EEE, dd MMM yyyy HH:mm:ss 'GMT'", Locale.US)
          .withZone(ZoneOffset.UTC);
  private static final DateTimeFormatter RFC_850 =
      DateTimeFormatter.ofPattern("EEEE, dd-MMM-yy HH:mm:ss 'GMT'", Locale.US)
          .withZone(ZoneOffset.UTC);
  private static final DateTimeFormatter ASCTIME =
      DateTimeFormatter.ofPattern("EEE MMM ppd HH:mm:ss yyyy", Locale.US).withZone(ZoneOffset.UTC);
  private static final DateTimeFormatter[] READ = {IMF_FIXDATE, RFC_850, ASCTIME};

  private HttpDates() {}

  /** {@code t} as an IMF-fixdate. */
  public static String format(Instant t) {
    return IMF_FIXDATE.format(t);
  }

  /**
   * An HTTP date header value in seconds since the epoch, or {@link Long#MIN_VALUE} when it is
   * absent (null) or not a date in any of the three forms.
   */
  public static long parse(String v) {
    if (v == null) return Long.MIN_VALUE;
    String s = v.trim();
    for (DateTimeFormatter f : READ) {
      try {
        return ZonedDateTime.parse(s, f).toEpochSecond();
      } catch (DateTimeParseException e) {
        // the next form
      }
    }
    return Long.MIN_VALUE;
  }
}
