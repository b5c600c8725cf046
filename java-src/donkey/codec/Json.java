package donkey.codec;

import clojure.lang.IFn;
import clojure.lang.Util;
import com.fasterxml.jackson.core.ErrorReportConfiguration;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.PrettyPrinter;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.core.exc.StreamConstraintsException;
import com.fasterxml.jackson.core.json.JsonWriteFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.ObjectWriter;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.json.JsonMapper;
import io.vertx.core.buffer.Buffer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.text.DateFormat;
import java.util.regex.Pattern;

/**
 * JSON for Clojure data, on Jackson: the kernel's codec, used by the response writer for map and
 * vector bodies and by {@code donkey.middleware.json}.
 *
 * <p><b>Reading</b> ({@code read}, {@code readBody}): one JSON value, with nothing but whitespace
 * after it, becomes Clojure data as {@link ClojureModule} describes: objects persistent maps
 * (string keys, or keywords with {@code keywordKeys}; a repeated key keeps its last value),
 * arrays persistent vectors, integers {@code Long} or exact {@code clojure.lang.BigInt}, decimals
 * {@code Double} or, with {@code bigDecimals}, exact {@code BigDecimal}. The text is UTF-8 (or
 * UTF-16/32, detected, for byte input). An InputStream is read but not closed: the caller owns
 * it.
 *
 * <p><b>Bad input</b>: malformed JSON (a bad literal, truncated input, trailing content, an
 * empty input to {@code read}), input over the parser's limits (nesting deeper than 1000
 * levels, a number longer than 1000 characters, a string over 20,000,000 characters, a name
 * over 50,000), a decimal whose exponent is out of range, an object with more keys than
 * {@code maxKeys} (10,000 unless given) and keys of colliding hashes ({@link JsonReading})
 * raise {@link JsonException}, whose message says what and where without echoing the input or
 * naming the parser's classes, and whose {@link JsonException#status()} is 413 for too many
 * keys, else 400. An I/O failure of the stream itself is an {@link UncheckedIOException}.
 *
 * <p><b>Key functions</b>: {@code readBody} may be given a function that makes each object key
 * from its name, and a {@link JsonWriter} one that names each keyword key. An exception the
 * function throws propagates unchanged (a checked one too), not as a JSON error.
 *
 * <p><b>Writing</b> ({@code writeBytes}, {@code writeString}, {@code writeBuffer}, and a
 * {@link JsonWriter} for other options): UTF-8 JSON, compact unless asked otherwise. A value
 * that cannot be written (an object Jackson has no serializer for, a lazy seq that throws
 * while it is realised, nesting deeper than 1000) raises {@link IllegalArgumentException} with the
 * cause attached; nothing partial is returned.
 *
 * <p><b>Threading</b>: every method may be called from any thread at once. The Jackson
 * {@code JsonFactory}, {@code ObjectMapper} and {@code ObjectWriter}s are built once and shared;
 * they are immutable after construction (Jackson's buffers are recycled per platform thread
 * and shared among virtual threads: {@link RecyclerPools}).
 */
public final class Json {
  /** The Content-Type the kernel and the middleware give JSON they write. */
  public static final String CONTENT_TYPE = "application/json; charset=utf-8";

  private static final JsonFactory FACTORY = newFactory();

  private static final ObjectMapper MAPPER = newMapper(FACTORY);
  private static final ObjectWriter WRITER = MAPPER.writer();
  private static final ObjectWriter PRETTY = WRITER.withDefaultPrettyPrinter();
  private static final ObjectWriter ASCII = WRITER.with(JsonWriteFeature.ESCAPE_NON_ASCII);
  private static final ObjectWriter PRETTY_ASCII = PRETTY.with(JsonWriteFeature.ESCAPE_NON_ASCII);
  private static final JsonWriter[] WRITERS = {
    new JsonWriter(WRITER, null), new JsonWriter(ASCII, null), new JsonWriter(PRETTY, null),
    new JsonWriter(PRETTY_ASCII, null)
  };

  /** The most keys one decoded object may have unless the caller says otherwise. */
  public static final int DEFAULT_MAX_KEYS = JsonReading.DEFAULT_MAX_KEYS;

  /** Jackson's "[Source: ...; line: L, column: C]" inside messages (a start marker's). */
  private static final Pattern SOURCE =
      Pattern.compile("\\[Source: [^;\\]]*; line: (-?\\d+), column: (-?\\d+)\\]");
  /**
   * Jackson's advice on the features it would need to accept an input ("enable
   * `JsonReadFeature.X` to allow", "(... Feature 'X' not enabled for parser)"): our
   * configuration is fixed, so the advice only names Jackson's internals.
   */
  private static final Pattern FEATURE_ADVICE = Pattern.compile(
      "[:;,]?\\s*enable `[^`]*` to allow|\\s*\\((?:[^()]|\\([^()]*\\))*Feature[^()]*\\)");
  /** A message that still names a class or method after {@link #clean}: not shown. */
  private static final Pattern INTERNALS =
      Pattern.compile("`|com\\.fasterxml|jackson|[A-Za-z]+\\.[A-Za-z]+\\(\\)|java\\.", Pattern.CASE_INSENSITIVE);
  private static final int MAX_MESSAGE = 200;

