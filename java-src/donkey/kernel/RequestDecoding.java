package donkey.kernel;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.PushbackInputStream;
import java.util.zip.GZIPInputStream;
import java.util.zip.Inflater;
import java.util.zip.InflaterInputStream;
import java.util.zip.ZipException;

/**
 * A request body's {@code Content-Encoding} undone ({@code :decompress-requests?}): gzip and
 * deflate (zlib, or raw deflate as some clients send it), inflated by the JDK as the handler
 * reads, with the inflated bytes counted against {@code :max-body-size}, so a small body that
 * inflates to gigabytes costs a read of the limit and a 413. A body that is not valid in its
 * coding (corrupt, or cut short: the gzip trailer is checked) gets 400 rather than reaching the
 * handler as an empty or shorter body. (Not Vert.x's own decompression, which hands a handler
 * an empty body for a corrupt one and a truncated body for a truncated one.)
 *
 * <p>Threading: {@link #of} on the event loop; the stream is read on the handler's thread, or on
 * the event loop for an async handler's body, which is inflated whole before it runs.
 */
final class RequestDecoding {
  /** No coding: the body as it arrived. */
  static final int NONE = 0;
  static final int GZIP = 1;
  static final int DEFLATE = 2;
  /** A coding that is not undone here: the request gets 415. */
  static final int UNSUPPORTED = -1;

  private RequestDecoding() {}

  /** The coding of a {@code Content-Encoding} value (null: {@link #NONE}). */
  static int of(String contentEncoding) {
    if (contentEncoding == null) return NONE;
    String c = contentEncoding.trim();
    if (c.isEmpty() || c.equalsIgnoreCase("identity")) return NONE;
    if (c.equalsIgnoreCase("gzip") || c.equalsIgnoreCase("x-gzip")) return GZIP;
    if (c.equalsIgnoreCase("deflate")) return DEFLATE;
    return UNSUPPORTED;
  }

  /**
   * The inflated body of {@code in}, coded as {@code coding}. Past {@code limit} inflated bytes
   * {@code tooLarge} runs (it claims a 413) and the read throws; on bytes that are not valid in
   * the coding {@code broken} runs (it claims a 400) and the read throws.
   */
  static InputStream inflating(InputStream in, int coding, long limit, Runnable tooLarge,
                               Runnable broken) {
    return new Inflating(in, coding, limit, tooLarge, broken);
  }

  /**
   * Event loop, for an async handler: {@code in}, a body that has arrived whole, inflated
   * whole.
   *
   * @return the inflated body, or null when {@code tooLarge} or {@code broken} ran
   */
  static InputStream inflateAll(InputStream in, int coding, long limit, Runnable tooLarge,
                                Runnable broken) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    byte[] buf = new byte[8192];
    try (InputStream s = inflating(in, coding, limit, tooLarge, broken)) {
      for (int n; (n = s.read(buf)) > 0; ) out.write(buf, 0, n);
    } catch (IOException e) {
      return null;
    }
    return new ByteArrayInputStream(out.toByteArray());
  }

  /** The inflating stream: opened on its first read, so a bad header fails a read too. */
  private static final class Inflating extends InputStream {
    private final InputStream raw;
    private final int coding;
    private final long limit;
    private final Runnable tooLarge;
    private final Runnable broken;
    private InputStream in;
    private Inflater inflater;
    private long count;
    private IOException failed;

    Inflating(InputStream raw, int coding, long limit, Runnable tooLarge, Runnable broken) {
      this.raw = raw;
      this.coding = coding;
      this.limit = limit;
      this.tooLarge = tooLarge;
      this.broken = broken;
    }

    @Override
    public int read() throws IOException {
      byte[] one = new byte[1];
      int n = read(one, 0, 1);
      return n <= 0 ? -1 : one[0] & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      if (failed != null) throw failed;
      if (len == 0) return 0;
      int n;
      try {
        if (in == null) in = open();
        // one past the limit is enough to know the body is over it
        long room = limit - count;
        n = in.read(b, off, room >= len ? len : (int) room + 1);
      } catch (ZipException | EOFException e) {
        // EOFException: the body ended inside the compressed data or the gzip trailer
        broken.run();
        throw fail("the request body is not valid " + name() + ": " + e.getMessage(), e);
      }
      if (n > 0) {
        count += n;
        if (count > limit) {
          tooLarge.run();
          throw fail("the request body is larger than :max-body-size (" + limit
              + " bytes) once inflated", null);
        }
      } else if (n < 0 && inflater != null && !inflater.finished()) {
        broken.run();
        throw fail("the request body's " + name() + " data ends early", null);
      }
      return n;
    }

    private InputStream open() throws IOException {
      if (coding == GZIP) return new GZIPInputStream(raw, 8192);
      // RFC 9110's deflate is the zlib format; some clients send raw deflate instead, which
      // a zlib header's check bits tell apart
      PushbackInputStream p = new PushbackInputStream(raw, 2);
      int b0 = p.read();
      int b1 = b0 < 0 ? -1 : p.read();
      if (b1 >= 0) p.unread(b1);
      if (b0 >= 0) p.unread(b0);
      boolean zlib = b1 >= 0 && (b0 & 0x0f) == 8 && ((b0 << 8) | b1) % 31 == 0;
      inflater = new Inflater(!zlib);
      return new InflaterInputStream(p, inflater, 8192);
    }

    private String name() {
      return coding == GZIP ? "gzip" : "deflate";
    }

    private IOException fail(String message, Throwable cause) {
      failed = new IOException(message, cause);
      return failed;
    }

    @Override
    public int available() throws IOException {
      return in == null || failed != null ? 0 : in.available();
    }

    @Override
    public void close() throws IOException {
      if (in != null) {
        in.close();
      } else {
        raw.close();
      }
      if (inflater != null) inflater.end();
    }
  }
}
