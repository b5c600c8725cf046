package donkey.files;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * A request path as the names of the files it leads through, or a refusal: the one place that
 * decides whether a path may reach the file system. The path is split on {@code /} before it is
 * percent-decoded, each segment on its own, so an encoded slash cannot join or split segments;
 * then a segment is refused (400) when it decodes to bytes that are not UTF-8 (overlong forms
 * included), holds a {@code /}, a backslash, a NUL or another control character, or a colon (a
 * Windows drive or stream name), or is made only of dots and spaces ({@code .}, {@code ..}, and
 * what Windows would read as them). A segment starting with a dot (a hidden file: {@code .git},
 * {@code .env}) is not served unless allowed, except {@code .well-known}.
 *
 * <p>Stateless; any thread.
 */
final class StaticPath {
  /** The reason a path is refused, with its status. */
  static final class Refused extends Exception {
    final int status;

    Refused(int status, String message) {
      super(message, null, false, false);
      this.status = status;
    }
  }

  private StaticPath() {}

  /**
   * The decoded segments of {@code rawPath} (percent-encoded, as the request line has it),
   * empty segments dropped.
   *
   * @param hidden true to allow segments that start with a dot
   * @throws Refused 400 for a segment that may not reach the file system, 404 for a hidden one
   */
  static List<String> segments(String rawPath, boolean hidden) throws Refused {
    List<String> out = new ArrayList<>();
    int start = 0;
    int n = rawPath.length();
    while (start <= n) {
      int slash = rawPath.indexOf('/', start);
      int end = slash < 0 ? n : slash;
      if (end > start) {
        String seg = decode(rawPath, start, end);
        check(seg, hidden);
        out.add(seg);
      }
      start = end + 1;
    }
    return out;
  }

  private static void check(String seg, boolean hidden) throws Refused {
    boolean onlyDots = true;
    for (int i = 0; i < seg.length(); i++) {
      char c = seg.charAt(i);
      if (c == '/' || c == '\\' || c == ':' || c < 0x20 || c == 0x7f) {
        throw new Refused(400, "Bad Request: the path has a character no file name may have");
      }
      if (c != '.' && c != ' ') onlyDots = false;
    }
    if (onlyDots) throw new Refused(400, "Bad Request: the path has a dot segment");
    if (!hidden && seg.charAt(0) == '.' && !seg.equals(".well-known")) {
      throw new Refused(404, "Not Found");
    }
  }

  /** Percent-decodes {@code s[from, to)} as UTF-8, strictly (overlong forms are not UTF-8). */
  private static String decode(String s, int from, int to) throws Refused {
    int pct = s.indexOf('%', from);
    if (pct < 0 || pct >= to) {
      for (int i = from; i < to; i++) {
        if (s.charAt(i) > 0x7e) return decodeBytes(s.substring(from, to));
      }
      return s.substring(from, to);
    }
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(to - from);
    for (int i = from; i < to; i++) {
      char c = s.charAt(i);
      if (c == '%') {
        if (i + 2 >= to) {
          throw new Refused(400, "Bad Request: a malformed percent escape in the path");
        }
        int hi = Character.digit(s.charAt(i + 1), 16);
        int lo = Character.digit(s.charAt(i + 2), 16);
        if (hi < 0 || lo < 0) {
          throw new Refused(400, "Bad Request: a malformed percent escape in the path");
        }
        bytes.write(hi * 16 + lo);
        i += 2;
      } else if (c > 0x7e) {
        byte[] b = String.valueOf(c).getBytes(StandardCharsets.UTF_8);
        bytes.write(b, 0, b.length);
      } else {
        bytes.write(c);
      }
    }
    return utf8(bytes.toByteArray());
  }

  private static String decodeBytes(String s) throws Refused {
    return utf8(s.getBytes(StandardCharsets.UTF_8));
  }

  private static String utf8(byte[] b) throws Refused {
    CharsetDecoder d = StandardCharsets.UTF_8.newDecoder()
        .onMalformedInput(CodingErrorAction.REPORT)
        .onUnmappableCharacter(CodingErrorAction.REPORT);
    try {
      CharBuffer c = d.decode(ByteBuffer.wrap(b));
      return c.toString();
    } catch (CharacterCodingException e) {
      throw new Refused(400, "Bad Request: the path is not UTF-8");
    }
  }
}
