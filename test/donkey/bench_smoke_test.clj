(ns donkey.bench-smoke-test
  "The JMH benchmarks (bench/jmh, bench/jmh-ring) still build and run: one short iteration of
  each (bench/jmh-smoke.sh). A benchmark the code has broken, in its setup, its self-check or
  its run, fails here instead of going unseen until the next measurement."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is]]))

(set! *warn-on-reflection* true)

(deftest every-benchmark-runs
  (let [pb (doto (ProcessBuilder. ["bash" "bench/jmh-smoke.sh"])
             (.redirectErrorStream true))
        p (.start pb)
        out (slurp (.getInputStream p))
        rc (.waitFor p)
        tail (str/join "\n" (take-last 40 (str/split-lines out)))
        results (re-seq #"Result \"[\w.]*?\.(\w+Bench)\.\w+\":" out)]
    (is (zero? rc) (str "bench/jmh-smoke.sh failed:\n" tail))
    (is (= #{"ExchangeBench" "RequestMapBench" "ResponseBench" "JsonParseBench" "JsonWriteBench"
             "QueryParamsBench" "RouterBench" "WideDecodeBench" "ContentTypeBench"}
           (set (map second results)))
        (str "every benchmark class reported a result:\n" tail))
    (is (.exists (io/file "bench/jmh/target/benchmarks.jar")))))
