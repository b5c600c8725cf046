package donkey.codec;

import clojure.lang.IPersistentMap;
import clojure.lang.Keyword;
import clojure.lang.LazilyPersistentVector;
import clojure.lang.PersistentArrayMap;
import clojure.lang.PersistentHashMap;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;

/**
 * Decodes {@code application/x-www-form-urlencoded} text (form bodies, and query strings, which
 * follow the same rules) into a Clojure persistent map, with the semantics of Ring's
 * {@code ring.middleware.params} (ring-codec's {@code form-decode}):
 *
 * <ul>
 *   <li>pairs are separated by {@code &}; empty pairs ({@code "a=1&&b=2"}, a leading or trailing
 *       {@code &}) are skipped; {@code ;} is not a separator;
 *   <li>a pair splits at its first {@code =}: {@code "a=1=2"} is {@code {"a" "1=2"}}, {@code "=b"}
 *       is {@code {"" "b"}}; a pair without {@code =} maps its key to {@code ""};
 *   <li>{@code +} is a space; {@code %XX} sequences are bytes, and each run of them is decoded
 *       in the given charset (UTF-8 by default); other characters are kept as they are;
 *   <li>a key that occurs more than once maps to a vector of its values, in input order;
 *   <li>keys are strings, or with {@code keywords} true, keywords when they have Ring's keyword
 *       syntax (see {@link #isKeywordSyntax}); other keys stay strings.
 * </ul>
 *
 * <p>Where this differs from Ring 1.8.2, on purpose: (1) input that contains no {@code =} at all
 * ({@code "a"}, {@code "a&b"}) gives {@code {"a" ""}} / {@code {"a" "" "b" ""}}, as newer
 * ring-codec's {@code form-decode-map} and the WHATWG URL standard do, where Ring 1.8.2 returned
 * {@code {}} (an artefact of its string-or-map {@code form-decode}); (2) bad input is an error,
 * not silently dropped: see below.
 *
 * <p>Bad input: a {@code %} not followed by two hex digits, or a run of percent-encoded bytes
 * that is not valid in the charset (for UTF-8: overlong forms, surrogates, truncated or stray
 * continuation bytes; decoding is strict, nothing is replaced by U+FFFD), throws
 * {@link MalformedInputException} with a short message naming what was wrong and where, e.g.
 * {@code "malformed percent-encoding in query string at index 5"}. Ring 1.8.2 instead dropped
 * the pair silently (bad hex) or put U+FFFD in the value (bad bytes). The message never quotes
 * the input, so it is safe to send to a client.
 *
 * <p>Limits: at most {@code maxParams} parameters (pairs, a repeated name counted each time;
 * {@link #DEFAULT_MAX_PARAMS} unless the caller says otherwise), else a
 * {@link MalformedInputException} with status 400 ({@code "more than 1000 parameters in query
 * string"}), or 413 from the {@code decodeBody} methods; and at most {@link KeyHashes#MAX_SHARED}
 * distinct names of one hash, else a 400 ({@code "too many parameter names with colliding
 * hashes in form body"}), checked before any name becomes a keyword.
 *
 * <p>Threading: stateless; every method may be called from any thread, including an event loop
 * (none blocks, except {@link #readBody} on a stream that blocks). The returned maps are
 * immutable.
 *
 * <p>Cost: one pass over the chars; keys and values without {@code %} or {@code +} are plain
 * substrings; the result map is built once, at the end, as a {@link PersistentArrayMap} (up to
 * eight keys) or a {@link PersistentHashMap}. Linear in the worst case too: colliding names are
 * refused before the hash map is built, so it never holds more than a few keys of one hash.
 */
public final class FormCodec {
  private static final Charset UTF_8 = StandardCharsets.UTF_8;
  private static final Charset ISO_8859_1 = StandardCharsets.ISO_8859_1;
  private static final Charset US_ASCII = StandardCharsets.US_ASCII;

  /**
   * The most parameters a query string or form body may have unless the caller says otherwise:
   * Jetty's default for form keys, and far more than an HTML form or a URL carries.
   */
  public static final int DEFAULT_MAX_PARAMS = 1000;

  /** Result maps with more keys than this are hash maps (Clojure's own threshold). */
  private static final int ARRAY_MAP_MAX = 8;

  private FormCodec() {}

  /** {@link #decode(String, Charset, boolean, String)} in UTF-8, with string keys. */
  public static IPersistentMap decode(String encoded) {
    return decode(encoded, UTF_8, false, "form data");
  }

  /** {@link #decode(String, Charset, boolean, String)}, naming the input "form data". */
  public static IPersistentMap decode(String encoded, Charset charset, boolean keywords) {
    return decode(encoded, charset, keywords, "form data");
  }

