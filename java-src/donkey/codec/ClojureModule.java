package donkey.codec;

import clojure.lang.AFn;
import clojure.lang.BigInt;
import clojure.lang.IFn;
import clojure.lang.IKVReduce;
import clojure.lang.IPersistentCollection;
import clojure.lang.IPersistentMap;
import clojure.lang.IPersistentVector;
import clojure.lang.ISeq;
import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;
import clojure.lang.PersistentHashMap;
import clojure.lang.PersistentVector;
import clojure.lang.RT;
import clojure.lang.Ratio;
import clojure.lang.Symbol;
import clojure.lang.Util;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.JsonTokenId;
import com.fasterxml.jackson.core.Version;
import com.fasterxml.jackson.databind.BeanDescription;
import com.fasterxml.jackson.databind.DeserializationConfig;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JavaType;
import com.fasterxml.jackson.databind.JsonDeserializer;
import com.fasterxml.jackson.databind.JsonSerializer;
import com.fasterxml.jackson.databind.Module;
import com.fasterxml.jackson.databind.SerializationConfig;
import com.fasterxml.jackson.databind.SerializerProvider;
import com.fasterxml.jackson.databind.deser.Deserializers;
import com.fasterxml.jackson.databind.deser.std.StdDeserializer;
import com.fasterxml.jackson.databind.jsontype.TypeSerializer;
import com.fasterxml.jackson.databind.ser.Serializers;
import com.fasterxml.jackson.databind.ser.std.StdSerializer;
import com.fasterxml.jackson.databind.type.CollectionLikeType;
import com.fasterxml.jackson.databind.type.CollectionType;
import com.fasterxml.jackson.databind.type.MapLikeType;
import com.fasterxml.jackson.databind.type.MapType;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.temporal.TemporalAccessor;
import java.time.temporal.TemporalAmount;
import java.util.Map;
import java.util.UUID;

/**
 * A Jackson {@link Module} for Clojure data, both ways.
 *
 * <p><b>Writing.</b> Keywords are written as their name without the colon ({@code :a/b} as
 * {@code "a/b"}), symbols and characters as strings; persistent maps (and records) as objects
 * whose keys are a keyword's name, a string as it is, or anything else's {@code str} (nil as
 * {@code ""}); vectors, lists, sets, seqs and other Clojure collections as arrays; a
 * {@link Ratio} as a double; {@link BigInt}, {@link BigInteger} and {@link BigDecimal} exactly;
 * {@link UUID} as a string; {@link Instant} and the other java.time values (dates, times,
 * durations, zones) as ISO-8601 strings, a {@link ZonedDateTime} with its offset and without
 * its zone id. Doubles that JSON cannot represent (NaN, infinities) are written as the strings
 * {@code "NaN"}, {@code "Infinity"}, {@code "-Infinity"}, as Jackson does. Java maps and
 * collections nested in Clojure data are written the same way; any other value goes to
 * Jackson's own serializers (which may fail: an object with no properties is an error, not
 * {@code {}}). A {@link JsonWriter} with a key function names keyword keys by it (see
 * {@link #write(Object, JsonGenerator, SerializerProvider, IFn)}).
 *
 * <p><b>Reading</b> (the deserializer for {@code Object}, {@link IPersistentMap} and
 * {@link IPersistentVector}): objects become persistent maps (array maps up to 8 entries, hash
 * maps beyond; a repeated key keeps its last value), arrays persistent vectors, strings strings,
 * integers {@link Long} or, when too big, {@link BigInt} (exact), decimals {@link Double} or,
 * with {@link DeserializationFeature#USE_BIG_DECIMAL_FOR_FLOATS}, {@link BigDecimal} (exact),
 * and true/false/null Booleans and nil. Keys are strings, or keywords when the reader carries
 * the attribute {@link #KEYWORD_KEYS} = {@code Boolean.TRUE}:
 * <pre>{@code mapper.readerFor(Object.class).withAttribute(ClojureModule.KEYWORD_KEYS, true)}</pre>
 *
 * <p>Reading has {@link JsonReading}'s limits, with its default of 10,000 keys per object: over
 * it, or with too many keys of one hash, the deserializer throws {@link JsonException}.
 *
 * <p>Threading: stateless; one instance may be registered with any number of mappers.
 * {@link Json} uses the same code directly, without the databind layer, on its hot paths.
 *
 * <p>One file because it is one Jackson module: the serializers and deserializers of the
 * Clojure types are registered together, and the key-function wrapping rides on them.
 */
