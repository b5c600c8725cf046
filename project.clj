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
  :javac-options ["--release" "17" "-proc:none" "-Xlint:all,-serial,-options,-path,-classfile" "-Werror"]
  :global-vars {*warn-on-reflection* true}
  ;; The jar carries donkey.server and the namespaces it loads compiled (no direct linking, so
  ;; their vars stay redefinable), next to their sources: a service loading them from source
  ;; would compile them, with every macro checked by clojure.spec, before its first request.
  ;; Only donkey's own classes are written; the optional namespaces stay source.
  :aot [donkey.server]
  :jar-exclusions [#"\.java$" #"(?i)log4j|logback|logging\.properties"]
  :profiles {;; Debian's Maven-layout folder: nREPL for lein's :base profile, and the Ring 1.8.2
             ;; jars the tests run real middleware from. Never part of the pom or the jar.
             :debian {:repositories [["debian" {:url "file:///usr/share/maven-repo" :checksum :ignore
                                                :snapshots false}]]}
             ;; ^{:pom-scope nil}: a vector-with-a-map profile loses lein's usual test scope, so
             ;; without it these deps land in the pom as compile deps; with it, not at all.
             :dev ^{:pom-scope nil} [:debian
                   {:dependencies [[ring/ring-core "1.8.2" :exclusions [org.clojure/clojure]]
                                   [compojure "1.6.0" :exclusions [org.clojure/clojure]]
                                   ;; ring-core's multipart middleware loads the servlet API
                                   [javax.servlet/javax.servlet-api "3.1.0"]
                                   ;; the optional OpenSSL (BoringSSL) TLS engine, so that the
                                   ;; TLS tests and benches run on it as well as on the JDK's.
                                   ;; Its pom also names the natives of five other platforms;
                                   ;; this one is Linux x86-64's alone.
                                   [io.netty/netty-tcnative-boringssl-static "2.0.84.Final"
                                    :classifier "linux-x86_64"
                                    :exclusions [io.netty/netty-tcnative-boringssl-static]]
                                   ;; its Java half at its own version (Vert.x's Netty names
                                   ;; an older one)
                                   [io.netty/netty-tcnative-classes "2.0.84.Final"]
                                   ;; the optional brotli and zstd response encoders, at the
                                   ;; versions Vert.x's Netty is built against (Linux x86-64's
                                   ;; brotli native alone)
                                   [com.aayushatharva.brotli4j/brotli4j "1.23.0"
                                    :exclusions [com.aayushatharva.brotli4j/native-linux-x86_64
                                                 com.aayushatharva.brotli4j/native-linux-aarch64
                                                 com.aayushatharva.brotli4j/native-linux-armv7
                                                 com.aayushatharva.brotli4j/native-linux-s390x
                                                 com.aayushatharva.brotli4j/native-linux-ppc64le
                                                 com.aayushatharva.brotli4j/native-linux-riscv64
                                                 com.aayushatharva.brotli4j/native-osx-x86_64
                                                 com.aayushatharva.brotli4j/native-osx-aarch64
                                                 com.aayushatharva.brotli4j/native-windows-x86_64
                                                 com.aayushatharva.brotli4j/native-windows-aarch64]]
                                   [com.aayushatharva.brotli4j/native-linux-x86_64 "1.23.0"]
                                   [com.github.luben/zstd-jni "1.5.7-7"]
                                   ;; the optional metrics (donkey.metrics) and their
                                   ;; Prometheus scrape handler
                                   [io.micrometer/micrometer-core "1.17.2"]
                                   [io.micrometer/micrometer-registry-prometheus "1.17.2"]]
                    :source-paths ["examples"]
                    :exclusions [org.clojure/clojure]}]
             ;; tools.deps, to check deps.edn (test/donkey/packaging_test.clj runs
             ;; `lein with-profile +tdeps run -m donkey.deps-check`). Not in the pom or the jar.
             :tdeps {:dependencies [[org.clojure/tools.deps "0.23.1512"]]
                     :source-paths ["dev-tdeps" "build"]}
             ;; `make bench` (bench/run.sh): the TechEmpower-style app and its two comparators
             ;; (a raw Vert.x server, Debian's ring-jetty-adapter 1.8.2 on Jetty 9.4). Compiled
             ;; into its own target dir; never part of the pom or the jar.
             :bench ^{:pom-scope nil} [:debian
                     {:dependencies [[ring/ring-jetty-adapter "1.8.2" :exclusions [org.clojure/clojure]]]
                      :source-paths ["bench/src"]
                      :java-source-paths ["bench/java"]
                      :target-path "target/bench"}]
             ;; bench/tfb/serve.sh and its tests: TechEmpower's app on PostgreSQL (JDBC with
             ;; HikariCP, Caffeine), all from Maven Central. Never part of the pom or the jar.
             :tfb ^{:pom-scope nil} [:debian
                   {:dependencies [[org.postgresql/postgresql "42.7.14"]
                                   [com.zaxxer/HikariCP "7.1.0"]
                                   [com.github.ben-manes.caffeine/caffeine "3.3.1"]
                                   ;; HikariCP logs through SLF4J: quiet without a logger
                                   [org.slf4j/slf4j-nop "2.0.17"]]
                    :source-paths ["bench/tfb/src"]}]
             :uberjar {:aot :all :jvm-opts ["-Dclojure.compiler.direct-linking=true"]}})
