(ns donkey.tfb-test
  "TechEmpower's application (bench/tfb) in each handler mode against a real PostgreSQL,
  started as outside checks start it: `bash bench/tfb/pg.sh start` (installing Debian's
  postgresql when missing), then `bash bench/tfb/serve.sh MODE PORT`. Checks what TechEmpower's
  verifier checks: the headers every answer carries, each test's body and content type, the
  count parameter's clamping, the Fortunes page byte for byte, and that updates reach the
  database (read back, and counted by pg_stat_statements as the verifier counts them)."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing use-fixtures]])
  (:import (com.fasterxml.jackson.databind JsonNode ObjectMapper)
           (java.net ServerSocket URI)
           (java.net.http HttpClient HttpClient$Version HttpRequest HttpResponse
                          HttpResponse$BodyHandlers)
           (java.nio.file Files)
           (java.nio.file.attribute FileAttribute)
           (java.time Duration ZonedDateTime)
           (java.time.format DateTimeFormatter)
           (java.util.concurrent Callable Executors Future TimeUnit)))

(set! *warn-on-reflection* true)

(defn- free-port []
  (with-open [s (ServerSocket. 0)] (.getLocalPort s)))

(def ^:private db-port (free-port))

(def ^:private pg-dir
  (str (Files/createTempDirectory "donkey-tfb-pg" (make-array FileAttribute 0))))

(defn- env
  "The environment of the scripts: this test's database port and cluster folder."
  []
  {"TFB_DB_PORT" (str db-port) "TFB_PG_DIR" pg-dir})

(defn- process-in
  "Starts `args` with the environment `e` added, output and errors merged."
  ^Process [e args]
  (let [pb (ProcessBuilder. ^java.util.List (vec args))]
    (.putAll (.environment pb) e)
    (-> pb (.redirectErrorStream true) (.start))))

(defn- process
  "Starts `args` with the scripts' environment."
  ^Process [& args]
  (process-in (env) args))

(defn- sh-in
  "Runs `args` to its end with the environment `e` added: {:exit code :out output}."
  [e & args]
  (let [^Process p (process-in e args)
        out (slurp (.getInputStream p))]
    {:exit (.waitFor p) :out out}))

(defn- sh
  "Runs `args` to its end with the scripts' environment: {:exit code :out output}."
  [& args]
  (apply sh-in (env) args))

(defn- psql
  "The rows `sql` gives as benchmarkdbuser on hello_world, unaligned, one line each."
  [sql]
  (let [{:keys [exit out]} (sh "bash" "bench/tfb/pg.sh" "psql" "-Atqc" sql)]
    (when-not (zero? exit) (throw (ex-info (str "psql failed: " out) {:sql sql})))
    (str/split-lines (str/trim out))))

(use-fixtures :once
  (fn [tests]
    (let [{:keys [exit out]} (sh "bash" "bench/tfb/pg.sh" "start")]
      (is (zero? exit) (str "bench/tfb/pg.sh start: " out))
      (try
        (when (zero? exit) (tests))
        (finally
          (sh "bash" "bench/tfb/pg.sh" "stop")
          (sh "rm" "-rf" pg-dir))))))

(def ^:private ^HttpClient client
  (-> (HttpClient/newBuilder) (.version HttpClient$Version/HTTP_1_1)
      (.connectTimeout (Duration/ofSeconds 5)) (.build)))

(defn- GET
  "GET `path` on 127.0.0.1:`port`: {:status :headers (lower-case names, first value) :body}."
  [port path]
  (let [^HttpResponse r (.send client (-> (HttpRequest/newBuilder
                                            (URI. (str "http://127.0.0.1:" port path)))
                                          (.timeout (Duration/ofSeconds 30)) (.build))
                               (HttpResponse$BodyHandlers/ofByteArray))]
    {:status (.statusCode r)
     :headers (into {} (for [[k v] (.map (.headers r))] [(str/lower-case k) (first v)]))
     :body (String. ^bytes (.body r) "UTF-8")}))