  /** {@link #decode(String, Charset, boolean, String, int)} with {@link #DEFAULT_MAX_PARAMS}. */
  public static IPersistentMap decode(String encoded, Charset charset, boolean keywords,
                                      String source) {
    return decode(encoded, charset, keywords, source, DEFAULT_MAX_PARAMS, 400);
  }

  /**
   * Decodes {@code encoded} (null is the empty map) into a persistent map of String or Keyword
   * keys to String values, or vectors of them for repeated keys.
   *
   * @param charset the charset of the percent-encoded bytes; null means UTF-8
   * @param keywords keywordize keys that have Ring's keyword syntax
   * @param source what the input is, for error messages ("query string", "form body")
   * @param maxParams the most parameters (pairs) accepted, at least 1
   * @throws MalformedInputException (status 400) on bad percent-encoding, bytes invalid in the
   *     charset, more than {@code maxParams} parameters, or more than
   *     {@link KeyHashes#MAX_SHARED} names of one hash
   */
  public static IPersistentMap decode(String encoded, Charset charset, boolean keywords,
                                      String source, int maxParams) {
    return decode(encoded, charset, keywords, source, maxParams, 400);
  }

  /**
   * {@link #decode(String, Charset, boolean, String, int)} of a form body already read into a
   * String, naming it "form body"; more than {@code maxParams} parameters are a 413.
   */
  public static IPersistentMap decodeBody(String body, Charset charset, boolean keywords,
                                          int maxParams) {
    return decode(body, charset, keywords, "form body", maxParams, 413);
  }

  /** @param tooMany the status of the exception for more than {@code maxParams} parameters */
  private static IPersistentMap decode(String encoded, Charset charset, boolean keywords,
                                       String source, int maxParams, int tooMany) {
    if (maxParams < 1) throw new IllegalArgumentException("maxParams must be at least 1");
    if (encoded == null || encoded.isEmpty()) return PersistentArrayMap.EMPTY;
    Charset cs = charset == null ? UTF_8 : charset;
    Acc acc = new Acc();
    int n = encoded.length();
    int start = 0;
    int eq = -1;
    boolean keyEncoded = false;
    boolean valEncoded = false;
    int pairs = 0;
    for (int i = 0; i < n; i++) {
      char c = encoded.charAt(i);
      if (c == '&') {
        if (i > start) {
          if (++pairs > maxParams) throw tooMany(source, maxParams, start, tooMany);
          pair(acc, encoded, start, eq, i, keyEncoded, valEncoded, cs, source);
        }
        start = i + 1;
        eq = -1;
        keyEncoded = false;
        valEncoded = false;
      } else if (c == '=') {
        if (eq < 0) eq = i;
      } else if (c == '%' || c == '+') {
        if (eq < 0) keyEncoded = true; else valEncoded = true;
      }
    }
    if (n > start) {
      if (++pairs > maxParams) throw tooMany(source, maxParams, start, tooMany);
      pair(acc, encoded, start, eq, n, keyEncoded, valEncoded, cs, source);
    }
    return acc.toMap(keywords, source);
  }

  private static MalformedInputException tooMany(String source, int max, int at, int status) {
    return new MalformedInputException("more than " + max + " parameters in " + source, at, status);
  }

  private static void pair(Acc acc, String s, int start, int eq, int end, boolean keyEncoded,
                           boolean valEncoded, Charset cs, String source) {
    if (eq < 0) {
      acc.put(part(s, start, end, keyEncoded, cs, source), "");
    } else {
      acc.put(part(s, start, eq, keyEncoded, cs, source),
              part(s, eq + 1, end, valEncoded, cs, source));
    }
  }

  private static String part(String s, int from, int to, boolean encoded, Charset cs,
                             String source) {
    if (from == to) return "";
    return encoded ? decodeRange(s, from, to, cs, source) : s.substring(from, to);
  }