public final class ClojureModule extends Module {
  /** Reader attribute: {@code Boolean.TRUE} makes object keys keywords. */
  public static final String KEYWORD_KEYS = "donkey.codec.keyword-keys";

  private static final Version VERSION =
      new Version(0, 1, 0, "SNAPSHOT", "org.clojars.donkey", "donkey");

  static final ValueSerializer SERIALIZER = new ValueSerializer();
  static final KeySerializer KEY_SERIALIZER = new KeySerializer();

  @Override
  public String getModuleName() {
    return "donkey.codec.ClojureModule";
  }

  @Override
  public Version version() {
    return VERSION;
  }

  @Override
  public Object getTypeId() {
    return ClojureModule.class.getName();
  }

  @Override
  public void setupModule(SetupContext context) {
    context.addSerializers(new ClojureSerializers());
    context.addKeySerializers(new ClojureKeySerializers());
    context.addDeserializers(new ClojureDeserializers());
  }

  // ---------------------------------------------------------------------------------------
  // writing

  /** True for the classes this module writes itself (the others go to Jackson). */
  static boolean handles(Class<?> c) {
    return IPersistentCollection.class.isAssignableFrom(c) // maps, vectors, sets, lists, seqs
        || c == Keyword.class || c == Symbol.class || c == Ratio.class || c == BigInt.class
        || c == UUID.class || c == Character.class || isTime(c);
  }

  /** java.time dates, times, offsets, zones and amounts, whose toString is ISO-8601. */
  private static boolean isTime(Class<?> c) {
    return c.getName().startsWith("java.time.")
        && (TemporalAccessor.class.isAssignableFrom(c) || TemporalAmount.class.isAssignableFrom(c)
            || ZoneId.class.isAssignableFrom(c));
  }

  /** Writes any value: Clojure data directly, everything else through {@code provider}. */
  static void write(Object v, JsonGenerator g, SerializerProvider provider) throws IOException {
    if (v == null) {
      g.writeNull();
      return;
    }
    // The common classes by exact class before any interface test: before JDK 23 a failing
    // interface test scans the class's interface list and a passing one caches only the last
    // interface (JDK-8180450). JsonWriteBench (bench/jmh-ring) measures the difference.
    Class<?> c = v.getClass();
    if (c == PersistentArrayMap.class || c == PersistentHashMap.class) {
      writeMap(v, g, provider);
      return;
    }
    if (c == PersistentVector.class) {
      g.writeStartArray(v);
      for (Object x : (PersistentVector) v) write(x, g, provider);
      g.writeEndArray();
      return;
    }
    if (c == Double.class) {
      g.writeNumber(((Double) v).doubleValue());
      return;
    }
    if (c == Boolean.class) {
      g.writeBoolean(((Boolean) v).booleanValue());
      return;
    }
    if (v instanceof String) {
      g.writeString((String) v);
    } else if (v instanceof Keyword) {
      g.writeString(((Keyword) v).sym.toString());
    } else if (v instanceof Long) {
      g.writeNumber(((Long) v).longValue());
    } else if (v instanceof IPersistentMap || v instanceof Map) {
      writeMap(v, g, provider);
    } else if (v instanceof IPersistentCollection || v instanceof java.util.Collection) {
      g.writeStartArray(v);
      if (v instanceof Iterable) {
        for (Object x : (Iterable<?>) v) write(x, g, provider);
      } else {
        for (ISeq s = RT.seq(v); s != null; s = s.next()) write(s.first(), g, provider);
      }
      g.writeEndArray();
    } else if (v instanceof Integer || v instanceof Short || v instanceof Byte) {
      g.writeNumber(((Number) v).intValue());
    } else if (v instanceof Float) {
      g.writeNumber(((Float) v).floatValue());
    } else if (v instanceof BigInt) {
      BigInt b = (BigInt) v;
      if (b.bipart == null) {
        g.writeNumber(b.lpart);
      } else {
        g.writeNumber(b.bipart);
      }
    } else if (v instanceof BigDecimal) {
      g.writeNumber((BigDecimal) v);
    } else if (v instanceof BigInteger) {
      g.writeNumber((BigInteger) v);
    } else if (v instanceof Ratio) {
      g.writeNumber(((Ratio) v).doubleValue());
    } else if (v instanceof Symbol || v instanceof UUID || v instanceof Instant) {
      g.writeString(v.toString());
    } else if (v instanceof ZonedDateTime) {
      g.writeString(DateTimeFormatter.ISO_OFFSET_DATE_TIME.format((ZonedDateTime) v));
    } else if (isTime(v.getClass())) {
      g.writeString(v.toString()); // ISO-8601 for every java.time value
    } else if (v instanceof Character) {
      g.writeString(String.valueOf(((Character) v).charValue()));
    } else {
      provider.defaultSerializeValue(v, g);
    }
  }

