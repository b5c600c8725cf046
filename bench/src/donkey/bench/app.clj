(ns donkey.bench.app
  "The TechEmpower-style app `make bench` measures (bench/run.sh): `GET /plaintext` and
  `GET /json`, written against donkey's public API, in the variants the bench compares:

    donkey-nb    a route table with 3-arity `:handler-mode :non-blocking` handlers, run on the
                 event loop
    donkey-sync  a plain sync Ring handler through `run-server`: the drop-in case
    donkey-vt    the same sync handler with `:virtual-threads? true` (Java 21+)
    jetty        the same sync handler on ring-jetty-adapter 1.8.2 (Jetty 9.4), what most Ring
                 services run today

  Every donkey variant runs with `:event-loops 1`. The JSON body is built per request: a fresh
  `{\"message\" \"Hello, World!\"}` map, handed to the kernel's JSON codec when the kernel has one
  (`donkey.codec.Json`), else serialized here with a Jackson ObjectMapper. Jetty always gets the
  app-serialized bytes. The system property `donkey.bench.json` (`kernel` or `app`) overrides
  the choice.

  The system properties RawVertx reads add the same protocols (bench/protocols.sh):
  `donkey.bench.tlsPort` with `donkey.bench.cert` and `donkey.bench.key` a TLS listener
  (`:ssl-port`, `:ssl-cert`, `:ssl-key`), `donkey.bench.h2` HTTP/2 on it (`:h2?`),
  `donkey.bench.h2c` cleartext HTTP/2 on the plain listener (`:h2c?`), and
  `donkey.bench.compression` response compression (`:compression? true`, every body size) with
  `GET /json-100k`, RawVertx's 100 KB JSON document (bench/compression.sh);
  `donkey.bench.files` a directory served under /files (`donkey.static/files-route`, route
  tables only; bench/files.sh); `donkey.bench.metrics` metrics on a Prometheus registry
  (`:metrics`), scraped at /metrics by route tables (bench/metrics.sh).

  Usage: java -cp ... clojure.main -m donkey.bench.app VARIANT PORT"
  (:require [donkey.server :as server])
  (:import (com.fasterxml.jackson.databind ObjectMapper)))

(set! *warn-on-reflection* true)

(def ^:private ^ObjectMapper mapper (ObjectMapper.))

(def ^:private ^String hello "Hello, World!")

(def ^:private kernel-json?
  "True when the kernel serializes a map :body to JSON itself."
  (case (System/getProperty "donkey.bench.json")
    "kernel" true
    "app" false
    (some? (try (Class/forName "donkey.codec.Json") (catch ClassNotFoundException _ nil)))))

(defn- message
  "A new map per call: the literal is not a constant because `s` is a local."
  [^String s]
  {"message" s})

(def ^:private plaintext-headers {"Content-Type" "text/plain"})
(def ^:private json-headers {"Content-Type" "application/json"})

(defn- plaintext-response []
  {:status 200 :headers plaintext-headers :body hello})

(defn- app-json-response []
  {:status 200 :headers json-headers :body (.writeValueAsBytes mapper (message hello))})

(defn- kernel-json-response []
  {:status 200 :headers json-headers :body (message hello)})

(defn- json-100k-response
  "RawVertx's 100 KB JSON document, built on the first call."
  []
  {:status 200 :headers json-headers :body donkey.bench.RawVertx$Json100k/BYTES})

(def ^:private not-found {:status 404 :headers plaintext-headers :body "Not Found"})

