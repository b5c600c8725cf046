package donkey.codec;

import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.nio.charset.UnsupportedCharsetException;
import java.util.Locale;
import java.util.Map;

/**
 * The one parser of media types and their parameters (RFC 9110 sections 8.3.1, 5.6.6 and
 * 12.5.1): the Content-Type of requests and responses, the media ranges of Accept, and the
 * parameter lists of headers built the same way (a multipart part's Content-Disposition);
 * {@link Accept} reads Accept lists with this grammar.
 *
 * <pre>
 *   media-type = type "/" subtype *( OWS ";" OWS [ parameter ] )
 *   parameter  = name "=" ( token / quoted-string )
 * </pre>
 *
 * <p>Type, subtype and parameter names are tokens, compared ignoring case; results name them in
 * lower case. Whitespace is allowed around the whole value, before each {@code ;} and around
 * {@code =}; empty parameters ({@code ;;}, a trailing {@code ;}) are skipped. A quoted value
 * has its quoted pairs undone ({@code "a\"b"} is {@code a"b}). An unquoted value is lenient: any
 * run of visible characters except {@code "} and {@code ;} (so a multipart boundary such as
 * {@code ----=_Part_1} works unquoted). Of a repeated parameter the first is used.
 *
 * <p>Malformed input gives a predictable, partial answer, never an exception: a value whose
 * type or subtype is missing or not a token (or that has anything but parameters after them)
 * has no media type and no parameters; a malformed parameter (no {@code =}, an empty or
 * invalid name or value, an unterminated quoted string, text after a value) ends the list, so
 * it and every parameter after it are ignored.
 *
 * <p>Charsets: {@link #charset(String)} is for requests, where an unknown charset is the
 * client's error ({@link UnsupportedCharsetException}: 415 or 400 from the middleware);
 * {@link #responseCharset} is for responses, where it falls back to UTF-8.
 *
 * <p>Cost: no regex; the questions asked per request ({@link #is}, {@link #isJson},
 * {@link #inRange}, a UTF-8 or ISO-8859-1 {@link #charset}) allocate nothing. Stateless; any
 * thread.
 */
public final class ContentType {
  private ContentType() {}

  /** End of list or of an Accept element: no further parameter. */
  static final long END = -1;
  /** Reasons a parameter list stopped early, as negative step results. */
  private static final long BAD_LIST = -2;
  private static final long BAD_NAME = -3;
  private static final long NO_VALUE = -4;
  private static final long BAD_VALUE = -5;
  private static final long UNTERMINATED = -6;

  /** Parameter scanning flags. */
  static final int LIST = 1;
  private static final int RAW_BACKSLASH = 2;

  // ---------------------------------------------------------------------------------------
  // media types

  /**
   * The media type of a Content-Type value, {@code type/subtype} in lower case, without
   * parameters; null when {@code value} is null or has no valid media type.
   */
  public static String mediaType(String value) {
    if (value == null) return null;
    int s = HttpTokens.skipOws(value, 0);
    int e = subtypeEnd(value, s, 0);
    if (e < 0) return null;
    String t = s == 0 && e == value.length() ? value : value.substring(s, e);
    return t.toLowerCase(Locale.ROOT);
  }

  /**
   * True when the media type of {@code value} is {@code type/subtype}, ignoring case and
   * parameters.
   *
   * @param type a token, e.g. {@code "application"}
   * @param subtype a token, e.g. {@code "x-www-form-urlencoded"}
   */
  public static boolean is(String value, String type, String subtype) {
    if (value == null) return false;
    int s = HttpTokens.skipOws(value, 0);
    int slash = s + type.length();
    int e = slash + 1 + subtype.length();
    // type and subtype are tokens, so a value that matches them has a valid media type
    return e <= value.length() && HttpTokens.matches(value, s, type) && value.charAt(slash) == '/'
        && HttpTokens.matches(value, slash + 1, subtype) && endsMediaType(value, e, 0);
  }

