(ns donkey.deps-check
  "Checks deps.edn with tools.deps itself, the way the Clojure CLI would use it (there is no
  CLI on these machines). Run from the project root with the :tdeps profile:

    lein with-profile +tdeps run -m donkey.deps-check

  1. deps.edn's :deps are exactly project.clj's runtime :dependencies, its only Maven repo
     is central, and its :build alias has the same deps (prep runs with only those).
  2. create-basis (root + project deps.edn, no user deps, as the CLI does) resolves them at
     those versions, and so does deps.edn on its own repos alone; no lib comes from Clojars.
  3. donkey-build/compile-java compiles the kernel into a temp dir.
  4. As a :local/root dependency of a throwaway consumer, donkey is reported unprepped, and
     tools.deps' own prep (a `java` subprocess on the :build alias' classpath, as for a
     git dep) compiles the kernel; a JVM on the consumer's classpath then serves a request.

  Prints one line per step and `deps-check: OK` last, exit 0; or `deps-check FAILED: ...`
  and exit 1."
  (:require [clojure.edn :as edn]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.tools.deps :as deps]
            [donkey-build :as build])
  (:import (java.io File PushbackReader)
           (java.nio.file Files)
           (java.nio.file.attribute FileAttribute)
           (java.util List)
           (java.util.concurrent TimeUnit)))

(set! *warn-on-reflection* true)

(defn- check! [ok? msg & [data]]
  (when-not ok? (throw (ex-info msg (or data {}))))
  ok?)

(defn project-clj-deps
  "project.clj's runtime :dependencies as {lib version}."
  [file]
  (with-open [r (PushbackReader. (io/reader file))]
    (let [[_ _ _ & kvs] (read r)
          {:keys [dependencies]} (apply hash-map kvs)]
      (into {} (map (fn [[lib version]] [lib version])) dependencies))))

(defn- mvn-versions [deps-map]
  (into {} (map (fn [[lib coord]] [lib (:mvn/version coord)])) deps-map))

(def ^:private temp-dirs (atom []))

(defn- temp-dir
  "A new temp dir, deleted when -main ends."
  ^File [prefix]
  (let [d (.toFile (Files/createTempDirectory prefix (make-array FileAttribute 0)))]
    (swap! temp-dirs conj d)
    d))

(defn- delete-tree! [^File f]
  (when (.isDirectory f) (run! delete-tree! (.listFiles f)))
  (.delete f))

(defn- copy-tree! [^File from ^File to]
  (doseq [^File f (file-seq from) :when (.isFile f)]
    (let [rel (.relativize (.toPath from) (.toPath f))
          dest (.toFile (.resolve (.toPath to) rel))]
      (io/make-parents dest)
      (io/copy f dest))))

(defn- fmt-libs [m] (str/join ", " (map (fn [[lib v]] (str lib " " v)) (sort-by str m))))