(defn- start-app
  "Starts `bash bench/tfb/serve.sh mode PORT` and waits for /plaintext to answer 200 (up to
  three minutes: the first run may fetch the profile's jars). Returns {:proc :port :out}, :out
  an atom of what the app printed."
  [mode]
  (let [port (free-port)
        p (process "bash" "bench/tfb/serve.sh" mode (str port))
        out (atom "")]
    (future (with-open [r (io/reader (.getInputStream p))]
              (doseq [line (line-seq r)] (swap! out str line "\n"))))
    (loop [waited 0]
      (cond
        (not (.isAlive p)) (throw (ex-info (str "serve.sh " mode " exited: " @out) {}))
        (> waited 180000) (do (.destroyForcibly p)
                              (throw (ex-info (str "serve.sh " mode " did not answer: " @out) {})))
        (= 200 (:status (try (GET port "/plaintext") (catch java.io.IOException _ nil))))
        {:proc p :port port :out out}
        :else (do (Thread/sleep 250) (recur (+ waited 250)))))))

(defn- stop-app [{:keys [^Process proc]}]
  (.destroy proc)
  (when-not (.waitFor proc 30 TimeUnit/SECONDS) (.destroyForcibly proc)))

(def ^:private ^ObjectMapper mapper (ObjectMapper.))

(defn- json ^JsonNode [^String s] (.readTree mapper s))

(defn- headers-ok
  "Every answer carries a Server and a valid Date header (TechEmpower's general rule)."
  [what {:keys [headers]}]
  (is (not (str/blank? (get headers "server"))) (str what ": Server"))
  (is (some? (try (ZonedDateTime/parse (get headers "date") DateTimeFormatter/RFC_1123_DATE_TIME)
                  (catch Exception _ nil)))
      (str what ": Date " (get headers "date"))))

(defn- world?
  "A World object as the verifier reads one: id and randomNumber, integers in 1..10000."
  [^JsonNode n]
  (and (.isObject n) (= 2 (.size n))
       (let [id (.get n "id") rn (.get n "randomNumber")]
         (and id rn (.isInt id) (.isInt rn)
              (<= 1 (.asInt id) 10000) (<= 1 (.asInt rn) 10000)))))

(defn- check-worlds
  "GET `path` answers a JSON array of `n` World objects, which it returns."
  ^JsonNode [port path n]
  (let [r (GET port path)
        body (json (:body r))]
    (is (= 200 (:status r)) path)
    (headers-ok path r)
    (is (str/starts-with? (get-in r [:headers "content-type"]) "application/json") path)
    (is (.isArray body) path)
    (is (= n (.size body)) path)
    (is (every? world? (iterator-seq (.elements body))) path)
    body))

(def ^:private count-cases
  "A count parameter's value and the rows it asks for (TechEmpower's test types 3, 5, 7)."
  [["2" 2] ["0" 1] ["foo" 1] ["501" 500] ["" 1] [nil 1] ["20" 20] ["-3" 1]])

(def ^:private fortunes-page
  (str "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
       "<tr><th>id</th><th>message</th></tr>"
       "<tr><td>11</td><td>&lt;script&gt;alert(&quot;This should not be displayed in a browser alert box.&quot;);&lt;/script&gt;</td></tr>"
       "<tr><td>4</td><td>A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1</td></tr>"
       "<tr><td>5</td><td>A computer program does what you tell it to do, not what you want it to do.</td></tr>"
       "<tr><td>2</td><td>A computer scientist is someone who fixes things that aren&#39;t broken.</td></tr>"
       "<tr><td>8</td><td>A list is only as strong as its weakest link. — Donald Knuth</td></tr>"
       "<tr><td>0</td><td>Additional fortune added at request time.</td></tr>"
       "<tr><td>3</td><td>After enough decimal places, nobody gives a damn.</td></tr>"
       "<tr><td>7</td><td>Any program that runs right is obsolete.</td></tr>"
       "<tr><td>10</td><td>Computers make very fast, very accurate mistakes.</td></tr>"
       "<tr><td>6</td><td>Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen</td></tr>"
       "<tr><td>9</td><td>Feature: A bug with seniority.</td></tr>"
       "<tr><td>1</td><td>fortune: No such file or directory</td></tr>"
       "<tr><td>12</td><td>フレームワークのベンチマーク</td></tr>"
       "</table></body></html>"))

