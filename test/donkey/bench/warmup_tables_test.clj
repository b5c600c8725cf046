(ns donkey.bench.warmup-tables-test
  "bench/warmup_tables.py on a small runs.tsv whose figures are known: the paired-window
  ratios (each measured window over the one of the same number, round, test and shape) beside
  the ratios of medians, in both the run and the compare tables, with the interval that
  resampling whole rounds gives their median."
  (:require [clojure.java.io :as io]
            [clojure.java.shell :as sh]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]))

(def ^:private columns
  ["round" "variant" "test" "phase" "shape" "window" "seconds" "rps" "p99_us" "errors" "loadavg"
   "t_end" "note"])

(defn- row [round variant phase window rps & {:keys [errors] :or {errors 0}}]
  [round variant "plaintext" phase (if (= phase "measure") "minimal" "-") window "1.0" rps "1000"
   errors "1.0" (str (+ window 1)) "-"])

(defn- runs
  "Two rounds of raw, old and new. Per-window new/raw: round 1 1.00 0.50 (its windows apart in
  time), round 2 0.90 0.90; a failed window of round 2 is left out of the pairs."
  []
  (concat
   (for [r [1 2] v ["raw" "old" "new"]] [r v "plaintext" "startup" "-" 0 "2.0" 0 -1 0 "1.0" "2.0" "-"])
   (for [r [1 2] v ["raw" "old" "new"] w (range 1 11)] (row r v "warmup" w 100))
   [(row 1 "raw" "measure" 1 1000) (row 1 "old" "measure" 1 1000) (row 1 "new" "measure" 1 1000)
    (row 1 "raw" "measure" 2 2000) (row 1 "old" "measure" 2 2000) (row 1 "new" "measure" 2 1000)
    (row 2 "raw" "measure" 1 1000) (row 2 "old" "measure" 1 1000) (row 2 "new" "measure" 1 900)
    (row 2 "raw" "measure" 2 1000) (row 2 "old" "measure" 2 1000) (row 2 "new" "measure" 2 900)
    (row 2 "raw" "measure" 3 1000) (row 2 "old" "measure" 3 1000) (row 2 "new" "measure" 3 0 :errors -1)]))

(defn- tables* [columns rows mode & args]
  (let [dir (doto (io/file (System/getProperty "java.io.tmpdir") (str "donkey-wt-" (System/nanoTime)))
              (.mkdirs))
        tsv (io/file dir "runs.tsv")]
    (try
      (spit tsv (str/join "\n" (map #(str/join "\t" %) (cons columns rows))))
      (apply sh/sh "python3" "bench/warmup_tables.py" mode (str tsv) (str (io/file dir "out.md"))
             (map #(if (= % :peak) (str (io/file dir "peak")) %) args))
      (finally
        (run! io/delete-file (reverse (file-seq dir)))))))

(defn- tables [mode & args]
  (apply tables* columns (runs) mode args))

(defn- line-of [out & parts]
  (first (filter (fn [l] (every? #(str/includes? l %) parts)) (str/split-lines out))))

(deftest paired-windows-in-the-compare-table
  (let [{:keys [exit out err]} (tables "compare" "old" "new" "raw")]
    (is (= 0 exit) err)
    (testing "new / raw: the median of four pairs (1.00 0.50 0.90 0.90), not the ratio of medians;
              resampling the rounds gives 0.75 (round 1 twice, a quarter of the resamples) to 0.90"
      (is (str/includes? (line-of out "| plaintext | minimal |")
                         "| 0.90 [0.75, 0.90] (0.50..1.00, 4 pairs) |")))
    (testing "old / raw: every pair 1.00, round 2's third too"
      (is (str/includes? (line-of out "| plaintext | minimal |")
                         "| 1.00 [1.00, 1.00] (1.00..1.00, 5 pairs) |")))
    (testing "the main table: the ratio of medians (950 / 1,250), then each round's ratio and their
              median, with the interval that resampling the two rounds gives it"
      (is (str/includes? (line-of out "| steady minimal req/s | plaintext |")
                         "| 0.76 | median 0.78 [0.67, 0.90]: 0.67 0.90 |")))))

(deftest paired-windows-in-the-run-table
  (let [{:keys [exit out err]} (tables "run" :peak "raw")]
    (is (= 0 exit) err)
    (is (str/includes? (line-of out "| new | plaintext | minimal |")
                       "| 0.90 [0.75, 0.90] (0.50..1.00, 4 pairs) |"))
    (is (str/includes? (line-of out "| raw | plaintext | minimal |") "| - |")
        "the base is not paired with itself")))

(defn- python
  "Runs `expr` with bench/warmup_tables.py imported as w; its printed value."
  [expr]
  (let [{:keys [exit out err]} (sh/sh "python3" "-c"
                                      (str "import sys; sys.path.insert(0, 'bench'); "
                                           "import warmup_tables as w; print(" expr ")"))]
    (is (= 0 exit) err)
    (str/trim out)))

(deftest round-interval
  (testing "one round: no interval, since its windows are not independent draws"
    (is (= "None" (python "w.round_interval({'1': [0.9, 1.0, 1.1]})")))
    (is (= "0.90 (0.80..1.00, 3 pairs)" (python "w.fmt_paired({'1': [0.8, 0.9, 1.0]})"))))
  (testing "rounds that agree give a narrow interval, rounds that disagree a wide one"
    (is (= "(1.0, 1.0)" (python "w.round_interval({'1': [1.0, 1.0], '2': [1.0], '3': [1.0]})")))
    (is (= "(0.8, 1.2)"
           (python "w.round_interval({'1': [0.8, 0.8], '2': [1.0, 1.0], '3': [1.2, 1.2]})"))))
  (testing "seeded: the same rows give the same interval"
    (let [expr "w.round_interval({str(r): [0.7 + 0.05 * r, 1.0] for r in range(8)})"]
      (is (= (python expr) (python expr))))))

(deftest cpu-of-the-measured-windows
  (let [cpu (fn [[round _ _ phase _ window :as r]]
              (if (= phase "measure")
                (into r [99 (if (= window 1) 96 80) (if (= round 2) 0.5 0)])
                (into r [-1 -1 -1])))
        rows (map (comp cpu vec) (runs))
        cols (into columns ["server_cpu" "load_cpu" "steal"])]
    (doseq [[mode args] [["compare" ["old" "new" "raw"]] ["run" [:peak "raw"]]]]
      (testing (str mode ": per variant the median and max over its measured windows, and how many had
                the load generator at 95% or more; a window whose wrk run failed is left out")
        (let [{:keys [exit out err]} (apply tables* cols rows mode args)]
          (is (= 0 exit) err)
          (is (= "| plaintext | raw | 99%, 99% | 80%, 96% | 0.5%, 0.5% | 2/5 |" (line-of out "| plaintext | raw | 99%")))
          (is (= "| plaintext | new | 99%, 99% | 88%, 96% | 0.2%, 0.5% | 2/4 |" (line-of out "| plaintext | new | 99%"))))))
    (testing "a runs.tsv without the CPU columns: no CPU table"
      (let [{:keys [exit out]} (tables "compare" "old" "new" "raw")]
        (is (= 0 exit))
        (is (nil? (line-of out "load generator")))))))