  private Json() {}

  /**
   * A new ObjectMapper with {@link ClojureModule} registered and donkey's settings (dates as
   * ISO-8601 strings). For code that wants databind features; each call returns a fresh
   * mapper, so configuring it changes nothing here.
   */
  public static ObjectMapper newMapper() {
    return newMapper(newFactory());
  }

  private static JsonFactory newFactory() {
    return JsonFactory.builder()
        // per-thread buffers on platform threads, shared ones on virtual threads
        .recyclerPool(RecyclerPools.threadAware())
        // the caller owns the stream; we only read one value from it
        .disable(StreamReadFeature.AUTO_CLOSE_SOURCE)
        .enable(StreamReadFeature.USE_FAST_DOUBLE_PARSER)
        .enable(StreamReadFeature.USE_FAST_BIG_NUMBER_PARSER)
        // characters outside the BMP as 4-byte UTF-8, not as two escaped surrogates
        .enable(JsonWriteFeature.COMBINE_UNICODE_SURROGATES_IN_UTF8)
        // error messages quote at most this much of a bad token, and never the raw input
        .errorReportConfiguration(ErrorReportConfiguration.builder()
            .maxErrorTokenLength(32).maxRawContentLength(0).build())
        .build();
  }

  private static ObjectMapper newMapper(JsonFactory factory) {
    return JsonMapper.builder(factory)
        .addModule(new ClojureModule())
        .disable(SerializationFeature.WRITE_DATES_AS_TIMESTAMPS)
        .build();
  }

  // ---------------------------------------------------------------------------------------
  // reading

  /**
   * Reads one JSON value from {@code in}, with at most {@link #DEFAULT_MAX_KEYS} keys per
   * object. An empty input is an error.
   *
   * @param keywordKeys object keys as keywords (else strings)
   * @param bigDecimals decimals as exact BigDecimal (else Double)
   * @throws JsonException when the input is not exactly one JSON value, or is over a limit
   */
  public static Object read(InputStream in, boolean keywordKeys, boolean bigDecimals) {
    return read(null, in, keywordKeys, bigDecimals, DEFAULT_MAX_KEYS, false);
  }

  /** As {@link #read(InputStream, boolean, boolean)}, from a String. */
  public static Object read(String s, boolean keywordKeys, boolean bigDecimals) {
    return read(s, null, keywordKeys, bigDecimals, DEFAULT_MAX_KEYS, false);
  }

  /**
   * As {@link #read(InputStream, boolean, boolean)}, for a request body: an empty or
   * whitespace-only input is an absent body and gives null rather than an error.
   */
  public static Object readBody(InputStream in, boolean keywordKeys, boolean bigDecimals) {
    return read(null, in, keywordKeys, bigDecimals, DEFAULT_MAX_KEYS, true);
  }

  /** As {@link #readBody(InputStream, boolean, boolean)}, from a String. */
  public static Object readBody(String s, boolean keywordKeys, boolean bigDecimals) {
    return read(s, null, keywordKeys, bigDecimals, DEFAULT_MAX_KEYS, true);
  }

  /**
   * As {@link #readBody(InputStream, boolean, boolean)}, with at most {@code maxKeys} keys
   * (members, a repeated name counted each time) in any one object; more is a
   * {@link JsonException} with status 413.
   *
   * @param maxKeys at least 1
   */
  public static Object readBody(InputStream in, boolean keywordKeys, boolean bigDecimals,
                                int maxKeys) {
    return read(null, in, keywordKeys, bigDecimals, maxKeys, true);
  }

  /** As {@link #readBody(InputStream, boolean, boolean, int)}, from a String. */
  public static Object readBody(String s, boolean keywordKeys, boolean bigDecimals,
                                int maxKeys) {
    return read(s, null, keywordKeys, bigDecimals, maxKeys, true, null);
  }

  /**
   * As {@link #readBody(InputStream, boolean, boolean, int)}, with each object key made by
   * {@code keyFn} from its name when it is not null (then {@code keywordKeys} is ignored).
   * The limits hold for the keys it makes (see {@link JsonReading}); an exception it throws
   * propagates unchanged.
   */
  public static Object readBody(InputStream in, boolean keywordKeys, boolean bigDecimals,
                                int maxKeys, IFn keyFn) {
    return read(null, in, keywordKeys, bigDecimals, maxKeys, true, keyFn);
  }

