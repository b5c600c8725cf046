(ns donkey.options.doc
  "The option table (`donkey.options/table`) as text: the options part of run-server's
  docstring and the defaults the README gives. Not loaded by run-server: the docstring is
  written out in `donkey.server`, and a test keeps it equal to `(doc)`. Internal to donkey."
  {:no-doc true}
  (:require [clojure.string :as str]
            [donkey.options :as options])
  (:import (donkey.kernel.config ServerConfig)))

(set! *warn-on-reflection* true)

(defn default-text
  "How the docs give `entry`'s default, a String."
  [entry]
  (or (:default-doc entry)
      (let [v (options/default-of entry (ServerConfig.))
            mib (* 1024 1024)]
        (cond (nil? v) "none"
              (and (integer? v) (<= mib v) (zero? (rem v mib))) (str (quot v mib) " MiB")
              :else (pr-str v)))))

(defn- wrap
  "`words` as lines of at most `width` characters, the first starting with `head` and the
  others with as many spaces."
  [head words width]
  (let [indent (apply str (repeat (count head) \space))]
    (loop [words words line head lines []]
      (if-let [[w & more] (seq words)]
        (let [fits (str line (when (not= line head) " ") w)]
          (if (or (<= (count fits) width) (= line head))
            (recur more fits lines)
            (recur more (str indent w) (conj lines line))))
        (conj lines line)))))

(defn doc
  "The options part of run-server's docstring, a String: each option of the table, its
  meaning and its default, one entry after another in the docstring's indentation."
  []
  ;; the meanings start one column past the longest option
  (let [column (inc (apply max (map (comp count str :key) options/table)))]
    (str/join "\n" (for [{k :key :as e} options/table
                         line (wrap (format (str "    %-" column "s") k)
                                    ;; the default as one word, so that it is never split
                                    (conj (str/split (:doc e) #" ")
                                          (str "(default " (default-text e) ")"))
                                    96)]
                     line))))
