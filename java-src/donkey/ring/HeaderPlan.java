package donkey.ring;

import clojure.lang.IPersistentCollection;
import clojure.lang.IPersistentMap;
import clojure.lang.ISeq;
import clojure.lang.RT;
import donkey.codec.ContentType;
import donkey.codec.Json;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpHeaders;
import java.nio.charset.Charset;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * What the response writer needs to know of a handler's {@code :headers}: whether it set a
 * framing header, and its {@code Content-Type}. A {@code :headers} map seen again (the same
 * object: a constant map in the handler's code, as most are) is compiled once into a plan whose
 * lines are pre-validated and pre-encoded, then written without looking at the Clojure map at
 * all; and a fixed response written with it twice alike (same body length, Date, Server) gets
 * its whole head as one shared read-only header block ({@link #block}).
 *
 * <p>The blocks rely on a property of Vert.x 5's HTTP/1.x header map: {@code setAll} of a
 * read-only copy shares its lines until the first change. That is why clearing such a map goes
 * through {@link #clear}.
 *
 * <p>Threading: immutable apart from the racy caches ({@link #PLANS}, the blocks, the
 * Content-Length values), whose entries are immutable and equal whichever thread made them;
 * any thread.
 */
final class HeaderPlan {
  /** The plan of a response without {@code :headers}. */
  static final HeaderPlan NONE = new HeaderPlan(null, null, false, false, false, null, null,
      false);

  /** The {@code Content-Type} the kernel gives a JSON body when the handler set none. */
  static final CharSequence JSON_TYPE = HttpHeaders.createOptimized(Json.CONTENT_TYPE);

  /** A compiled plan's header lines, in order; null for a plan made for one response. */
  final CharSequence[] names;
  final CharSequence[] values;
  /**
   * The same lines as an HTTP/2 header block takes them ({@link #forHttp2}): names in lower
   * case, made once here rather than by Vert.x on every response, and no connection-specific
   * field.
   */
  private final CharSequence[] h2Names;
  private final CharSequence[] h2Values;
  /** True when the handler set {@code Content-Length} or {@code Transfer-Encoding}. */
  final boolean framing;
  /** True when a {@code Connection} line lists {@code close}: the connection's last answer. */
  final boolean closes;
  final boolean hasDate;
  final boolean hasServer;
  /** The handler's Content-Type, or null. */
  final String contentType;
  /** The charset of {@link #contentType}, worked out once for a compiled plan, else null. */
  private final Charset charset;
  /**
   * A compiled plan's {@link Block}s, direct-mapped by body length, JSON flag and Server
   * value; null for a plan made for one response. Racy: see {@link Block}.
   */
  private final Block[] blocks;

  private HeaderPlan(CharSequence[] names, CharSequence[] values, boolean framing,
                     boolean hasDate, boolean hasServer, String contentType, Charset charset,
                     boolean closes) {
    this.names = names;
    this.values = values;
    int n = 0;
    if (names != null) {
      for (CharSequence name : names) n += isConnectionField(name) ? 0 : 1;
    }
    this.h2Names = names == null ? null : new CharSequence[n];
    this.h2Values = names == null ? null : new CharSequence[n];
    for (int i = 0, j = 0; names != null && i < names.length; i++) {
      if (isConnectionField(names[i])) continue;
      h2Names[j] = HttpHeaders.createOptimized(names[i].toString().toLowerCase(Locale.ROOT));
      h2Values[j++] = values[i];
    }
    this.framing = framing;
    this.closes = closes;
    this.hasDate = hasDate;
    this.hasServer = hasServer;
    this.contentType = contentType;
    this.charset = charset;
    this.blocks = names == null ? null : new Block[BLOCKS];
  }

  /**
   * The plan of headers applied for one response: its {@link HeaderLines#apply} flags and
   * Content-Type.
   */
  static HeaderPlan applied(int flags, String contentType) {
    return new HeaderPlan(null, null, (flags & HeaderLines.FRAMING) != 0, false, false,
        contentType, null, (flags & HeaderLines.CLOSE) != 0);
  }

  /** The charset a String body is encoded with: that of the Content-Type, else UTF-8. */
  Charset charset() {
    return charset != null ? charset : ContentType.responseCharset(contentType);
  }

  // ---- compiled plans ---------------------------------------------------------------------

  /** Compiled plans of recently seen {@code :headers} maps (or {@link #NOT_COMPILED}). */
  private static final SeenTwiceCache PLANS = new SeenTwiceCache(256);
  /** The value kept for a map whose values are not all constant text: never compiled. */
  private static final Object NOT_COMPILED = new Object();

  /**
   * The compiled plan of {@code headers} when it was seen before and can have one, else null.
   * Once per response: a second call would count the map as seen twice.
   */
  static HeaderPlan of(IPersistentMap headers) {
    Object v = PLANS.get(headers);
    if (v == SeenTwiceCache.SEEN_ONCE) {
      v = constantValues(headers) ? compile(headers) : NOT_COMPILED;
      PLANS.put(headers, v);
    }
    return v instanceof HeaderPlan ? (HeaderPlan) v : null;
  }

  /**
   * True when every value of {@code headers} is a String, nil, or a persistent collection of
   * Strings: values whose text cannot change, so a plan made of them stays true. (A value of
   * another type is written with its current {@code toString} each time, uncached.)
   */
  private static boolean constantValues(IPersistentMap headers) {
    for (ISeq s = headers.seq(); s != null; s = s.next()) {
      Object v = ((Map.Entry<?, ?>) s.first()).getValue();
      if (v == null || v instanceof String) continue;
      if (!(v instanceof IPersistentCollection)) return false;
      for (ISeq m = RT.seq(v); m != null; m = m.next()) {
        if (!(m.first() instanceof String)) return false;
      }
    }
    return true;
  }

  /**
   * Compiles a {@code :headers} map into the lines {@link HeaderLines#apply} would set, by
   * applying it once to a scratch header map. Throws as that does.
   */
  static HeaderPlan compile(IPersistentMap headers) {
    MultiMap lines = HttpHeaders.headers();
    int flags = HeaderLines.apply(lines, headers);
    List<Map.Entry<String, String>> entries = lines.entries();
    CharSequence[] names = new CharSequence[entries.size()];
    CharSequence[] values = new CharSequence[entries.size()];
    for (int i = 0; i < names.length; i++) {
      names[i] = HttpHeaders.createOptimized(entries.get(i).getKey());
      values[i] = encoded(entries.get(i).getValue());
    }
    String contentType = lines.get(HttpHeaders.CONTENT_TYPE);
    return new HeaderPlan(names, values, (flags & HeaderLines.FRAMING) != 0,
        lines.contains(HttpHeaders.DATE), lines.contains(HttpHeaders.SERVER), contentType,
        ContentType.responseCharset(contentType), (flags & HeaderLines.CLOSE) != 0);
  }

  /** An ASCII value pre-encoded (Vert.x copies its bytes); others stay Strings, sent as now. */
  private static CharSequence encoded(String v) {
    for (int i = 0; i < v.length(); i++) {
      if (v.charAt(i) >= 128) return v;
    }
    return HttpHeaders.createOptimized(v);
  }

  /**
   * Adds a compiled plan's lines to an empty header map, after Date and Server; to an HTTP/2
   * response's, as {@link #forHttp2} has them.
   */
  void addLines(MultiMap out, CharSequence date, CharSequence server) {
    if (date != null && !hasDate) out.add(HttpHeaders.DATE, date);
    if (server != null && !hasServer) out.add(HttpHeaders.SERVER, server);
    boolean h2 = forHttp2(out);
    CharSequence[] ns = h2 ? h2Names : names;
    CharSequence[] vs = h2 ? h2Values : values;
    for (int i = 0; i < ns.length; i++) out.add(ns[i], vs[i]);
  }

  // ---- HTTP/2 header blocks ---------------------------------------------------------------

  /**
   * True when {@code out} is an HTTP/2 response's header map (any but Vert.x's HTTP/1.x one):
   * its names go out in lower case, and it carries no connection-specific field (RFC 9113
   * 8.2.2: a client treats a response with one as malformed).
   */
  static boolean forHttp2(MultiMap out) {
    return out.getClass() != SHARING_HEADERS;
  }

  /** The fields HTTP/2 does not carry (RFC 9113 8.2.2), in lower case. */
  private static final CharSequence[] CONNECTION_FIELDS = {HttpHeaders.CONNECTION,
      HttpHeaders.createOptimized("keep-alive"), HttpHeaders.createOptimized("proxy-connection"),
      HttpHeaders.TRANSFER_ENCODING, HttpHeaders.createOptimized("upgrade")};

  private static boolean isConnectionField(CharSequence name) {
    for (CharSequence f : CONNECTION_FIELDS) {
      if (io.netty.util.AsciiString.contentEqualsIgnoreCase(f, name)) return true;
    }
    return false;
  }

  /** Removes the connection-specific fields from an HTTP/2 response's header map. */
  static void dropConnectionFields(MultiMap out) {
    for (CharSequence f : CONNECTION_FIELDS) out.remove(f);
  }

  /**
   * Adds a fixed response's whole head to an empty header map: {@link #addLines}, the JSON
   * Content-Type when {@code json}, and the Content-Length of a {@code length}-byte body.
   */
  void addHead(MultiMap out, CharSequence date, CharSequence server, int length, boolean json) {
    addLines(out, date, server);
    if (json) out.add(HttpHeaders.CONTENT_TYPE, JSON_TYPE);
    out.add(HttpHeaders.CONTENT_LENGTH, contentLength(length));
  }

  // ---- shared header blocks ---------------------------------------------------------------

  /** Slots of {@link #block}'s table, per compiled plan (a power of two). */
  private static final int BLOCKS = 8;

  /**
   * A fixed response's whole header block (Date, Server, the plan's lines, the JSON
   * Content-Type when added, Content-Length) as a read-only Vert.x header map, validated once
   * when made. {@code setAll} of it into a response's empty header map shares its lines until
   * the first change, which copies them (Vert.x changes such a response only to add a
   * {@code Connection} header), so the response skips four or five validated, hashed,
   * allocating {@code add}s; the encoder writes the same bytes.
   *
   * <p>Immutable: written racily into {@link #blocks} and safe to read from any thread through
   * its final fields; the read-only map is only ever read.
   */
  private static final class Block {
    final CharSequence date;
    final CharSequence server;
    final int length;
    final boolean json;
    /** The lines, or null for a key seen once. */
    final MultiMap lines;

    Block(CharSequence date, CharSequence server, int length, boolean json, MultiMap lines) {
      this.date = date;
      this.server = server;
      this.length = length;
      this.json = json;
      this.lines = lines;
    }
  }

  /**
   * The read-only header block of a fixed response written with this compiled plan, the
   * given Date and Server values, a body of {@code length} bytes and, when {@code json}, the
   * JSON Content-Type: made the second time in a row its slot sees this key (at once when
   * only the Date has changed since the slot's block was made), else null and the key is
   * remembered. Any thread.
   */
  MultiMap block(CharSequence date, CharSequence server, int length, boolean json) {
    Block[] bs = blocks;
    int i = (length * 2 + (json ? 1 : 0) + (server == null ? 0 : server.hashCode()))
        & (BLOCKS - 1);
    Block b = bs[i];
    if (b != null && b.length == length && b.json == json && sameText(b.server, server)) {
      boolean sameDate = b.date == date;
      if (sameDate && b.lines != null) return b.lines;
      if (sameDate || b.lines != null) {
        // seen twice, or a block of a constant response whose Date has moved on
        MultiMap lines = HttpHeaders.headers();
        addHead(lines, date, server, length, json);
        lines = lines.copy(false);
        bs[i] = new Block(date, server, length, json, lines);
        return lines;
      }
    }
    bs[i] = new Block(date, server, length, json, null);
    return null;
  }

  /** True when {@code a} and {@code b} are both null or hold the same characters. */
  private static boolean sameText(CharSequence a, CharSequence b) {
    return a == b || a != null && b != null && io.netty.util.AsciiString.contentEquals(a, b);
  }

  /**
   * The class of the header maps Vert.x gives HTTP/1.x responses, whose {@code setAll} of a
   * read-only copy shares its lines: other header maps (HTTP/2) are written line by line.
   */
  private static final Class<?> SHARING_HEADERS = HttpHeaders.headers().getClass();

  /** A read-only empty header map: see {@link #clear}. */
  private static final MultiMap NO_HEADERS = HttpHeaders.headers().copy(false);

  /** True when blocks can be shared into {@code out}: an empty HTTP/1.x header map. */
  static boolean takesBlocks(MultiMap out) {
    return out.getClass() == SHARING_HEADERS && out.isEmpty();
  }

  /**
   * Removes every line of {@code h}. Not {@code h.clear()}: Vert.x 5.1's header map clears a
   * map sharing a read-only block's lines without forgetting the block, and copies the block's
   * lines back in on the next change. {@code setAll} of an empty read-only map replaces the
   * shared lines with none.
   */
  static void clear(MultiMap h) {
    if (h.getClass() == SHARING_HEADERS) {
      h.setAll(NO_HEADERS);
    } else {
      h.clear();
    }
  }

  // ---- Content-Length values --------------------------------------------------------------

  /**
   * {@code Content-Length} values of short bodies, made on first use: Vert.x copies a
   * pre-encoded value's bytes, where a String value is checked and encoded char by char.
   * Racy and benign: a slot is null or a value equal to any other thread's.
   */
  private static final CharSequence[] LENGTHS = new CharSequence[2048];

  /** The {@code Content-Length} value for a body of {@code n} bytes. */
  static CharSequence contentLength(int n) {
    if (n >= LENGTHS.length) return Integer.toString(n);
    CharSequence v = LENGTHS[n];
    if (v == null) {
      v = HttpHeaders.createOptimized(Integer.toString(n));
      LENGTHS[n] = v;
    }
    return v;
  }
}
