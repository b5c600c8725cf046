(ns donkey.options.check
  "Checking run-server's option map against the option table (`donkey.options/table`): names
  that look misspelt and refused options fail, aliases and `:pool-opts` resolve to the
  options they name, and every option, given or its default, is checked and set on a
  `ServerConfig`. Internal to donkey."
  {:no-doc true}
  (:require [clojure.string :as str]
            [donkey.options :as options :refer [fail table refused without-effect]])
  (:import (donkey.kernel.config ServerConfig)))

(set! *warn-on-reflection* true)

(declare must-be)

(defn- boolean-alias
  "The value of the boolean alias `k`, checked as its option would be."
  [k v]
  (must-be k :boolean v nil)
  v)

;; Alias conversions, (fn [alias value]) => the option's value, or ::none when that value of the
;; alias sets nothing.

(defn- unless-minus-1
  "ring-jetty's :selector-threads -1 leaves the choice to the server."
  [_ v]
  (if (= -1 v) ::none v))

(defn- server-version
  "ring-jetty's :send-server-version? false sends no Server header; true leaves :server-header
  in charge."
  [k v]
  (if (boolean-alias k v) ::none nil))

(defn- allow-virtual
  "http-kit's :allow-virtual? true runs handlers on virtual threads where the JVM has them;
  false asks for nothing donkey would not do anyway."
  [k v]
  (if (and (boolean-alias k v) (>= (.feature (Runtime/version)) 21)) true ::none))

(defn- seconds
  "AppsFlyer Donkey's :idle-timeout-seconds: seconds, as ms."
  [k v]
  (must-be k [:int 0 (quot Integer/MAX_VALUE 1000)] v nil)
  (* 1000 v))

(defn- header-switch
  "A header option given as a switch (AppsFlyer Donkey's :server-header): true leaves the
  default, false sends none; any other value is the option's own."
  [_ v]
  (cond (true? v) ::none (false? v) nil :else v))

(def ^:private conversions
  "The conversions the table names, by name: of an alias's value (`:aliases`), or of an
  option's own (`:coerce`)."
  {:unless-minus-1 unless-minus-1
   :server-version server-version
   :allow-virtual allow-virtual
   :seconds seconds
   :header-switch header-switch})

(def ^:private aliases
  "Every alias as [alias option convert], in table order."
  (vec (for [{k :key as :aliases} table
             [alias convert] as]
         [alias k (if convert (conversions convert) (fn [_ v] v))])))

(def ^:private by-key (into {} (map (juxt :key identity)) table))

(defn- problem
  "Why `v` fails `check`, as what it must be, or nil when it passes. An :int bound that is an
  option names that option's value in `resolved`."
  [check v resolved]
  (let [[kind a b] (if (vector? check) check [check])]
    (case kind
      :any nil
      :boolean (when-not (boolean? v) "true or false")
      :string (when-not (string? v) "a string")
      :string-or-nil (when-not (or (nil? v) (string? v)) "a string or nil")
      :strings-or-nil (when-not (or (nil? v)
                                    (and (coll? v) (not (map? v)) (every? string? v)))
                        "a collection of strings or nil")
      :fn-or-nil (when-not (or (nil? v) (ifn? v)) (str "a function " a))
      :keystore (when-not (or (nil? v) (string? v) (instance? java.security.KeyStore v))
                  "a path or a java.security.KeyStore")
      :paths (when-not (or (nil? v) (string? v)
                           (and (vector? v) (seq v) (every? string? v)))
               "a path or a vector of paths")
      :strings (when-not (or (nil? v) (and (sequential? v) (every? string? v)))
                 "a vector of strings")
      :meter-registry (when-not (or (nil? v)
                                    (some #(= "io.micrometer.core.instrument.MeterRegistry"
                                              (.getName ^Class %))
                                          (supers (class v))))
                        "a Micrometer MeterRegistry (io.micrometer/micrometer-core) or nil")
      :tags (when-not (or (nil? v)
                          (and (map? v)
                               (every? (fn [[k t]] (and (or (keyword? k)
                                                            (and (string? k) (seq k)))
                                                        (or (keyword? t) (string? t)
                                                            (number? t))))
                                       v)))
              "a map of tag names (keywords or strings) to values (strings, keywords or numbers)")
      :proxies (when-not (nil? v)
                 (if-not (and (coll? v) (not (map? v)) (seq v) (every? string? v))
                   "a non-empty collection of IP addresses and CIDR ranges (strings)"
                   (try (donkey.ring.Proxies. ^java.util.Collection (vec v)) nil
                        (catch IllegalArgumentException e
                          (str "a collection of IP addresses and CIDR ranges; "
                               (.getMessage e))))))
      :ssl-context (when-not (or (nil? v) (instance? javax.net.ssl.SSLContext v))
                     "a javax.net.ssl.SSLContext")
      :one-of (when-not (contains? (set (rest check)) v)
                (str "one of " (str/join ", " (map pr-str (rest check)))))
      :int (let [hi (if (keyword? b) (get resolved b) b)]
             (when-not (and (integer? v) (<= a v hi))
               (str "an integer in " a ".." hi))))))

