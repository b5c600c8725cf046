package donkey.codec;

import java.util.function.Function;

/**
 * A direct-mapped cache of the keys a codec makes from names it reads (keywords, mostly), so a
 * hot map key costs one array read and one {@code equals} instead of {@code Keyword.intern}'s
 * Symbol allocation and table lookup. Bounded (a colliding name replaces the entry) and
 * lock-free: the races are benign, since an entry is immutable and a miss only costs a call
 * of the key function.
 *
 * <p>Threading: any thread.
 */
final class KeywordCache {
  private static final int SIZE = 1024;

  private final Entry[] entries = new Entry[SIZE];
  private final Function<String, Object> key;

  private static final class Entry {
    final String name;
    final Object key;

    Entry(String name, Object key) {
      this.name = name;
      this.key = key;
    }
  }

  /** @param key makes the key for a name; must be a pure function of it, never null */
  KeywordCache(Function<String, Object> key) {
    this.key = key;
  }

  /** The key for {@code name}. */
  Object get(String name) {
    Object k = cached(name);
    return k != null ? k : make(name);
  }

  /** The key for {@code name} when the cache holds it, else null. */
  Object cached(String name) {
    Entry e = entries[name.hashCode() & (SIZE - 1)];
    return e != null && (e.name == name || e.name.equals(name)) ? e.key : null;
  }

  /** Makes the key for {@code name} with the key function and caches it. */
  Object make(String name) {
    Object k = key.apply(name);
    entries[name.hashCode() & (SIZE - 1)] = new Entry(name, k);
    return k;
  }
}
