(ns donkey.packaging-test
  "Packaging, checked the way users meet it: deps.edn through tools.deps itself, and the jar and
  pom of `lein install` through a throwaway consumer project.

  Each test runs Leiningen in a fresh temp copy of the project (target/ and .git left out), so
  the jar is built from a clean tree (no stale or AOT classes that happen to sit in target/)
  and the test never writes into the working tree's target/, whose classes this JVM runs.
  `lein install` still installs the SNAPSHOT into ~/.m2, which is what install means.
  Everything comes from Maven Central, /usr/share/maven-repo and ~/.m2: no Clojars."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [clojure.xml :as xml])
  (:import (java.io File PushbackReader)
           (java.nio.file Files)
           (java.nio.file.attribute FileAttribute)
           (java.util List)
           (java.util.concurrent TimeUnit)
           (java.util.jar JarFile JarEntry)))

(set! *warn-on-reflection* true)

;; ---------------------------------------------------------------------------------------------
;; helpers

(def ^:private root (.getCanonicalFile (io/file (System/getProperty "user.dir"))))

(defn- project-info
  "Name, version and runtime :dependencies ({lib version}) of project.clj."
  []
  (with-open [r (PushbackReader. (io/reader (io/file root "project.clj")))]
    (let [[_ sym version & kvs] (read r)
          {:keys [dependencies]} (apply hash-map kvs)]
      {:group (or (namespace sym) (name sym))
       :artifact (name sym)
       :version version
       :deps (into {} (map (fn [[lib v]] [lib v])) dependencies)})))

(defn- temp-dir ^File [prefix]
  (.toFile (Files/createTempDirectory prefix (make-array FileAttribute 0))))

(defn- delete-tree! [^File f]
  (when (.isDirectory f)
    (run! delete-tree! (.listFiles f)))
  (.delete f))

