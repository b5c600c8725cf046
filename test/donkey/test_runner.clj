(ns donkey.test-runner
  "Runs every test namespace and prints `tests: N passed, N failed` last, from clojure.test's
  own counters (N passed = passing assertions; failed = failures + errors)."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :as t]))

(defn- test-namespaces []
  (->> (file-seq (io/file "test"))
       (filter #(str/ends-with? (str %) "_test.clj"))
       (map #(-> (str %)
                 (str/replace #"^test/" "")
                 (str/replace #"\.clj$" "")
                 (str/replace "/" ".")
                 (str/replace "_" "-")
                 symbol))
       sort))

(defn -main [& args]
  (let [only (set (map symbol args))
        nss (cond->> (test-namespaces) (seq only) (filter only))
        start (System/nanoTime)]
    (apply require nss)
    (let [{:keys [pass fail error test]} (apply t/run-tests nss)
          secs (/ (- (System/nanoTime) start) 1e9)]
      (println (format "ran %d tests in %d namespaces in %.1f s" test (count nss) secs))
      (println (format "tests: %d passed, %d failed" pass (+ fail error)))
      (flush)
      (shutdown-agents)
      (System/exit (if (zero? (+ fail error)) 0 1)))))
