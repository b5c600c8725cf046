package donkey.ring;

/**
 * A small cache keyed by object identity that keeps a value only for a key seen a second
 * time: a constant of the handler's code (a {@code :headers} map, a String body) comes back
 * on every response and earns its entry, while an object made per response costs one slot
 * write and is never worked on. Direct-mapped by identity hash over a fixed number of slots,
 * so it is bounded (a colliding key replaces the slot) and a key seen once stays referenced
 * only until its slot is reused.
 *
 * <p>Threading: any thread, without locks. The races are benign: a slot holds either a key
 * or an immutable entry with final fields, so a reader sees a whole entry or an older slot,
 * and a lost write only costs a miss.
 */
final class SeenTwiceCache {
  /** What {@link #get} returns for a key seen once before: the caller may {@link #put} now. */
  static final Object SEEN_ONCE = new Object();

  private static final class Entry {
    final Object key;
    final Object value;

    Entry(Object key, Object value) {
      this.key = key;
      this.value = value;
    }
  }

  private final Object[] slots;

  /** @param size the number of slots, a power of two */
  SeenTwiceCache(int size) {
    if (Integer.bitCount(size) != 1) throw new IllegalArgumentException("size must be a power of two");
    slots = new Object[size];
  }

  /**
   * The value kept for {@code key}; {@link #SEEN_ONCE} when the key was seen once before and
   * has no value yet; else null, and the key is remembered as seen once.
   */
  Object get(Object key) {
    int slot = slot(key);
    Object s = slots[slot];
    if (s instanceof Entry && ((Entry) s).key == key) return ((Entry) s).value;
    if (s == key) return SEEN_ONCE;
    slots[slot] = key;
    return null;
  }

  /** Keeps {@code value} for {@code key} (replacing whatever held its slot). */
  void put(Object key, Object value) {
    slots[slot(key)] = new Entry(key, value);
  }

  private int slot(Object key) {
    return System.identityHashCode(key) & (slots.length - 1);
  }
}
