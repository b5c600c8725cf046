(ns donkey-build
  "Compiles the Java kernel (java-src/) for tools.deps users, with the JDK's own compiler:
  deps.edn's `:deps/prep-lib` runs `compile-java` when donkey is a git or :local/root
  dependency, and `clojure -T:build compile-java` runs it in a checkout. (Leiningen users
  never get here: lein's javac task does the same from project.clj.)

  No tools.build: it is not on Maven Central, and javax.tools is all this needs."
  (:require [clojure.java.io :as io]
            [clojure.string :as str])
  (:import (java.io File)
           (javax.tools JavaCompiler ToolProvider)))

(set! *warn-on-reflection* true)

(def ^:private javac-options
  ;; --release 17: the kernel's floor, whatever JDK compiles it (same as project.clj).
  ;; -proc:none: nothing on the classpath gets to run as an annotation processor.
  ["--release" "17" "-encoding" "UTF-8" "-proc:none"])

(defn- java-sources [^File dir]
  (->> (file-seq dir)
       (filter #(and (.isFile ^File %) (str/ends-with? (.getName ^File %) ".java")))
       (map #(.getPath ^File %))
       sort))

(defn- classpath
  "The compile classpath: `cp` (a string or a coll of paths) when given, else this JVM's own.
  Under prep (and -T) the JVM runs on the :build alias' classpath, which is why that alias
  lists vertx-core; under Leiningen or a REPL it is the project's."
  ^String [cp]
  (cond (string? cp) cp
        (seq cp) (str/join File/pathSeparator (map str cp))
        :else (System/getProperty "java.class.path")))

(defn compile-java
  "Compiles every java-src/**/*.java into target/classes. Relative paths are taken from the
  current directory, which is the library's root when the CLI preps it.

  `opts` may be nil (prep passes nil) or a map of:
    :src-dir    Java source root (default \"java-src\")
    :class-dir  output directory (default \"target/classes\"), created when missing
    :classpath  compile classpath, a string or a coll of paths (default: this JVM's)

  Prints a line on success; throws ex-info when javac reports errors (after printing them
  to stderr). Returns a map of :class-dir and :sources (the count)."
  [opts]
  (let [{:keys [src-dir class-dir] :or {src-dir "java-src" class-dir "target/classes"}} opts
        src (io/file src-dir)
        out (io/file class-dir)
        sources (java-sources src)
        ^JavaCompiler javac (ToolProvider/getSystemJavaCompiler)]
    (when-not javac
      (throw (ex-info "donkey-build: no Java compiler in this runtime; run it on a JDK, not a JRE"
                      {:java-home (System/getProperty "java.home")})))
    (when (empty? sources)
      (throw (ex-info (str "donkey-build: no .java files under " (.getAbsolutePath src))
                      {:src-dir (str src)})))
    (.mkdirs out)
    (let [args (-> javac-options
                   (into ["-d" (.getPath out)
                          "-sourcepath" (.getPath src)
                          "-cp" (classpath (:classpath opts))])
                   (into sources))
          exit (.run javac nil nil nil (into-array String args))]
      (when-not (zero? exit)
        (throw (ex-info (str "donkey-build: javac failed (exit " exit "), see its errors above")
                        {:exit exit :src-dir (str src) :class-dir (str out)})))
      (println (str "donkey-build: compiled " (count sources) " Java sources to " (.getPath out)))
      {:class-dir (.getPath out) :sources (count sources)})))
