package donkey.files;

import clojure.lang.AFn;
import clojure.lang.IFn;
import clojure.lang.IPersistentMap;
import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;
import donkey.ring.CheckedFile;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.net.JarURLConnection;
import java.net.URL;
import java.net.URLConnection;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * A Ring handler serving the files under a directory, or the resources under a classpath
 * prefix, for {@code GET} and {@code HEAD}: the file's {@code Content-Type} by extension
 * ({@link MediaTypes}), {@code ETag} (strong, from its length and modification time) and
 * {@code Last-Modified}, the conditional requests of RFC 9110 13 ({@code If-Match},
 * {@code If-Unmodified-Since}: 412; {@code If-None-Match}, {@code If-Modified-Since}: 304),
 * one byte range (RFC 9110 14: 206, 416 for none satisfiable, {@code If-Range}; several
 * ranges that do not merge into one get the whole file, as RFC 9110 14.2 allows), a
 * {@code .br} or {@code .gz} sibling when the client accepts it, {@code Cache-Control}, index
 * files (a directory without its trailing slash is redirected to it, as a browser resolves
 * relative links against it), and no directory listings. A whole file on disk is the response's
 * {@code java.io.File} body, which the kernel sends without copying it through the heap.
 *
 * <p>What may reach the file system is {@link StaticPath}'s to decide; a file reached through a
 * symbolic link that leads out of the root is not served unless allowed.
 *
 * <p>Threading: any thread, called per request; immutable. It reads file attributes, which
 * block: on a {@code :non-blocking} route that is the event loop's time (one {@code stat}
 * per candidate file), fine for local disks; a network file system belongs on a blocking route.
 */
public final class StaticFiles extends AFn {
  private static final Keyword URI = Keyword.intern("uri");
  private static final Keyword QUERY = Keyword.intern("query-string");
  private static final Keyword METHOD = Keyword.intern("request-method");
  private static final Keyword HEADERS = Keyword.intern("headers");
  private static final Keyword GET = Keyword.intern("get");
  private static final Keyword HEAD = Keyword.intern("head");
  private static final Keyword STATUS = Keyword.intern("status");
  private static final Keyword BODY = Keyword.intern("body");
  /** Ranges past this many in one request are not served as ranges (a known amplification). */
  private static final int MAX_RANGES = 16;
  private static final DateTimeFormatter HTTP_DATE =
      DateTimeFormatter.ofPattern("EEE, dd MMM yyyy HH:mm:ss 'GMT'", Locale.US)
          .withZone(ZoneOffset.UTC);
  private static final DateTimeFormatter RFC_850 =
      DateTimeFormatter.ofPattern("EEEE, dd-MMM-yy HH:mm:ss 'GMT'", Locale.US)
          .withZone(ZoneOffset.UTC);
  private static final DateTimeFormatter ASCTIME =
      DateTimeFormatter.ofPattern("EEE MMM ppd HH:mm:ss yyyy", Locale.US).withZone(ZoneOffset.UTC);

  private final Path root;
  private final Path realRoot;
  private final String resourcePrefix;
  private final ClassLoader loader;
  private final String urlPrefix;
  private final String[] indexFiles;
  private final String cacheControl;
  private final boolean precompressed;
  private final boolean followSymlinks;
  private final boolean hidden;
  private final MediaTypes types;

  /** The options of a handler; fields, filled by {@code donkey.static}. */
  public static final class Options {
    /** The URL path the files are served under ({@code "/assets"}), stripped from the URI. */
    public String prefix = "";
    public String[] indexFiles = {"index.html"};
    public String cacheControl;
    public boolean precompressed = true;
    public boolean followSymlinks;
    public boolean hidden;
    public MediaTypes types = MediaTypes.with(null);
  }

  private StaticFiles(Path root, String resourcePrefix, ClassLoader loader, Options o)
      throws IOException {
    this.root = root;
    this.realRoot = root == null ? null : root.toRealPath();
    this.resourcePrefix = resourcePrefix;
    this.loader = loader;
    String p = o.prefix == null ? "" : o.prefix;
    while (p.endsWith("/")) p = p.substring(0, p.length() - 1);
    this.urlPrefix = p;
    this.indexFiles = o.indexFiles == null ? new String[0] : o.indexFiles.clone();
    this.cacheControl = o.cacheControl;
    this.precompressed = o.precompressed;
    this.followSymlinks = o.followSymlinks;
    this.hidden = o.hidden;
    this.types = o.types;
  }

