package donkey.route;

import clojure.lang.IPersistentMap;
import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;
import clojure.lang.PersistentHashMap;
import donkey.codec.Accept;
import donkey.codec.ContentType;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/**
 * A route table compiled once: literal paths in a hash map, {@code :param} paths in a segment
 * trie (literal segments win over parameters, with backtracking), full-path regexes tried in
 * declaration order after both. Routes with the same path are told apart by method,
 * {@code :consumes} and {@code :produces}.
 *
 * <p>Threading: immutable after {@link #compile}; {@link #match} may run on any thread at once.
 *
 * <p>Bad input: {@link #compile} rejects invalid and duplicate routes with an
 * {@link IllegalArgumentException} naming the route; {@link #match} answers a percent-encoding
 * error in a path parameter with status 400.
 */
public final class Router {
  /** The result of matching one request. */
  public static final class Match {
    /** 0 when a route matched; otherwise the status to answer (400, 404, 405, 406, 415). */
    public final int status;
    public final Route route;
    /** {@code :path-params} of the match (keyword keys; positional regex groups by index). */
    public final IPersistentMap pathParams;
    /** The {@code Allow} header value of a 405. */
    public final String allow;
    /** A short explanation for an error status. */
    public final String message;

    Match(int status, Route route, IPersistentMap pathParams, String allow, String message) {
      this.status = status;
      this.route = route;
      this.pathParams = pathParams;
      this.allow = allow;
      this.message = message;
    }
  }

  private static final class Node {
    final HashMap<String, Node> literal = new HashMap<>();
    Node param;
    List<Route> routes;
  }

  private static final Match NOT_FOUND = new Match(404, null, null, null, "Not Found");

  private final HashMap<String, List<Route>> exact = new HashMap<>();
  /**
   * For each literal path whose routes negotiate no media types, the outcome of every
   * {@link #METHODS} method, worked out at compile time: a request with one of them is
   * matched by finding its path (see {@link #scannedPaths}), with no allocation.
   */
  private final HashMap<String, Match[]> exactOutcomes = new HashMap<>();
  /**
   * The keys and values of {@link #exactOutcomes} as arrays when there are at most
   * {@link #SCANNED} of them, else null: a request's path is a new String, so a hash lookup
   * first hashes all of it, where a scan compares lengths and then one candidate's bytes.
   */
  private String[] scannedPaths;
  private Match[][] scannedOutcomes;
  private static final int SCANNED = 8;
  /** The methods whose outcomes are precomputed; Vert.x names them with these literals. */
  private static final String[] METHODS = {"GET", "POST", "HEAD", "PUT", "DELETE", "PATCH",
      "OPTIONS"};
  private final Node root = new Node();
  private final List<Pattern> patterns = new ArrayList<>();
  private final List<String[]> patternNames = new ArrayList<>();
  private final List<List<Route>> patternRoutes = new ArrayList<>();
  private boolean mediaTypes;

  private Router() {}

  /**
   * True when some route has {@code :consumes} or {@code :produces}, so {@link #match} reads
   * the request's Content-Type and Accept; false when it never looks at them (null will do).
   */
  public boolean needsMediaTypes() {
    return mediaTypes;
  }

  /**
   * Compiles {@code routes}, in declaration order.
   *
   * @throws IllegalArgumentException for an invalid path or regex, a parameter name used twice
   *     in one path, or two routes that would serve the same requests
   */
  public static Router compile(List<Route> routes) {
    Router r = new Router();
    Map<String, List<Route>> byPattern = new HashMap<>();
    for (Route route : routes) {
      r.mediaTypes |= route.negotiates();
      String key = route.regex ? "regex:" + route.path : "simple:" + r.addSimpleKey(route);
      List<Route> group = byPattern.computeIfAbsent(key, k -> new ArrayList<>());
      for (Route other : group) {
        if (overlaps(route, other)) {
          throw new IllegalArgumentException("duplicate route " + route + ": it serves the same "
              + "requests as " + other);
        }
      }
      group.add(route);
      if (group.size() > 1) continue;
      if (route.regex) {
        try {
          r.patterns.add(Pattern.compile(route.path));
          r.patternNames.add(groupNames(route.path));
        } catch (PatternSyntaxException e) {
          throw route.invalid("bad regex: " + e.getDescription());
        }
        r.patternRoutes.add(group);
      } else if (route.paramKeys.length == 0) {
        r.exact.put(route.path, group);
      } else {
        Node n = r.root;
        for (String seg : segments(route.path)) {
          if (seg.startsWith(":")) {
            if (n.param == null) n.param = new Node();
            n = n.param;
          } else {
            n = n.literal.computeIfAbsent(seg, k -> new Node());
          }
        }
        n.routes = group;
      }
    }
    for (Map.Entry<String, List<Route>> e : r.exact.entrySet()) {
      List<Route> group = e.getValue();
      if (group.stream().anyMatch(Route::negotiates)) continue;
      Match[] outcomes = new Match[METHODS.length];
      for (int i = 0; i < METHODS.length; i++) {
        outcomes[i] = select(group, METHODS[i], null, null, PersistentArrayMap.EMPTY);
      }
      r.exactOutcomes.put(e.getKey(), outcomes);
    }
    if (r.exactOutcomes.size() <= SCANNED) {
      r.scannedPaths = r.exactOutcomes.keySet().toArray(new String[0]);
      r.scannedOutcomes = new Match[r.scannedPaths.length][];
      for (int i = 0; i < r.scannedPaths.length; i++) {
        r.scannedOutcomes[i] = r.exactOutcomes.get(r.scannedPaths[i]);
      }
    }
    return r;
  }