  /** As {@link #readBody(InputStream, boolean, boolean, int, IFn)}, from a String. */
  public static Object readBody(String s, boolean keywordKeys, boolean bigDecimals,
                                int maxKeys, IFn keyFn) {
    return read(s, null, keywordKeys, bigDecimals, maxKeys, true, keyFn);
  }

  private static Object read(String s, InputStream in, boolean keywordKeys, boolean bigDecimals,
                             int maxKeys, boolean emptyIsNull) {
    return read(s, in, keywordKeys, bigDecimals, maxKeys, emptyIsNull, null);
  }

  private static Object read(String s, InputStream in, boolean keywordKeys, boolean bigDecimals,
                             int maxKeys, boolean emptyIsNull, IFn keyFn) {
    JsonReading reading = new JsonReading(keywordKeys, bigDecimals, maxKeys, keyFn);
    JsonParser p = null;
    try {
      p = s != null ? FACTORY.createParser(s) : FACTORY.createParser(in);
      JsonToken t = p.nextToken();
      if (t == null) {
        if (emptyIsNull) return null;
        throw error("no JSON value in the input", p.currentLocation(), null, 400);
      }
      Object v = reading.read(p, t);
      if (p.nextToken() != null) {
        throw error("unexpected content after the JSON value", p.currentTokenLocation(), null,
            400);
      }
      return v;
    } catch (KeyFnFailure e) {
      throw Util.sneakyThrow(e.getCause());
    } catch (JsonProcessingException e) {
      JsonLocation loc = e.getLocation();
      if (loc == null && p != null) loc = p.currentLocation();
      throw error(clean(e), loc, e, 400);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } finally {
      if (p != null) {
        try {
          p.close();
        } catch (IOException ignored) {
          // the source is not closed (AUTO_CLOSE_SOURCE is off); nothing to release here
        }
      }
    }
  }

  /** The exception for {@code what} at {@code loc} (may be null). */
  static JsonException error(String what, JsonLocation loc, Throwable cause, int status) {
    int line = loc == null ? -1 : loc.getLineNr();
    int column = loc == null ? -1 : loc.getColumnNr();
    return new JsonException(what, line, line > 0 ? column : -1, cause, status);
  }

  /**
   * Jackson's message as one line of ours, at most 200 chars, without its source descriptions
   * or anything that names Jackson's classes, methods or features: its constraint errors in
   * our words, its advice on features dropped, and any other message that still names
   * internals replaced by a plain one.
   */
  static String clean(JsonProcessingException e) {
    if (e instanceof StreamConstraintsException) return constraint(e.getOriginalMessage());
    String m = e.getOriginalMessage();
    if (m == null || m.isEmpty()) return "malformed JSON";
    m = SOURCE.matcher(m).replaceAll("line $1, column $2");
    m = FEATURE_ADVICE.matcher(m).replaceAll("");
    // "Unexpected end-of-inputNo digit following sign": Jackson joins two sentences
    m = m.replace("end-of-inputexpected", "end-of-input: expected")
        .replace("end-of-inputNo", "end-of-input: no");
    m = m.replace('\n', ' ').replace('\r', ' ').trim();
    if (INTERNALS.matcher(m).find()) return "malformed JSON";
    return m.length() > MAX_MESSAGE ? m.substring(0, MAX_MESSAGE) + "..." : m;
  }

  /**
   * A {@link StreamConstraintsException}'s message in our words. Jackson names the limit's
   * getter ("... exceeds the maximum allowed (1000, from
   * `StreamReadConstraints.getMaxNestingDepth()`)"); which limit it was is read from the
   * message's start, and the figure from our own constraints.
   */
  private static String constraint(String m) {
    StreamReadConstraints c = FACTORY.streamReadConstraints();
    String s = m == null ? "" : m;
    if (s.startsWith("Document nesting depth")) {
      return "nesting deeper than " + c.getMaxNestingDepth() + " levels";
    }
    if (s.startsWith("Number value length")) {
      return "number longer than " + c.getMaxNumberLength() + " characters";
    }
    if (s.startsWith("String value length")) {
      return "string longer than " + c.getMaxStringLength() + " characters";
    }
    if (s.startsWith("Name length")) {
      return "name longer than " + c.getMaxNameLength() + " characters";
    }
    if (s.startsWith("Document length")) {
      return "document longer than " + c.getMaxDocumentLength() + " bytes";
    }
    if (s.startsWith("Token count")) {
      return "more than " + c.getMaxTokenCount() + " tokens";
    }
    return "JSON over a size limit";
  }

  // ---------------------------------------------------------------------------------------
  // writing

  /**
   * Writes {@code value} as compact UTF-8 JSON.
   *
   * @throws IllegalArgumentException when it cannot be written
   */
  public static byte[] writeBytes(Object value) {
    try {
      return WRITER.writeValueAsBytes(value);
    } catch (JsonProcessingException e) {
      throw unwritable(value, e);
    }
  }

