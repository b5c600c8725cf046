(ns donkey.options.spelling
  "Telling a misspelt option from a key of the application's own: the distance between names.
  Internal to donkey."
  {:no-doc true}
  (:require [clojure.string :as str]))

(set! *warn-on-reflection* true)

(defn- normal
  "A name as a typo often spells it differently: lower case, without `-`, `_` and `?`."
  [k]
  (str/replace (str/lower-case (name k)) #"[-_?]" ""))

(defn- edits
  "The number of single-character insertions, deletions, substitutions and transpositions of
  adjacent characters that turn `a` into `b` (optimal string alignment)."
  [^String a ^String b]
  (let [n (count a) m (count b)]
    (loop [i 1
           before nil                        ; row i-2
           prev (vec (range (inc m)))]       ; row i-1
      (if (> i n)
        (peek prev)
        (let [row (reduce
                   (fn [row j]
                     (let [same (= (.charAt a (dec i)) (.charAt b (dec j)))
                           best (min (inc (prev j)) (inc (row (dec j)))
                                     (+ (prev (dec j)) (if same 0 1)))
                           swap (and before (> j 1)
                                     (= (.charAt a (dec i)) (.charAt b (- j 2)))
                                     (= (.charAt a (- i 2)) (.charAt b (dec j))))]
                       (conj row (if swap (min best (inc (before (- j 2)))) best))))
                   [i]
                   (range 1 (inc m)))]
          (recur (inc i) prev row))))))

(defn suggestion
  "The name of `known` (a set of keywords) that `k` was probably meant to be, when `k` is not
  in `known` but is close to one of them: the same but for case, `-`, `_` and `?`, or one
  edit away from a name of five or more characters, two from one of eight or more. Nil
  otherwise (a key of the application's own), and for namespaced keys and non-keywords."
  [known k]
  (when (and (keyword? k) (nil? (namespace k)) (not (contains? known k)))
    (let [n (name k) nk (normal k)]
      (->> known
           (keep (fn [option]
                   (let [o (name option)
                         limit (cond (<= 8 (count o)) 2 (<= 5 (count o)) 1 :else 0)
                         d (edits n o)]
                     (cond (= nk (normal option)) [0 o option]
                           (<= d limit) [d o option]))))
           sort first peek))))
