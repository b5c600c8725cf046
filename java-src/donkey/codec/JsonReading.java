package donkey.codec;

import clojure.lang.BigInt;
import clojure.lang.IFn;
import clojure.lang.ITransientMap;
import clojure.lang.Keyword;
import clojure.lang.LazilyPersistentVector;
import clojure.lang.PersistentArrayMap;
import clojure.lang.PersistentHashMap;
import clojure.lang.PersistentVector;
import clojure.lang.Util;
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
 * <p>With a key function, the keys are what it returns for each name (any value, nil
 * included), and the limits hold for those keys: the first two as above, and a document may
 * hold at most {@link KeyHashes#MAX_SHARED} distinct keywords of one hash among them. The
 * function runs before its key can be checked, so a function that interns keywords has
 * interned one more than that of one hash when the document is refused. An exception it
 * throws leaves the reading as a {@link Json.KeyFnFailure} carrying it.
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
  /** Makes each key from its name, or null for {@code keywordKeys}' keys. */
  private final IFn keyFn;
  /**
   * With keyword keys: the keywords this document made because the cache did not hold them,
   * by their name's hash, each entry a name-keyword array of at most
   * {@link KeyHashes#MAX_SHARED} pairs; null until the first.
   */
  private HashMap<Integer, Object[]> made;
  /**
   * With a key function: the distinct keywords it returned in this document, by hash, each
   * entry an array of at most {@link KeyHashes#MAX_SHARED}; null until the first.
   */
  private HashMap<Integer, Keyword[]> seen;
  /**
   * With a key function: the keywords last checked, one per slot of their hash, so that a
   * name repeated across the objects of a document is looked up in {@link #seen} once.
   */
  private Keyword[] recent;

  /**
   * @param keywordKeys object keys as keywords (else strings)
   * @param bigDecimals decimals as exact BigDecimal (else Double)
   * @param maxKeys the most members of one object, at least 1
   */
  JsonReading(boolean keywordKeys, boolean bigDecimals, int maxKeys) {
    this(keywordKeys, bigDecimals, maxKeys, null);
  }

  /**
   * @param keyFn makes each object key from its name; when not null, {@code keywordKeys} is
   *     ignored
   */
  JsonReading(boolean keywordKeys, boolean bigDecimals, int maxKeys, IFn keyFn) {
    if (maxKeys < 1) throw new IllegalArgumentException("maxKeys must be at least 1");
    this.keywordKeys = keyFn == null && keywordKeys;
    this.bigDecimals = bigDecimals;
    this.maxKeys = maxKeys;
    this.keyFn = keyFn;
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

  /**
   * Reads an object's fields from the one named {@code name} (null: none) to its end. With a
   * key function the keys may be of any class and nil, so they are compared as a Clojure map
   * compares them; without one they are Strings or keywords, compared by identity first.
   */
  private Object readObject(JsonParser p, String name) throws IOException {
    if (name == null) return PersistentArrayMap.EMPTY;
    boolean userKeys = keyFn != null;
    Object[] kvs = new Object[8];
    int n = 0;
    int members = 0;
    boolean big = false;
    for (; name != null; name = p.nextFieldName()) {
      if (++members > maxKeys) {
        throw Json.error("JSON object with more than " + maxKeys + " keys",
            p.currentTokenLocation(), null, 413);
      }
      Object k = userKeys ? userKey(p, name) : keywordKeys ? keyword(p, name) : name;
      Object v = read(p, p.nextToken());
      if (!big) {
        int i = userKeys ? indexOfEquivKey(kvs, n, k) : indexOfKey(kvs, n, k);
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
    // past the array map's size, repeated keys are only merged here (the last value wins);
    // the hash check takes no nil key, and nil is one key whatever its count: a stand-in will do
    if (userKeys) {
      for (int j = 0; j < n; j += 2) {
        if (kvs[j] == null) kvs[j] = NIL_KEY;
      }
    }
    if (KeyHashes.tooManyShared(kvs, 0, 2, n / 2)) {
      throw Json.error("too many keys with colliding hashes in one JSON object",
          p.currentLocation(), null, 400);
    }
    ITransientMap m = PersistentHashMap.EMPTY.asTransient();
    for (int j = 0; j < n; j += 2) m = m.assoc(kvs[j] == NIL_KEY ? null : kvs[j], kvs[j + 1]);
    return m.persistent();
  }

  /** Stands in for a nil key during the hash check. */
  private static final Object NIL_KEY = new Object();

  private static int indexOfEquivKey(Object[] kvs, int n, Object k) {
    for (int i = 0; i < n; i += 2) {
      if (Util.equiv(k, kvs[i])) return i;
    }
    return -1;
  }

  /**
   * The key {@link #keyFn} makes of {@code name}. A keyword among them counts towards the
   * document's bound on keywords of one hash (see the class doc).
   */
  private Object userKey(JsonParser p, String name) {
    Object k;
    try {
      k = keyFn.invoke(name);
    } catch (Exception e) {
      throw new Json.KeyFnFailure(e);
    }
    if (k instanceof Keyword) checkKeyword(p, (Keyword) k);
    return k;
  }

  private void checkKeyword(JsonParser p, Keyword k) {
    // Keyword.hashCode is its symbol's, by which the global keyword table files it
    int h = k.hashCode();
    if (recent == null) recent = new Keyword[64];
    int slot = h & 63;
    if (recent[slot] == k) return;
    if (seen == null) seen = new HashMap<>();
    Keyword[] same = seen.get(h);
    if (same == null) {
      seen.put(h, same = new Keyword[KeyHashes.MAX_SHARED]);
    }
    int i = 0;
    // keywords are interned: a name this document has given is the same object again
    for (; i < same.length && same[i] != null; i++) {
      if (same[i] == k) break;
    }
    if (i == same.length) {
      throw Json.error("too many keys with colliding hashes in the JSON document",
          p.currentTokenLocation(), null, 400);
    }
    same[i] = k;
    recent[slot] = k;
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
