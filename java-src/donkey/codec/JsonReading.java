package donkey.codec;

import clojure.lang.BigInt;
import clojure.lang.ITransientMap;
import clojure.lang.Keyword;
import clojure.lang.LazilyPersistentVector;
import clojure.lang.PersistentArrayMap;
import clojure.lang.PersistentHashMap;
import clojure.lang.PersistentVector;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.JsonTokenId;
import java.io.IOException;
import java.util.Arrays;
import java.util.HashMap;

/**
 * Reads one JSON document from a Jackson parser into Clojure data ({@link ClojureModule}
 * describes the mapping), with the limits that keep a hostile document cheap:
 *
 * <ul>
 *   <li>an object may have at most {@code maxKeys} members (a repeated name counted each
 *       time), else a {@link JsonException} with status 413. Per object, not per document: the
 *       limit bounds the one hash map a handler gets; a document of many small objects (a
 *       long array of records) costs time in proportion to its bytes, which
 *       {@code :max-body-size} bounds.
 *   <li>an object may have at most {@link KeyHashes#MAX_SHARED} distinct keys of one hash,
 *       else a 400, so that its hash map is built in linear time.
 *   <li>with keyword keys, a document may bring at most {@link KeyHashes#MAX_SHARED} new
 *       names of one {@code String.hashCode} to the global keyword table (names the keyword
 *       cache does not hold), else a 400: {@code Keyword.intern}'s table keeps names of one
 *       hash in a list it searches, so a document of many small objects, each within the
 *       limit above, could otherwise make it quadratic.
 * </ul>
 *
 * <p>Threading: one instance per document, on one thread.
 */
final class JsonReading {
  /** The most members one object may have unless the caller says otherwise. */
  static final int DEFAULT_MAX_KEYS = 10_000;

  /**
   * Decoded objects of up to 16 keys (this many keys and values together) become array maps,
   * as {@code array-map} makes them: cheaper to build than a hash map, and a lookup is a linear
   * scan of interned keys. (Clojure's own {@code assoc} turns a map into a hash map past 8
   * keys; assoc on a bigger array map does the same, so nothing downstream changes.)
   */
  private static final int ARRAY_MAP_SLOTS = 32;

  /** Keyword keys of decoded objects: {@code Keyword.intern(name)}, cached. */
  private static final KeywordCache KEYS = new KeywordCache(Keyword::intern);

  private final boolean keywordKeys;
  private final boolean bigDecimals;
  private final int maxKeys;
  /**
   * With keyword keys: the keywords this document made because the cache did not hold them,
   * by their name's hash, each entry a name-keyword array of at most
   * {@link KeyHashes#MAX_SHARED} pairs; null until the first.
   */
  private HashMap<Integer, Object[]> made;

  /**
   * @param keywordKeys object keys as keywords (else strings)
   * @param bigDecimals decimals as exact BigDecimal (else Double)
   * @param maxKeys the most members of one object, at least 1
   */
  JsonReading(boolean keywordKeys, boolean bigDecimals, int maxKeys) {
    if (maxKeys < 1) throw new IllegalArgumentException("maxKeys must be at least 1");
    this.keywordKeys = keywordKeys;
    this.bigDecimals = bigDecimals;
    this.maxKeys = maxKeys;
  }

  /**
   * Reads one value whose first token {@code t} is the parser's current token, leaving the
   * parser on the value's last token.
   *
   * @throws JsonException for an object over a limit, or a number out of range
   */
  Object read(JsonParser p, JsonToken t) throws IOException {
    switch (t.id()) {
      case JsonTokenId.ID_START_OBJECT:
        return readObject(p, p.nextFieldName());
      case JsonTokenId.ID_START_ARRAY:
        return readArray(p);
      case JsonTokenId.ID_STRING:
        return p.getText();
      case JsonTokenId.ID_NUMBER_INT:
        return readInteger(p);
      case JsonTokenId.ID_NUMBER_FLOAT:
        return bigDecimals ? readDecimal(p) : (Object) p.getDoubleValue();
      case JsonTokenId.ID_TRUE:
        return Boolean.TRUE;
      case JsonTokenId.ID_FALSE:
        return Boolean.FALSE;
      case JsonTokenId.ID_NULL:
        return null;
      case JsonTokenId.ID_FIELD_NAME:
        // databind may hand over an object whose START_OBJECT it has consumed
        return readObject(p, p.currentName());
      case JsonTokenId.ID_END_OBJECT:
        return PersistentArrayMap.EMPTY;
      case JsonTokenId.ID_EMBEDDED_OBJECT:
        return p.getEmbeddedObject();
      default:
        throw new IllegalStateException("unexpected JSON token " + t);
    }
  }

