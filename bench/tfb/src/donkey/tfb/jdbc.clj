(ns donkey.tfb.jdbc
  "TechEmpower's database tests on JDBC: PostgreSQL's driver behind a HikariCP pool, as a
  blocking Ring service would have them. Every function borrows a connection for its whole
  test and gives it back; each runs on the calling thread (a worker, or a virtual thread) and
  throws what the driver throws."
  (:require [donkey.tfb.rules :as rules])
  (:import (com.zaxxer.hikari HikariConfig HikariDataSource)
           (java.sql PreparedStatement)
           (javax.sql DataSource)))

(set! *warn-on-reflection* true)

(def ^:private select-world "SELECT id, randomnumber FROM world WHERE id = ?")
(def ^:private update-world "UPDATE world SET randomnumber = ? WHERE id = ?")
(def ^:private select-fortunes "SELECT id, message FROM fortune")

(defn data-source
  "A HikariCP pool of `size` connections to TechEmpower's database on 127.0.0.1:`port`.
  Prepared statements are kept server-side from their first use (`prepareThreshold=1`), as a
  long-running service's would be after warm-up."
  ^HikariDataSource [port size]
  (let [cfg (doto (HikariConfig.)
              (.setJdbcUrl (str "jdbc:postgresql://127.0.0.1:" port "/hello_world"
                                "?prepareThreshold=1&preparedStatementCacheQueries=16"))
              (.setUsername "benchmarkdbuser")
              (.setPassword "benchmarkdbpass")
              (.setMaximumPoolSize (int size))
              (.setMinimumIdle (int size))
              (.setAutoCommit true)
              (.setPoolName "tfb"))]
    (HikariDataSource. cfg)))

(defn- read-world
  "The World row of `id` through the prepared `ps`."
  [^PreparedStatement ps ^long id]
  (.setInt ps 1 (int id))
  (with-open [rs (.executeQuery ps)]
    (when-not (.next rs) (throw (IllegalStateException. (str "no World row " id))))
    (rules/world (.getInt rs 1) (.getInt rs 2))))

(defn world
  "One random World row (test 2)."
  [^DataSource ds]
  (with-open [c (.getConnection ds)
              ps (.prepareStatement c select-world)]
    (read-world ps (rules/random-id))))

(defn- read-worlds
  "`n` random World rows through the prepared `ps`, one query each."
  [^PreparedStatement ps n]
  (loop [i 0 acc (transient [])]
    (if (< i (long n))
      (recur (inc i) (conj! acc (read-world ps (rules/random-id))))
      (persistent! acc))))

(defn worlds
  "`n` random World rows, one query each (test 3)."
  [^DataSource ds n]
  (with-open [c (.getConnection ds)
              ps (.prepareStatement c select-world)]
    (read-worlds ps n)))

(defn update-worlds
  "`n` random World rows, each read with its own query and then given a new randomNumber, the
  updates sent as one batch in id order (so that two requests updating the same rows take
  their locks in the same order) (test 5). Returns the rows as updated."
  [^DataSource ds n]
  (with-open [c (.getConnection ds)
              ps (.prepareStatement c select-world)
              up (.prepareStatement c update-world)]
    (let [rows (mapv #(rules/world (get % "id") (rules/random-number)) (read-worlds ps n))]
      (doseq [w (sort-by #(get % "id") rows)]
        (.setInt up 1 (int (get w "randomNumber")))
        (.setInt up 2 (int (get w "id")))
        (.addBatch up))
      (.executeBatch up)
      rows)))

(defn fortunes
  "Every Fortune row, as `[id message]` (test 4)."
  [^DataSource ds]
  (with-open [c (.getConnection ds)
              ps (.prepareStatement c select-fortunes)
              rs (.executeQuery ps)]
    (loop [acc (transient [])]
      (if (.next rs)
        (recur (conj! acc [(.getInt rs 1) (.getString rs 2)]))
        (persistent! acc)))))

(defn all-worlds
  "Every World row, for the cache (test 7's start-up)."
  [^DataSource ds]
  (with-open [c (.getConnection ds)
              ps (.prepareStatement c "SELECT id, randomnumber FROM world")
              rs (.executeQuery ps)]
    (loop [acc (transient [])]
      (if (.next rs)
        (recur (conj! acc (rules/world (.getInt rs 1) (.getInt rs 2))))
        (persistent! acc)))))
