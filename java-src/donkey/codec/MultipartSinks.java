package donkey.codec;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.Arrays;
import java.util.Objects;

/**
 * Where the bytes of a part go as {@link MultipartReader} finds them: a field's into memory up
 * to its limit, a file part's into its temp file or, for a Ring store, out through an
 * InputStream the store reads. Each is used by the one thread parsing its body.
 */
final class MultipartSinks {
  private MultipartSinks() {}

  /** A field's bytes, in memory, up to a limit. */
  static final class FieldSink implements MultipartReader.Sink {
    private final long max;
    private final String name;
    private byte[] buf = new byte[64];
    private int len;

    FieldSink(long max, String name) {
      this.max = Math.min(max, Integer.MAX_VALUE - 8);
      this.name = name;
    }

    @Override
    public void write(byte[] b, int off, int n) {
      if (len + (long) n > max) {
        throw MultipartException.tooLarge("field '" + MultipartHeaders.clip(name)
                                          + "' is larger than " + max + " bytes");
      }
      if (len + n > buf.length) {
        buf = Arrays.copyOf(buf, (int) Math.min(max, Math.max(buf.length * 2L, len + (long) n)));
      }
      System.arraycopy(b, off, buf, len, n);
      len += n;
    }

    byte[] bytes() {
      return len == buf.length ? buf : Arrays.copyOf(buf, len);
    }
  }

  /**
   * A file part's content as an InputStream for a store, read from the body as the store reads
   * it, up to a limit. Fail-stop: the first failure (a limit, a malformed or broken body) is
   * kept in {@code failure} and every later read throws it again, so the parse can tell what
   * ended the part whatever the store made of it. Closing skips the rest of the part; once the
   * store has returned the stream is closed and reads throw.
   */
  static final class PartStream extends InputStream {
    private final MultipartReader r;
    private final long max;
    private final String name;
    private long size;
    private boolean ended;
    boolean closed;
    Throwable failure;
    private byte[] one;

    PartStream(MultipartReader r, long max, String name) {
      this.r = r;
      this.max = max;
      this.name = name;
    }

    @Override
    public int read() throws IOException {
      if (one == null) one = new byte[1];
      int n = read(one, 0, 1);
      return n < 0 ? -1 : one[0] & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      Objects.checkFromIndexSize(off, len, b.length);
      if (closed) {
        throw new IOException("multipart part stream closed: a :store reads it before it returns");
      }
      if (failure != null) throw forReader(failure);
      if (ended) return -1;
      if (len == 0) return 0;
      int n;
      try {
        // one byte past the limit is enough to tell that the part is over it
        n = r.readContent(b, off, (int) Math.min(len, max - size + 1));
      } catch (IOException | RuntimeException | Error e) {
        failure = e;
        throw forReader(e);
      }
      if (n < 0) {
        ended = true;
        return -1;
      }
      if (size + n > max) {
        failure = MultipartException.tooLarge("file '" + MultipartHeaders.clip(name)
                                              + "' is larger than " + max + " bytes");
        throw forReader(failure);
      }
      size += n;
      return n;
    }

    /**
     * What a read throws for {@code t}: InputStream's IOException for a refused body (the
     * MultipartException its cause), anything else as it is.
     */
    private static IOException forReader(Throwable t) {
      if (t instanceof MultipartException) return new IOException(t.getMessage(), t);
      throw Multipart.rethrow(t);
    }

    /** Skips what is left of the part, counting it against the limit; then reads throw. */
    @Override
    public void close() throws IOException {
      if (closed) return;
      try {
        if (failure == null && !ended) {
          byte[] skip = new byte[Multipart.FILE_BUFFER];
          while (read(skip, 0, skip.length) >= 0) {
            // the bytes are dropped: the part's end is what is wanted
          }
        }
      } finally {
        closed = true;
      }
    }
  }

  /** A file part's bytes, to its temp file, up to a limit. */
  static final class FileSink implements MultipartReader.Sink {
    private final OutputStream out;
    private final long max;
    private final String name;
    long size;

    FileSink(OutputStream out, long max, String name) {
      this.out = out;
      this.max = max;
      this.name = name;
    }

    @Override
    public void write(byte[] b, int off, int n) throws IOException {
      if (size + n > max) {
        throw MultipartException.tooLarge("file '" + MultipartHeaders.clip(name)
                                          + "' is larger than " + max + " bytes");
      }
      out.write(b, off, n);
      size += n;
    }
  }
}
