(ns donkey.tfb.rules
  "What TechEmpower's rules ask of every implementation, whatever its database client: the
  count parameter of the multi-row tests, random World ids, the World object as JSON sees it,
  and the Fortunes page. Pure functions, any thread."
  (:require [clojure.string :as str])
  (:import (java.util.concurrent ThreadLocalRandom)))

(set! *warn-on-reflection* true)

(def world-rows
  "Rows in the World table: ids run 1..10000."
  10000)

(defn random-id
  "A World id, 1..10000, uniformly."
  ^long []
  (inc (.nextInt (ThreadLocalRandom/current) world-rows)))

(defn random-number
  "A new randomNumber for an update, 1..10000."
  ^long []
  (random-id))

(defn- param-value
  "The value of `name` in the query string `qs` (the first, undecoded), or nil."
  [^String qs ^String name]
  (when qs
    (some (fn [^String pair]
            (let [i (.indexOf pair "=")]
              (when (and (pos? i) (= name (subs pair 0 i)))
                (subs pair (inc i)))))
          (str/split qs #"&"))))

(defn count-param
  "The number of rows a multi-row test asks for with `name` (`queries` or `count`) in the query
  string `qs`: clamped to 1..500, and 1 when the parameter is missing, empty, zero or not a
  number (TechEmpower's test types 3, 5 and 7)."
  ^long [^String qs ^String name]
  (let [v (param-value qs name)
        n (try (Long/parseLong (str/trim (or v ""))) (catch NumberFormatException _ 1))]
    (max 1 (min 500 n))))

(defn world
  "A World row as its JSON: `{\"id\": id, \"randomNumber\": n}`."
  [id n]
  {"id" id "randomNumber" n})

(def ^:private added-fortune
  [0 "Additional fortune added at request time."])

(defn- escape
  "`s` with the five characters HTML gives meaning to escaped, into `b`."
  [^StringBuilder b ^String s]
  (dotimes [i (.length s)]
    (let [c (.charAt s i)]
      (case c
        \& (.append b "&amp;")
        \< (.append b "&lt;")
        \> (.append b "&gt;")
        \" (.append b "&quot;")
        \' (.append b "&#39;")
        (.append b c))))
  b)

(defn fortunes-page
  "The Fortunes page for `rows` (a seq of `[id message]`, as read from the Fortune table): the
  row added at request time joined, all sorted by message, escaped, in TechEmpower's table."
  ^String [rows]
  (let [sorted (sort-by second (conj (vec rows) added-fortune))
        b (StringBuilder. 1400)]
    (.append b "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>")
    (doseq [[id message] sorted]
      (.append b "<tr><td>")
      (.append b (str id))
      (.append b "</td><td>")
      (escape b message)
      (.append b "</td></tr>"))
    (.append b "</table></body></html>")
    (.toString b)))

(def html-headers
  "The Fortunes page's headers."
  {"Content-Type" "text/html; charset=utf-8"})

(def json-headers
  "The JSON tests' headers."
  {"Content-Type" "application/json"})

(def text-headers
  "The plaintext test's headers."
  {"Content-Type" "text/plain"})