  /** The JSON name of a map key: a keyword's name, a string as is, else its {@code str}. */
  static String key(Object k) {
    if (k instanceof String) return (String) k;
    if (k instanceof Keyword) return ((Keyword) k).sym.toString();
    return k == null ? "" : k.toString();
  }

  private static void writeMap(Object m, JsonGenerator g, SerializerProvider provider)
      throws IOException {
    g.writeStartObject(m);
    Class<?> c = m.getClass();
    // the core maps' own kvreduce, called on the class, not the interface (see write)
    if (c == PersistentArrayMap.class) {
      ((PersistentArrayMap) m).kvreduce(new EntryWriter(g, provider), null);
    } else if (c == PersistentHashMap.class) {
      ((PersistentHashMap) m).kvreduce(new EntryWriter(g, provider), null);
    } else if (m instanceof IKVReduce) {
      // array, hash and sorted maps: no MapEntry per entry, unlike iterating
      ((IKVReduce) m).kvreduce(new EntryWriter(g, provider), null);
    } else if (m instanceof IPersistentMap) {
      // records (their seq is in field order; their entrySet is a hash set) and other maps
      for (ISeq s = RT.seq(m); s != null; s = s.next()) {
        Map.Entry<?, ?> e = (Map.Entry<?, ?>) s.first();
        g.writeFieldName(key(e.getKey()));
        write(e.getValue(), g, provider);
      }
    } else {
      for (Map.Entry<?, ?> e : ((Map<?, ?>) m).entrySet()) {
        g.writeFieldName(key(e.getKey()));
        write(e.getValue(), g, provider);
      }
    }
    g.writeEndObject();
  }

  /** The reducing function of {@link #writeMap}; an IOException leaves it unchanged. */
  private static final class EntryWriter extends AFn {
    private final JsonGenerator g;
    private final SerializerProvider provider;

    EntryWriter(JsonGenerator g, SerializerProvider provider) {
      this.g = g;
      this.provider = provider;
    }

    @Override
    public Object invoke(Object acc, Object k, Object v) {
      try {
        g.writeFieldName(key(k));
        write(v, g, provider);
      } catch (IOException e) {
        throw Util.sneakyThrow(e);
      }
      return acc;
    }
  }

  // ---------------------------------------------------------------------------------------
  // writing with a key function

  /**
   * A value to write with {@link #keyFn} naming its maps' keyword keys: what
   * {@link JsonWriter} gives Jackson, so that the key function reaches the code below through
   * the serializer Jackson picks for this class, and writing without one never looks for it.
   */
  static final class KeyFnRoot {
    final Object value;
    final IFn keyFn;

    KeyFnRoot(Object value, IFn keyFn) {
      this.value = value;
      this.keyFn = keyFn;
    }
  }

  /** Writes a {@link KeyFnRoot}. */
  static final class KeyFnRootSerializer extends StdSerializer<KeyFnRoot> {
    KeyFnRootSerializer() {
      super(KeyFnRoot.class);
    }

    @Override
    public void serialize(KeyFnRoot root, JsonGenerator g, SerializerProvider provider)
        throws IOException {
      write(root.value, g, provider, root.keyFn);
    }
  }

