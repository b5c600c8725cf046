(ns donkey.middleware.options
  "The option checks the kernel middleware namespaces share, run once when a middleware is
  built (or by each call of a request function): each throws an IllegalArgumentException whose
  message starts with `who`, the public function's qualified name, then names the option and
  the value it got. Internal to donkey."
  {:no-doc true}
  (:import (donkey.codec ContentType)
           (java.nio.charset Charset)))

(set! *warn-on-reflection* true)

(defn fail
  "Throws the IllegalArgumentException of `who` (a qualified function name) for `parts`,
  joined as one message."
  [who & parts]
  (throw (IllegalArgumentException. ^String (apply str who ": " parts))))

(defn map-or-nil
  "`opts` when it is a map or nil, and, given `known` (the set of `who`'s option names), none
  of its keys looks like a misspelling of one (`donkey.options.spelling`); fails otherwise.
  Other keys are ignored, as Ring's middleware ignores them."
  ([who opts]
   (when-not (or (nil? opts) (map? opts))
     (fail who "options must be a map, got " (pr-str opts)))
   opts)
  ([who opts known]
   (map-or-nil who opts)
   (doseq [k (keys opts)
           :when (not (contains? known k))]
     ;; the distance code loads only for a key that is not an option
     (when-let [meant ((requiring-resolve 'donkey.options.spelling/suggestion) known k)]
       (fail who "unknown option " k "; did you mean " meant "? (other unknown keys are "
             "ignored; this one looks like a misspelling)")))
   opts))

(defn boolean-or-nil
  "The value of `k` in `opts` when it is true, false or nil; fails otherwise."
  [who opts k]
  (let [v (get opts k)]
    (when-not (or (nil? v) (boolean? v))
      (fail who k " must be true or false, got " (pr-str v)))
    v))

(defn charset
  "`v`, the value of the option named `what` (nil, a charset name or a Charset), as a Charset
  or nil; fails for a name this JVM has no charset of, or a value of another kind."
  ^Charset [who what v]
  (cond
    (nil? v) nil
    (instance? Charset v) v
    ;; (an UnsupportedCharsetException, or an illegal name, is an IllegalArgumentException)
    (string? v) (try (ContentType/forName v)
                     (catch IllegalArgumentException _
                       (fail who what " names no charset this JVM has: " (pr-str v))))
    :else (fail who what " must be a charset name or a java.nio.charset.Charset, got "
                (pr-str v))))

(defn positive-int
  "`v`, the value of `k`, when it is an integer from 1 to `most`; fails otherwise."
  [who k v most]
  (when-not (and (integer? v) (<= 1 v most))
    (fail who k " must be a positive integer, got " (pr-str v)))
  v)
