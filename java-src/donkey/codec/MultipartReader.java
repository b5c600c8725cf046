package donkey.codec;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.Charset;
import java.util.ArrayList;
import java.util.List;

/**
 * The byte-level scanner under {@link Multipart}: one pass over the body through one fixed
 * buffer, finding delimiters ({@code CRLF "--" boundary}), header lines and part contents.
 *
 * <p>Memory: the buffer is the only storage; part contents are handed to a {@link Sink} in
 * slices as soon as they cannot be the start of a delimiter (or read from the reader with
 * {@link #readContent}, as a stream), so at most {@code delimiter length - 1} bytes of content
 * are held back between reads.
 *
 * <p>Threading: one instance per body, used by one thread.
 *
 * <p>Bad input: every read is counted against {@code maxTotal} (413 past it); end of stream
 * where the grammar needs more bytes, lines longer than the header limit and stray bytes after
 * a boundary are a 400 ({@link MultipartException}).
 */
final class MultipartReader {
  /** Receives part contents. */
  interface Sink {
    void write(byte[] b, int off, int len) throws IOException;
  }

  private static final byte CR = '\r';
  private static final byte LF = '\n';

  private final InputStream in;
  private final byte[] buf;
  /** {@code CRLF "--" boundary}; the CRLF belongs to the delimiter, not to the part before. */
  private final byte[] delim;
  private final long maxTotal;
  private final int maxHeaderBytes;
  private final long contentLength;
  private final Multipart.Progress progress;
  private int pos;
  private int lim;
  private long total;
  private boolean eof;
  /** Bytes at {@code pos} known to be content of the current part (see {@link #locate}). */
  private int known;
  /** A delimiter starts right after the {@code known} bytes. */
  private boolean atDelim;
  /** Parts begun, for {@code progress}. */
  private long parts;

  /**
   * @param in the body; null reads as empty
   * @param delim {@code CRLF "--" boundary}, shorter than a quarter of {@code bufferSize}
   * @param maxTotal the most bytes that may be read from {@code in}
   * @param maxHeaderBytes the most bytes a part's header section may take, under
   *     {@code bufferSize / 2}
   * @param contentLength the body's declared length, or -1, for {@code progress}
   * @param progress told of every read from {@code in} and every part begun; may be null
   */
  MultipartReader(InputStream in, byte[] delim, int bufferSize, long maxTotal,
                  int maxHeaderBytes, long contentLength, Multipart.Progress progress) {
    this.in = in;
    this.contentLength = contentLength;
    this.progress = progress;
    this.buf = new byte[bufferSize];
    this.delim = delim;
    this.maxTotal = maxTotal;
    this.maxHeaderBytes = maxHeaderBytes;
    this.eof = in == null;
  }

  /** Bytes read from the body so far. */
  long bytesRead() {
    return total;
  }

  /**
   * Moves the unread bytes to the front of the buffer and reads once more behind them.
   *
   * @return false at end of stream
   */
  private boolean fill() throws IOException {
    if (eof) return false;
    if (pos > 0) {
      System.arraycopy(buf, pos, buf, 0, lim - pos);
      lim -= pos;
      pos = 0;
    }
    if (lim == buf.length) throw new IllegalStateException("multipart buffer full");
    int n = in.read(buf, lim, buf.length - lim);
    if (n < 0) {
      eof = true;
      return false;
    }
    total += n;
    if (total > maxTotal) {
      throw MultipartException.tooLarge("multipart body is larger than " + maxTotal + " bytes");
    }
    lim += n;
    if (progress != null) progress.update(total, contentLength, parts);
    return true;
  }

  /** Counts a part whose headers have been read, and says so to {@code progress}. */
  void partBegun() {
    parts++;
    if (progress != null) progress.update(total, contentLength, parts);
  }

  /** Makes at least {@code n} unread bytes available; false if the stream ends first. */
  private boolean need(int n) throws IOException {
    while (lim - pos < n) {
      if (!fill()) return false;
    }
    return true;
  }

  /**
   * Skips the preamble and the first boundary ({@code "--" boundary}, at the very start or at
   * the start of a line), leaving the reader just after it.
   */
  void skipPreamble() throws IOException {
    int dashBoundary = delim.length - 2;
    if (need(dashBoundary) && matches(pos, 2, dashBoundary)) {
      pos += dashBoundary;
      return;
    }
    scan(null, "no opening boundary");
  }

  /**
   * Hands everything up to the next delimiter to {@code sink} (nothing when null) and moves
   * past the delimiter.
   *
   * @param endOfStream what is wrong when the stream ends before a delimiter
   */
  void scan(Sink sink, String endOfStream) throws IOException {
    while (true) {
      locate(endOfStream);
      if (sink != null && known > 0) sink.write(buf, pos, known);
      pos += known;
      known = 0;
      if (atDelim) {
        pos += delim.length;
        atDelim = false;
        return;
      }
    }
  }

