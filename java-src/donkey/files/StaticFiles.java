package donkey.files;

import clojure.lang.AFn;
import clojure.lang.IFn;
import clojure.lang.IPersistentMap;
import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;
import donkey.codec.AcceptEncoding;
import donkey.codec.HttpDates;
import donkey.ring.CheckedFile;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

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
  private final FileLookup files;
  private final String urlPrefix;
  private final String cacheControl;
  private final boolean precompressed;
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
    this.files = new FileLookup(root, resourcePrefix, loader,
        o.indexFiles == null ? new String[0] : o.indexFiles.clone(), o.followSymlinks);
    String p = o.prefix == null ? "" : o.prefix;
    while (p.endsWith("/")) p = p.substring(0, p.length() - 1);
    this.urlPrefix = p;
    this.cacheControl = o.cacheControl;
    this.precompressed = o.precompressed;
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
      f = files.find(segments, slash);
    } catch (FileLookup.Redirect r) {
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

  private IPersistentMap serve(Found f, IPersistentMap req, boolean head) {
    IPersistentMap h = (IPersistentMap) req.valAt(HEADERS);
    String range = header(h, "range");
    // a precompressed sibling, when no range is asked for: ranges are of the file itself
    String coding = null;
    Found chosen = f;
    boolean siblings = false;
    if (precompressed && f.path != null && !files.knownAlone(f)) {
      String accept = header(h, "accept-encoding");
      for (String c : new String[] {"br", "gzip"}) {
        Found s = files.sibling(f, c.equals("br") ? ".br" : ".gz");
        if (s == null) continue;
        siblings = true;
        if (coding == null && range == null && AcceptEncoding.accepts(accept, c)) {
          coding = c;
          chosen = s;
        }
      }
      if (!siblings) files.alone(f);
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
      if (!Validators.matches(ifMatch, etag, true)) return status(412, out);
    } else {
      long since = HttpDates.parse(header(h, "if-unmodified-since"));
      if (since != Long.MIN_VALUE && modifiedS > since) return status(412, out);
    }
    String ifNoneMatch = header(h, "if-none-match");
    if (ifNoneMatch != null) {
      if (Validators.matches(ifNoneMatch, etag, false)) return status(304, out);
    } else {
      long since = HttpDates.parse(header(h, "if-modified-since"));
      if (since != Long.MIN_VALUE && modifiedS <= since) return status(304, out);
    }

    add(out, "Content-Type", types.of(f.name));
    if (coding != null) add(out, "Content-Encoding", coding);
    if (coding == null) add(out, "Accept-Ranges", "bytes");
    if (range != null && !head && coding == null && Validators.ifRange(header(h, "if-range"), etag,
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
      return response(200, map(out), new CheckedFile(chosen.path.toString()));
    }
    add(out, "Content-Length", Long.toString(chosen.length));
    try {
      return response(200, map(out), chosen.open(0, chosen.length));
    } catch (IOException e) {
      return answer(404, "Not Found");
    }
  }

  /** Formatted modification times: a site's files share few, and formatting one is not free. */
  private final java.util.concurrent.ConcurrentHashMap<Long, String> dates =
      new java.util.concurrent.ConcurrentHashMap<>();

  private static final int MAX_DATES = 4096;

  private String httpDate(long seconds) {
    String d = dates.get(seconds);
    if (d == null) {
      d = HttpDates.format(Instant.ofEpochSecond(seconds));
      if (dates.size() >= MAX_DATES) dates.clear();
      dates.put(seconds, d);
    }
    return d;
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
