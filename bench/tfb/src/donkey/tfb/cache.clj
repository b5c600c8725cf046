(ns donkey.tfb.cache
  "TechEmpower's cached-queries test (test 7): World objects held in a Caffeine cache, the
  in-process cache a JVM service would use, filled from the database at start-up. The rules
  ask for a cache of World objects, serialized per request, not of responses; Caffeine is
  thread-safe without a lock on reads, so every handler mode reads it as it is."
  (:require [donkey.tfb.rules :as rules])
  (:import (com.github.benmanes.caffeine.cache Cache Caffeine)
           (java.util.concurrent Executor)))

(set! *warn-on-reflection* true)

(def ^:private on-caller
  "Caffeine's upkeep (its read buffers' drain) run by the thread that read, in place of a task
  on the common ForkJoinPool: on a server's one core that pool's thread was woken about three
  times per request and took the core from the event loop."
  (reify Executor (execute [_ r] (.run r))))

(defn cache
  "A cache holding `worlds` (World maps) by id, sized for the whole table."
  ^Cache [worlds]
  (let [^Cache c (-> (Caffeine/newBuilder) (.maximumSize (* 2 rules/world-rows))
                     (.executor on-caller) (.build))]
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
