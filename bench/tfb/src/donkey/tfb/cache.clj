(ns donkey.tfb.cache
  "TechEmpower's cached-queries test (test 7): World objects held in a Caffeine cache, the
  in-process cache a JVM service would use, filled from the database at start-up. The rules
  ask for a cache of World objects, serialized per request, not of responses; Caffeine is
  thread-safe without a lock on reads, so every handler mode reads it as it is."
  (:require [donkey.tfb.rules :as rules])
  (:import (com.github.benmanes.caffeine.cache Cache Caffeine)))

(set! *warn-on-reflection* true)

(defn cache
  "A cache holding `worlds` (World maps) by id, sized for the whole table."
  ^Cache [worlds]
  (let [^Cache c (-> (Caffeine/newBuilder) (.maximumSize (* 2 rules/world-rows)) (.build))]
    (doseq [w worlds] (.put c (long (get w "id")) w))
    c))

(defn worlds
  "`n` random World objects from `c`. Throws when one is missing: the cache holds the whole
  table."
  [^Cache c n]
  (loop [i 0 acc (transient [])]
    (if (< i (long n))
      (let [id (rules/random-id)
            w (.getIfPresent c id)]
        (when (nil? w) (throw (IllegalStateException. (str "World " id " is not cached"))))
        (recur (inc i) (conj! acc w)))
      (persistent! acc))))