(defn- must-be
  "Fails, naming the option `k`, when `v` does not pass `check`."
  [k check v resolved]
  (when-let [p (problem check v resolved)]
    (fail (str k " must be " p ", got " (pr-str v)))))

(defn- given
  "The options `opts` sets: without nil values (nil means the default), except for the
  options whose nil is a value."
  [opts]
  (into {} (filter (fn [[k v]] (or (some? v) (= :kept (:nil (by-key k)))))) opts))

(defn- resolve-aliases
  "`opts` with every alias replaced by the option it names, and ::from, a map from each option
  set through an alias to that alias (for messages). Fails when two names of one option
  disagree."
  [opts]
  (let [sources (reduce (fn [acc [alias k convert]]
                          (if (contains? opts alias)
                            (let [raw (get opts alias)
                                  v (convert alias raw)]
                              (if (= v ::none) acc (update acc k (fnil conj []) [alias v raw])))
                            acc))
                        (into {} (keep (fn [[k v]]
                                         (let [convert (some-> (by-key k) :coerce conversions)
                                               c (if convert (convert k v) v)]
                                           (when-not (= c ::none) [k [[k c v]]]))))
                              opts)
                        aliases)]
    (reduce-kv (fn [m k srcs]
                 (when (< 1 (count (distinct (map second srcs))))
                   (fail (str "options naming one setting disagree: "
                              (str/join ", " (map (fn [[a _ raw]] (str a " " (pr-str raw))) srcs))
                              "; give one")))
                 (let [[from v] (first srcs)]
                   (cond-> (assoc m k v)
                     (not= from k) (assoc-in [::from k] from))))
               {}
               (apply dissoc sources (map first aliases)))))

(def ^:private known
  "Every name run-server reads, whatever it does with it."
  (into #{:pool-opts} (concat (map :key table) (map first aliases) (keys refused) without-effect)))

(defn- check-names!
  "Fails on a key of `opts` that is close to a name run-server reads
  (`donkey.options.spelling/suggestion`). The distance code loads only for a key that is not
  a known name: a start with known options alone does not compile it."
  [opts where]
  (doseq [k (keys opts)
          :when (not (contains? known k))]
    (when-let [meant ((requiring-resolve 'donkey.options.spelling/suggestion) known k)]
      (fail (str "unknown option " k where "; did you mean " meant "? (other unknown keys are "
                 "ignored; this one looks like a misspelling)")))))

(defn configure!
  "Checks `opts`, run-server's option map, and sets `cfg`, a fresh ServerConfig, from it:
  keys that look like misspelt options and refused options fail; :pool-opts and aliases are
  resolved; then every option of the table, given or its default, is checked and set. Other
  unknown options are ignored. Returns `cfg`."
  ^ServerConfig [^ServerConfig cfg opts]
  (check-names! opts "")
  (when (map? (:pool-opts opts)) (check-names! (:pool-opts opts) " in :pool-opts"))
  (doseq [[k [reason ok?]] refused
          :let [v (get opts k)]
          :when (not ((or ok? #(or (nil? %) (false? %))) v))]
    (fail (str k " is not supported: " reason)))
  (let [pool-opts (:pool-opts opts)
        _ (when-not (or (nil? pool-opts) (map? pool-opts))
            (fail (str ":pool-opts must be a map, got " (pr-str pool-opts))))
        ;; as http-kit: a :pool-opts map replaces the top-level pool options
        opts (if pool-opts
               (merge (apply dissoc opts options/pool-keys)
                      (select-keys pool-opts options/pool-keys))
               opts)
        opts (resolve-aliases (given opts))
        resolved (into {} (for [{k :key :as e} table]
                            [k (if (contains? opts k) (get opts k) (options/default-of e cfg))]))]
    (doseq [{k :key :keys [check to]} table
            :let [v (get resolved k)]]
      (must-be (get-in opts [::from k] k) check v resolved)
      (when to ((:set to) cfg v)))
    (when (and (.virtualThreads cfg) (< (.feature (Runtime/version)) 21))
      (fail (str (get-in opts [::from :virtual-threads?] :virtual-threads?)
                 " needs Java 21 or later; this JVM is " (Runtime/version))))
    ;; as ring-jetty: an :ssl-port turns TLS on, whatever :ssl? says
    (when (contains? opts :ssl-port) (set! (.ssl cfg) true))
    (when (and (.trustForwardedFor cfg) (.trustedProxies cfg))
      (fail (str (get-in opts [::from :trust-forwarded-for?] :trust-forwarded-for?)
                 " and :trusted-proxies both set :remote-addr; give :trusted-proxies alone, "
                 "which reads X-Forwarded-For only from the proxies it names")))
    (if-let [registry (.metricsRegistry cfg)]
      ;; loads Micrometer, which a registry's being here shows is on the classpath
      (set! (.metrics cfg) ((requiring-resolve 'donkey.metrics/server-metrics)
                            registry (.metricsTags cfg)))
      (when (.metricsTags cfg)
        (fail ":metrics-tags has no effect without :metrics (a Micrometer MeterRegistry)")))
    cfg))

(defn join?
  "Whether run-server waits for the server to stop, from `opts` as given (:join? has no alias
  and nothing to check)."
  [opts]
  (get opts :join? (:default (by-key :join?))))
