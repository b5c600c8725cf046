(ns donkey.bench.tls-engines
  "The server bench/tls-engines.sh measures: `GET /json` (a fresh `{\"message\" \"Hello, World!\"}`
  map per request, written by the kernel's JSON codec) and `GET /plaintext`, HTTPS only, one
  event loop, a plain sync Ring handler, on the TLS engine named on the command line.

  Usage: java -cp ... clojure.main -m donkey.bench.tls-engines jdk|openssl PORT KEYSTORE PASSWORD"
  (:require [donkey.server :as server])
  (:import (donkey.kernel Server)))

(set! *warn-on-reflection* true)

(def ^:private ^String hello "Hello, World!")

(defn- handler [request]
  (case (:uri request)
    "/json" {:status 200 :headers {"Content-Type" "application/json"} :body {"message" hello}}
    "/plaintext" {:status 200 :headers {"Content-Type" "text/plain"} :body hello}
    {:status 404 :headers {"Content-Type" "text/plain"} :body "Not Found"}))

(defn -main [& [engine port keystore password]]
  (when-not (and engine port keystore password)
    (binding [*out* *err*]
      (println "usage: donkey.bench.tls-engines jdk|openssl PORT KEYSTORE PASSWORD"))
    (System/exit 2))
  (let [^Server s (server/run-server handler {:host "127.0.0.1" :http? false
                                              :ssl-port (Integer/parseInt port)
                                              :keystore keystore :key-password password
                                              :ssl-provider (keyword engine)
                                              :event-loops 1 :join? false})]
    (println (str "tls-engines server on https://127.0.0.1:" port ", engine "
                  (name (server/ssl-provider s)) ", Java " (System/getProperty "java.version")))
    (flush)
    (.await s)))