  /**
   * Decodes one key or value, {@code s[from, to)}, which contains a {@code %} or a {@code +}.
   * Positions in error messages are indices into the whole of {@code s}.
   */
  private static String decodeRange(String s, int from, int to, Charset cs, String source) {
    StringBuilder sb = new StringBuilder(to - from);
    byte[] buf = null;
    int plain = from;
    int i = from;
    while (i < to) {
      char c = s.charAt(i);
      if (c == '+') {
        sb.append(s, plain, i).append(' ');
        plain = ++i;
      } else if (c == '%') {
        sb.append(s, plain, i);
        // later runs in this range are shorter than what is left now, so one buffer serves all
        if (buf == null) buf = new byte[(to - i) / 3 + 1];
        int run = i;
        int nb = 0;
        while (i < to && s.charAt(i) == '%') {
          int hi;
          int lo;
          if (i + 2 >= to || (hi = hex(s.charAt(i + 1))) < 0 || (lo = hex(s.charAt(i + 2))) < 0) {
            throw new MalformedInputException(
                "malformed percent-encoding in " + source + " at index " + i, i);
          }
          buf[nb++] = (byte) ((hi << 4) | lo);
          i += 3;
        }
        int bad = StrictDecoder.decode(buf, 0, nb, cs, sb);
        if (bad >= 0) {
          int at = run + 3 * bad;
          throw new MalformedInputException(
              "invalid " + cs.name() + " in " + source + " at index " + at, at);
        }
        plain = i;
      } else {
        i++;
      }
    }
    return sb.append(s, plain, to).toString();
  }