  private static Object readInteger(JsonParser p) throws IOException {
    switch (p.getNumberType()) {
      case INT:
      case LONG:
        return p.getLongValue();
      default:
        return BigInt.fromBigInteger(p.getBigIntegerValue());
    }
  }

  private static Object readDecimal(JsonParser p) throws IOException {
    try {
      return p.getDecimalValue();
    } catch (NumberFormatException e) {
      // an exponent BigDecimal cannot hold ("1e-2147483648"); Jackson's message names classes
      throw Json.error("number out of range", p.currentTokenLocation(), e, 400);
    }
  }

  /** Reads an object's fields from the one named {@code name} (null: none) to its end. */
  private Object readObject(JsonParser p, String name) throws IOException {
    if (name == null) return PersistentArrayMap.EMPTY;
    Object[] kvs = new Object[8];
    int n = 0;
    int members = 0;
    boolean big = false;
    for (; name != null; name = p.nextFieldName()) {
      if (++members > maxKeys) {
        throw Json.error("JSON object with more than " + maxKeys + " keys",
            p.currentTokenLocation(), null, 413);
      }
      Object k = keywordKeys ? keyword(p, name) : name;
      Object v = read(p, p.nextToken());
      if (!big) {
        int i = indexOfKey(kvs, n, k);
        if (i >= 0) {
          kvs[i + 1] = v; // a repeated key: the last value wins
          continue;
        }
        big = n == ARRAY_MAP_SLOTS;
      }
      if (n == kvs.length) kvs = Arrays.copyOf(kvs, big ? 2 * n : Math.min(2 * n, ARRAY_MAP_SLOTS));
      kvs[n++] = k;
      kvs[n++] = v;
    }
    if (!big) return new PersistentArrayMap(n == kvs.length ? kvs : Arrays.copyOf(kvs, n));
    // past the array map's size, repeated keys are only merged here (the last value wins)
    if (KeyHashes.tooManyShared(kvs, 0, 2, n / 2)) {
      throw Json.error("too many keys with colliding hashes in one JSON object",
          p.currentLocation(), null, 400);
    }
    ITransientMap m = PersistentHashMap.EMPTY.asTransient();
    for (int j = 0; j < n; j += 2) m = m.assoc(kvs[j], kvs[j + 1]);
    return m.persistent();
  }

  private static int indexOfKey(Object[] kvs, int n, Object k) {
    // keywords are interned (equals is identity); parsed names are mostly canonical Strings
    for (int i = 0; i < n; i += 2) {
      if (k.equals(kvs[i])) return i;
    }
    return -1;
  }

  /** The keyword key for {@code name}: from the cache, else made, if the document may. */
  private Object keyword(JsonParser p, String name) {
    Object k = KEYS.cached(name);
    return k != null ? k : make(p, name);
  }

  private Object make(JsonParser p, String name) {
    if (made == null) made = new HashMap<>();
    Integer h = name.hashCode();
    Object[] same = made.get(h);
    int n = 0;
    if (same != null) {
      for (; n < same.length && same[n] != null; n += 2) {
        if (name.equals(same[n])) return same[n + 1];
      }
      if (n == same.length) {
        throw Json.error("too many keys with colliding hashes in the JSON document",
            p.currentTokenLocation(), null, 400);
      }
    } else {
      made.put(h, same = new Object[2 * KeyHashes.MAX_SHARED]);
    }
    Object k = KEYS.make(name);
    same[n] = name;
    same[n + 1] = k;
    return k;
  }

  private Object readArray(JsonParser p) throws IOException {
    JsonToken t = p.nextToken();
    if (t == JsonToken.END_ARRAY) return PersistentVector.EMPTY;
    Object[] items = new Object[8];
    int n = 0;
    do {
      if (n == items.length) items = Arrays.copyOf(items, n * 2);
      items[n++] = read(p, t);
    } while ((t = p.nextToken()) != JsonToken.END_ARRAY);
    // owning: up to 32 items the array becomes the vector's tail as it is
    return LazilyPersistentVector.createOwning(n == items.length ? items : Arrays.copyOf(items, n));
  }
}
