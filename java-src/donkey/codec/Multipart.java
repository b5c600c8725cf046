package donkey.codec;

import clojure.lang.IFn;
import clojure.lang.IPersistentMap;
import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;
import java.io.BufferedOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.nio.charset.UnsupportedCharsetException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A streaming {@code multipart/form-data} parser (RFC 7578 over RFC 2046) producing Ring's
 * multipart parameter map.
 *
 * <p>Contract: one pass over the body through one fixed {@value #BUFFER_SIZE}-byte buffer; the
 * body is never held whole. A part whose Content-Disposition has a {@code filename} (or
 * {@code filename*}) is a file part: its content streams to a temp file
 * ({@code donkey-multipart-*.tmp}, created owner-read/write only where the file system has
 * POSIX permissions) and its value is {@code {:filename :content-type :tempfile :size}} as in
 * Ring ({@code :content-type} the part's Content-Type header, nil when absent; {@code :size} a
 * Long). Every other part is a field, held in memory and decoded to a String. Names map to their
 * value, a repeated name to a vector of its values in arrival order. The preamble and the
 * epilogue are ignored (the epilogue is not even read).
 *
 * <p>Charsets, first match wins: the forced charset, when configured; for a field, the charset
 * of its own Content-Type; the value of a field named {@code _charset_} (HTML 5's way of naming
 * the form's encoding; it stays in the map); the fallback charset. The fallback is the
 * configured one or else the request Content-Type's {@code charset} parameter, else UTF-8. Part
 * headers (so names and filenames) are decoded with the forced charset or the fallback. Bytes
 * invalid in the charset decode to U+FFFD. Filenames are exactly what the client sent (quoted
 * pairs {@code \"} and {@code \\} undone, {@code filename*} decoded): never use one as a path.
 *
 * <p>A store, when configured, replaces the temp files: Ring's store contract. It is called
 * once per file part, as the parse reaches it, with {@code {:filename :content-type :stream}},
 * and what it returns is the part's value. {@code :stream} reads the part's content straight
 * from the body (nothing is spooled) and must be read before the store returns: the rest of
 * the part is skipped then, and the stream closed. A part over {@code maxFileSize} (or a body
 * that breaks off) ends the stream with an {@code IOException} once the store has read
 * {@code maxFileSize} bytes, its cause the {@link MultipartException}; that exception is what
 * the parse throws, whatever the store did with the {@code IOException}. An exception of the
 * store's own propagates. What a store kept of a body that fails later is its own to undo.
 *
 * <p>Limits, each a {@link MultipartException} with status 413: bytes read from the body
 * ({@code maxRequestSize}, checked against Content-Length before reading too), bytes of one file
 * part ({@code maxFileSize}), bytes of one field ({@code maxFieldSize}), number of parts
 * ({@code maxParts}), number of file parts ({@code maxFiles}, checked before the part's content
 * is read). Part header sections over {@value #MAX_PART_HEADER_BYTES} bytes are a 400,
 * and so are more than {@link KeyHashes#MAX_SHARED} distinct part names of one hash, which
 * would make the parameter map quadratic to build.
 *
 * <p>Bad input: a missing or invalid boundary, no opening or closing boundary, junk after a
 * boundary, a truncated body, header lines without a colon, a part without a form-data
 * Content-Disposition or without a name, an unknown charset: a {@link MultipartException} with
 * status 400 and a short message naming the problem. Not supported: nested
 * {@code multipart/mixed} parts (RFC 7578 section 4.3 drops them; such a part is kept as a field
 * holding its raw content) and {@code Content-Transfer-Encoding} (ignored, as RFC 7578 section
 * 4.7 says senders must not use it).
 *
 * <p>Cleanup: when a parse fails for any reason (including an {@code IOException} from the body
 * or the disk), every temp file it wrote is deleted before the exception leaves. After a
 * successful parse the caller owns the files, through {@link MultipartResult}.
 *
 * <p>Threading: an instance is immutable configuration; {@link #parse} may run on any number of
 * threads at once. Each call blocks on the body stream and on disk writes, so it belongs on a
 * worker thread unless the body is already in memory.
 */
public final class Multipart {
  /** The read buffer, allocated per parse. */
  public static final int BUFFER_SIZE = 64 * 1024;
  /** The longest boundary accepted; RFC 2046 allows 70, some clients go further. */
  public static final int MAX_BOUNDARY_LENGTH = 200;
  /** The most bytes one part's header section may take. */
  public static final int MAX_PART_HEADER_BYTES = 16 * 1024;
  /** The prefix of temp file names. */
  public static final String TEMP_FILE_PREFIX = "donkey-multipart-";

  public static final Keyword FILENAME = Keyword.intern("filename");
  public static final Keyword CONTENT_TYPE = Keyword.intern("content-type");
  public static final Keyword TEMPFILE = Keyword.intern("tempfile");
  public static final Keyword SIZE = Keyword.intern("size");
  public static final Keyword STREAM = Keyword.intern("stream");

  /** Told how far a parse has got: Ring's {@code :progress-fn}, less the request. */
  public interface Progress {
    /**
     * Called after every read from the body and after the headers of every part.
     *
     * @param bytesRead bytes read from the body so far
     * @param contentLength the body's declared length, or -1
     * @param items parts begun so far, fields and files
     */
    void update(long bytesRead, long contentLength, long items);
  }

  /** The buffer between a file part and its temp file, and for skipping a store's leftovers. */
  static final int FILE_BUFFER = 16 * 1024;

  private final Charset forcedCharset;
  private final Charset fallbackCharset;
  private final long maxFileSize;
  private final long maxFieldSize;
  private final long maxRequestSize;
  private final int maxParts;
  private final int maxFiles;
  private final boolean keywords;
  private final Path tempDir;
  private final IFn store;

  /**
   * @param forcedCharset decode every field and header with this charset, whatever the body
   *     says; null to follow the body
   * @param fallbackCharset the charset of fields that name none; null for the request
   *     Content-Type's charset, else UTF-8
   * @param maxFileSize the most bytes of one file part
   * @param maxFieldSize the most bytes of one field (fields are held in memory)
   * @param maxRequestSize the most bytes read from the body
   * @param maxParts the most parts in a body
   * @param keywords turn names with keyword syntax (as {@code wrap-keyword-params} decides)
   *     into keywords
   * @param tempDir where temp files go; null for {@code java.io.tmpdir}
   * @throws IllegalArgumentException if a limit is not positive
   */
  public Multipart(Charset forcedCharset, Charset fallbackCharset, long maxFileSize,
                   long maxFieldSize, long maxRequestSize, int maxParts, boolean keywords,
                   File tempDir) {
    this(forcedCharset, fallbackCharset, maxFileSize, maxFieldSize, maxRequestSize, maxParts,
         Integer.MAX_VALUE, keywords, tempDir, null);
  }

  /**
   * As the constructor above, with
   *
   * @param maxFiles the most file parts in a body (zero refuses any)
   * @param store Ring's store function for file parts (see the class doc); null for temp files
   * @throws IllegalArgumentException if a limit is not positive, or {@code maxFiles} negative
   */
  public Multipart(Charset forcedCharset, Charset fallbackCharset, long maxFileSize,
                   long maxFieldSize, long maxRequestSize, int maxParts, int maxFiles,
                   boolean keywords, File tempDir, IFn store) {
    if (maxFileSize <= 0 || maxFieldSize <= 0 || maxRequestSize <= 0 || maxParts <= 0
        || maxFiles < 0) {
      throw new IllegalArgumentException("multipart limits must be positive");
    }
    this.maxFiles = maxFiles;
    this.store = store;
    this.forcedCharset = forcedCharset;
    this.fallbackCharset = fallbackCharset;
    this.maxFileSize = maxFileSize;
    this.maxFieldSize = maxFieldSize;
    this.maxRequestSize = maxRequestSize;
    this.maxParts = maxParts;
    this.keywords = keywords;
    this.tempDir = tempDir == null ? null : tempDir.toPath();
  }

  /** True if {@code contentType} (a header value, may be null) is multipart/form-data. */
  public static boolean isFormData(String contentType) {
    return ContentType.is(contentType, "multipart", "form-data");
  }

  /** The {@code boundary} parameter of a Content-Type header value, or null when it has none. */
  public static String boundary(String contentType) {
    String b = ContentType.param(contentType, "boundary");
    return b == null || b.isEmpty() ? null : b;
  }

  /**
   * Parses a request body.
   *
   * @param body the body; null reads as empty (a 400)
   * @param contentType the request's Content-Type header value
   * @param contentLength the request's Content-Length, or -1 when unknown
   * @return the parameters and the temp files, which the caller must delete
   * @throws MultipartException on a malformed body (400) or one over a limit (413)
   * @throws IOException if reading the body or writing a temp file fails
   */
  public MultipartResult parse(InputStream body, String contentType, long contentLength)
      throws IOException {
    return parse(body, contentType, contentLength, null);
  }

  /**
   * As {@link #parse(InputStream, String, long)}, telling {@code progress} (may be null) how
   * far it has got.
   */
  public MultipartResult parse(InputStream body, String contentType, long contentLength,
                               Progress progress) throws IOException {
    if (contentLength > maxRequestSize) {
      throw MultipartException.tooLarge("multipart body is larger than " + maxRequestSize + " bytes");
    }
    String boundary = boundary(contentType);
    if (boundary == null) {
      throw new MultipartException(MultipartException.BAD_REQUEST,
                                   "multipart/form-data request without a boundary");
    }
    Charset fallback = fallbackCharset;
    if (fallback == null) {
      try {
        fallback = ContentType.charset(contentType);
      } catch (UnsupportedCharsetException e) {
        throw MultipartHeaders.unsupported(e.getCharsetName());
      }
      if (fallback == null) fallback = StandardCharsets.UTF_8;
    }
    return parseBody(body, boundary, fallback, contentLength, progress);
  }

  /**
   * Parses a body delimited by {@code boundary}.
   *
   * @param body the body; null reads as empty (a 400)
   * @param boundary the boundary, without the leading {@code --}
   * @param fallback the charset of fields that name none (unless a charset is forced)
   * @return the parameters and the temp files, which the caller must delete
   * @throws MultipartException on a malformed body (400) or one over a limit (413)
   * @throws IOException if reading the body or writing a temp file fails
   */
  public MultipartResult parseBody(InputStream body, String boundary, Charset fallback)
      throws IOException {
    return parseBody(body, boundary, fallback, -1, null);
  }

  /**
   * As {@link #parseBody(InputStream, String, Charset)}, telling {@code progress} (may be null)
   * how far it has got, with {@code contentLength} (or -1) as the body's declared length.
   */
  public MultipartResult parseBody(InputStream body, String boundary, Charset fallback,
                                   long contentLength, Progress progress) throws IOException {
    byte[] delim = delimiter(boundary);
    Charset headerCharset = forcedCharset != null ? forcedCharset : fallback;
    MultipartReader r = new MultipartReader(body, delim, BUFFER_SIZE, maxRequestSize,
                                            MAX_PART_HEADER_BYTES, contentLength, progress);
    ArrayList<MultipartParams.Item> items = new ArrayList<>();
    ArrayList<File> files = new ArrayList<>();
    int fileParts = 0;
    boolean ok = false;
    try {
      r.skipPreamble();
      while (r.afterBoundary()) {
        if (items.size() == maxParts) {
          throw MultipartException.tooLarge("multipart body has more than " + maxParts + " parts");
        }
        MultipartHeaders.Part p = MultipartHeaders.part(r.headerLines(headerCharset));
        r.partBegun();
        if (p.filename != null) {
          if (++fileParts > maxFiles) {
            throw MultipartException.tooLarge("multipart body has more than " + maxFiles + " files");
          }
          Object value = store == null ? file(r, p, files) : stored(r, p);
          items.add(new MultipartParams.Item(p.name, value, null, false));
        } else {
          MultipartSinks.FieldSink sink = new MultipartSinks.FieldSink(maxFieldSize, p.name);
          r.scan(sink, "no closing boundary");
          items.add(new MultipartParams.Item(p.name, sink.bytes(), p.charset, true));
        }
      }
      MultipartResult result = new MultipartResult(
          MultipartParams.build(items, fallback, forcedCharset, keywords),
          files.toArray(new File[0]));
      ok = true;
      return result;
    } finally {
      if (!ok) delete(files);
    }
  }

  /** Streams a file part to a new temp file (added to {@code files} first) and returns its map. */
  private IPersistentMap file(MultipartReader r, MultipartHeaders.Part p, List<File> files)
      throws IOException {
    Path path = tempDir == null ? Files.createTempFile(TEMP_FILE_PREFIX, ".tmp")
                                : Files.createTempFile(tempDir, TEMP_FILE_PREFIX, ".tmp");
    File f = path.toFile();
    files.add(f);
    MultipartSinks.FileSink sink;
    try (OutputStream out = new BufferedOutputStream(Files.newOutputStream(path), FILE_BUFFER)) {
      sink = new MultipartSinks.FileSink(out, maxFileSize, p.name);
      r.scan(sink, "no closing boundary");
    }
    return new PersistentArrayMap(new Object[] {
      FILENAME, p.filename,
      CONTENT_TYPE, p.contentType,
      TEMPFILE, f,
      SIZE, Long.valueOf(sink.size),
    });
  }

  /**
   * Hands a file part to the store and returns what it made of it. Whatever ended the part's
   * stream early (a limit, a broken body) is thrown in place of what the store threw or
   * returned: a store may catch the stream's IOException, and the refusal must not depend on
   * it.
   */
  private Object stored(MultipartReader r, MultipartHeaders.Part p) throws IOException {
    MultipartSinks.PartStream in = new MultipartSinks.PartStream(r, maxFileSize, p.name);
    Object value;
    try {
      value = store.invoke(new PersistentArrayMap(new Object[] {
        FILENAME, p.filename,
        CONTENT_TYPE, p.contentType,
        STREAM, in,
      }));
    } catch (Throwable t) {
      in.closed = true;
      throw rethrow(in.failure != null ? in.failure : t);
    }
    try {
      in.close();
    } catch (IOException | RuntimeException e) {
      if (in.failure == null) throw e;
    }
    if (in.failure != null) throw rethrow(in.failure);
    return value;
  }

  /** Throws {@code t}, checked or not, as it is; the return type lets callers write throw. */
  @SuppressWarnings("unchecked")
  static <T extends Throwable> RuntimeException rethrow(Throwable t) throws T {
    throw (T) t;
  }

  /** {@code CRLF "--" boundary}, after checking the boundary; a 400 for a bad one. */
  static byte[] delimiter(String boundary) {
    int n = boundary == null ? 0 : boundary.length();
    if (n == 0 || n > MAX_BOUNDARY_LENGTH) {
      throw new MultipartException(MultipartException.BAD_REQUEST, "invalid multipart boundary");
    }
    byte[] d = new byte[n + 4];
    d[0] = '\r';
    d[1] = '\n';
    d[2] = '-';
    d[3] = '-';
    for (int i = 0; i < n; i++) {
      char c = boundary.charAt(i);
      if (c < 0x20 || c > 0x7e) {
        throw new MultipartException(MultipartException.BAD_REQUEST, "invalid multipart boundary");
      }
      d[i + 4] = (byte) c;
    }
    return d;
  }

  /** Deletes {@code files}, ignoring failures. */
  static void delete(List<File> files) {
    for (File f : files) {
      try {
        Files.deleteIfExists(f.toPath());
      } catch (IOException | RuntimeException e) {
        // best effort: a file that cannot be deleted now will not be deleted by retrying
      }
    }
  }

}
