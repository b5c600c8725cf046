package donkey.kernel;

import donkey.codec.HttpDates;
import io.netty.util.AsciiString;
import java.time.Instant;

/**
 * The {@code Date} header value every response carries: the IMF-fixdate of RFC 9110 section
 * 5.6.7 ({@code Sun, 06 Nov 1994 08:49:37 GMT}), one value for the whole JVM, refreshed by
 * each event loop's one-second timer ({@link #refresh}) and read per response
 * ({@link #current}). One shared object per second, rather than one per loop, lets a response
 * header block made with it ({@code ResponseWriter}'s blocks) serve every loop and be remade
 * once a second, not each time two loops' values take turns.
 *
 * <p>Threading: any thread. {@link #refresh} replaces the value only when its text changes,
 * so loops whose timers fire in the same second keep one object.
 */
final class HttpDate {
  private static volatile AsciiString current = format();

  private HttpDate() {}

  /** The current HTTP date, as a pre-encoded header value, at most about a second old. */
  static CharSequence current() {
    return current;
  }

  /** Makes {@link #current} the time now, keeping its object while the text is the same. */
  static void refresh() {
    AsciiString now = format();
    if (!now.contentEquals(current)) current = now;
  }

  private static AsciiString format() {
    return AsciiString.cached(HttpDates.format(Instant.now()));
  }
}