(defn- check-deps-edn [project-deps deps-edn]
  (check! (= project-deps (mvn-versions (:deps deps-edn)))
          "deps.edn :deps differ from project.clj's runtime :dependencies"
          {:project.clj project-deps :deps.edn (:deps deps-edn)})
  (check! (= #{"central"} (set (keys (:mvn/repos deps-edn))))
          "deps.edn :mvn/repos must hold central only" {:mvn/repos (:mvn/repos deps-edn)})
  (let [build (get-in deps-edn [:aliases :build])]
    (check! (= (:deps deps-edn) (:deps build))
            "the :build alias' :deps must equal :deps (prep gets only the alias' deps)"
            {:build (:deps build)})
    (check! (= (:deps/prep-lib deps-edn) {:alias :build :fn 'compile-java :ensure "target/classes"})
            "unexpected :deps/prep-lib" {:deps/prep-lib (:deps/prep-lib deps-edn)}))
  (println "deps.edn matches project.clj:" (fmt-libs project-deps)))

(defn- from-clojars?
  "True when Maven's local repo records that one of `paths` (jars of a lib) was downloaded
  from a repository named clojars."
  [paths]
  (some (fn [p]
          (let [marker (io/file (.getParentFile (io/file p)) "_remote.repositories")]
            (and (.exists marker) (str/includes? (slurp marker) ">clojars="))))
        paths))

(defn- check-basis [project-deps]
  (let [cli (deps/create-basis {:user nil :project "deps.edn"})
        own (deps/create-basis {:root nil :user nil :project "deps.edn"})]
    (doseq [[what basis] [["root + deps.edn" cli] ["deps.edn alone" own]]
            :let [libs (:libs basis)]]
      (doseq [[lib version] project-deps]
        (check! (= version (get-in libs [lib :mvn/version]))
                (str what ": " lib " did not resolve to " version)
                {:resolved (get libs lib)}))
      (check! (every? :mvn/version (vals libs)) (str what ": a lib that is not a Maven artifact")
              {:libs (keys libs)})
      (when-let [bad (seq (filter (comp from-clojars? :paths val) libs))]
        (check! false (str what ": libs from Clojars: " (str/join ", " (map key bad))))))
    (check! (= (mvn-versions (:libs cli)) (mvn-versions (:libs own)))
            "deps.edn resolves differently without the CLI's root deps"
            {:cli (mvn-versions (:libs cli)) :own (mvn-versions (:libs own))})
    (println (str "create-basis resolves " (count (:libs cli)) " libs from central, none from clojars: "
                  (fmt-libs (select-keys (mvn-versions (:libs cli)) (keys project-deps)))))))

(defn- check-compile-java []
  (let [out (temp-dir "donkey-classes")]
    (build/compile-java {:class-dir (str out)})
    (check! (.isFile (io/file out "donkey/kernel/Server.class"))
            "compile-java produced no donkey/kernel/Server.class" {:class-dir (str out)})
    (println "compile-java: donkey/kernel/Server.class compiled")))

(defn- run-java
  "Runs `java -cp cp clojure.main -e form` and returns [exit output]; killed after 60 s."
  [^String cp ^String form]
  (let [log (File/createTempFile "donkey-deps-check" ".log")
        ^List cmd ["java" "-cp" cp "clojure.main" "-e" form]
        p (.start (doto (ProcessBuilder. cmd)
                    (.redirectErrorStream true)
                    (.redirectOutput log)))]
    (if (.waitFor p 60 TimeUnit/SECONDS)
      (try [(.exitValue p) (slurp log)] (finally (.delete log)))
      (do (.destroyForcibly p) [-1 (str (slurp log) "\n[killed after 60 s]")]))))

(def ^:private consumer-form
  "Runs in a JVM on the consumer's classpath: one request to donkey, prints the body."
  (pr-str
   '(let [run-server (requiring-resolve 'donkey.server/run-server)
          s (run-server (fn [req] {:status 200 :body (str "tools.deps consumer " (:uri req))})
                        {:port 0 :join? false})
          port ((requiring-resolve 'donkey.server/port) s)
          client (java.net.http.HttpClient/newHttpClient)
          req (.build (java.net.http.HttpRequest/newBuilder
                       (java.net.URI/create (str "http://127.0.0.1:" port "/prep"))))
          resp (.send client req (java.net.http.HttpResponse$BodyHandlers/ofString))]
      (println (str "BODY " (.body resp)))
      ((requiring-resolve 'donkey.server/stop) s)
      (shutdown-agents)
      (System/exit 0))))

(defn- check-prep []
  (let [lib-dir (temp-dir "donkey-lib")
        _ (doseq [d ["src" "java-src" "build"]] (copy-tree! (io/file d) (io/file lib-dir d)))
        _ (io/copy (io/file "deps.edn") (io/file lib-dir "deps.edn"))
        lib 'org.clojars.donkey/donkey
        consumer {:deps {lib {:local/root (str lib-dir)}}}
        basis (deps/create-basis {:user nil :project consumer})
        unprepped (try (deps/prep-libs! (:libs basis) {:action :error} basis) nil
                       (catch clojure.lang.ExceptionInfo e (:unprepped (ex-data e))))]
    (check! (= [lib] unprepped) "tools.deps does not see donkey as needing prep"
            {:unprepped unprepped})
    ;; what `clojure -X:deps prep` does: runs donkey-build/compile-java in a `java` process
    ;; on the :build alias' classpath, in the lib's root
    (deps/prep-libs! (:libs basis) {:action :prep :log :info} basis)
    (check! (.isFile (io/file lib-dir "target/classes/donkey/kernel/Server.class"))
            "prep did not compile donkey/kernel/Server.class" {:lib-dir (str lib-dir)})
    (let [roots (set (:classpath-roots basis))]
      (check! (every? roots [(str (io/file lib-dir "src")) (str (io/file lib-dir "target/classes"))])
              "the consumer's classpath lacks donkey's src or target/classes"
              {:classpath-roots (:classpath-roots basis)}))
    (let [[exit out] (run-java (str/join File/pathSeparator (:classpath-roots basis)) consumer-form)]
      (check! (and (zero? exit) (str/includes? out "BODY tools.deps consumer /prep"))
              (str "a JVM on the consumer's classpath could not serve a request:\n" out)))
    (println "prep: compiled by tools.deps' prep-libs!, and a consumer served \"tools.deps consumer /prep\"")))

(defn -main [& _]
  (let [code (try
               (let [project-deps (project-clj-deps "project.clj")
                     deps-edn (with-open [r (PushbackReader. (io/reader "deps.edn"))] (edn/read r))]
                 (check-deps-edn project-deps deps-edn)
                 (check-basis project-deps)
                 (check-compile-java)
                 (check-prep)
                 (println "deps-check: OK")
                 0)
               (catch Throwable t
                 (println "deps-check FAILED:" (.getMessage t))
                 (when-let [d (ex-data t)] (prn d))
                 (when-not (instance? clojure.lang.ExceptionInfo t) (.printStackTrace t))
                 1)
               (finally (run! delete-tree! @temp-dirs)))]
    (flush)
    (shutdown-agents)
    (System/exit code)))
