package donkey.ring;

import clojure.lang.IFn;
import clojure.lang.ILookup;
import clojure.lang.IPersistentCollection;
import clojure.lang.IPersistentMap;
import clojure.lang.IRecord;
import clojure.lang.IType;
import clojure.lang.IPersistentVector;
import clojure.lang.ISeq;
import clojure.lang.Keyword;
import clojure.lang.Named;
import clojure.lang.PersistentArrayMap;
import clojure.lang.PersistentHashMap;
import clojure.lang.PersistentVector;
import clojure.lang.RT;
import clojure.lang.Seqable;
import donkey.codec.Json;
import io.vertx.core.MultiMap;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpServerResponse;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Writes a Ring response map to a Vert.x response: the one place that knows every body type
 * of the Ring SPEC.
 *
 * <p>Body types: nil, String (encoded with the charset of {@code Content-Type}, UTF-8 when it
 * names none), byte[], java.io.File (sent with zero-copy), java.io.InputStream (streamed, then
 * closed), ISeq (each element's {@code str}, flushed after each element), and anything
 * {@code ring.core.protocols/StreamableResponseBody} can write when ring-core is loaded.
 * A Clojure map or vector ({@link IPersistentMap} / {@link IPersistentVector}, never an ISeq,
 * which stays Ring's streamed seq) is written as JSON by {@link Json}: serialized whole on the
 * event loop, always UTF-8 (RFC 8259), with an exact {@code Content-Length} and
 * {@code Content-Type: application/json; charset=utf-8} when the handler set no Content-Type.
 * A record or deftype that satisfies {@code StreamableResponseBody} is streamed by the protocol
 * instead; for core maps and vectors the protocol is not consulted.
 *
 * <p>Threading: {@link #writeHead}, {@link #writeFixed} and {@link #fixedBody} run on whichever
 * single thread owns the response at the time (the event loop, or the worker that ran the
 * handler); {@link #stream} blocks and must run on a worker or virtual thread.
 *
 * <p>Bad input: a response that is not a map, a status that is not an integer in 100..999, a
 * header value with CR or LF, a body of an unknown type, or a map/vector body that cannot be
 * written as JSON raises {@link IllegalArgumentException} before anything is sent, so the
 * caller can answer 500.
 */
public final class ResponseWriter {
  public static final Keyword STATUS = Keyword.intern("status");
  public static final Keyword HEADERS = Keyword.intern("headers");
  public static final Keyword BODY = Keyword.intern("body");

  /** How a body is sent. */
  public enum Kind {
    /**
     * Known length, in memory: written at once from the event loop (nil, String, byte[], and
     * map or vector bodies, serialized to JSON there).
     */
    FIXED,
    /** A file: sent by Vert.x without blocking. */
    FILE,
    /** Produced by blocking code: streamed from a worker thread with flow control. */
    STREAM,
    /** A {@link StreamingBody}: the head goes out at once, the application sends chunks later. */
    CHANNEL
  }

  private static final int READ_CHUNK = 32 * 1024;
  private static final CharSequence JSON_TYPE = io.vertx.core.http.HttpHeaders.createOptimized(
      Json.CONTENT_TYPE);

  private ResponseWriter() {}

  /**
   * Classes named by the signatures of methods on the response path, resolved through this
   * class's loader when it is initialized: the JIT does not inline a method whose signature
   * names a class its holder's loader has not resolved yet ("unloaded signature classes"),
   * which kept {@code isCoreJson}, {@code HeaderPlan.charset} and {@code encode} calls on
   * every response (seen in {@code -XX:+LogCompilation}).
   */
  @SuppressWarnings("unused")
  private static final Class<?>[] SIGNATURES = {Class.class, Charset.class, Buffer.class,
      HeaderPlan.class};

  /**
   * Checks that {@code response} is a Ring response map and returns how its body is sent.
   *
   * @param streamablePred {@code (fn [body])} for StreamableResponseBody, or null
   * @throws IllegalArgumentException when it is not a response or the body type is unknown
   */
  public static Kind classify(Object response, IFn streamablePred) {
    if (!(response instanceof IPersistentMap)) {
      throw new IllegalArgumentException("handler returned "
          + (response == null ? "nil" : "a " + response.getClass().getName())
          + ", not a Ring response map");
    }
    // read through the interface just tested (IPersistentMap is an ILookup): a second
    // interface would make the map class's one-entry cache of its last positive interface
    // test alternate, and each miss scans its twenty-odd interfaces (JDK-8180450, before JDK 23)
    Object body = ((IPersistentMap) response).valAt(BODY);
    if (body == null || body instanceof String || body instanceof byte[]) return Kind.FIXED;
    if (isCoreJson(body.getClass())) return Kind.FIXED;
    if (body instanceof File) return Kind.FILE;
    if (body instanceof StreamingBody) return Kind.CHANNEL;
    if (body instanceof InputStream || body instanceof ISeq) return Kind.STREAM;
    if (isJson(body)) {
      // a record or deftype may implement StreamableResponseBody itself, and then that wins;
      // core maps and vectors skip the (slow) protocol check
      if ((body instanceof IRecord || body instanceof IType) && streamablePred != null
          && RT.booleanCast(streamablePred.invoke(body))) {
        return Kind.STREAM;
      }
      return Kind.FIXED;
    }
    if (streamablePred != null && RT.booleanCast(streamablePred.invoke(body))) return Kind.STREAM;
    throw new IllegalArgumentException("unsupported response body type " + body.getClass().getName());
  }

  /**
   * What {@link #writeHead} learnt of the handler's headers that the body writer needs: whether
   * it set a framing header, and its {@code Content-Type}. A {@code :headers} map seen again
   * (the same object: a constant map in the handler's code, as most are) is compiled once into
   * a plan whose header lines are pre-validated and pre-encoded, and is then written without
   * looking at the Clojure map at all.
   *
   * <p>Immutable; shared between threads through {@link #PLANS}.
   */
  public static final class HeaderPlan {
    static final HeaderPlan NONE = new HeaderPlan(null, null, false, false, false, null, null);

    /** A compiled plan's header lines, in order; null for a plan made for one response. */
    final CharSequence[] names;
    final CharSequence[] values;
    final boolean framing;
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

    HeaderPlan(CharSequence[] names, CharSequence[] values, boolean framing, boolean hasDate,
               boolean hasServer, String contentType, Charset charset) {
      this.names = names;
      this.values = values;
      this.framing = framing;
      this.hasDate = hasDate;
      this.hasServer = hasServer;
      this.contentType = contentType;
      this.charset = charset;
      this.blocks = names == null ? null : new Block[BLOCKS];
    }

    /** The charset a String body is encoded with: that of the Content-Type, else UTF-8. */
    Charset charset() {
      return charset != null ? charset : ResponseWriter.charset(contentType);
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
          MultiMap lines = lines(this, date, server, length, json);
          bs[i] = new Block(date, server, length, json, lines);
          return lines;
        }
      }
      bs[i] = new Block(date, server, length, json, null);
      return null;
    }
  }

  /** Slots of {@link HeaderPlan#block}'s table, per compiled plan (a power of two). */
  private static final int BLOCKS = 8;

  /**
   * A fixed response's whole header block (Date, Server, the plan's lines, the JSON
   * Content-Type when added, Content-Length) as a read-only Vert.x header map, validated once
   * when made. {@code setAll} of a read-only map into a response's empty header map shares its
   * lines until its first change, which copies them (Vert.x changes such a response only to
   * add a {@code Connection} header, for a request that closes the connection or an HTTP/1.0
   * keep-alive; HEAD and 304 responses, whose framing it edits, never get a block), so the
   * response skips four or five validated, hashed, allocating {@code add}s; the encoder writes
   * the same bytes.
   *
   * <p>Immutable: written racily into {@link HeaderPlan#blocks} and safe to read from any
   * thread through its final fields; the read-only map is only ever read.
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

  /** True when {@code a} and {@code b} are both null or hold the same characters. */
  private static boolean sameText(CharSequence a, CharSequence b) {
    return a == b || a != null && b != null && io.netty.util.AsciiString.contentEquals(a, b);
  }

  /**
   * The class of the header maps Vert.x gives HTTP/1.x responses, whose {@code setAll} of a
   * read-only copy shares its lines: other header maps (HTTP/2) are written line by line.
   */
  private static final Class<?> SHARING_HEADERS = io.vertx.core.http.HttpHeaders.headers()
      .getClass();

  /** A read-only empty header map: see {@link #clearHeaders}. */
  private static final MultiMap NO_HEADERS = io.vertx.core.http.HttpHeaders.headers().copy(false);

  /**
   * Removes every header of {@code resp}. Not {@code headers().clear()}: Vert.x 5.1's header
   * map clears a map sharing a read-only block's lines ({@link Block}) without forgetting the
   * block, and copies the block's lines back in on the next change. {@code setAll} of an empty
   * read-only map replaces the shared lines with none. The thread that owns the response.
   */
  public static void clearHeaders(HttpServerResponse resp) {
    MultiMap h = resp.headers();
    if (h.getClass() == SHARING_HEADERS) {
      h.setAll(NO_HEADERS);
    } else {
      h.clear();
    }
  }

  /** Compiled plans of recently seen {@code :headers} maps (or {@link #NOT_COMPILED}). */
  private static final SeenTwiceCache PLANS = new SeenTwiceCache(256);
  /** The value kept for a map whose values are not all constant text: never compiled. */
  private static final Object NOT_COMPILED = new Object();

  /**
   * Sets the status and headers of {@code resp} from the Ring response map. The {@code Date}
   * and {@code Server} headers are set first, so the handler's own values replace them.
   *
   * <p>Threading: the event loop, or the thread that has the response when it writes a fixed
   * body directly (Vert.x queues its writes to the loop); the plan cache is thread-safe.
   *
   * @param date the cached HTTP date of the event loop, or null for no Date header
   * @param server the {@code Server} header value, or null for none
   * @return what {@link #fixedBody} needs to know of the headers
   * @throws IllegalArgumentException for a bad status, a header name that is not a token, or
   *     a value with CR, LF or NUL (header injection), before anything is sent
   */
  public static HeaderPlan writeHead(HttpServerResponse resp, IPersistentMap response,
                                     CharSequence date, CharSequence server) {
    status(resp, status(response.valAt(STATUS)));
    return writeHeaders(resp, response, date, server);
  }

  /**
   * Sets the status of {@code resp} unless it already has it: Vert.x's setter takes the
   * connection's lock, its getter does not, and most responses keep the default 200. The
   * thread that owns the response (the event loop when a worker prepared it).
   */
  public static void status(HttpServerResponse resp, int status) {
    if (resp.getStatusCode() != status) resp.setStatusCode(status);
  }

  /**
   * {@link #writeHead} without the status, for a thread that prepares a response the event
   * loop ends: Vert.x sets the status under the connection's lock, which a worker would
   * contend for with the loop (see {@link #status(Object)} to check it there).
   *
   * @throws IllegalArgumentException as {@link #writeHead}, except for the status
   */
  public static HeaderPlan writeHeaders(HttpServerResponse resp, IPersistentMap response,
                                        CharSequence date, CharSequence server) {
    Object headers = response.valAt(HEADERS);
    return writeHeaders(resp.headers(), headers,
        headers instanceof IPersistentMap ? plan((IPersistentMap) headers) : null, date, server);
  }

  /**
   * {@link #writeHeaders} with the {@code :headers} value and its compiled plan (or null)
   * already looked up: {@link #plan} is to be called once per response, as a second call
   * would count the map as seen twice.
   */
  private static HeaderPlan writeHeaders(MultiMap out, Object headers, HeaderPlan plan,
                                         CharSequence date, CharSequence server) {
    if (plan != null && out.isEmpty()) {
      addLines(out, plan, date, server);
      return plan;
    }
    if (date != null) out.set(io.vertx.core.http.HttpHeaders.DATE, date);
    if (server != null) out.set(io.vertx.core.http.HttpHeaders.SERVER, server);
    if (headers == null) return HeaderPlan.NONE;
    boolean framing = apply(out, headers);
    return new HeaderPlan(null, null, framing, false, false,
        out.get(io.vertx.core.http.HttpHeaders.CONTENT_TYPE), null);
  }

  /** Adds a compiled plan's lines to an empty header map, after Date and Server. */
  private static void addLines(MultiMap out, HeaderPlan plan, CharSequence date,
                               CharSequence server) {
    if (date != null && !plan.hasDate) out.add(io.vertx.core.http.HttpHeaders.DATE, date);
    if (server != null && !plan.hasServer) out.add(io.vertx.core.http.HttpHeaders.SERVER, server);
    CharSequence[] names = plan.names;
    CharSequence[] values = plan.values;
    for (int i = 0; i < names.length; i++) out.add(names[i], values[i]);
  }

  /**
   * Adds a fixed response's whole head to an empty header map: {@link #addLines}, the JSON
   * Content-Type when {@code json}, and the Content-Length of a {@code length}-byte body.
   */
  private static void addHead(MultiMap out, HeaderPlan plan, CharSequence date,
                              CharSequence server, int length, boolean json) {
    addLines(out, plan, date, server);
    if (json) out.add(io.vertx.core.http.HttpHeaders.CONTENT_TYPE, JSON_TYPE);
    out.add(io.vertx.core.http.HttpHeaders.CONTENT_LENGTH, contentLength(length));
  }

  /** A {@link Block}'s lines: {@link #addHead} into a new map, made read-only. */
  private static MultiMap lines(HeaderPlan plan, CharSequence date, CharSequence server,
                                int length, boolean json) {
    MultiMap lines = io.vertx.core.http.HttpHeaders.headers();
    addHead(lines, plan, date, server, length, json);
    return lines.copy(false);
  }

  /**
   * Sets the handler's {@code :headers} on {@code out}: names checked, values checked for
   * CR/LF/NUL, a String value set, a seq value one line per element, nil skipped, other values
   * by their {@code toString}; a name set again case-insensitively replaces the earlier one.
   *
   * @return true when the handler set {@code Content-Length} or {@code Transfer-Encoding}
   */
  private static boolean apply(MultiMap out, Object headers) {
    if (!(headers instanceof Map)) {
      throw new IllegalArgumentException(":headers must be a map, got " + headers.getClass().getName());
    }
    boolean framing = false;
    for (Object o : ((Map<?, ?>) headers).entrySet()) {
      Map.Entry<?, ?> e = (Map.Entry<?, ?>) o;
      String name = headerName(e.getKey());
      framing |= isFraming(name);
      Object v = e.getValue();
      if (v instanceof String) {
        out.set(name, checkValue(name, (String) v));
      } else if (v instanceof Iterable || v instanceof ISeq || v instanceof Seqable) {
        out.remove(name);
        for (ISeq s = RT.seq(v); s != null; s = s.next()) {
          out.add(name, checkValue(name, String.valueOf(s.first())));
        }
      } else if (v != null) {
        out.set(name, checkValue(name, v.toString()));
      }
    }
    return framing;
  }

  /** The compiled plan of {@code headers} when it was seen before and can have one, else null. */
  private static HeaderPlan plan(IPersistentMap headers) {
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
   * Compiles a {@code :headers} map into the lines {@link #apply} would set, by applying it
   * once to a scratch header map. Throws as {@link #apply} does.
   */
  static HeaderPlan compile(IPersistentMap headers) {
    MultiMap lines = io.vertx.core.http.HttpHeaders.headers();
    boolean framing = apply(lines, headers);
    List<Map.Entry<String, String>> entries = lines.entries();
    CharSequence[] names = new CharSequence[entries.size()];
    CharSequence[] values = new CharSequence[entries.size()];
    for (int i = 0; i < names.length; i++) {
      names[i] = io.vertx.core.http.HttpHeaders.createOptimized(entries.get(i).getKey());
      values[i] = encoded(entries.get(i).getValue());
    }
    String contentType = lines.get(io.vertx.core.http.HttpHeaders.CONTENT_TYPE);
    return new HeaderPlan(names, values, framing,
        lines.contains(io.vertx.core.http.HttpHeaders.DATE),
        lines.contains(io.vertx.core.http.HttpHeaders.SERVER), contentType, charset(contentType));
  }

  /** An ASCII value pre-encoded (Vert.x copies its bytes); others stay Strings, sent as now. */
  private static CharSequence encoded(String v) {
    for (int i = 0; i < v.length(); i++) {
      if (v.charAt(i) >= 128) return v;
    }
    return io.vertx.core.http.HttpHeaders.createOptimized(v);
  }

  /** True for Content-Length and Transfer-Encoding, which the writer owns for fixed bodies. */
  private static boolean isFraming(String name) {
    return name.length() == 14 && name.equalsIgnoreCase("content-length")
        || name.length() == 17 && name.equalsIgnoreCase("transfer-encoding");
  }

  /**
   * True for the core map and vector classes, which are JSON bodies: an exact class test
   * first, so the common bodies skip the interface checks below (a negative interface check
   * scans every interface a Clojure collection class implements).
   */
  private static boolean isCoreJson(Class<?> c) {
    return c == PersistentArrayMap.class || c == PersistentHashMap.class
        || c == PersistentVector.class;
  }

  /**
   * True for a body written as JSON: a Clojure map or vector that is not a seq. The fixed
   * bodies that are not JSON, String and byte[], are told apart by their exact class first:
   * an {@code instanceof} of an interface that fails is a scan of the object's class's whole
   * interface list on HotSpot before JDK 23 (JDK-8180450), and C2 leaves the scan in when the
   * call site sees more than one body class; for a String body (plaintext) that was two scans
   * per response, 1.2% of the event loop's time in the pipelined plaintext bench.
   */
  static boolean isJson(Object body) {
    if (body == null || body instanceof String || body instanceof byte[]) return false;
    if (isCoreJson(body.getClass())) return true;
    return (body instanceof IPersistentMap || body instanceof IPersistentVector)
        && !(body instanceof ISeq);
  }

  /** Ends {@code resp} with what {@link #writeFixed} or {@link #fixedBody} made (null: no body). */
  public static void end(HttpServerResponse resp, Buffer body) {
    if (body == null) {
      resp.end();
    } else {
      resp.end(body);
    }
  }

  /**
   * Prepares a nil, String, byte[], or map or vector (JSON) body for {@code end}: its bytes
   * (null when nothing is sent), with the framing headers the handler set replaced by the
   * kernel's ({@link Framing}) and the JSON Content-Type added when the handler set none. A map
   * or vector is serialized before anything else is done, so a body that cannot be written
   * throws with the response untouched. Any thread that owns the response; the serialization
   * runs on the calling thread.
   *
   * @param head what {@link #writeHead} returned
   * @param framing {@link Framing#of} the response: for {@link Framing#BODY} the
   *     {@code Content-Length} is the body's (set from a cache of pre-encoded values, so that
   *     Vert.x leaves it alone); otherwise no body is sent and the length is that of
   *     {@link Framing#setBodyless}, HEAD's being the length of the body a GET would get
   * @throws IllegalArgumentException when a map or vector body cannot be written as JSON, or
   *     the body is of no FIXED type
   */
  public static Buffer fixedBody(HttpServerResponse resp, Object body, HeaderPlan head,
                                 int framing) {
    Buffer json = isJson(body) ? Json.writeBuffer(body) : null;
    MultiMap h = resp.headers();
    Buffer b = bytes(body, json, head);
    if (json != null && head.contentType == null) {
      h.set(io.vertx.core.http.HttpHeaders.CONTENT_TYPE, JSON_TYPE);
    }
    if (framing != Framing.BODY) {
      long declared = head.framing ? Framing.parseLength(
          String.valueOf(h.get(io.vertx.core.http.HttpHeaders.CONTENT_LENGTH))) : -1;
      Framing.setBodyless(h, framing, b == null ? -1 : b.length(), declared);
      return null;
    }
    if (head.framing) {
      h.remove(io.vertx.core.http.HttpHeaders.TRANSFER_ENCODING);
      h.remove(io.vertx.core.http.HttpHeaders.CONTENT_LENGTH);
    }
    // (the framing headers are gone: the handler's were removed above, and nothing else sets
    // them before this point, so add, not set)
    h.add(io.vertx.core.http.HttpHeaders.CONTENT_LENGTH, contentLength(length(b)));
    return b;
  }

  /**
   * Sets the headers of a fixed response and returns its body for {@code end}: {@link
   * #writeHeaders} then {@link #fixedBody}, in one step, and without setting the status. A
   * {@code :headers} map with a compiled plan, on an HTTP/1.x response whose headers are still
   * empty and which gets a {@code Content-Length}, is written as one shared read-only block
   * ({@link Block}) once its slot has seen the same plan, Date, Server and body length twice;
   * the lines on the wire are the same either way. The body is made (a map or vector
   * serialized) before any header is set. Any thread that owns the response.
   *
   * @param framing as {@link #fixedBody}
   * @throws IllegalArgumentException as {@link #writeHeaders} and {@link #fixedBody}
   */
  public static Buffer writeFixed(HttpServerResponse resp, IPersistentMap response,
                                  CharSequence date, CharSequence server, int framing) {
    Object headers = response.valAt(HEADERS);
    HeaderPlan plan = headers instanceof IPersistentMap ? plan((IPersistentMap) headers) : null;
    MultiMap out;
    if (plan != null && framing == Framing.BODY && !plan.framing
        && (out = resp.headers()).getClass() == SHARING_HEADERS && out.isEmpty()) {
      Object body = response.valAt(BODY);
      Buffer json = isJson(body) ? Json.writeBuffer(body) : null;
      Buffer b = bytes(body, json, plan);
      boolean jsonType = json != null && plan.contentType == null;
      int length = length(b);
      MultiMap lines = plan.block(date, server, length, jsonType);
      if (lines != null) {
        out.setAll(lines);
      } else {
        addHead(out, plan, date, server, length, jsonType);
      }
      return b;
    }
    HeaderPlan head = writeHeaders(resp.headers(), headers, plan, date, server);
    return fixedBody(resp, response.valAt(BODY), head, framing);
  }

  /**
   * The bytes of a fixed body: null for nil, a String encoded with the plan's charset, a
   * byte[] wrapped, or {@code json} (the body already serialized).
   *
   * @throws IllegalArgumentException for a body of no fixed type
   */
  private static Buffer bytes(Object body, Buffer json, HeaderPlan head) {
    if (body == null) return null;
    if (body instanceof String) return encode((String) body, head.charset());
    if (body instanceof byte[]) return Buffer.buffer((byte[]) body);
    if (json != null) return json;
    throw new IllegalArgumentException("not a fixed response body: " + body.getClass().getName());
  }

  private static int length(Buffer b) {
    return b == null ? 0 : b.length();
  }

  /**
   * {@code Content-Length} values of short bodies, made on first use: Vert.x copies a
   * pre-encoded value's bytes, where a String value is checked and encoded char by char.
   * Racy and benign: a slot is null or a value equal to any other thread's.
   */
  private static final CharSequence[] LENGTHS = new CharSequence[2048];

  /** The {@code Content-Length} value for a body of {@code n} bytes. */
  private static CharSequence contentLength(int n) {
    if (n >= LENGTHS.length) return Integer.toString(n);
    CharSequence v = LENGTHS[n];
    if (v == null) {
      v = io.vertx.core.http.HttpHeaders.createOptimized(Integer.toString(n));
      LENGTHS[n] = v;
    }
    return v;
  }

  /**
   * Recently sent String bodies of up to {@link #CACHED_BODY_CHARS} chars with their bytes, so
   * a constant body (a literal in the handler) is encoded once. Vert.x sends a slice of a
   * Buffer, never the Buffer itself, so one Buffer can be sent any number of times.
   */
  private static final SeenTwiceCache BODIES = new SeenTwiceCache(256);

  private static final class Encoded {
    final Charset charset;
    final Buffer bytes;

    Encoded(Charset charset, Buffer bytes) {
      this.charset = charset;
      this.bytes = bytes;
    }
  }

  /** Longer String bodies are encoded per response: the cache must not pin big bodies. */
  private static final int CACHED_BODY_CHARS = 4096;

  /** {@code s} encoded with {@code cs}; any thread. */
  static Buffer encode(String s, Charset cs) {
    if (s.length() > CACHED_BODY_CHARS) return Buffer.buffer(s.getBytes(cs));
    Object seen = BODIES.get(s);
    if (seen instanceof Encoded && ((Encoded) seen).charset == cs) return ((Encoded) seen).bytes;
    Buffer b = Buffer.buffer(s.getBytes(cs));
    if (seen != null) BODIES.put(s, new Encoded(cs, b)); // seen before: a constant
    return b;
  }

  /**
   * Sends a file body with zero-copy (a HEAD request gets its length and no body; a 204, 205 or
   * 304 is ended without reading the file); a missing or unreadable file raises before
   * sending.
   *
   * @param framing {@link Framing#of} the response
   */
  public static void sendFile(HttpServerResponse resp, File f, int framing) {
    if (!f.isFile() || !f.canRead()) {
      throw new IllegalArgumentException("response body file is not a readable file: " + f);
    }
    MultiMap h = resp.headers();
    if (framing == Framing.BODY || framing == Framing.HEAD) {
      h.remove(io.vertx.core.http.HttpHeaders.TRANSFER_ENCODING);
      h.remove(io.vertx.core.http.HttpHeaders.CONTENT_LENGTH);
      // (Vert.x leaves a HEAD answer's length to us, and sends no body for it)
      if (framing == Framing.HEAD) {
        h.set(io.vertx.core.http.HttpHeaders.CONTENT_LENGTH, Long.toString(f.length()));
      }
      resp.sendFile(f.getPath());
      return;
    }
    long declared = Framing.parseLength(
        String.valueOf(h.get(io.vertx.core.http.HttpHeaders.CONTENT_LENGTH)));
    Framing.setBodyless(h, framing, f.length(), declared);
    resp.end();
  }

  /**
   * Streams an InputStream, ISeq or StreamableResponseBody body, blocking while the client
   * does not read. The head must already be set with {@link #writeHead}. An InputStream body
   * is closed afterwards in every case; nothing is read from it, and an ISeq is not realized,
   * when the response has no body ({@link ResponseOutputStream#discards}).
   *
   * <p>Worker or virtual thread only.
   *
   * @param os the stream over {@code resp}; after a throw, {@link ResponseOutputStream#committed()}
   *     tells whether anything was sent
   * @param bodyCloses true when a StreamableResponseBody ends the response by closing the
   *     stream, which it may hand to another thread (Ring's contract for async handlers);
   *     false to close it when {@code write-body-to-stream} returns (sync handlers)
   * @throws Exception whatever the body or the connection threw
   */
  public static void stream(HttpServerResponse resp, IPersistentMap response,
                            ResponseOutputStream os, IFn streamableWriter, boolean bodyCloses)
      throws Exception {
    Object body = response.valAt(BODY);
    boolean none = os.discards();
    if (body instanceof InputStream) {
      try (InputStream in = (InputStream) body) {
        if (!none) {
          byte[] chunk = new byte[READ_CHUNK];
          for (int n; (n = in.read(chunk)) >= 0; ) {
            if (n > 0) os.write(chunk, 0, n);
          }
        }
      }
      os.close();
    } else if (body instanceof ISeq) {
      if (!none) {
        Charset cs = charset(resp.headers().get(io.vertx.core.http.HttpHeaders.CONTENT_TYPE));
        for (ISeq s = (ISeq) body; s != null; s = s.next()) {
          Object x = s.first();
          if (x != null) os.write(x.toString().getBytes(cs));
          os.flush();
        }
      }
      os.close();
    } else {
      streamableWriter.invoke(body, response, os);
      if (!bodyCloses) os.close();
    }
  }

  /** Closes an InputStream body that will not be sent (an error answered instead). */
  public static void discard(Object response) {
    if (response instanceof ILookup) {
      Object body = ((ILookup) response).valAt(BODY);
      if (body instanceof InputStream) {
        try {
          ((InputStream) body).close();
        } catch (IOException ignored) {
          // nothing more to do with a body nobody will read
        }
      }
    }
  }

  /**
   * The HTTP status of a response's {@code :status} value: 200 for nil. A 1xx status is
   * refused: it is an interim answer, after which HTTP/1.1 expects the final one on the same
   * connection (100 would make the next request's answer this one's; 101 would claim a
   * protocol switch that never happens).
   *
   * @throws IllegalArgumentException when it is not an integer in 200..999
   */
  public static int status(Object s) {
    if (s == null) return 200;
    if (s instanceof Long || s instanceof Integer || s instanceof Short) {
      long v = ((Number) s).longValue();
      if (v >= 200 && v <= 999) return (int) v;
      if (v >= 100 && v < 200) {
        throw new IllegalArgumentException("a response cannot have the interim :status " + v);
      }
    }
    throw new IllegalArgumentException("invalid :status " + s);
  }

  private static String headerName(Object k) {
    // String first, by its exact class: a failing interface test (Named) scans String's
    // interfaces on every header before JDK 23 (see isJson)
    String name = k instanceof String ? (String) k
        : k instanceof Named ? ((Named) k).getName() : String.valueOf(k);
    if (name.isEmpty()) throw new IllegalArgumentException("empty response header name");
    for (int i = 0; i < name.length(); i++) {
      if (!isTokenChar(name.charAt(i))) {
        throw new IllegalArgumentException("invalid response header name " + quote(name));
      }
    }
    return name;
  }

  /** True for a {@code tchar} of RFC 9110 5.6.2, what a field name is made of. */
  private static boolean isTokenChar(char c) {
    if (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') return true;
    return c < 127 && "!#$%&'*+-.^_`|~".indexOf(c) >= 0;
  }

  /**
   * {@code v} when it is a valid field value: no control character but HTAB (CR and LF would
   * inject headers; RFC 9110 5.5 allows none of the others either).
   */
  private static String checkValue(String name, String v) {
    for (int i = 0; i < v.length(); i++) {
      char c = v.charAt(i);
      if (c < ' ' && c != '\t' || c == 0x7f) {
        throw new IllegalArgumentException("response header " + name
            + (c == '\r' || c == '\n' ? " has a CR or LF in its value (header injection refused)"
                : " has a control character in its value"));
      }
    }
    return v;
  }

  private static String quote(String s) {
    return '"' + (s.length() > 64 ? s.substring(0, 64) + "..." : s) + '"';
  }

  /** The charset named by a Content-Type value, UTF-8 when none or unknown. */
  static Charset charset(String contentType) {
    if (contentType == null) return StandardCharsets.UTF_8;
    int i = contentType.toLowerCase(Locale.ROOT).indexOf("charset=");
    if (i < 0) return StandardCharsets.UTF_8;
    int start = i + 8;
    int end = contentType.indexOf(';', start);
    String name = (end < 0 ? contentType.substring(start) : contentType.substring(start, end)).trim();
    if (name.length() >= 2 && name.charAt(0) == '"' && name.charAt(name.length() - 1) == '"') {
      name = name.substring(1, name.length() - 1);
    }
    try {
      return Charset.forName(name);
    } catch (RuntimeException e) {
      return StandardCharsets.UTF_8;
    }
  }
}