  static final KeyFnRootSerializer KEY_FN_ROOT_SERIALIZER = new KeyFnRootSerializer();

  /**
   * As {@link #write(Object, JsonGenerator, SerializerProvider)}, with each keyword key of a
   * map named by {@code keyFn}, as cheshire's {@code :key-fn} does; other keys, and maps
   * inside values Jackson writes itself (beans), are written as without it. Only maps and
   * collections differ, so everything else is left to the method without a key function.
   */
  static void write(Object v, JsonGenerator g, SerializerProvider provider, IFn keyFn)
      throws IOException {
    if (v instanceof IPersistentMap || v instanceof Map) {
      writeMap(v, g, provider, keyFn);
    } else if (v instanceof IPersistentCollection || v instanceof java.util.Collection) {
      g.writeStartArray(v);
      if (v instanceof Iterable) {
        for (Object x : (Iterable<?>) v) write(x, g, provider, keyFn);
      } else {
        for (ISeq s = RT.seq(v); s != null; s = s.next()) write(s.first(), g, provider, keyFn);
      }
      g.writeEndArray();
    } else {
      write(v, g, provider);
    }
  }

  /**
   * The JSON name of a map key: a keyword's as {@code keyFn} gives it, any other key's as
   * {@link #key} gives it. The function's exception leaves as a {@link Json.KeyFnFailure},
   * since Jackson would wrap it in its own.
   */
  static String key(Object k, IFn keyFn) {
    if (!(k instanceof Keyword)) return key(k);
    Object name;
    try {
      name = keyFn.invoke(k);
    } catch (Exception e) {
      throw new Json.KeyFnFailure(e);
    }
    return name instanceof String ? (String) name : key(name);
  }

  private static void writeMap(Object m, JsonGenerator g, SerializerProvider provider, IFn keyFn)
      throws IOException {
    g.writeStartObject(m);
    if (m instanceof IKVReduce) {
      ((IKVReduce) m).kvreduce(new RenamingEntryWriter(g, provider, keyFn), null);
    } else if (m instanceof IPersistentMap) {
      for (ISeq s = RT.seq(m); s != null; s = s.next()) {
        Map.Entry<?, ?> e = (Map.Entry<?, ?>) s.first();
        g.writeFieldName(key(e.getKey(), keyFn));
        write(e.getValue(), g, provider, keyFn);
      }
    } else {
      for (Map.Entry<?, ?> e : ((Map<?, ?>) m).entrySet()) {
        g.writeFieldName(key(e.getKey(), keyFn));
        write(e.getValue(), g, provider, keyFn);
      }
    }
    g.writeEndObject();
  }

  /** The reducing function of the key function's {@code writeMap}. */
  private static final class RenamingEntryWriter extends AFn {
    private final JsonGenerator g;
    private final SerializerProvider provider;
    private final IFn keyFn;

    RenamingEntryWriter(JsonGenerator g, SerializerProvider provider, IFn keyFn) {
      this.g = g;
      this.provider = provider;
      this.keyFn = keyFn;
    }

    @Override
    public Object invoke(Object acc, Object k, Object v) {
      try {
        g.writeFieldName(key(k, keyFn));
        write(v, g, provider, keyFn);
      } catch (IOException e) {
        throw Util.sneakyThrow(e);
      }
      return acc;
    }
  }

  /** Writes every value {@link #handles} claims. */
  static final class ValueSerializer extends StdSerializer<Object> {
    ValueSerializer() {
      super(Object.class);
    }

    @Override
    public void serialize(Object value, JsonGenerator g, SerializerProvider provider)
        throws IOException {
      write(value, g, provider);
    }
  }

  /** Writes keyword and symbol keys of maps Jackson writes itself (java.util maps). */
  static final class KeySerializer extends StdSerializer<Object> {
    KeySerializer() {
      super(Object.class);
    }

    @Override
    public void serialize(Object value, JsonGenerator g, SerializerProvider provider)
        throws IOException {
      g.writeFieldName(key(value));
    }
  }

  private static final class ClojureSerializers extends Serializers.Base {
    private static JsonSerializer<?> forType(JavaType type) {
      Class<?> c = type.getRawClass();
      if (c == KeyFnRoot.class) return KEY_FN_ROOT_SERIALIZER;
      return handles(c) ? SERIALIZER : null;
    }