(defn- check-mode
  "Every test of the app served in `mode`."
  [mode]
  (let [app (start-app mode)
        port (:port app)]
    (try
      (is (not (str/includes? @(:out app) "Reflection warning")) @(:out app))
      (testing (str mode ": plaintext")
        (let [r (GET port "/plaintext")]
          (headers-ok "/plaintext" r)
          (is (str/starts-with? (get-in r [:headers "content-type"]) "text/plain"))
          (is (= "Hello, World!" (:body r)))))
      (testing (str mode ": json")
        (let [r (GET port "/json")]
          (headers-ok "/json" r)
          (is (str/starts-with? (get-in r [:headers "content-type"]) "application/json"))
          (is (= {"message" "Hello, World!"} (.convertValue mapper (json (:body r)) java.util.Map)))))
      (testing (str mode ": db")
        (let [r (GET port "/db")]
          (is (= 200 (:status r)))
          (headers-ok "/db" r)
          (is (str/starts-with? (get-in r [:headers "content-type"]) "application/json"))
          (is (world? (json (:body r))) (:body r))))
      (testing (str mode ": queries")
        (doseq [[v n] count-cases]
          (check-worlds port (if v (str "/queries?queries=" v) "/queries") n)))
      (testing (str mode ": cached queries")
        (doseq [[v n] count-cases]
          (check-worlds port (if v (str "/cached-queries?count=" v) "/cached-queries") n)))
      (testing (str mode ": fortunes")
        (let [r (GET port "/fortunes")]
          (is (= 200 (:status r)))
          (headers-ok "/fortunes" r)
          (is (= "text/html; charset=utf-8" (str/lower-case (get-in r [:headers "content-type"]))))
          (is (= fortunes-page (:body r)))))
      (testing (str mode ": updates")
        (doseq [[v n] count-cases]
          (check-worlds port (if v (str "/updates?queries=" v) "/updates") n))
        (testing "what an update answers is in the database"
          (let [rows (check-worlds port "/updates?queries=20" 20)
                ;; a repeated id keeps the number of its last occurrence
                expected (into {} (for [^JsonNode w (iterator-seq (.elements rows))]
                                    [(.asInt (.get w "id")) (.asInt (.get w "randomNumber"))]))
                actual (into {} (for [line (psql (str "SELECT id, randomnumber FROM world WHERE id IN ("
                                                      (str/join "," (keys expected)) ")"))]
                                  (mapv parse-long (str/split line #"\|"))))]
            (is (= expected actual))))
        (testing "counted as TechEmpower's verifier counts: one read and one update per row"
          (psql "SELECT pg_stat_statements_reset()")
          (check-worlds port "/updates?queries=20" 20)
          (is (= ["20|20"]
                 (psql (str "SELECT coalesce(sum(calls) FILTER (WHERE query ~* '^select'), 0) || '|' || "
                            "coalesce(sum(rows) FILTER (WHERE query ~* '^update'), 0) "
                            "FROM pg_stat_statements WHERE query ~* '\\mworld\\M'")))))
        (testing "concurrent updates of the same rows all answer (no deadlock)"
          (let [pool (Executors/newFixedThreadPool 16)]
            (try
              (let [fs (vec (for [_ (range 64)]
                              (.submit pool ^Callable #(:status (GET port "/updates?queries=20")))))]
                (is (= (repeat 64 200) (map #(.get ^Future % 60 TimeUnit/SECONDS) fs))))
              (finally (.shutdownNow pool))))))
      (finally
        (stop-app app)))))

(deftest sync-mode (check-mode "sync"))

(deftest virtual-threads-mode (check-mode "vt"))

(deftest non-blocking-mode (check-mode "nb"))

(deftest a-running-debian-cluster-on-the-port-gets-the-database
  ;; where Debian's package started its own cluster on the port (5432 by default), the
  ;; database, its tables and pg_stat_statements are added to that cluster instead of the
  ;; script refusing the port
  (let [port (free-port)
        e {"TFB_DB_PORT" (str port)}
        ver (str/trim (:out (sh-in {} "bash" "-c" "ls /usr/lib/postgresql | sort -V | tail -n 1")))
        cluster (str "donkeytfb" port)
        created (sh-in {} "pg_createcluster" ver cluster "-p" (str port) "--start")]
    (is (zero? (:exit created)) (:out created))
    (try
      (let [{:keys [exit out]} (sh-in e "bash" "bench/tfb/pg.sh" "start")]
        (is (zero? exit) out)
        (is (str/includes? out (str "adding hello_world to the running cluster " ver "/" cluster)) out)
        (let [q (fn [sql] (str/trim (:out (sh-in e "bash" "bench/tfb/pg.sh" "psql" "-Atqc" sql))))]
          (is (= "10000" (q "SELECT count(*) FROM world")))
          (is (= "12" (q "SELECT count(*) FROM fortune")))
          (is (= "t" (q "SELECT count(*) >= 0 FROM pg_stat_statements")))))
      (is (str/includes? (:out (sh-in e "bash" "bench/tfb/pg.sh" "start")) "already answers"))
      (finally
        (sh-in {} "pg_dropcluster" ver cluster "--stop")))))