  /**
   * A handler for the files under the directory {@code root}.
   *
   * @throws IllegalArgumentException when {@code root} is not a readable directory
   */
  public static StaticFiles directory(File root, Options o) {
    Path p = root.toPath().toAbsolutePath().normalize();
    if (!Files.isDirectory(p) || !Files.isReadable(p)) {
      throw new IllegalArgumentException("not a readable directory: " + root);
    }
    try {
      return new StaticFiles(p, null, null, o);
    } catch (IOException e) {
      throw new IllegalArgumentException("cannot resolve " + root + ": " + e.getMessage(), e);
    }
  }

  /** A handler for the resources under {@code prefix} on {@code loader}'s classpath. */
  public static StaticFiles resources(String prefix, ClassLoader loader, Options o) {
    String p = prefix == null ? "" : prefix;
    while (p.startsWith("/")) p = p.substring(1);
    while (p.endsWith("/")) p = p.substring(0, p.length() - 1);
    try {
      return new StaticFiles(null, p, loader, o);
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public Object invoke(Object request) {
    return respond((IPersistentMap) request);
  }

  @Override
  public Object invoke(Object request, Object respond, Object raise) {
    Object r;
    try {
      r = respond((IPersistentMap) request);
    } catch (Throwable t) {
      return ((IFn) raise).invoke(t);
    }
    return ((IFn) respond).invoke(r);
  }

  /** A file found for a request: on disk ({@link #path}) or a classpath resource. */
  private static final class Found {
    final Path path;
    final URL url;
    final String name;
    final long length;
    final long modified;

    Found(Path path, URL url, String name, long length, long modified) {
      this.path = path;
      this.url = url;
      this.name = name;
      this.length = length;
      this.modified = modified;
    }

    String etag(String suffix) {
      return "\"" + Long.toHexString(length) + "-" + Long.toHexString(modified) + suffix + "\"";
    }

    InputStream open(long offset, long count) throws IOException {
      if (path != null) {
        FileChannel ch = FileChannel.open(path, StandardOpenOption.READ);
        ch.position(offset);
        return new Bounded(Channels.newInputStream(ch), count);
      }
      URLConnection c = url.openConnection();
      c.setUseCaches(false);
      InputStream in = c.getInputStream();
      in.skipNBytes(offset);
      return new Bounded(in, count);
    }
  }

  /** The Ring response for {@code req}. */
  IPersistentMap respond(IPersistentMap req) {
    Object method = req.valAt(METHOD);
    if (method != GET && method != HEAD) {
      return answer(405, "Method Not Allowed", "Allow", "GET, HEAD");
    }
    String uri = String.valueOf(req.valAt(URI));
    if (!uri.startsWith(urlPrefix)
        || uri.length() > urlPrefix.length() && uri.charAt(urlPrefix.length()) != '/') {
      return answer(404, "Not Found");
    }
    String rest = uri.substring(urlPrefix.length());
    List<String> segments;
    try {
      segments = StaticPath.segments(rest, hidden);
    } catch (StaticPath.Refused r) {
      return answer(r.status, r.getMessage());
    }
    // (the mount point itself is a directory asked for without its slash, unless it is "/")
    boolean slash = rest.endsWith("/") || rest.isEmpty() && urlPrefix.isEmpty();
    Found f;
    try {
      f = find(segments, slash);
    } catch (Redirect r) {
      Object q = req.valAt(QUERY);
      String to = uri + "/" + (q != null ? "?" + q : "");
      return response(301, headers("Location", to, "Content-Type", "text/plain; charset=utf-8"),
          "Moved Permanently");
    } catch (IOException e) {
      f = null;
    }
    if (f == null) return answer(404, "Not Found");
    return serve(f, req, method == HEAD);
  }

  /** Signals a directory asked for without its trailing slash. */
  private static final class Redirect extends Exception {
    Redirect() {
      super(null, null, false, false);
    }
  }

  private Found find(List<String> segments, boolean slash) throws IOException, Redirect {
    return root != null ? findFile(segments, slash) : findResource(segments, slash);
  }

  private Found findFile(List<String> segments, boolean slash) throws IOException, Redirect {
    Path p = root;
    for (String s : segments) p = p.resolve(s);
    p = p.normalize();
    if (!p.startsWith(root)) return null;
    BasicFileAttributes a = attributes(p);
    if (a == null) return null;
    if (a.isDirectory()) {
      if (!slash) {
        for (String index : indexFiles) {
          if (attributes(p.resolve(index)) != null) throw new Redirect();
        }
        return null;
      }
      for (String index : indexFiles) {
        Path ip = p.resolve(index);
        BasicFileAttributes ia = attributes(ip);
        if (ia != null && ia.isRegularFile()) return found(ip, ia);
      }
      return null;
    }
    return a.isRegularFile() && !slash ? found(p, a) : null;
  }

  private Found found(Path p, BasicFileAttributes a) {
    return new Found(p, null, p.getFileName().toString(), a.size(),
        a.lastModifiedTime().toMillis());
  }

  /**
   * The attributes of {@code p} when it may be served (null when it does not exist, cannot be
   * read, or leads out of the root through a link that is not allowed). Without
   * {@code :allow-symlinks?}, {@code p} itself is looked at without following a link (a link
   * is resolved and checked), and its directory's real path is checked once a second at most
   * ({@link #inRoot}): a real path costs a system call per component of the path.
   */
  private BasicFileAttributes attributes(Path p) throws IOException {
    try {
      if (followSymlinks) return Files.readAttributes(p, BasicFileAttributes.class);
      BasicFileAttributes a = Files.readAttributes(p, BasicFileAttributes.class,
          LinkOption.NOFOLLOW_LINKS);
      if (a.isSymbolicLink()) {
        if (!p.toRealPath().startsWith(realRoot)) return null;
        a = Files.readAttributes(p, BasicFileAttributes.class);
      }
      if (p.equals(root)) return a;
      Path dir = p.getParent();
      return dir != null && inRoot(dir) ? a : null;
    } catch (NoSuchFileException | java.nio.file.AccessDeniedException e) {
      return null;
    }
  }

  /**
   * Whether the file at {@code p} (a regular file, as its attributes said) can be read: one
   * system call, which spares the response writer its two ({@link CheckedFile}).
   */
  private static boolean readable(Path p) {
    return Files.isReadable(p);
  }

  /** Directories whose real path was found inside the root, and when (System.nanoTime()). */
  private final java.util.concurrent.ConcurrentHashMap<Path, Long> checkedDirs =
      new java.util.concurrent.ConcurrentHashMap<>();
  private static final long RECHECK_NANOS = 1_000_000_000L;
  private static final int MAX_CHECKED_DIRS = 4096;

  /** Whether the directory {@code dir} really lies under the root, links resolved. */
  private boolean inRoot(Path dir) throws IOException {
    long now = System.nanoTime();
    Long at = checkedDirs.get(dir);
    if (at != null && now - at < RECHECK_NANOS) return true;
    if (!dir.toRealPath().startsWith(realRoot)) {
      checkedDirs.remove(dir);
      return false;
    }
    if (checkedDirs.size() >= MAX_CHECKED_DIRS) checkedDirs.clear();
    checkedDirs.put(dir, now);
    return true;
  }

  private Found findResource(List<String> segments, boolean slash) throws IOException, Redirect {
    String name = String.join("/", segments);
    String base = resourcePrefix.isEmpty() ? name
        : name.isEmpty() ? resourcePrefix : resourcePrefix + "/" + name;
    if (!slash && !name.isEmpty()) {
      Found f = resource(base);
      if (f != null) return f;
    }
    for (String index : indexFiles) {
      Found f = resource(base.isEmpty() ? index : base + "/" + index);
      if (f != null) {
        if (!slash) throw new Redirect();
        return f;
      }
    }
    return null;
  }

  private Found resource(String name) throws IOException {
    URL url = loader.getResource(name);
    if (url == null) return null;
    if ("file".equals(url.getProtocol())) {
      Path p;
      try {
        p = Path.of(url.toURI());
      } catch (java.net.URISyntaxException | IllegalArgumentException e) {
        return null;
      }
      BasicFileAttributes a = Files.readAttributes(p, BasicFileAttributes.class);
      return a.isRegularFile() ? found(p, a) : null;
    }
    URLConnection c = url.openConnection();
    c.setUseCaches(false);
    if (c instanceof JarURLConnection) {
      java.util.jar.JarEntry e = ((JarURLConnection) c).getJarEntry();
      if (e == null || e.isDirectory()) return null;
      long modified = e.getTime() < 0 ? 0 : e.getTime();
      return new Found(null, url, name.substring(name.lastIndexOf('/') + 1), e.getSize(),
          modified);
    }
    long length = c.getContentLengthLong();
    if (length < 0) return null;
    return new Found(null, url, name.substring(name.lastIndexOf('/') + 1), length,
        Math.max(0, c.getLastModified()));
  }

  private IPersistentMap serve(Found f, IPersistentMap req, boolean head) {
    IPersistentMap h = (IPersistentMap) req.valAt(HEADERS);
    String range = header(h, "range");
    // a precompressed sibling, when no range is asked for: ranges are of the file itself
    String coding = null;
    Found chosen = f;
    boolean siblings = false;
    if (precompressed && f.path != null && !knownAlone(f)) {
      String accept = header(h, "accept-encoding");
      for (String c : new String[] {"br", "gzip"}) {
        Found s = sibling(f, c.equals("br") ? ".br" : ".gz");
        if (s == null) continue;
        siblings = true;
        if (coding == null && range == null && AcceptEncoding.accepts(accept, c)) {
          coding = c;
          chosen = s;
        }
      }
      if (!siblings) alone(f);
    }
    String etag = f.etag(coding == null ? "" : "-" + coding);
    long modifiedS = f.modified / 1000;
    String lastModified = httpDate(modifiedS);
    List<String> out = new ArrayList<>(16);
    add(out, "ETag", etag);
    add(out, "Last-Modified", lastModified);
    if (cacheControl != null) add(out, "Cache-Control", cacheControl);
    if (siblings) add(out, "Vary", "Accept-Encoding");

    // RFC 9110 13.2.2: the preconditions in their order
    String ifMatch = header(h, "if-match");
    if (ifMatch != null) {
      if (!matches(ifMatch, etag, true)) return status(412, out);
    } else {
      long since = date(header(h, "if-unmodified-since"));
      if (since != Long.MIN_VALUE && modifiedS > since) return status(412, out);
    }
    String ifNoneMatch = header(h, "if-none-match");
    if (ifNoneMatch != null) {
      if (matches(ifNoneMatch, etag, false)) return status(304, out);
    } else {
      long since = date(header(h, "if-modified-since"));
      if (since != Long.MIN_VALUE && modifiedS <= since) return status(304, out);
    }

    add(out, "Content-Type", types.of(f.name));
    if (coding != null) add(out, "Content-Encoding", coding);
    if (coding == null) add(out, "Accept-Ranges", "bytes");
    if (range != null && !head && coding == null && ifRange(header(h, "if-range"), etag,
        lastModified)) {
      long[] r = ByteRange.single(range, f.length, MAX_RANGES);
      if (r == ByteRange.UNSATISFIABLE) {
        add(out, "Content-Range", "bytes */" + f.length);
        return response(416, map(out), null);
      }
      if (r != null) {
        add(out, "Content-Range", "bytes " + r[0] + "-" + r[1] + "/" + f.length);
        long count = r[1] - r[0] + 1;
        add(out, "Content-Length", Long.toString(count));
        try {
          return response(206, map(out), chosen.open(r[0], count));
        } catch (IOException e) {
          return answer(404, "Not Found");
        }
      }
    }
    if (chosen.path != null) {
      return response(200, map(out), readable(chosen.path)
          ? new CheckedFile(chosen.path.toString()) : chosen.path.toFile());
    }
    add(out, "Content-Length", Long.toString(chosen.length));
    try {
      return response(200, map(out), chosen.open(0, chosen.length));
    } catch (IOException e) {
      return answer(404, "Not Found");
    }
  }

  /** Files found without precompressed siblings, and when (System.nanoTime()). */
  private final java.util.concurrent.ConcurrentHashMap<Path, Long> noSiblings =
      new java.util.concurrent.ConcurrentHashMap<>();

  /**
   * Whether {@code f} has no precompressed sibling, as last seen less than a second ago: two
   * file look-ups a request saved for the common case.
   */
  private boolean knownAlone(Found f) {
    Long at = noSiblings.get(f.path);
    return at != null && System.nanoTime() - at < RECHECK_NANOS;
  }

  private void alone(Found f) {
    if (noSiblings.size() >= MAX_CHECKED_DIRS) noSiblings.clear();
    noSiblings.put(f.path, System.nanoTime());
  }

  /** The precompressed sibling of {@code f} ({@code name.gz}), when it is a file to serve. */
  private Found sibling(Found f, String ext) {
    Path p = f.path.resolveSibling(f.path.getFileName() + ext);
    // the common case, no sibling, without the exception a missing file's attributes throw
    if (!p.toFile().isFile()) return null;
    try {
      BasicFileAttributes a = attributes(p);
      return a != null && a.isRegularFile() ? found(p, a) : null;
    } catch (IOException e) {
      return null;
    }
  }

  /**
   * Whether an {@code If-Range} lets the range apply (RFC 9110 13.1.5): none, a strong ETag
   * equal to the file's, or a date equal to its Last-Modified.
   */
  private static boolean ifRange(String ifRange, String etag, String lastModified) {
    if (ifRange == null) return true;
    String v = ifRange.trim();
    if (v.startsWith("\"")) return v.equals(etag);
    if (v.startsWith("W/")) return false;
    return v.equals(lastModified);
  }

  /**
   * Whether an If-Match or If-None-Match list names {@code etag}: {@code *}, or an entity tag
   * equal to it, strongly (If-Match) or weakly ({@code W/} ignored, If-None-Match).
   */
  static boolean matches(String list, String etag, boolean strong) {
    String v = list.trim();
    if (v.equals("*")) return true;
    int i = 0;
    int n = v.length();
    while (i < n) {
      while (i < n && (v.charAt(i) == ',' || v.charAt(i) == ' ' || v.charAt(i) == '\t')) i++;
      if (i >= n) break;
      boolean weak = false;
      if (v.startsWith("W/", i)) {
        weak = true;
        i += 2;
      }
      if (i >= n || v.charAt(i) != '"') return false; // not a list of entity tags
      int close = v.indexOf('"', i + 1);
      if (close < 0) return false;
      String tag = v.substring(i, close + 1);
      if (tag.equals(etag) && !(strong && weak)) return true;
      i = close + 1;
    }
    return false;
  }

  /** Formatted modification times: a site's files share few, and formatting one is not free. */
  private final java.util.concurrent.ConcurrentHashMap<Long, String> dates =
      new java.util.concurrent.ConcurrentHashMap<>();

  private String httpDate(long seconds) {
    String d = dates.get(seconds);
    if (d == null) {
      d = HTTP_DATE.format(Instant.ofEpochSecond(seconds));
      if (dates.size() >= MAX_CHECKED_DIRS) dates.clear();
      dates.put(seconds, d);
    }
    return d;
  }

  /** An HTTP date in seconds since the epoch, or Long.MIN_VALUE when absent or not a date. */
  static long date(String v) {
    if (v == null) return Long.MIN_VALUE;
    String s = v.trim();
    for (DateTimeFormatter f : new DateTimeFormatter[] {HTTP_DATE, RFC_850, ASCTIME}) {
      try {
        return ZonedDateTime.parse(s, f).toEpochSecond();
      } catch (DateTimeParseException e) {
        // the next format
      }
    }
    return Long.MIN_VALUE;
  }

  private static String header(IPersistentMap h, String name) {
    if (h == null) return null;
    Object v = h.valAt(name);
    return v == null ? null : v.toString();
  }

  private static void add(List<String> out, String name, String value) {
    out.add(name);
    out.add(value);
  }

  private static IPersistentMap map(List<String> kv) {
    return PersistentArrayMap.createAsIfByAssoc(kv.toArray());
  }

  private static IPersistentMap headers(String... kv) {
    return PersistentArrayMap.createAsIfByAssoc(kv);
  }

  private static IPersistentMap status(int status, List<String> out) {
    return response(status, map(out), null);
  }

  private static IPersistentMap answer(int status, String text, String... extra) {
    List<String> kv = new ArrayList<>(4);
    add(kv, "Content-Type", "text/plain; charset=utf-8");
    for (int i = 0; i + 1 < extra.length; i += 2) add(kv, extra[i], extra[i + 1]);
    return response(status, map(kv), text);
  }

  private static IPersistentMap response(int status, IPersistentMap headers, Object body) {
    return PersistentArrayMap.createAsIfByAssoc(new Object[] {
        STATUS, (long) status, HEADERS, headers, BODY, body});
  }
}