  private static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  /**
   * Reads {@code body} to its end, closes it, and decodes its bytes strictly in {@code charset}
   * (null means UTF-8).
   *
   * @throws MalformedInputException when the bytes are not valid in the charset; the message
   *     names the byte offset ("invalid UTF-8 in form body at byte 12")
   * @throws UncheckedIOException when reading fails
   */
  public static String readBody(InputStream body, Charset charset) {
    Charset cs = charset == null ? UTF_8 : charset;
    byte[] b;
    try (InputStream in = body) {
      b = in.readAllBytes();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    if (cs == UTF_8 || cs == ISO_8859_1 || cs == US_ASCII) {
      boolean ascii = true;
      for (byte x : b) {
        if (x < 0) { ascii = false; break; }
      }
      // compact strings: an ASCII byte[] becomes a Latin-1 String with a plain copy
      if (ascii || cs == ISO_8859_1) return new String(b, ISO_8859_1);
    }
    StringBuilder sb = new StringBuilder(b.length);
    int bad = StrictDecoder.decode(b, 0, b.length, cs, sb);
    if (bad >= 0) {
      throw new MalformedInputException("invalid " + cs.name() + " in form body at byte " + bad, bad);
    }
    return sb.toString();
  }

  /** {@link #decodeBody(InputStream, Charset, boolean, int)} with {@link #DEFAULT_MAX_PARAMS}. */
  public static IPersistentMap decodeBody(InputStream body, Charset charset, boolean keywords) {
    return decodeBody(body, charset, keywords, DEFAULT_MAX_PARAMS);
  }

  /**
   * {@link #readBody} then {@link #decodeBody(String, Charset, boolean, int)}: a form body, whose
   * parameters over {@code maxParams} are a 413 ({@link MalformedInputException#status()}).
   */
  public static IPersistentMap decodeBody(InputStream body, Charset charset, boolean keywords,
                                          int maxParams) {
    return decodeBody(readBody(body, charset), charset, keywords, maxParams);
  }

  /**
   * Ring's rule ({@code ring.middleware.keyword-params}, without namespaces) for a key that may
   * become a keyword: {@code [\p{L}*+!_?-][\p{L}\d*+!_?-]*}, where {@code \d} is ASCII 0-9.
   * So {@code "a"}, {@code "é"}, {@code "a-1"} qualify; {@code ""}, {@code "1a"},
   * {@code "a.b"}, {@code "a/b"}, {@code "a b"} do not.
   */
  public static boolean isKeywordSyntax(String s) {
    int n = s.length();
    if (n == 0) return false;
    int i = 0;
    while (i < n) {
      int cp = s.codePointAt(i);
      boolean ok = Character.isLetter(cp)
          || cp == '*' || cp == '+' || cp == '!' || cp == '_' || cp == '?' || cp == '-'
          || (i > 0 && cp >= '0' && cp <= '9');
      if (!ok) return false;
      i += Character.charCount(cp);
    }
    return true;
  }

  /**
   * Ring's rule with {@code :parse-namespaces? true} for a namespaced key:
   * {@code [\p{L}*+!_?-][\p{L}\d*+!_?.-]* / [\p{L}*+!_?-][\p{L}\d*+!_?-]*} (no spaces): one
   * {@code /}, a namespace that may also hold {@code .}, and a name as {@link #isKeywordSyntax}.
   * So {@code "ns/a"} and {@code "a.b/c"} qualify; {@code "/a"}, {@code "a/"}, {@code "1a/b"},
   * {@code "a/b/c"} do not.
   */
  public static boolean isNamespacedKeywordSyntax(String s) {
    int slash = s.indexOf('/');
    if (slash <= 0 || !isKeywordSyntax(s.substring(slash + 1))) return false;
    for (int i = 0; i < slash; ) {
      int cp = s.codePointAt(i);
      boolean ok = Character.isLetter(cp)
          || cp == '*' || cp == '+' || cp == '!' || cp == '_' || cp == '?' || cp == '-'
          || (i > 0 && (cp == '.' || cp >= '0' && cp <= '9'));
      if (!ok) return false;
      i += Character.charCount(cp);
    }
    return true;
  }

  /** {@code k} as a keyword when it has keyword syntax, else {@code k} itself. */
  public static Object keywordKey(String k) {
    return KEYS.get(k);
  }

  /**
   * {@code k} as a keyword when it has keyword syntax, or with {@code namespaces} namespaced
   * keyword syntax ({@link #isNamespacedKeywordSyntax}: {@code "ns/a"} becomes {@code :ns/a});
   * else {@code k} itself.
   */
  public static Object keywordKey(String k, boolean namespaces) {
    return namespaces ? NAMESPACED_KEYS.get(k) : KEYS.get(k);
  }

  private static final KeywordCache KEYS =
      new KeywordCache(k -> isKeywordSyntax(k) ? Keyword.intern(null, k) : k);

  private static final KeywordCache NAMESPACED_KEYS = new KeywordCache(k -> {
    if (isKeywordSyntax(k)) return Keyword.intern(null, k);
    if (!isNamespacedKeywordSyntax(k)) return k;
    int slash = k.indexOf('/');
    return Keyword.intern(k.substring(0, slash), k.substring(slash + 1));
  });

  /** The values of a key seen more than once, in order. */
  private static final class Multi {
    Object[] items;
    int n;

    Multi(String first, String second) {
      items = new Object[] {first, second, null, null};
      n = 2;
    }

    void add(String v) {
      if (n == items.length) {
        Object[] bigger = new Object[n * 2];
        System.arraycopy(items, 0, bigger, 0, n);
        items = bigger;
      }
      items[n++] = v;
    }

    Object toVector() {
      Object[] exact = new Object[n];
      System.arraycopy(items, 0, exact, 0, n);
      return LazilyPersistentVector.createOwning(exact);
    }
  }

  /** Keys in first-seen order; a linear scan while small, a hash index once large. */
  private static final class Acc {
    String[] keys = new String[ARRAY_MAP_MAX];
    Object[] vals = new Object[ARRAY_MAP_MAX];
    int n;
    HashMap<String, Integer> index;

    void put(String k, String v) {
      int at = find(k);
      if (at < 0) {
        if (n == keys.length) {
          String[] ks = new String[n * 2];
          Object[] vs = new Object[n * 2];
          System.arraycopy(keys, 0, ks, 0, n);
          System.arraycopy(vals, 0, vs, 0, n);
          keys = ks;
          vals = vs;
        }
        keys[n] = k;
        vals[n] = v;
        if (index != null) {
          index.put(k, n);
        } else if (n == ARRAY_MAP_MAX) {
          index = new HashMap<>(64);
          for (int j = 0; j <= n; j++) index.put(keys[j], j);
        }
        n++;
      } else {
        Object cur = vals[at];
        if (cur instanceof Multi) ((Multi) cur).add(v);
        else vals[at] = new Multi((String) cur, v);
      }
    }

    private int find(String k) {
      if (index != null) {
        Integer at = index.get(k);
        return at == null ? -1 : at;
      }
      for (int j = 0; j < n; j++) {
        if (k.equals(keys[j])) return j;
      }
      return -1;
    }

    /**
     * The map, once its names pass the hash check: before any becomes a keyword (interning
     * colliding names would load the global keyword table), and for keyword keys once more,
     * since a keyword's hash is not its name's.
     */
    IPersistentMap toMap(boolean keywords, String source) {
      if (n == 0) return PersistentArrayMap.EMPTY;
      boolean big = n > ARRAY_MAP_MAX;
      if (big && KeyHashes.tooManyShared(keys, 0, 1, n)) throw colliding(source);
      Object[] kv = new Object[n * 2];
      for (int j = 0; j < n; j++) {
        kv[2 * j] = keywords ? keywordKey(keys[j]) : keys[j];
        Object v = vals[j];
        kv[2 * j + 1] = v instanceof Multi ? ((Multi) v).toVector() : v;
      }
      if (!big) return new PersistentArrayMap(kv);
      if (keywords && KeyHashes.tooManyShared(kv, 0, 2, n)) throw colliding(source);
      return PersistentHashMap.create(kv);
    }

    private static MalformedInputException colliding(String source) {
      return new MalformedInputException(
          "too many parameter names with colliding hashes in " + source, -1, 400);
    }
  }
}