  /** Validates a simple path, records its parameter keywords, returns its shape key. */
  private String addSimpleKey(Route route) {
    if (!route.path.startsWith("/")) throw route.invalid("a :simple path must start with /");
    List<String> names = new ArrayList<>();
    StringBuilder shape = new StringBuilder();
    for (String seg : segments(route.path)) {
      shape.append('/');
      if (seg.startsWith(":")) {
        String name = seg.substring(1);
        if (name.isEmpty()) throw route.invalid("empty parameter name");
        if (names.contains(name)) throw route.invalid("parameter :" + name + " used twice");
        names.add(name);
        shape.append(':');
      } else {
        if (seg.indexOf(':') >= 0) throw route.invalid("':' inside a segment: " + seg);
        shape.append(seg);
      }
    }
    route.paramKeys = new Keyword[names.size()];
    for (int i = 0; i < names.size(); i++) route.paramKeys[i] = Keyword.intern(names.get(i));
    return shape.toString();
  }

  private static boolean overlaps(Route a, Route b) {
    boolean methods = a.methods.length == 0 || b.methods.length == 0;
    for (String m : a.methods) methods |= b.allows(m);
    return methods && sameSet(a.consumes, b.consumes) && sameSet(a.produces, b.produces);
  }

  private static boolean sameSet(String[] a, String[] b) {
    return Set.of(a).equals(Set.of(b));
  }

  /** The segments of a path after the leading '/'; "/" has one empty segment. */
  private static String[] segments(String path) {
    return path.substring(1).split("/", -1);
  }

  /**
   * Finds the route for a request.
   *
   * @param method upper-case method name
   * @param path the raw (percent-encoded) path
   * @param contentType the request's Content-Type, or null
   * @param accept the request's Accept, or null
   */
  public Match match(String method, String path, String contentType, String accept) {
    return match(method, path, contentType, accept, null);
  }

  /**
   * {@link #match(String, String, String, String)} that first asks {@code memo}, the calling
   * event loop's own, whether {@code path} is the very instance it routed last.
   */
  public Match match(String method, String path, String contentType, String accept,
                     PathMemo memo) {
    Match[] outcomes;
    if (memo != null && memo.path == path && memo.router == this) {
      outcomes = memo.outcomes;
    } else {
      outcomes = literalOutcomes(path);
      if (outcomes != null && memo != null) {
        memo.router = this;
        memo.path = path;
        memo.outcomes = outcomes;
      }
    }
    if (outcomes != null) {
      for (int i = 0; i < METHODS.length; i++) {
        if (METHODS[i] == method) return outcomes[i];
      }
    }
    List<Route> group = exact.get(path);
    IPersistentMap params = PersistentArrayMap.EMPTY;
    if (group == null && (root.param != null || !root.literal.isEmpty())) {
      String[] values = new String[16];
      Node n = walk(root, path, 1, values, 0);
      if (n != null) {
        group = n.routes;
        try {
          params = params(group.get(0).paramKeys, values);
        } catch (IllegalArgumentException e) {
          return new Match(400, null, null, null, "Bad Request: " + e.getMessage());
        }
      }
    }
    if (group == null) {
      for (int i = 0; i < patterns.size(); i++) {
        Matcher m = patterns.get(i).matcher(path);
        if (m.matches()) {
          group = patternRoutes.get(i);
          try {
            params = groups(patternNames.get(i), m);
          } catch (IllegalArgumentException e) {
            return new Match(400, null, null, null, "Bad Request: " + e.getMessage());
          }
          break;
        }
      }
    }
    if (group == null) return NOT_FOUND;
    return select(group, method, contentType, accept, params);
  }

  /** The precomputed outcomes of a literal path, or null. */
  private Match[] literalOutcomes(String path) {
    String[] paths = scannedPaths;
    if (paths == null) return exactOutcomes.get(path);
    int n = path.length();
    for (int i = 0; i < paths.length; i++) {
      if (paths[i].length() == n && paths[i].equals(path)) return scannedOutcomes[i];
    }
    return null;
  }

