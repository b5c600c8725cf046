package donkey.route;

import clojure.lang.IFn;
import donkey.codec.ContentType;
import java.util.Arrays;
import java.util.Locale;

/**
 * One compiled route: a path pattern, the methods and media types it accepts, and the handler
 * (with its middleware already applied) in the mode it runs in. Immutable.
 */
public final class Route {
  /** How a route's handler runs. */
  public enum Mode {
    /** 1-arity handler on the worker executor (platform or virtual threads). */
    BLOCKING,
    /** 3-arity handler on the event loop; it must not block. */
    NON_BLOCKING
  }

  final String path;
  final boolean regex;
  /** Upper-case method names; empty means every method. */
  final String[] methods;
  /** Lower-case media ranges the request body may have; empty means any. */
  final String[] consumes;
  /** Lower-case media types the handler can produce; empty means no negotiation. */
  final String[] produces;
  final IFn handler;
  final Mode mode;
  /** False when the route's responses are never compressed ({@code :compress? false}). */
  private final boolean compress;
  /** The route's {@code :max-body-size}, or -1 for the server's. */
  private final long maxBodySize;
  /** The parameters of a {@code :simple} path, in order, as keys of {@code :path-params}. */
  clojure.lang.Keyword[] paramKeys = new clojure.lang.Keyword[0];

  /**
   * @param path a {@code :simple} path ({@code /users/:id}) or a full-path regex
   * @throws IllegalArgumentException naming the route when an argument is invalid
   */
  public Route(String path, boolean regex, String[] methods, String[] consumes,
               String[] produces, IFn handler, Mode mode) {
    this(path, regex, methods, consumes, produces, handler, mode, true, -1);
  }

  /**
   * As the other constructor, with {@code compress} false for a route whose responses the
   * server never compresses, and {@code maxBodySize} the largest request body the route takes
   * (-1: the server's {@code :max-body-size}).
   */
  public Route(String path, boolean regex, String[] methods, String[] consumes,
               String[] produces, IFn handler, Mode mode, boolean compress, long maxBodySize) {
    this.compress = compress;
    this.maxBodySize = maxBodySize;
    this.path = path;
    this.regex = regex;
    this.methods = upper(methods);
    this.consumes = lower(consumes);
    this.produces = lower(produces);
    this.handler = handler;
    this.mode = mode;
    if (path == null || path.isEmpty()) throw invalid("empty path");
    if (handler == null) throw invalid("no :handler");
    if (mode == null) throw invalid("no :handler-mode");
    linkForInlining(handler);
    for (String m : this.consumes) checkRange(m);
    for (String m : this.produces) checkRange(m);
  }

  /**
   * Has the class loader of {@code fn}'s class resolve {@code java.lang.Object}, the one class
   * of {@code IFn.invoke}'s signatures: C2 does not inline a method whose signature names a
   * class its holder's loader has not resolved, and a fn compiled at run time has a fresh
   * {@code DynamicClassLoader} that often has not (the handlers of an application loaded from
   * source). Harmless for any other class; called at
   * start-up, any thread.
   */
  public static void linkForInlining(Object fn) {
    if (fn == null) return;
    ClassLoader loader = fn.getClass().getClassLoader();
    if (loader == null) return;
    try {
      Class.forName("java.lang.Object", false, loader);
    } catch (ClassNotFoundException | LinkageError e) {
      // a loader that cannot find Object cannot have loaded fn; nothing to do
    }
  }

  private void checkRange(String range) {
    if (!ContentType.isRange(range)) {
      throw invalid("bad media type \"" + range + "\" (expected type/subtype, type/* or */*)");
    }
  }

  /** The route as a log names it: its methods and path pattern ({@code "GET /users/:id"}). */
  public String describe() {
    return (methods.length == 0 ? "ANY" : String.join(",", methods)) + " " + path;
  }

  /** The route's path pattern as given: a {@code :simple} path or a regex. */
  public String path() {
    return path;
  }

  /** The route's largest request body, or -1 for the server's {@code :max-body-size}. */
  public long maxBodySize() {
    return maxBodySize;
  }

  /** False when the route turned response compression off. */
  public boolean compresses() {
    return compress;
  }

  /** The handler, with the route's and the server's middleware applied. */
  public IFn handler() {
    return handler;
  }

  /** The mode the handler runs in. */
  public Mode mode() {
    return mode;
  }

  /** True when the route has {@code :consumes} or {@code :produces}. */
  boolean negotiates() {
    return consumes.length > 0 || produces.length > 0;
  }

  boolean allows(String method) {
    if (methods.length == 0) return true;
    for (String m : methods) if (m.equals(method)) return true;
    return false;
  }

  IllegalArgumentException invalid(String why) {
    return new IllegalArgumentException("invalid route " + this + ": " + why);
  }

  @Override
  public String toString() {
    return (methods.length == 0 ? "ANY" : String.join(",", methods)) + " " + path
        + (regex ? " (regex)" : "")
        + (consumes.length == 0 ? "" : " consumes " + Arrays.toString(consumes))
        + (produces.length == 0 ? "" : " produces " + Arrays.toString(produces));
  }

  private static String[] upper(String[] a) {
    String[] out = a == null ? new String[0] : a.clone();
    for (int i = 0; i < out.length; i++) out[i] = out[i].toUpperCase(Locale.ROOT);
    return out;
  }

  private static String[] lower(String[] a) {
    String[] out = a == null ? new String[0] : a.clone();
    for (int i = 0; i < out.length; i++) out[i] = out[i].trim().toLowerCase(Locale.ROOT);
    return out;
  }
}
