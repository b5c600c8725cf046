package donkey.codec;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.Charset;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CoderResult;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * Strict decoding of bytes in a charset, for input the kernel refuses rather than repairs
 * (percent-encoded form data): nothing is replaced by U+FFFD, and the caller learns where the
 * first bad byte is. UTF-8, ISO-8859-1 and US-ASCII are decoded by hand, without a
 * {@link CharsetDecoder}. Stateless; any thread.
 */
final class StrictDecoder {
  private static final Charset UTF_8 = StandardCharsets.UTF_8;
  private static final Charset ISO_8859_1 = StandardCharsets.ISO_8859_1;
  private static final Charset US_ASCII = StandardCharsets.US_ASCII;

  private StrictDecoder() {}

  /**
   * Appends {@code b[from, to)} decoded strictly in {@code cs} to {@code out}; returns -1, or
   * on invalid input the offset (from {@code from}) of the first byte that does not decode.
   */
  static int decode(byte[] b, int from, int to, Charset cs, StringBuilder out) {
    if (cs == UTF_8) return utf8(b, from, to, out);
    if (cs == ISO_8859_1) {
      for (int k = from; k < to; k++) out.append((char) (b[k] & 0xff));
      return -1;
    }
    if (cs == US_ASCII) {
      for (int k = from; k < to; k++) {
        if (b[k] < 0) return k - from;
        out.append((char) b[k]);
      }
      return -1;
    }
    return generic(b, from, to, cs, out);
  }

  /** Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF. */
  private static int utf8(byte[] b, int from, int to, StringBuilder out) {
    int k = from;
    while (k < to) {
      int b0 = b[k] & 0xff;
      if (b0 < 0x80) {
        out.append((char) b0);
        k++;
        continue;
      }
      int more;
      int cp;
      int min;
      if (b0 >= 0xC2 && b0 <= 0xDF) {
        more = 1; cp = b0 & 0x1F; min = 0x80;
      } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        more = 2; cp = b0 & 0x0F; min = 0x800;
      } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        more = 3; cp = b0 & 0x07; min = 0x10000;
      } else {
        return k - from;
      }
      if (k + more >= to) return k - from;
      for (int j = 1; j <= more; j++) {
        int bj = b[k + j] & 0xff;
        if ((bj & 0xC0) != 0x80) return k - from;
        cp = (cp << 6) | (bj & 0x3F);
      }
      if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return k - from;
      out.appendCodePoint(cp);
      k += more + 1;
    }
    return -1;
  }

  private static int generic(byte[] b, int from, int to, Charset cs, StringBuilder out) {
    CharsetDecoder d = cs.newDecoder()
        .onMalformedInput(CodingErrorAction.REPORT)
        .onUnmappableCharacter(CodingErrorAction.REPORT);
    ByteBuffer in = ByteBuffer.wrap(b, from, to - from);
    CharBuffer chars = CharBuffer.allocate(
        (int) Math.min(Integer.MAX_VALUE - 16, (long) ((to - from) * (double) d.maxCharsPerByte()) + 16));
    while (true) {
      CoderResult r = d.decode(in, chars, true);
      if (r.isError()) return in.position() - from;
      if (r.isOverflow()) { chars = flushTo(chars, out); continue; }
      break;
    }
    while (true) {
      CoderResult r = d.flush(chars);
      if (r.isError()) return in.position() - from;
      if (r.isOverflow()) { chars = flushTo(chars, out); continue; }
      break;
    }
    flushTo(chars, out);
    return -1;
  }

  private static CharBuffer flushTo(CharBuffer chars, StringBuilder out) {
    chars.flip();
    out.append(chars);
    chars.clear();
    return chars;
  }
}
