package donkey.codec;

import clojure.lang.IPersistentMap;
import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;
import clojure.lang.PersistentHashMap;
import clojure.lang.PersistentVector;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * How the parts {@link Multipart} read become Ring's parameter map: fields decoded in their
 * charset, repeated names folded into vectors in arrival order, names made keywords when asked,
 * and names of colliding hashes refused. Stateless; any thread.
 */
final class MultipartParams {
  /** The field whose value names the charset of the fields without one (HTML 5). */
  private static final String CHARSET_FIELD = "_charset_";

  private MultipartParams() {}

  /** Decodes the fields and folds the items into Ring's map, repeated names into vectors. */
  static IPersistentMap build(List<Item> items, Charset fallback, Charset forcedCharset,
                              boolean keywords) {
    Charset formCharset = fallback;
    if (forcedCharset != null) {
      formCharset = forcedCharset;
    } else {
      for (Item it : items) {
        if (it.field && CHARSET_FIELD.equals(it.name)) {
          formCharset = MultipartHeaders.charset(new String((byte[]) it.value, StandardCharsets.ISO_8859_1));
          break;
        }
      }
    }
    // by name first: a String-keyed LinkedHashMap stays O(log n) per lookup even for names of
    // one hash (its bins become trees of Comparable keys)
    LinkedHashMap<String, Object> acc = new LinkedHashMap<>();
    for (Item it : items) {
      Object value = it.value;
      if (it.field) {
        Charset cs = forcedCharset != null ? forcedCharset
            : it.charset != null ? it.charset : formCharset;
        value = new String((byte[]) value, cs);
      }
      Object old = acc.get(it.name);
      // a store may return nil, which is a value like any other
      if (old == null && !acc.containsKey(it.name)) {
        acc.put(it.name, value);
      } else if (old instanceof Repeated) {
        ((Repeated) old).add(value);
      } else {
        Repeated values = new Repeated();
        values.add(old);
        values.add(value);
        acc.put(it.name, values);
      }
    }
    int n = acc.size();
    Object[] kv = new Object[n * 2];
    int i = 0;
    for (Map.Entry<String, Object> e : acc.entrySet()) {
      Object v = e.getValue();
      kv[i++] = e.getKey();
      kv[i++] = v instanceof Repeated ? PersistentVector.create((Repeated) v) : v;
    }
    if (n <= 8) {
      if (keywords) keywordize(kv);
      return new PersistentArrayMap(kv);
    }
    // names of one hash are refused before any becomes a keyword (interning them would load
    // the global keyword table), and keywords once more, since a keyword's hash is not its
    // name's: so the hash map never holds more than a few keys of one hash (KeyHashes)
    boolean refused = KeyHashes.tooManyShared(kv, 0, 2, n);
    if (!refused && keywords && keywordize(kv)) refused = KeyHashes.tooManyShared(kv, 0, 2, n);
    if (refused) {
      throw new MultipartException(MultipartException.BAD_REQUEST,
                                   "too many part names with colliding hashes");
    }
    return PersistentHashMap.create(kv);
  }

  /**
   * Turns the names (every other element of {@code kv}) that have keyword syntax into
   * keywords, as {@code wrap-keyword-params} decides; true when any did.
   */
  private static boolean keywordize(Object[] kv) {
    boolean any = false;
    for (int j = 0; j < kv.length; j += 2) {
      Object key = FormCodec.keywordKey((String) kv[j]);
      if (key instanceof Keyword) {
        kv[j] = key;
        any = true;
      }
    }
    return any;
  }

  /** One part, in arrival order: a field's bytes or a file part's map. */
  static final class Item {
    final String name;
    final Object value;
    final Charset charset;
    final boolean field;

    Item(String name, Object value, Charset charset, boolean field) {
      this.name = name;
      this.value = value;
      this.charset = charset;
      this.field = field;
    }
  }

  /** The values of a repeated name while the map is being built. */
  private static final class Repeated extends ArrayList<Object> {
    private static final long serialVersionUID = 1L;
  }
}
