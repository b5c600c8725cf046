(ns donkey.jit-shape-test
  "Shapes of kernel methods that the JIT's warm-up depends on. `Admission.start`, the request
  path's entry from Vert.x, must stay over C2's FreqInlineSize (325 bytes of bytecode by
  default): then C2 compiles it as a unit of its own rather than into every Vert.x and Netty
  frame above it, which made a fresh server take seconds longer to reach its peak. The same
  holds for `ResponseSender.send`, the response path's entry: over that size it is compiled
  once on its own, not again inside the request path's unit that reaches C2 before it. And
  for `HeadCheck.headerLines`, the scan of the header lines: a request shape the JIT has not
  seen (a Connection line, a browser's dozen headers) deoptimizes that scan alone; inlined,
  it took the request path's entry down with it, whose recompile then called the callees
  compiled meanwhile instead of inlining them."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is]]))

(set! *warn-on-reflection* true)

(def ^:private freq-inline-size 325)

(defn- code-length
  "The bytecode length of the method of class `class-name` whose javap signature line contains
  `signature`, from `javap -c -p` run on the class file the classpath has."
  [class-name signature]
  (let [resource (io/resource (str (str/replace class-name "." "/") ".class"))
        file (io/file (.toURI resource))
        javap (str (System/getProperty "java.home") "/bin/javap")
        p (-> (ProcessBuilder. [javap "-c" "-p" (str file)]) (.redirectErrorStream true) (.start))
        out (slurp (.getInputStream p))
        _ (.waitFor p)
        body (->> (str/split-lines out)
                  (drop-while #(not (str/includes? % signature)))
                  rest
                  (take-while #(not (re-matches #"  \S.*" %))))
        offsets (keep #(some->> (re-find #"^\s+(\d+): " %) second parse-long) body)]
    (when (seq offsets) (inc (apply max offsets)))))

(deftest admission-start-is-not-inlined-into-vertx-frames
  (let [n (code-length "donkey.kernel.Admission" "static void start(donkey.kernel.Exchange)")]
    (is (some? n) "javap shows Admission.start")
    (is (< freq-inline-size n)
        (str "Admission.start has " n " bytes of bytecode: keep it over " freq-inline-size
             ", so that C2 compiles the request path as its own unit"))))

(deftest response-sender-send-is-not-inlined-into-dispatch
  (let [n (code-length "donkey.kernel.ResponseSender"
                       "static void send(donkey.kernel.Exchange, java.lang.Object)")]
    (is (some? n) "javap shows ResponseSender.send")
    (is (< freq-inline-size n)
        (str "ResponseSender.send has " n " bytes of bytecode: keep it over " freq-inline-size
             ", so that C2 compiles the response path as its own unit"))))

(deftest header-scan-is-its-own-unit
  (let [n (code-length "donkey.kernel.HeadCheck"
                       "java.lang.String headerLines(io.vertx.core.MultiMap, io.vertx.core.http.HttpVersion, java.lang.String)")]
    (is (some? n) "javap shows HeadCheck.headerLines")
    (is (< freq-inline-size n)
        (str "HeadCheck.headerLines has " n " bytes of bytecode: keep it over " freq-inline-size
             ", so that a request shape the JIT has not seen deoptimizes the header scan alone"))))
