package donkey.files;

import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;

/** The first {@code count} bytes of a stream (a byte range's body); closes the stream. */
final class Bounded extends FilterInputStream {
  private long left;

  Bounded(InputStream in, long count) {
    super(in);
    this.left = count;
  }

  @Override
  public int read() throws IOException {
    if (left <= 0) return -1;
    int b = in.read();
    if (b >= 0) left--;
    return b;
  }

  @Override
  public int read(byte[] b, int off, int len) throws IOException {
    if (left <= 0) return -1;
    int n = in.read(b, off, (int) Math.min(len, left));
    if (n > 0) left -= n;
    return n;
  }

  @Override
  public long skip(long n) throws IOException {
    long s = in.skip(Math.min(n, left));
    left -= s;
    return s;
  }

  @Override
  public int available() throws IOException {
    return (int) Math.min(in.available(), left);
  }
}