  /** True when {@code value} names JSON: {@code application/json} or {@code application/*+json}. */
  public static boolean isJson(String value) {
    if (value == null) return false;
    int s = HttpTokens.skipOws(value, 0);
    if (!HttpTokens.matches(value, s, "application/")) return false;
    int sub = s + 12;
    if (HttpTokens.matches(value, sub, "json") && endsMediaType(value, sub + 4, 0)) return true;
    int e = HttpTokens.tokenEnd(value, sub);
    return e - sub > 5 && HttpTokens.matches(value, e - 5, "+json") && endsMediaType(value, e, 0);
  }

  /**
   * True when the media type of {@code value} is within {@code range}: {@code *}{@code /*},
   * {@code type/*} or {@code type/subtype}, lower case and without parameters (as
   * {@link #isRange} accepts).
   */
  public static boolean inRange(String value, String range) {
    if (value == null) return false;
    int s = HttpTokens.skipOws(value, 0);
    int e = subtypeEnd(value, s, 0);
    if (e < 0) return false;
    int slash = range.indexOf('/');
    if (range.charAt(slash + 1) == '*' && range.length() == slash + 2) {
      if (slash == 1 && range.charAt(0) == '*') return true;
      return HttpTokens.equalsIgnoreCase(value, s, range, 0, slash + 1);
    }
    return e - s == range.length() && HttpTokens.equalsIgnoreCase(value, s, range, 0, e - s);
  }

  /**
   * True when {@code range} is a media range without parameters or whitespace:
   * {@code *}{@code /*}, {@code type/*} or {@code type/subtype}. ({@code *}{@code /subtype} is
   * not one.)
   */
  public static boolean isRange(String range) {
    if (range == null) return false;
    int e = subtypeEnd(range, 0, 0);
    if (e != range.length()) return false;
    int slash = range.indexOf('/');
    boolean anyType = slash == 1 && range.charAt(0) == '*';
    boolean anySubtype = e == slash + 2 && range.charAt(slash + 1) == '*';
    return !anyType || anySubtype;
  }

  // ---------------------------------------------------------------------------------------
  // parameters and charsets

  /**
   * The value of parameter {@code name} (any case) of a Content-Type value, unquoted; null when
   * there is none (see the class comment for malformed values). An empty quoted value is
   * {@code ""}.
   */
  public static String param(String contentType, String name) {
    long b = find(contentType, name);
    return b < 0 ? null : value(contentType, (int) (b >>> 32), (int) b, 0);
  }

  /**
   * The charset a request's Content-Type names, or null when it names none (no or an empty
   * {@code charset} parameter).
   *
   * @throws UnsupportedCharsetException when it names one this JVM does not have, or an
   *     illegal name
   */
  public static Charset charset(String contentType) {
    return charset(contentType, true);
  }

  /**
   * The charset for writing a response of this Content-Type: the one its {@code charset}
   * parameter names, UTF-8 when there is none, the value is malformed or the charset unknown.
   */
  public static Charset responseCharset(String contentType) {
    Charset cs = charset(contentType, false);
    return cs == null ? StandardCharsets.UTF_8 : cs;
  }

  /**
   * The charset called {@code name}, ignoring case and surrounding whitespace; UTF-8,
   * ISO-8859-1 and US-ASCII without a registry lookup.
   *
   * @throws UnsupportedCharsetException when it is unknown or the name is illegal
   */
  public static Charset forName(String name) {
    String n = name.trim();
    Charset cs = known(n, 0, n.length());
    if (cs == null) cs = lookup(n);
    if (cs == null) throw new UnsupportedCharsetException(n);
    return cs;
  }

  private static Charset charset(String contentType, boolean strict) {
    long b = find(contentType, "charset");
    if (b < 0) return null;
    int vs = (int) (b >>> 32);
    int ve = (int) b;
    if (contentType.charAt(vs) == '"') {
      int bs = contentType.indexOf('\\', vs);
      if (bs >= 0 && bs < ve) {
        String name = value(contentType, vs, ve, 0);
        return name.isEmpty() ? null : named(name, 0, name.length(), strict);
      }
      vs++;
      ve--;
    }
    return vs == ve ? null : named(contentType, vs, ve, strict);
  }

