package donkey.kernel.compression;

import donkey.kernel.config.ServerConfig;
import io.netty.handler.codec.compression.Brotli;
import io.netty.handler.codec.compression.CompressionOptions;
import io.netty.handler.codec.compression.StandardCompressionOptions;
import io.netty.handler.codec.compression.Zstd;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerOptions;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * Which responses are compressed. The compressing is Vert.x's (Netty's encoders, chosen by the
 * request's {@code Accept-Encoding} with its q-values, and skipped for HEAD, 1xx, 204, 304 and
 * fixed bodies under {@code :compression-min-size}); this class only says, per response, whether
 * it may be: a media type on the list, no {@code Content-Encoding} of the handler's own, no
 * range, a route that allows it. A response that may be gets {@code Vary: Accept-Encoding}
 * (whether or not this client's request was compressed: a cache keeps both); one that may not
 * gets {@code Content-Encoding: identity}, which tells Vert.x's compressor to leave it alone and
 * which Vert.x removes before sending.
 *
 * <p>{@code text/event-stream} is never compressed unless listed by its exact name: a
 * compressor between an event and the client is where EventSource streams usually stall.
 *
 * <p>Immutable; {@link #mark} runs on whichever thread writes a response's head.
 */
public final class ResponseCompression {
  /**
   * Text formats worth compressing; already-compressed media (images other than SVG and icons,
   * audio, video, archives, WOFF fonts) are left out.
   */
  public static final List<String> DEFAULT_TYPES = List.of(
      "text/*", "+json", "+xml", "application/json", "application/javascript",
      "application/x-javascript", "application/ecmascript", "application/xml",
      "application/x-www-form-urlencoded", "application/graphql", "application/yaml",
      "application/x-yaml", "application/toml", "application/x-ndjson", "application/wasm",
      "application/vnd.ms-fontobject", "font/ttf", "font/otf", "font/collection",
      "image/x-icon", "image/vnd.microsoft.icon", "image/bmp");

  private static final String EVENT_STREAM = "text/event-stream";
  private static final CharSequence IDENTITY = HttpHeaders.createOptimized("identity");
  private static final CharSequence ACCEPT_ENCODING = HttpHeaders.createOptimized(
      "Accept-Encoding");

  private final Set<String> exact = new HashSet<>();
  /** {@code type/} of each {@code type/*} entry; {@code ""} for {@code * /*}. */
  private final List<String> prefixes = new ArrayList<>();
  /** {@code +suffix} entries. */
  private final Set<String> suffixes = new HashSet<>();

  private ResponseCompression(Collection<String> types) {
    for (String t : types) {
      String m = t == null ? "" : t.trim().toLowerCase(Locale.ROOT);
      if (m.equals("*/*")) {
        prefixes.add("");
      } else if (m.length() > 1 && m.charAt(0) == '+' && token(m, 1, m.length())) {
        suffixes.add(m);
      } else {
        int slash = m.indexOf('/');
        if (slash <= 0 || !token(m, 0, slash)) throw badType(t);
        if (m.length() == slash + 2 && m.charAt(slash + 1) == '*') {
          prefixes.add(m.substring(0, slash + 1));
        } else if (token(m, slash + 1, m.length())) {
          exact.add(m);
        } else {
          throw badType(t);
        }
      }
    }
  }

  /**
   * Start-up: the policy of {@code cfg}'s compression options, or null when
   * {@code :compression?} is off.
   *
   * @throws IllegalArgumentException naming the entry of {@code :compression-types} that is not
   *     a media type, a {@code type/*} range or a {@code +suffix}
   */
  public static ResponseCompression of(ServerConfig cfg) {
    if (!cfg.compression) return null;
    return new ResponseCompression(cfg.compressionTypes == null ? DEFAULT_TYPES
        : cfg.compressionTypes);
  }

  /**
   * Start-up: turns on Vert.x's response compression when {@code cfg} asks: gzip and deflate
   * at {@code :compression-level}, brotli and zstd before them when their libraries load.
   * (Request bodies are the kernel's to inflate: {@code RequestDecoding}.)
   */
  public static void configure(HttpServerOptions opts, ServerConfig cfg) {
    if (cfg.compression) {
      List<CompressionOptions> encoders = new ArrayList<>(4);
      // (each class is touched only once its library is known to load)
      if (Brotli.isAvailable()) encoders.add(StandardCompressionOptions.brotli());
      if (Zstd.isAvailable()) encoders.add(StandardCompressionOptions.zstd());
      encoders.add(StandardCompressionOptions.gzip(cfg.compressionLevel, 15, 8));
      encoders.add(StandardCompressionOptions.deflate(cfg.compressionLevel, 15, 8));
      opts.setCompressionSupported(true)
          .setCompressors(encoders)
          .setCompressionContentSizeThreshold(cfg.compressionMinSize);
    }
  }

  /**
   * The thread writing a response's head, once its headers are set and before it is written:
   * marks it as compressible ({@code Vary}) or not ({@code Content-Encoding: identity}).
   *
   * @param h the response's headers
   * @param status its status
   * @param head true for a response to HEAD, which carries no body to compress
   * @param allowed false when the route turned compression off
   */
  public void mark(MultiMap h, int status, boolean head, boolean allowed) {
    if (h.contains(HttpHeaders.CONTENT_ENCODING)) return; // the handler's own coding
    if (allowed && status != 206 && !h.contains(HttpHeaders.CONTENT_RANGE)
        && compressible(h.get(HttpHeaders.CONTENT_TYPE))) {
      vary(h);
    } else if (!head && status >= 200 && status != 204 && status != 304) {
      // (Vert.x's compressor does not look at the others, so would not remove the mark)
      h.set(HttpHeaders.CONTENT_ENCODING, IDENTITY);
    }
  }

  /** True when a body of {@code contentType} (a header value, or null) may be compressed. */
  public boolean compressible(String contentType) {
    if (contentType == null) return false;
    int semi = contentType.indexOf(';');
    String m = (semi < 0 ? contentType : contentType.substring(0, semi)).trim()
        .toLowerCase(Locale.ROOT);
    if (exact.contains(m)) return true;
    if (m.equals(EVENT_STREAM)) return false;
    int slash = m.indexOf('/');
    if (slash <= 0) return false;
    for (String p : prefixes) {
      if (m.startsWith(p)) return true;
    }
    int plus = m.lastIndexOf('+');
    return plus > slash && suffixes.contains(m.substring(plus));
  }

  /** Adds Accept-Encoding to the response's Vary, unless it is there or Vary is {@code *}. */
  private static void vary(MultiMap h) {
    List<String> vs = h.getAll(HttpHeaders.VARY);
    if (vs.isEmpty()) {
      h.add(HttpHeaders.VARY, ACCEPT_ENCODING);
      return;
    }
    for (String v : vs) {
      for (String name : v.split(",")) {
        String n = name.trim();
        if (n.equals("*") || n.equalsIgnoreCase("accept-encoding")) return;
      }
    }
    h.add(HttpHeaders.VARY, ACCEPT_ENCODING);
  }

  private static boolean token(String s, int from, int to) {
    if (from >= to) return false;
    for (int i = from; i < to; i++) {
      char c = s.charAt(i);
      boolean ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
          || "!#$&-^_.+".indexOf(c) >= 0;
      if (!ok) return false;
    }
    return true;
  }

  private static IllegalArgumentException badType(String t) {
    return new IllegalArgumentException(":compression-types: " + pr(t) + " is not a media type "
        + "(\"application/json\"), a range (\"text/*\") or a suffix (\"+json\")");
  }

  private static String pr(String s) {
    return s == null ? "nil" : "\"" + s + "\"";
  }
}