  /**
   * Copies up to {@code len} bytes of the current part's content into {@code b}; the pull
   * counterpart of {@link #scan}, for a part handed to code that reads a stream.
   *
   * @return the number of bytes copied (at least one when {@code len} is positive), or -1 at
   *     the end of the part, having moved past its delimiter; the next call reads the content
   *     of whatever follows, so the caller stops at -1
   */
  int readContent(byte[] b, int off, int len) throws IOException {
    if (len == 0) return 0;
    while (known == 0) {
      if (atDelim) {
        pos += delim.length;
        atDelim = false;
        return -1;
      }
      locate("no closing boundary");
    }
    int n = Math.min(len, known);
    System.arraycopy(buf, pos, b, off, n);
    pos += n;
    known -= n;
    return n;
  }

  /**
   * Unless bytes at {@code pos} are already known to be content, finds how many are: sets
   * {@code known} to the bytes before the next delimiter, or before a tail that could start
   * one, reading more as needed, and {@code atDelim} when the delimiter itself follows them.
   * Remembering the answer keeps small reads through {@link #readContent} from scanning the
   * same bytes again.
   */
  private void locate(String endOfStream) throws IOException {
    if (known > 0 || atDelim) return;
    final byte[] d = delim;
    final int dl = d.length;
    while (true) {
      int last = lim - dl;
      for (int i = pos; i <= last; i++) {
        if (buf[i] == CR && matches(i + 1, 1, dl - 1)) {
          known = i - pos;
          atDelim = true;
          return;
        }
      }
      // No whole delimiter in [pos, lim): everything before a tail that could start one is
      // content.
      int keep = lim;
      for (int j = Math.max(pos, lim - dl + 1); j < lim; j++) {
        if (buf[j] == CR && matches(j + 1, 1, lim - j - 1)) {
          keep = j;
          break;
        }
      }
      if (keep > pos) {
        known = keep - pos;
        return;
      }
      if (!fill()) throw MultipartException.malformed(endOfStream);
    }
  }

  /** True if {@code buf[at..at+n)} equals {@code delim[from..from+n)}. */
  private boolean matches(int at, int from, int n) {
    final byte[] b = buf;
    final byte[] d = delim;
    for (int k = 0; k < n; k++) {
      if (b[at + k] != d[from + k]) return false;
    }
    return true;
  }

  /**
   * Reads what follows a boundary: {@code "--"} (the close delimiter; the epilogue is not read)
   * or optional transport padding (spaces, tabs) and CRLF, before the next part's headers.
   *
   * @return true if a part follows, false after the close delimiter
   */
  boolean afterBoundary() throws IOException {
    if (!need(2)) throw MultipartException.malformed("body ends after a boundary");
    if (buf[pos] == '-' && buf[pos + 1] == '-') {
      pos += 2;
      return false;
    }
    while (true) {
      if (!need(1)) throw MultipartException.malformed("body ends after a boundary");
      byte b = buf[pos];
      if (b != ' ' && b != '\t') break;
      pos++;
    }
    if (!need(2)) throw MultipartException.malformed("body ends after a boundary");
    if (buf[pos] == CR && buf[pos + 1] == LF) {
      pos += 2;
      return true;
    }
    throw MultipartException.malformed("unexpected characters after a boundary");
  }

  /**
   * Reads a part's header section up to and including the empty line, unfolding continuation
   * lines (those starting with a space or tab) into the line before.
   *
   * @param cs the charset the header bytes are decoded with
   * @return the header lines, without their CRLF
   */
  List<String> headerLines(Charset cs) throws IOException {
    ArrayList<String> lines = new ArrayList<>(4);
    // the line being unfolded: appending keeps a header folded over many lines linear
    StringBuilder current = null;
    int size = 0;
    while (true) {
      int from = pos;
      int eol;
      while ((eol = crlf(from)) < 0) {
        if (size + (lim - pos) > maxHeaderBytes) {
          throw MultipartException.malformed("part headers larger than " + maxHeaderBytes + " bytes");
        }
        int scanned = lim - pos;
        if (!fill()) throw MultipartException.malformed("body ends in part headers");
        from = pos + Math.max(0, scanned - 1);
      }
      int len = eol - pos;
      size += len + 2;
      if (size > maxHeaderBytes) {
        throw MultipartException.malformed("part headers larger than " + maxHeaderBytes + " bytes");
      }
      if (len == 0) {
        pos += 2;
        if (current != null) lines.add(current.toString());
        return lines;
      }
      String line = new String(buf, pos, len, cs);
      pos = eol + 2;
      char c = line.charAt(0);
      if (c == ' ' || c == '\t') {
        if (current == null) throw MultipartException.malformed("part header starts with a space");
        current.append(line);
      } else {
        if (current != null) lines.add(current.toString());
        current = new StringBuilder(line);
      }
    }
  }

  /** The index of the next CRLF at or after {@code from} in the unread bytes, or -1. */
  private int crlf(int from) {
    for (int i = from; i < lim - 1; i++) {
      if (buf[i] == CR && buf[i + 1] == LF) return i;
    }
    return -1;
  }
}
