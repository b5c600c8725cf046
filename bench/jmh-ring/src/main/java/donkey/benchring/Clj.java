package donkey.benchring;

import clojure.java.api.Clojure;
import clojure.lang.IFn;

/** Small helpers to reach Clojure from the benchmarks. */
final class Clj {
  private static final IFn REQUIRE = Clojure.var("clojure.core", "require");
  static final IFn EQ = Clojure.var("clojure.core", "=");
  static final IFn PR_STR = Clojure.var("clojure.core", "pr-str");

  private Clj() {}

  static void require(String ns) {
    REQUIRE.invoke(Clojure.read(ns));
  }

  static IFn var(String ns, String name) {
    require(ns);
    return Clojure.var(ns, name);
  }

  static Object read(String edn) {
    return Clojure.read(edn);
  }

  /** Fails loudly unless {@code a} and {@code b} are Clojure-equal. */
  static void checkEqual(String what, Object a, Object b) {
    if (!Boolean.TRUE.equals(EQ.invoke(a, b))) {
      throw new IllegalStateException(what + " differ:\n donkey: " + PR_STR.invoke(a)
          + "\n ring:   " + PR_STR.invoke(b));
    }
  }

  /** Fails loudly unless the benchmark JVM runs the Clojure the pom asks for. */
  static void checkClojureVersion() {
    String v = (String) Clojure.var("clojure.core", "clojure-version").invoke();
    if (!"1.12.3".equals(v)) {
      throw new IllegalStateException("expected Clojure 1.12.3 in the benchmark JVM, got " + v);
    }
    System.err.println("[setup] clojure-version = " + v);
  }
}
