package donkey.codec;

import clojure.lang.Keyword;
import clojure.lang.Murmur3;
import clojure.lang.Util;
import java.util.Arrays;

/**
 * The hash-flooding check for maps built from keys a client chooses (parameter, part, header
 * and JSON object names): how many distinct keys share one hash.
 *
 * <p>Clojure's {@code PersistentHashMap} keeps the keys of one full 32-bit hash in a collision
 * node, a flat array that every insert scans and copies, so n keys of one hash cost O(n^2) to
 * build. Such keys are easy to make: {@code String.hashCode} is public arithmetic ("Aa" and
 * "BB" collide, so do all 2^k strings of k such blocks) and a String's {@code hasheq} is a
 * function of it. Every decoder that builds a map from client keys therefore refuses the map
 * when more than {@link #MAX_SHARED} of its distinct keys share a hash: the map then never
 * holds a collision node larger than that, and building it stays linear.
 *
 * <p>The bound is far above what real data reaches: for n keys with independent 32-bit hashes
 * the expected number of 9-key groups sharing one hash is C(n, 9) / 2^256, below 1e-46 for
 * n = 10,000; and although short strings' hashes are not independent, real key sets show pairs
 * and, rarely, triples that collide, not nine.
 *
 * <p>Threading: stateless, any thread. Cost: a counting pass over the keys' hashes into one
 * byte per key (at least 64); only when some group of hashes there exceeds the bound, which
 * real key sets practically never do, an exact pass that sorts a {@code long[n]}: O(n log n)
 * whatever the keys, nothing for maps of up to {@link #MAX_SHARED} keys.
 */
public final class KeyHashes {
  /** The most distinct keys of one map that may share a hash. */
  public static final int MAX_SHARED = 8;

  private KeyHashes() {}

  /**
   * True when more than {@link #MAX_SHARED} distinct keys among {@code n} keys share one hash
   * ({@code Util.hasheq}, the hash {@code PersistentHashMap} uses; for Strings a one-to-one
   * function of {@code String.hashCode}). The keys are {@code keys[from]},
   * {@code keys[from + stride]}, ...; they may repeat (a repeated key counts once) and must not
   * be null.
   */
  public static boolean tooManyShared(Object[] keys, int from, int stride, int n) {
    if (n <= MAX_SHARED) return false;
    // Keys of one hash share a bucket, so no bucket over the bound means no hash over it.
    // Buckets by the hash's top bits after a multiplication: distinct hashes land in one
    // bucket only by chance (then the exact pass decides), or by design, which costs the
    // attacker nothing but the exact pass.
    int bits = Math.max(6, 32 - Integer.numberOfLeadingZeros(n - 1));
    byte[] counts = new byte[1 << bits];
    for (int i = 0; i < n; i++) {
      if (++counts[(hash(keys[from + i * stride]) * 0x9E3779B9) >>> (32 - bits)] > MAX_SHARED) {
        return exact(keys, from, stride, n);
      }
    }
    return false;
  }

  /**
   * {@code Util.hasheq}, with the two key classes the decoders make tested first by exact
   * class: the general method's interface test fails slowly for a String.
   */
  private static int hash(Object k) {
    Class<?> c = k.getClass();
    if (c == String.class) return Murmur3.hashInt(k.hashCode());
    if (c == Keyword.class) return ((Keyword) k).hasheq();
    return Util.hasheq(k);
  }

  private static boolean exact(Object[] keys, int from, int stride, int n) {
    // the hash in the high half, the key's position in the low half: sorting groups equal hashes
    long[] h = new long[n];
    for (int i = 0; i < n; i++) {
      h[i] = ((long) hash(keys[from + i * stride]) << 32) | i;
    }
    Arrays.sort(h);
    int start = 0;
    for (int i = 1; i <= n; i++) {
      if (i == n || (int) (h[i] >>> 32) != (int) (h[start] >>> 32)) {
        if (i - start > MAX_SHARED && distinct(keys, from, stride, h, start, i) > MAX_SHARED) {
          return true;
        }
        start = i;
      }
    }
    return false;
  }

  /**
   * How many distinct keys a run of equal hashes holds, counting no further than one past
   * {@link #MAX_SHARED}: each key is compared with at most that many others.
   */
  private static int distinct(Object[] keys, int from, int stride, long[] h, int start, int end) {
    Object[] seen = new Object[MAX_SHARED + 1];
    int d = 0;
    next:
    for (int j = start; j < end; j++) {
      Object k = keys[from + (int) h[j] * stride];
      for (int s = 0; s < d; s++) {
        if (Util.equiv(seen[s], k)) continue next;
      }
      seen[d++] = k;
      if (d > MAX_SHARED) break;
    }
    return d;
  }
}
