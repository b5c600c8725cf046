(defproject org.clojars.donkey/donkey "0.1.0-SNAPSHOT"
  :description "A Ring HTTP server on Vert.x 5 with a Java kernel."
  :license {:name "Apache License 2.0" :url "https://www.apache.org/licenses/LICENSE-2.0"}
  ;; Runtime dependencies: Maven Central only.
  :dependencies [[org.clojure/clojure "1.12.3"]
                 [io.vertx/vertx-core "5.1.6"]
                 ;; the kernel's JSON codec; same version as the jackson-core Vert.x brings
                 [com.fasterxml.jackson.core/jackson-databind "2.21.5"]]
  :repositories [["central" {:url "https://repo1.maven.org/maven2/" :snapshots false}]]
  :source-paths ["src"]
  :java-source-paths ["java-src"]
  :javac-options ["--release" "17" "-Xlint:all,-serial,-options,-path,-classfile" "-Werror"]
  :global-vars {*warn-on-reflection* true}
  :jar-exclusions [#"\.java$" #"(?i)log4j|logback|logging\.properties"]
  :profiles {;; Debian's Maven-layout folder: nREPL for lein's :base profile, and the Ring 1.8.2
             ;; jars the tests run real middleware from. Never part of the pom or the jar.
             :debian {:repositories [["debian" {:url "file:///usr/share/maven-repo" :checksum :ignore
                                                :snapshots false}]]}
             :dev [:debian
                   {:dependencies [[ring/ring-core "1.8.2" :exclusions [org.clojure/clojure]]
                                   [compojure "1.6.0" :exclusions [org.clojure/clojure]]
                                   ;; ring-core's multipart middleware loads the servlet API
                                   [javax.servlet/javax.servlet-api "3.1.0"]]
                    :source-paths ["examples"]
                    :exclusions [org.clojure/clojure]}]
             :uberjar {:aot :all :jvm-opts ["-Dclojure.compiler.direct-linking=true"]}})