  /** Writes {@code value} as compact JSON text. */
  public static String writeString(Object value) {
    return writeString(value, false, false);
  }

  /**
   * Writes {@code value} as JSON text.
   *
   * @param pretty indented, one entry per line (Jackson's default pretty printer)
   * @param escapeNonAscii every character above 127 as a {@code \\uXXXX} escape
   * @throws IllegalArgumentException when it cannot be written
   */
  public static String writeString(Object value, boolean pretty, boolean escapeNonAscii) {
    return writer(pretty, escapeNonAscii).writeString(value);
  }

  /** The {@link JsonWriter} with these options and no others (a shared instance). */
  public static JsonWriter writer(boolean pretty, boolean escapeNonAscii) {
    return WRITERS[(pretty ? 2 : 0) + (escapeNonAscii ? 1 : 0)];
  }

  /**
   * A {@link JsonWriter} with these options.
   *
   * @param pretty the pretty printer (Jackson makes one per document of it when it can, as
   *     {@code DefaultPrettyPrinter} allows), or null for compact output
   * @param escapeNonAscii every character above 127 as a {@code \\uXXXX} escape
   * @param dateFormat the format of {@code java.util.Date} values (Jackson uses a copy per
   *     document), or null for ISO-8601 with milliseconds and offset
   * @param keyFn names each keyword key of a map, or null: called with the keyword, its result
   *     written as the name (a String as it is, anything else as a key would be: a keyword as
   *     its name, else its {@code str}, nil as ""). Other keys are written as without it.
   */
  public static JsonWriter writer(PrettyPrinter pretty, boolean escapeNonAscii,
                              DateFormat dateFormat, IFn keyFn) {
    ObjectWriter w = WRITER;
    if (pretty != null) w = w.with(pretty);
    if (escapeNonAscii) w = w.with(JsonWriteFeature.ESCAPE_NON_ASCII);
    if (dateFormat != null) w = w.with(dateFormat);
    return new JsonWriter(w, keyFn);
  }

  /**
   * Carries an exception a key function threw out of Jackson, which would otherwise take it
   * for its own failure (it wraps what a serializer throws; it reports a parser's IOException
   * as malformed input). Unwrapped before it leaves this class.
   */
  static final class KeyFnFailure extends RuntimeException {
    private static final long serialVersionUID = 1L;

    KeyFnFailure(Exception cause) {
      super(null, cause, false, false);
    }
  }

  /**
   * Writes {@code value} as compact UTF-8 JSON straight into a Vert.x buffer: Jackson's
   * recycled chunk is copied into the buffer, with no intermediate byte[] of the whole; a
   * document smaller than one chunk (8000 bytes) gets a buffer of exactly its size.
   *
   * @throws IllegalArgumentException when it cannot be written
   */
  public static Buffer writeBuffer(Object value) {
    BufferOutput out = new BufferOutput();
    try {
      WRITER.writeValue(out, value);
    } catch (JsonProcessingException e) {
      throw unwritable(value, e);
    } catch (IOException e) {
      throw new UncheckedIOException(e); // not thrown by BufferOutput
    }
    return out.result();
  }

  static IllegalArgumentException unwritable(Object value, JsonProcessingException e) {
    return new IllegalArgumentException("cannot write "
        + (value == null ? "nil" : "a " + value.getClass().getName())
        + " as JSON: " + writeMessage(e), e);
  }

  /**
   * Why a value could not be written, for the developer who sees the exception (it is never
   * sent to a client): Jackson's message, with a write-constraint error in our words.
   */
  private static String writeMessage(JsonProcessingException e) {
    String m = e.getOriginalMessage();
    if (e instanceof StreamConstraintsException && m != null
        && m.startsWith("Document nesting depth")) {
      return "nesting deeper than " + FACTORY.streamWriteConstraints().getMaxNestingDepth()
          + " levels";
    }
    if (m == null || m.isEmpty()) return "unknown error";
    m = SOURCE.matcher(m).replaceAll("line $1, column $2").replace('\n', ' ').replace('\r', ' ');
    return m.length() > MAX_MESSAGE ? m.substring(0, MAX_MESSAGE) + "..." : m;
  }

  /** An OutputStream that appends to a Vert.x buffer sized by the first write. */
  private static final class BufferOutput extends OutputStream {
    private Buffer buf;

    @Override
    public void write(int b) {
      buffer(16).appendByte((byte) b);
    }

    @Override
    public void write(byte[] b, int off, int len) {
      buffer(len).appendBytes(b, off, len);
    }

    private Buffer buffer(int first) {
      if (buf == null) buf = Buffer.buffer(Math.max(first, 16));
      return buf;
    }

    Buffer result() {
      return buf == null ? Buffer.buffer(0) : buf;
    }
  }
}
