(ns donkey.kernel-layout-test
  "The Java sources' package structure: the kernel's sub-packages (config, tls, workers,
  internals, http2, websocket) and the ring, route and codec packages depend on each other without a cycle, so
  each can be read, and changed, from the bottom up."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is]]))

(set! *warn-on-reflection* true)

(defn- code
  "`s` without comments and string literals: what the compiler reads as names."
  [^String s]
  ;; char literals first (a '"' would open a string), then strings, then comments
  (-> s
      (str/replace #"'(?:\\.|[^'\\])'" "' '")
      (str/replace #"\"(?:[^\"\\\n]++|\\.)*+\"" "\"\"")
      (str/replace #"(?s)/\*.*?\*/" "")
      (str/replace #"//[^\n]*" "")))

(defn- package-graph
  "{package #{packages it names}} over the .java files under java-src/: imports and fully
  qualified names alike."
  []
  (reduce (fn [g ^java.io.File f]
            (let [src (code (slurp f))
                  pkg (second (re-find #"(?m)^package ([\w.]+);" src))
                  named (set (map second (re-seq #"\b(donkey(?:\.[a-z]\w*)+)\.[A-Z]" src)))]
              (update g pkg (fnil into #{}) (disj named pkg))))
          {}
          (filter #(str/ends-with? (.getName ^java.io.File %) ".java")
                  (file-seq (io/file "java-src")))))

(defn- cycle-from
  "A path that leads from `start` back to it in `graph`, or nil."
  [graph start]
  (loop [stack [[start [start]]] seen #{}]
    (when-let [[node path] (peek stack)]
      (let [stack (pop stack)
            nexts (get graph node)]
        (if (contains? nexts start)
          (conj path start)
          (let [fresh (remove seen nexts)]
            (recur (into stack (map (fn [n] [n (conj path n)]) fresh))
                   (into seen fresh))))))))

(deftest no-package-cycles
  (let [graph (package-graph)]
    (is (contains? graph "donkey.kernel.tls") "the scan sees the kernel's sub-packages")
    (doseq [pkg (keys graph)]
      (is (nil? (cycle-from graph pkg)) (str "a cycle: " (str/join " -> " (cycle-from graph pkg)))))))

(deftest the-kernel-sub-packages-stand-alone
  ;; what reaches below Vert.x's API, the worker pool, TLS, the configuration, HTTP/2's
  ;; connection state and the WebSockets know nothing of the HTTP request path that uses them
  (let [graph (package-graph)]
    (doseq [pkg ["donkey.kernel.config" "donkey.kernel.tls" "donkey.kernel.workers"
                 "donkey.kernel.internals" "donkey.kernel.http2" "donkey.kernel.websocket"]]
      (is (not (contains? (get graph pkg) "donkey.kernel")) pkg))))