  /** The charset named by {@code s[from, to)}: null, or an exception when strict, if unknown. */
  private static Charset named(String s, int from, int to, boolean strict) {
    Charset cs = known(s, from, to);
    if (cs != null) return cs;
    String name = s.substring(from, to);
    cs = lookup(name);
    if (cs == null && strict) throw new UnsupportedCharsetException(name);
    return cs;
  }

  private static Charset known(String s, int from, int to) {
    int len = to - from;
    if (len == 5 && HttpTokens.matches(s, from, "utf-8")) return StandardCharsets.UTF_8;
    if (len == 4 && HttpTokens.matches(s, from, "utf8")) return StandardCharsets.UTF_8;
    if (len == 10 && HttpTokens.matches(s, from, "iso-8859-1")) return StandardCharsets.ISO_8859_1;
    if (len == 8 && HttpTokens.matches(s, from, "us-ascii")) return StandardCharsets.US_ASCII;
    return null;
  }

  private static Charset lookup(String name) {
    try {
      return Charset.isSupported(name) ? Charset.forName(name) : null;
    } catch (IllegalArgumentException e) {
      return null; // an illegal name (IllegalCharsetNameException) or an empty one
    }
  }

  /**
   * Puts the parameters of a header value shaped {@code token *( OWS ";" OWS [ parameter ] )}
   * (a Content-Disposition), from {@code from}, just after its token, into {@code out}: names
   * in lower case, the first of a repeated name kept. A backslash in a quoted value escapes
   * only {@code "} and {@code \} and is otherwise kept, as browsers send Windows paths in
   * filenames unescaped.
   *
   * @return null when the whole list was well-formed, else what ended it early ("unterminated
   *     quoted string", ...); the parameters before it are in {@code out}
   */
  static String params(String value, int from, Map<String, String> out) {
    int i = from;
    while (true) {
      long r = step(value, i, RAW_BACKSLASH);
      if (r == END) return null;
      if (r < 0) return reason(r);
      int ns = (int) (r >>> 32);
      int ve = (int) r;
      int ne = HttpTokens.tokenEnd(value, ns);
      out.putIfAbsent(value.substring(ns, ne).toLowerCase(Locale.ROOT),
                      value(value, valueStart(value, ne), ve, RAW_BACKSLASH));
      i = ve;
    }
  }

  private static String reason(long r) {
    if (r == UNTERMINATED) return "unterminated quoted string";
    if (r == NO_VALUE) return "parameter without a value";
    if (r == BAD_NAME) return "malformed parameter name";
    if (r == BAD_VALUE) return "malformed parameter value";
    return "malformed parameter list";
  }

  // ---------------------------------------------------------------------------------------
  // the grammar

  /**
   * The bounds of parameter {@code name}'s raw value (quotes included) in a media-type value,
   * packed as {@code start << 32 | end}; negative when there is none.
   */
  private static long find(String value, String name) {
    if (value == null) return -1;
    int i = subtypeEnd(value, HttpTokens.skipOws(value, 0), 0);
    if (i < 0) return -1;
    int len = name.length();
    while (true) {
      long r = step(value, i, 0);
      if (r < 0) return -1;
      int ns = (int) (r >>> 32);
      int ve = (int) r;
      if (HttpTokens.matches(value, ns, name) && HttpTokens.tokenEnd(value, ns) == ns + len) {
        return ((long) valueStart(value, ns + len) << 32) | ve;
      }
      i = ve;
    }
  }

  /**
   * The end of a media type {@code type "/" subtype} starting at {@code s}, when only OWS and
   * then the end, a {@code ;} (or with {@link #LIST} a {@code ,}) follow it; else -1.
   */
  static int subtypeEnd(String v, int s, int flags) {
    int slash = HttpTokens.tokenEnd(v, s);
    if (slash == s || slash >= v.length() || v.charAt(slash) != '/') return -1;
    int e = HttpTokens.tokenEnd(v, slash + 1);
    return e > slash + 1 && endsMediaType(v, e, flags) ? e : -1;
  }