    @Override
    public JsonSerializer<?> findSerializer(SerializationConfig config, JavaType type,
                                            BeanDescription beanDesc) {
      return forType(type);
    }

    @Override
    public JsonSerializer<?> findCollectionSerializer(
        SerializationConfig config, CollectionType type, BeanDescription beanDesc,
        TypeSerializer elementTypeSerializer, JsonSerializer<Object> elementValueSerializer) {
      return forType(type);
    }

    @Override
    public JsonSerializer<?> findCollectionLikeSerializer(
        SerializationConfig config, CollectionLikeType type, BeanDescription beanDesc,
        TypeSerializer elementTypeSerializer, JsonSerializer<Object> elementValueSerializer) {
      return forType(type);
    }

    @Override
    public JsonSerializer<?> findMapSerializer(
        SerializationConfig config, MapType type, BeanDescription beanDesc,
        JsonSerializer<Object> keySerializer, TypeSerializer elementTypeSerializer,
        JsonSerializer<Object> elementValueSerializer) {
      return forType(type);
    }

    @Override
    public JsonSerializer<?> findMapLikeSerializer(
        SerializationConfig config, MapLikeType type, BeanDescription beanDesc,
        JsonSerializer<Object> keySerializer, TypeSerializer elementTypeSerializer,
        JsonSerializer<Object> elementValueSerializer) {
      return forType(type);
    }
  }

  private static final class ClojureKeySerializers extends Serializers.Base {
    @Override
    public JsonSerializer<?> findSerializer(SerializationConfig config, JavaType type,
                                            BeanDescription beanDesc) {
      Class<?> c = type.getRawClass();
      return c == Keyword.class || c == Symbol.class ? KEY_SERIALIZER : null;
    }
  }

  // ---------------------------------------------------------------------------------------
  // reading

  /** The databind deserializer, for {@code Object}, {@link IPersistentMap} and vectors. */
  static final class ValueDeserializer extends StdDeserializer<Object> {
    private final int expected; // a JsonTokenId START_ token, or -1 for any value

    ValueDeserializer(Class<?> type, int expected) {
      super(type);
      this.expected = expected;
    }

    @Override
    public Object deserialize(JsonParser p, DeserializationContext ctxt) throws IOException {
      JsonToken t = p.currentToken();
      if (expected == JsonTokenId.ID_START_OBJECT && t != JsonToken.START_OBJECT
          && t != JsonToken.FIELD_NAME && t != JsonToken.END_OBJECT) {
        return ctxt.handleUnexpectedToken(handledType(), p);
      }
      if (expected == JsonTokenId.ID_START_ARRAY && t != JsonToken.START_ARRAY) {
        return ctxt.handleUnexpectedToken(handledType(), p);
      }
      return new JsonReading(Boolean.TRUE.equals(ctxt.getAttribute(KEYWORD_KEYS)),
          ctxt.isEnabled(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS),
          JsonReading.DEFAULT_MAX_KEYS).read(p, t);
    }

    @Override
    public boolean isCachable() {
      return true;
    }
  }

  private static final class ClojureDeserializers extends Deserializers.Base {
    private static final ValueDeserializer ANY = new ValueDeserializer(Object.class, -1);
    private static final ValueDeserializer MAP =
        new ValueDeserializer(IPersistentMap.class, JsonTokenId.ID_START_OBJECT);
    private static final ValueDeserializer VECTOR =
        new ValueDeserializer(IPersistentVector.class, JsonTokenId.ID_START_ARRAY);

    @Override
    public JsonDeserializer<?> findBeanDeserializer(JavaType type, DeserializationConfig config,
                                                    BeanDescription beanDesc) {
      Class<?> c = type.getRawClass();
      if (c == Object.class) return ANY;
      if (c == IPersistentMap.class) return MAP;
      if (c == IPersistentVector.class) return VECTOR;
      return null;
    }

    @Override
    public boolean hasDeserializerFor(DeserializationConfig config, Class<?> valueType) {
      return valueType == Object.class || valueType == IPersistentMap.class
          || valueType == IPersistentVector.class;
    }
  }
}