  private static Match select(List<Route> group, String method, String contentType,
                              String accept, IPersistentMap params) {
    boolean methodOk = false;
    boolean consumesOk = false;
    Route best = null;
    double bestQ = 0;
    for (int pass = 0; pass < 2 && best == null; pass++) {
      // HEAD falls back to the GET routes when no route takes HEAD itself.
      String m = pass == 0 ? method : "GET";
      if (pass == 1 && (!method.equals("HEAD") || methodOk)) break;
      for (Route r : group) {
        if (!r.allows(m)) continue;
        methodOk = true;
        if (r.consumes.length > 0 && !anyCovers(r.consumes, contentType)) continue;
        consumesOk = true;
        // The route whose best produced type the client rates highest wins; declaration
        // order breaks ties, and a route without :produces rates 1.
        double q = r.produces.length == 0 ? 1.0 : bestQuality(r.produces, accept);
        if (q > bestQ) {
          bestQ = q;
          best = r;
        }
      }
    }
    if (best != null) return new Match(0, best, params, null, null);
    if (!methodOk) return new Match(405, null, null, allow(group), "Method Not Allowed");
    if (!consumesOk) return new Match(415, null, null, null, "Unsupported Media Type");
    return new Match(406, null, null, null, "Not Acceptable");
  }

  private static boolean anyCovers(String[] ranges, String contentType) {
    for (String r : ranges) if (ContentType.inRange(contentType, r)) return true;
    return false;
  }

  /** The highest quality the Accept header gives any of {@code produces}; 0 for none. */
  static double bestQuality(String[] produces, String accept) {
    double best = 0;
    for (String p : produces) best = Math.max(best, Accept.quality(accept, p));
    return best;
  }

  private static String allow(List<Route> group) {
    Set<String> methods = new LinkedHashSet<>();
    for (Route r : group) {
      if (r.methods.length == 0) return "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT";
      for (String m : r.methods) methods.add(m);
    }
    if (methods.contains("GET")) methods.add("HEAD");
    return String.join(", ", methods);
  }

  /** Depth-first trie walk from {@code pos}; literal children first, then the parameter. */
  private static Node walk(Node n, String path, int pos, String[] values, int depth) {
    int end = path.indexOf('/', pos);
    if (end < 0) end = path.length();
    String seg = path.substring(pos, end);
    boolean last = end == path.length();
    Node lit = n.literal.get(seg);
    if (lit != null) {
      Node found = last ? (lit.routes != null ? lit : null) : walk(lit, path, end + 1, values, depth);
      if (found != null) return found;
    }
    if (n.param != null && !seg.isEmpty() && depth < values.length) {
      values[depth] = seg;
      Node p = n.param;
      Node found = last ? (p.routes != null ? p : null) : walk(p, path, end + 1, values, depth + 1);
      if (found != null) return found;
    }
    return null;
  }

  private static IPersistentMap params(Keyword[] keys, String[] values) {
    Object[] kv = new Object[keys.length * 2];
    for (int i = 0; i < keys.length; i++) {
      kv[2 * i] = keys[i];
      kv[2 * i + 1] = decode(values[i]);
    }
    return kv.length <= 16 ? new PersistentArrayMap(kv) : PersistentHashMap.create(kv);
  }

  /** The names of the named groups of a regex ({@code (?<name>...)}), Java 17 has no API for it. */
  private static String[] groupNames(String regex) {
    List<String> names = new ArrayList<>();
    Matcher m = Pattern.compile("(?<!\\\\)\\(\\?<([a-zA-Z][a-zA-Z0-9]*)>").matcher(regex);
    while (m.find()) names.add(m.group(1));
    return names.toArray(new String[0]);
  }

  private static IPersistentMap groups(String[] names, Matcher m) {
    List<Object> kv = new ArrayList<>();
    for (int g = 1; g <= m.groupCount(); g++) {
      String v = m.group(g);
      if (v == null) continue;
      kv.add(Long.valueOf(g));
      kv.add(decode(v));
    }
    for (String name : names) {
      String v = m.group(name);
      if (v == null) continue;
      kv.add(Keyword.intern(name));
      kv.add(decode(v));
    }
    Object[] a = kv.toArray();
    return a.length <= 16 ? new PersistentArrayMap(a) : PersistentHashMap.create(a);
  }

  /** Percent-decodes a path segment as UTF-8 ({@code +} stays a plus). */
  static String decode(String s) {
    int pct = s.indexOf('%');
    if (pct < 0) return s;
    byte[] out = new byte[s.length()];
    int n = 0;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '%') {
        if (i + 2 >= s.length()) throw new IllegalArgumentException("malformed percent-encoding in path");
        int hi = Character.digit(s.charAt(i + 1), 16);
        int lo = Character.digit(s.charAt(i + 2), 16);
        if (hi < 0 || lo < 0) throw new IllegalArgumentException("malformed percent-encoding in path");
        out[n++] = (byte) ((hi << 4) | lo);
        i += 2;
      } else if (c < 0x80) {
        out[n++] = (byte) c;
      } else {
        byte[] b = String.valueOf(c).getBytes(StandardCharsets.UTF_8);
        if (n + b.length > out.length) out = java.util.Arrays.copyOf(out, out.length * 2 + b.length);
        System.arraycopy(b, 0, out, n, b.length);
        n += b.length;
      }
    }
    return new String(out, 0, n, StandardCharsets.UTF_8);
  }
}