(def ^:private skipped-dirs #{"target" ".git" ".cpcache"})

(defn- copy-project!
  "Copies the project into `to`, leaving out build output and VCS data at any depth."
  [^File to]
  (letfn [(walk [^File from ^File dest]
            (doseq [^File f (.listFiles from)
                    :let [n (.getName f) d (io/file dest n)]]
              (cond
                (Files/isSymbolicLink (.toPath f)) nil
                (.isDirectory f) (when-not (skipped-dirs n) (.mkdirs d) (walk f d))
                (or (str/starts-with? n ".lein-") (= n ".nrepl-port") (= n "pom.xml")) nil
                :else (io/copy f d))))]
    (walk root to)
    to))

(defn- run-cmd
  "Runs `cmd` in `dir` with stdout and stderr together in a temp file, stdin closed. After
  `timeout-s` it kills the process and its descendants (lein starts a second JVM). Returns
  {:exit :out}, :exit -1 on time-out. clojure.java.shell/sh cannot be timed out or killed,
  hence a ProcessBuilder."
  [dir timeout-s & cmd]
  (let [log (File/createTempFile "donkey-packaging" ".log")
        ^List cmd (vec cmd)
        pb (doto (ProcessBuilder. cmd)
             (.directory (io/file dir))
             (.redirectErrorStream true)
             (.redirectOutput log))
        ;; set by the outer lein for this JVM, and the nested lein warns about CLASSPATH;
        ;; LEIN_JVM_OPTS and JVM_OPTS stay, so a nested lein runs like the outer one
        _ (doto (.environment pb)
            (.remove "CLASSPATH") (.remove "LEIN_FAST_TRAMPOLINE") (.remove "TRAMPOLINE_FILE"))
        p (.start pb)]
    (.close (.getOutputStream p))
    (try
      (if (.waitFor p timeout-s TimeUnit/SECONDS)
        {:exit (.exitValue p) :out (slurp log)}
        (do (run! #(.destroyForcibly ^java.lang.ProcessHandle %) (iterator-seq (.iterator (.descendants p))))
            (.destroyForcibly p)
            (.waitFor p 10 TimeUnit/SECONDS)
            {:exit -1 :out (str (slurp log) "\n[killed after " timeout-s " s: " (str/join " " cmd) "]")}))
      (finally (.delete log)))))

(defn- ok? [{:keys [exit]}] (= 0 exit))

(defn- tail [s] (let [s (str s)] (subs s (max 0 (- (count s) 6000)))))

(defn- relative-files
  "Paths (with /) of the files under `dir` whose name ends with `ext`."
  [^File dir ext]
  (let [base (.toPath dir)]
    (->> (file-seq dir)
         (filter #(and (.isFile ^File %) (str/ends-with? (.getName ^File %) ext)))
         (map #(str/replace (str (.relativize base (.toPath ^File %))) File/separator "/"))
         set)))

(defn- without-comments [xml] (str/trim (str/replace xml #"(?s)<!--.*?-->" "")))

(defn- jar-entries
  "Names of the files in a jar."
  [^File f]
  (with-open [jar (JarFile. f)]
    (->> (enumeration-seq (.entries jar))
         (remove #(.isDirectory ^JarEntry %))
         (map #(.getName ^JarEntry %))
         set)))

;; ---------------------------------------------------------------------------------------------
;; A. deps.edn, through tools.deps

(deftest deps-edn-resolves-and-preps
  (let [dir (temp-dir "donkey-tdeps")
        {:keys [deps]} (project-info)]
    (try
      (copy-project! dir)
      (let [{:keys [out] :as r} (run-cmd dir 420 "lein" "with-profile" "+tdeps" "run" "-m" "donkey.deps-check")]
        (is (ok? r) (str "deps-check failed:\n" (tail out)))
        (when (ok? r)
          (testing "deps.edn's :deps are project.clj's runtime deps, resolved at those versions from central"
            (is (str/includes? out "deps.edn matches project.clj:") (tail out))
            (doseq [[lib v] deps]
              (is (re-find (re-pattern (str "(?m)^create-basis resolves \\d+ libs from central, none from clojars: .*"
                                            "\\Q" lib " " v "\\E"))
                           out)
                  (str lib " " v " not resolved:\n" (tail out)))))
          (testing "compile-java and the :deps/prep-lib step compile the kernel"
            (is (str/includes? out "compile-java: donkey/kernel/Server.class compiled") (tail out))
            (is (str/includes? out "prep: compiled by tools.deps' prep-libs!, and a consumer served") (tail out)))
          (is (re-find #"(?m)^deps-check: OK$" out) (tail out))))
      (finally (delete-tree! dir)))))

;; ---------------------------------------------------------------------------------------------
;; B. lein install: the jar, the pom, and a consumer of the installed artifact

(defn- xml-children [node tag] (filter #(= tag (:tag %)) (:content node)))
(defn- xml-text [node tag] (some-> (first (xml-children node tag)) :content first str/trim))

(defn- pom-info [^File pom]
  (let [project (xml/parse pom)
        deps (mapcat #(xml-children % :dependency) (xml-children project :dependencies))
        repos (mapcat #(xml-children % :repository) (xml-children project :repositories))]
    {:deps (set (for [d deps]
                  {:lib (symbol (xml-text d :groupId) (xml-text d :artifactId))
                   :version (xml-text d :version)
                   :scope (xml-text d :scope)
                   :exclusions? (boolean (seq (xml-children d :exclusions)))}))
     :repos (set (for [r repos] [(xml-text r :id) (xml-text r :url)]))}))

(defn- consumer-project [{:keys [group artifact version]} & [clojure-version]]
  (str "(defproject donkey-consumer \"0.0.0\"\n"
       "  :dependencies [[" group "/" artifact " " (pr-str version) "]"
       (when clojure-version (str " [org.clojure/clojure " (pr-str clojure-version) "]"))
       "]\n"
       "  ;; no Clojars: central for releases, Debian's folder for the nREPL lein's :base profile\n"
       "  ;; adds; no repository serves snapshots, so the SNAPSHOT comes from ~/.m2\n"
       "  :repositories ^:replace [[\"central\" {:url \"https://repo1.maven.org/maven2/\" :snapshots false}]\n"
       "                           [\"debian\" {:url \"file:///usr/share/maven-repo\" :checksum :ignore\n"
       "                                      :snapshots false}]])\n"))

(def ^:private consumer-main
  "(ns consumer.main
  (:require [clojure.java.io :as io]
            [donkey.server :as server])
  (:import (java.net URI)
           (java.net.http HttpClient HttpRequest HttpResponse$BodyHandlers)))

(defn -main [& _]
  (let [s (server/run-server (fn [req] {:status 200 :headers {\"content-type\" \"text/plain\"}
                                        :body (str \"hello from the installed jar: \" (:uri req))})
                             {:port 0 :join? false})]
    (try
      (let [req (.build (HttpRequest/newBuilder
                         (URI/create (str \"http://127.0.0.1:\" (server/port s) \"/consumer\"))))
            resp (.send (HttpClient/newHttpClient) req (HttpResponse$BodyHandlers/ofString))]
        (println \"SOURCE\" (str (io/resource \"donkey/server.clj\")))
        (println \"KERNEL\" (str (.getLocation (.getCodeSource (.getProtectionDomain donkey.kernel.Server)))))
        ;; loaded from its compiled classes: a namespace compiled at load time has its fns
        ;; defined by Clojure's DynamicClassLoader
        (println \"SERVER-FN-LOADER\" (.getName (class (.getClassLoader (class server/run-server)))))
        (println \"SERVER-INIT\" (str (.getLocation (.getCodeSource (.getProtectionDomain (Class/forName \"donkey.server__init\"))))))
        (println \"RING-ON-CLASSPATH\" (some? (io/resource \"ring/core/protocols.clj\")))
        (println \"CLOJURE\" (clojure-version))
        (println \"STATUS\" (.statusCode resp))
        (println \"BODY\" (.body resp)))
      (finally (server/stop s)))
    (shutdown-agents)
    (System/exit 0)))
")

(def ^:private aot-namespaces
  "The namespaces the jar carries compiled (project.clj's :aot donkey.server and what it loads),
  as resource paths."
  ["donkey/server" "donkey/options" "donkey/options/check" "donkey/routes"])

(defn- check-jar [^File jar-file ^File copy]
  (let [entries (jar-entries jar-file)
        clj-sources (relative-files (io/file copy "src") ".clj")
        java-sources (relative-files (io/file copy "java-src") ".java")
        compiled (relative-files (io/file copy "target" "classes") ".class")
        not-shipped (into #{} (mapcat #(relative-files (io/file copy %) ""))
                          ["test" "examples" "dev-tdeps" "build" "bench/src"])]
    (testing "the Clojure sources are in the jar"
      (is (seq clj-sources))
      (doseq [f clj-sources] (is (contains? entries f) (str f " missing from the jar"))))
    (testing "every Java source is in the jar compiled, not as source"
      (is (seq java-sources))
      (doseq [f java-sources :let [c (str/replace f #"\.java$" ".class")]]
        (is (contains? entries c) (str c " missing from the jar")))
      (is (empty? (filter #(str/ends-with? % ".java") entries))))
    (testing "donkey.server and the namespaces it loads are compiled, the optional ones are not"
      (doseq [ns-path aot-namespaces]
        (is (contains? entries (str ns-path "__init.class")) (str ns-path " is not compiled")))
      (is (= (set aot-namespaces)
             (set (for [e entries :when (str/ends-with? e "__init.class")]
                    (str/replace e #"__init\.class$" ""))))
          "a namespace compiled that donkey.server does not load"))
    (testing "nothing else outside META-INF: no test, example, bench, build or dev code, no class of another library"
      (is (empty? (filter not-shipped entries)) (str "shipped: " (vec (filter not-shipped entries))))
      (is (empty? (remove #(or (str/starts-with? % "META-INF/")
                               (contains? clj-sources %)
                               (contains? compiled %))
                          entries)))
      (is (every? #(str/starts-with? % "donkey/") (filter #(str/ends-with? % ".class") entries))))
    (testing "no logging configuration"
      (is (empty? (filter #(re-find #"(?i)log4j|logback|logging\.properties|simplelogger|tinylog" %)
                          entries))))))

(defn- check-pom [^File pom {:keys [deps]}]
  (let [{pom-deps :deps repos :repos} (pom-info pom)
        text (slurp pom)]
    (testing "the pom's dependencies are exactly the runtime deps: compile scope, no exclusions"
      (is (= (set (for [[lib v] deps] {:lib lib :version v :scope nil :exclusions? false}))
             pom-deps)))
    (testing "no Debian repository in the pom"
      (is (not-any? (fn [[id url]] (or (= "debian" id) (str/starts-with? (str url) "file:"))) repos)
          (str repos))
      (is (not (str/includes? text "/usr/share/maven-repo"))))))

(deftest lein-install-jar-pom-and-consumer
  (let [{:keys [group artifact version] :as info} (project-info)
        dir (temp-dir "donkey-install")
        consumer (temp-dir "donkey-consumer")
        jar-name (str artifact "-" version ".jar")
        m2 (io/file (System/getProperty "user.home") ".m2" "repository"
                    (str/replace group "." "/") artifact version)]
    (try
      (copy-project! dir)
      (let [{:keys [out] :as r} (run-cmd dir 300 "lein" "install")]
        (is (ok? r) (str "lein install failed:\n" (tail out)))
        (when (ok? r)
          (let [jar (io/file dir "target" jar-name)
                pom (io/file dir "pom.xml")]
            (is (.isFile jar))
            (check-jar jar dir)
            (check-pom pom info)
            (with-open [jf (JarFile. jar)]
              (is (= (without-comments (slurp pom))
                     (without-comments
                      (slurp (.getInputStream jf (.getEntry jf (str "META-INF/maven/" group "/" artifact "/pom.xml"))))))
                  "the pom inside the jar is the pom (less lein's closing comment)"))
            ;; same entries rather than same bytes: a concurrent run on this machine may have
            ;; installed its own (identical but for timestamps) build since
            (testing "what was installed into ~/.m2 is that jar and pom"
              (is (= (jar-entries jar) (jar-entries (io/file m2 jar-name))))
              (is (= (slurp pom) (slurp (io/file m2 (str artifact "-" version ".pom")))))))
          (testing "a consumer project depending on the installed artifact serves a request"
            (spit (io/file consumer "project.clj") (consumer-project info))
            (io/make-parents (io/file consumer "src" "consumer" "main.clj"))
            (spit (io/file consumer "src" "consumer" "main.clj") consumer-main)
            (let [{:keys [out] :as r} (run-cmd consumer 300 "lein" "run" "-m" "consumer.main")
                  line (fn [k] (some->> (re-find (re-pattern (str "(?m)^" k " (.*)$")) out) second))]
              (is (ok? r) (str "consumer failed:\n" (tail out)))
              (is (= "hello from the installed jar: /consumer" (line "BODY")) (tail out))
              (is (= "200" (line "STATUS")) (tail out))
              (testing "donkey came from the installed jar, without the dev deps"
                (is (str/includes? (str (line "SOURCE")) (str "!/donkey/server.clj")) (line "SOURCE"))
                (is (str/includes? (str (line "SOURCE")) (str "/" version "/" jar-name)) (line "SOURCE"))
                (is (str/ends-with? (str (line "KERNEL")) (str "/" version "/" jar-name)) (line "KERNEL"))
                (is (str/ends-with? (str (line "SERVER-INIT")) (str "/" version "/" jar-name)) (line "SERVER-INIT"))
                (is (not= "clojure.lang.DynamicClassLoader" (line "SERVER-FN-LOADER"))
                    "donkey.server was compiled at load time, not loaded from the jar's classes")
                (is (= "false" (line "RING-ON-CLASSPATH")) (tail out)))))
          ;; the compiled namespaces were compiled by Clojure 1.12; an application on 1.11
          ;; (Debian's, from its Maven folder) loads and runs them as well
          (testing "the same consumer on Clojure 1.11.1"
            (spit (io/file consumer "project.clj") (consumer-project info "1.11.1"))
            (let [{:keys [out] :as r} (run-cmd consumer 300 "lein" "run" "-m" "consumer.main")
                  line (fn [k] (some->> (re-find (re-pattern (str "(?m)^" k " (.*)$")) out) second))]
              (is (ok? r) (str "consumer on 1.11.1 failed:\n" (tail out)))
              (is (= "1.11.1" (line "CLOJURE")) (tail out))
              (is (= "hello from the installed jar: /consumer" (line "BODY")) (tail out))
              (is (not= "clojure.lang.DynamicClassLoader" (line "SERVER-FN-LOADER")) (tail out))))))
      (finally (delete-tree! dir) (delete-tree! consumer)))))

(deftest makefile-has-the-documented-targets
  ;; the README's commands: a target lost in an edit would only show when someone ran it
  (let [{:keys [exit out]} (run-cmd "." 30 "make" "-n" "test" "run" "bench" "soak" "conformance")]
    (is (zero? exit) out)
    (is (str/includes? out "donkey.test-runner") "make test")
    (is (str/includes? out "donkey.example") "make run")
    (is (str/includes? out "bench/run.sh") "make bench: throughput")
    (is (str/includes? out "bench/latency.sh") "make bench: fixed-rate latency")
    (is (str/includes? out "bench/protocols.sh") "make bench: TLS and HTTP/2")
    (is (str/includes? out "bench/soak.sh") "make soak")
    (is (str/includes? out "conformance/websocket.sh") "make conformance: WebSockets")
    (is (str/includes? out "conformance/h2spec.sh") "make conformance: HTTP/2")))