  /** True when OWS then the end, a {@code ;} or (with {@link #LIST}) a {@code ,} follow e. */
  private static boolean endsMediaType(String v, int e, int flags) {
    int k = HttpTokens.skipOws(v, e);
    if (k == v.length()) return true;
    char c = v.charAt(k);
    return c == ';' || (c == ',' && (flags & LIST) != 0);
  }

  /**
   * Reads the next parameter from {@code i} (after a media type or a previous parameter's
   * value): {@code nameStart << 32 | valueEnd}, {@link #END} when the list (or the Accept
   * element) is over, or a negative reason when it is malformed.
   */
  static long step(String v, int i, int flags) {
    int n = v.length();
    boolean list = (flags & LIST) != 0;
    while (true) {
      int p = HttpTokens.skipOws(v, i);
      if (p == n || (list && v.charAt(p) == ',')) return END;
      if (v.charAt(p) != ';') return BAD_LIST;
      p = HttpTokens.skipOws(v, p + 1);
      if (p == n || (list && v.charAt(p) == ',')) return END;
      if (v.charAt(p) == ';') {
        i = p; // an empty parameter
        continue;
      }
      int ne = HttpTokens.tokenEnd(v, p);
      if (ne == p) return BAD_NAME;
      int vs = valueStart(v, ne);
      if (vs < 0) return NO_VALUE;
      int ve = valueEnd(v, vs, flags);
      if (ve < 0) return ve;
      int k = HttpTokens.skipOws(v, ve);
      if (k < n && v.charAt(k) != ';' && !(list && v.charAt(k) == ',')) return BAD_LIST;
      return ((long) p << 32) | ve;
    }
  }

  /** Where the value after the name ending at {@code ne} starts ({@code BWS "=" BWS}), or -1. */
  static int valueStart(String v, int ne) {
    int k = HttpTokens.skipOws(v, ne);
    if (k == v.length() || v.charAt(k) != '=') return -1;
    return HttpTokens.skipOws(v, k + 1);
  }

  /** The end of the value at {@code vs} (after its closing quote), or a negative reason. */
  private static int valueEnd(String v, int vs, int flags) {
    int n = v.length();
    if (vs < n && v.charAt(vs) == '"') {
      boolean raw = (flags & RAW_BACKSLASH) != 0;
      for (int j = vs + 1; j < n; j++) {
        char c = v.charAt(j);
        if (c == '"') return j + 1;
        if (c == '\\' && j + 1 < n && (!raw || v.charAt(j + 1) == '"' || v.charAt(j + 1) == '\\')) {
          j++;
        }
      }
      return (int) UNTERMINATED;
    }
    boolean list = (flags & LIST) != 0;
    int j = vs;
    while (j < n) {
      char c = v.charAt(j);
      if (c <= ' ' || c == 0x7f || c == ';' || c == '"' || (list && c == ',')) break;
      j++;
    }
    return j == vs ? (int) BAD_VALUE : j;
  }

  /** The value {@code v[vs, ve)}, its quotes removed and quoted pairs undone. */
  private static String value(String v, int vs, int ve, int flags) {
    if (v.charAt(vs) != '"') return v.substring(vs, ve);
    int from = vs + 1;
    int to = ve - 1;
    int bs = v.indexOf('\\', from);
    if (bs < 0 || bs >= to) return v.substring(from, to);
    boolean raw = (flags & RAW_BACKSLASH) != 0;
    StringBuilder sb = new StringBuilder(to - from);
    for (int j = from; j < to; j++) {
      char c = v.charAt(j);
      if (c == '\\' && j + 1 < to && (!raw || v.charAt(j + 1) == '"' || v.charAt(j + 1) == '\\')) {
        c = v.charAt(++j);
      }
      sb.append(c);
    }
    return sb.toString();
  }
}
