(ns donkey.jit-shape-test
  "Shapes of kernel methods that the JIT's warm-up depends on. `Admission.admit`, the request
  path's entry from Vert.x, must stay over C2's FreqInlineSize (325 bytes of bytecode by
  default): then C2 compiles it as a unit of its own rather than into every Vert.x and Netty
  frame above it, which made a fresh server take seconds longer to reach its peak. The same
  holds for `ResponseSender.send`, the response path's entry: over that size it is compiled
  once on its own, not again inside the request path's unit that reaches C2 before it. And
  for `HeadCheck.headerLines`, the scan of the header lines: a request shape the JIT has not
  seen (a Connection line, a browser's dozen headers) deoptimizes that scan alone; inlined,
  it took the request path's entry down with it, whose recompile then called the callees
  compiled meanwhile instead of inlining them. And the units that end responses call Vert.x's
  `end` themselves: its write path is at the edge of C2's inlining depth."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is]]))

(set! *warn-on-reflection* true)

(def ^:private freq-inline-size 325)

(defn- method-code
  "The javap lines of the code of the method of class `class-name` whose javap signature line
  contains `signature`, from `javap -c -p` run on the class file the classpath has."
  [class-name signature]
  (let [resource (io/resource (str (str/replace class-name "." "/") ".class"))
        file (io/file (.toURI resource))
        javap (str (System/getProperty "java.home") "/bin/javap")
        p (-> (ProcessBuilder. ^java.util.List (vector javap "-c" "-p" (str file)))
              (.redirectErrorStream true)
              (.start))
        out (slurp (.getInputStream p))
        _ (.waitFor p)]
    (->> (str/split-lines out)
         (drop-while #(not (str/includes? % signature)))
         rest
         (take-while #(not (re-matches #"  \S.*" %))))))

(defn- code-length
  "The bytecode length of the method `signature` of `class-name` (see method-code)."
  [class-name signature]
  (let [offsets (keep #(some->> (re-find #"^\s+(\d+): " %) second parse-long)
                      (method-code class-name signature))]
    (when (seq offsets) (inc (apply max offsets)))))

(defn- is-own-unit
  "Asserts that the method `label` of `class-name` (its javap line contains `signature`) is
  over C2's FreqInlineSize, so that C2 compiles it apart from its callers, for `why`."
  [class-name signature label why]
  (let [n (code-length class-name signature)]
    (is (some? n) (str "javap shows " label))
    (is (< freq-inline-size n)
        (str label " has " n " bytes of bytecode: keep it over " freq-inline-size ", " why))))

(deftest admission-is-not-inlined-into-vertx-frames
  (is-own-unit "donkey.kernel.Admission" "final void admit()"
               "Admission.admit" "so that C2 compiles the request path as its own unit"))

(deftest response-sender-send-is-not-inlined-into-dispatch
  (is-own-unit "donkey.kernel.ResponseSender"
               "final void send(java.lang.Object)"
               "ResponseSender.send" "so that C2 compiles the response path as its own unit"))

(deftest header-scan-is-its-own-unit
  (is-own-unit "donkey.kernel.HeadCheck"
               (str "java.lang.String headerLines(io.vertx.core.MultiMap, "
                    "io.vertx.core.http.HttpVersion, java.lang.String, "
                    "donkey.kernel.ConnectionGuard$State)")
               "HeadCheck.headerLines"
               "so that a request shape the JIT has not seen deoptimizes the header scan alone"))

(def ^:private response-end
  "javap's comment on a call of Vert.x's HttpServerResponse.end(Buffer)."
  "InterfaceMethod io/vertx/core/http/HttpServerResponse.end:(Lio/vertx/core/buffer/Buffer;)")

(deftest responses-are-ended-from-the-compiled-unit-itself
  ;; Vert.x's write path below end(Buffer) is about fifteen calls deep, at the edge of C2's
  ;; MaxInlineLevel (15): each helper frame between the unit's root and end costs the deepest
  ;; frames of that path their inlining (a promise built by an out-of-line constructor call on
  ;; every response), so the units that end responses call end themselves.
  (doseq [[sig label] [["final void send(java.lang.Object)" "ResponseSender.send"]
                       ["final void endPrepared()" "ResponseSender.endPrepared"]]]
    (let [code (method-code "donkey.kernel.ResponseSender" sig)]
      (is (seq code) (str "javap shows " label))
      (is (some #(str/includes? % response-end) code)
          (str label " calls HttpServerResponse.end(Buffer) itself, not through a helper")))))