(def ^:private files-handler
  "The directory of the property donkey.bench.files as a Ring handler under /files, or nil.
  donkey.static loads only then, so that the other benches time the start-up they did."
  (when-let [dir (System/getProperty "donkey.bench.files")]
    ((requiring-resolve 'donkey.static/files-handler) dir {:prefix "/files"})))

(defn- sync-handler
  "A plain Ring handler, as a ring-jetty service would have it."
  [json-response]
  (fn [request]
    (case (:uri request)
      "/plaintext" (plaintext-response)
      "/json" (json-response)
      "/json-100k" (json-100k-response)
      (if (and files-handler (.startsWith ^String (:uri request) "/files/"))
        (files-handler request)
        not-found))))

(defn- route-table
  "The non-blocking variant: the kernel routes, the handlers run on the event loop."
  [json-response]
  {:routes [{:path "/plaintext" :methods [:get] :handler-mode :non-blocking
             :handler (fn [_request respond _raise] (respond (plaintext-response)))}
            {:path "/json" :methods [:get] :handler-mode :non-blocking
             :handler (fn [_request respond _raise] (respond (json-response)))}
            {:path "/json-100k" :methods [:get] :handler-mode :non-blocking
             :handler (fn [_request respond _raise] (respond (json-100k-response)))}]})

(defn- with-files
  "`table` with the directory of the property donkey.bench.files served under /files, in
  `mode`, when the property is set."
  [table mode]
  (if-let [dir (System/getProperty "donkey.bench.files")]
    (update table :routes conj
            ((requiring-resolve 'donkey.static/files-route) "/files" dir {:handler-mode mode}))
    table))

(def ^:private metrics-registry
  "The registry of the property donkey.bench.metrics, or nil. Micrometer loads only then."
  (when (Boolean/getBoolean "donkey.bench.metrics")
    ((requiring-resolve 'donkey.metrics.prometheus/registry))))

(defn- with-metrics
  "`table` with the Prometheus scrape of `metrics-registry` at /metrics, when there is one."
  [table]
  (if metrics-registry
    (update table :routes conj
            {:path "/metrics" :methods [:get]
             :handler ((requiring-resolve 'donkey.metrics.prometheus/scrape-handler)
                       metrics-registry)})
    table))

(defn- protocol-opts
  "donkey's options for the protocols the system properties ask for; {} when none."
  []
  (let [tls-port (System/getProperty "donkey.bench.tlsPort")]
    (cond-> {}
      tls-port (assoc :ssl-port (Integer/parseInt tls-port)
                      :ssl-cert (System/getProperty "donkey.bench.cert")
                      :ssl-key (System/getProperty "donkey.bench.key"))
      (and tls-port (Boolean/getBoolean "donkey.bench.h2")) (assoc :h2? true)
      (Boolean/getBoolean "donkey.bench.h2c") (assoc :h2c? true)
      (Boolean/getBoolean "donkey.bench.compression") (assoc :compression? true
                                                             :compression-min-size 0)
      metrics-registry (assoc :metrics metrics-registry))))

(def ^:private donkey-opts
  (merge {:host "127.0.0.1" :event-loops 1 :join? true} (protocol-opts)))

(defn -main [& [variant port]]
  (when-not (and variant port)
    (binding [*out* *err*] (println "usage: donkey.bench.app donkey-nb|donkey-sync|donkey-vt|jetty PORT"))
    (System/exit 2))
  (let [port (Integer/parseInt port)
        donkey-json (if kernel-json? kernel-json-response app-json-response)
        json-mode (fn [kernel?] (if kernel? "kernel codec" "app-side Jackson ObjectMapper"))
        announce (fn [json] (println (str "bench app " variant " on 127.0.0.1:" port
                                          " (JSON: " json ", Java "
                                          (System/getProperty "java.version") ", Clojure "
                                          (clojure-version) ")")))]
    (case variant
      "donkey-nb" (do (announce (json-mode kernel-json?))
                      (server/run-server (with-metrics (with-files (route-table donkey-json) :non-blocking))
                                         (assoc donkey-opts :port port)))
      "donkey-sync" (do (announce (json-mode kernel-json?))
                        (server/run-server (sync-handler donkey-json) (assoc donkey-opts :port port)))
      "donkey-vt" (do (announce (json-mode kernel-json?))
                      (server/run-server (sync-handler donkey-json)
                                         (assoc donkey-opts :port port :virtual-threads? true)))
      "jetty" (let [run-jetty (requiring-resolve 'ring.adapter.jetty/run-jetty)]
                (announce (json-mode false))
                (run-jetty (sync-handler app-json-response)
                           {:host "127.0.0.1" :port port :join? true}))
      (do (binding [*out* *err*] (println "unknown variant" variant))
          (System/exit 2)))))
