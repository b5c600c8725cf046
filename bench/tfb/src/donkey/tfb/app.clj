(ns donkey.tfb.app
  "TechEmpower's web framework benchmark on donkey: all seven tests, on PostgreSQL, in each of
  donkey's handler modes, each written as that mode's users would write it:

    sync  route handlers of one argument on donkey's worker pool; JDBC (PostgreSQL's driver,
          HikariCP)
    vt    the same handlers on virtual threads (`:virtual-threads? true`, Java 21+)
    nb    `:handler-mode :non-blocking` handlers on the event loop; /plaintext, /json and
          /cached-queries answer there, the database tests hand their JDBC calls to donkey's
          workers (`donkey.scope/offload!`) and answer from the loop. (Vert.x's reactive
          PostgreSQL client for Vert.x 5.1 cannot be fetched here: Maven Central's mirror
          serves 5.0.x, which fails against Vert.x 5.1's internals.)

  And the comparator: `jetty`, the sync handlers as one Ring handler on ring-jetty-adapter
  (the :bench profile's; `donkey.tfb.jetty`).

  Routes: /plaintext, /json, /db, /queries?queries=N, /fortunes, /updates?queries=N,
  /cached-queries?count=N. The cache of test 7 is Caffeine, filled at start-up.

  Usage: java -cp ... clojure.main -m donkey.tfb.app sync|vt|nb|jetty PORT
  The database: hello_world on 127.0.0.1, port TFB_DB_PORT (default 5432), as
  bench/tfb/pg.sh makes it. System properties: donkey.tfb.event-loops (default: the cores),
  donkey.tfb.pool (JDBC connections, default 32)."
  (:require [donkey.scope :as scope]
            [donkey.server :as server]
            [donkey.tfb.cache :as cache]
            [donkey.tfb.jdbc :as jdbc]
            [donkey.tfb.rules :as rules]))

(set! *warn-on-reflection* true)

(def ^:private ^String hello "Hello, World!")

(defn- plaintext [] {:status 200 :headers rules/text-headers :body hello})

(defn- json
  "A JSON response of `body`, which the kernel serializes per request."
  [body]
  {:status 200 :headers rules/json-headers :body body})

(defn- html [^String page] {:status 200 :headers rules/html-headers :body page})

(defn- queries [request] (rules/count-param (:query-string request) "queries"))

(defn- cached
  "Test 7's answer: the cached World objects the request's `count` asks for."
  [worlds request]
  (json (cache/worlds worlds (rules/count-param (:query-string request) "count"))))

(defn- sync-routes
  "The tests as one-argument route handlers on JDBC's `ds`, with `worlds` the cache."
  [ds worlds]
  [{:path "/plaintext" :handler (fn [_] (plaintext))}
   {:path "/json" :handler (fn [_] (json {"message" hello}))}
   {:path "/db" :handler (fn [_] (json (jdbc/world ds)))}
   {:path "/queries" :handler (fn [r] (json (jdbc/worlds ds (queries r))))}
   {:path "/fortunes" :handler (fn [_] (html (rules/fortunes-page (jdbc/fortunes ds))))}
   {:path "/updates" :handler (fn [r] (json (jdbc/update-worlds ds (queries r))))}
   {:path "/cached-queries" :handler #(cached worlds %)}])

(defn- offloaded
  "A non-blocking handler that runs `(query request)` (blocking JDBC) on a worker and answers
  `(respond (f result))` back on the event loop."
  [query f]
  (fn [request respond _raise]
    (let [result (volatile! nil)]
      (scope/offload! #(vreset! result (query request))
                      #(when-not (scope/over?) (respond (f @result)))))))

(defn- nb-routes
  "The tests as non-blocking route handlers on JDBC's `ds`, with `worlds` the cache."
  [ds worlds]
  (mapv #(assoc % :handler-mode :non-blocking)
        [{:path "/plaintext" :handler (fn [_ respond _] (respond (plaintext)))}
         {:path "/json" :handler (fn [_ respond _] (respond (json {"message" hello})))}
         {:path "/db" :handler (offloaded (fn [_] (jdbc/world ds)) json)}
         {:path "/queries" :handler (offloaded #(jdbc/worlds ds (queries %)) json)}
         {:path "/fortunes" :handler (offloaded (fn [_] (jdbc/fortunes ds))
                                                #(html (rules/fortunes-page %)))}
         {:path "/updates" :handler (offloaded #(jdbc/update-worlds ds (queries %)) json)}
         {:path "/cached-queries" :handler (fn [r respond _] (respond (cached worlds r)))}]))

(defn db-port
  "The database's port: TFB_DB_PORT, else 5432."
  []
  (Integer/parseInt (or (System/getenv "TFB_DB_PORT") "5432")))

(defn- prop-int [name default]
  (Integer/parseInt (or (System/getProperty name) (str default))))

(defn start
  "Starts the app in `mode` (\"sync\", \"vt\", \"nb\" or \"jetty\") on 127.0.0.1:`port` (0: any)
  against the database on 127.0.0.1:`db-port`, its cache filled first, and returns what `stop`
  takes. Throws for an unknown mode or a database that does not answer."
  [mode port db-port]
  (when-not (#{"sync" "vt" "nb" "jetty"} mode)
    (throw (IllegalArgumentException. (str "unknown mode " mode ": sync, vt, nb or jetty"))))
  (let [loops (prop-int "donkey.tfb.event-loops" (.availableProcessors (Runtime/getRuntime)))
        ds (jdbc/data-source db-port (prop-int "donkey.tfb.pool" 32))]
    (try
      (let [worlds (cache/cache (jdbc/all-worlds ds))]
        (if (= mode "jetty")
          (assoc ((requiring-resolve 'donkey.tfb.jetty/start) (sync-routes ds worlds) port)
                 :close ds)
          (let [s (server/run-server {:routes (if (= mode "nb")
                                                 (nb-routes ds worlds)
                                                 (sync-routes ds worlds))}
                                     (cond-> {:host "127.0.0.1" :port port :event-loops loops
                                              :join? false}
                                       (= mode "vt") (assoc :virtual-threads? true)))]
            {:stop #(server/stop s) :port #(server/port s) :close ds})))
      (catch Throwable t
        (.close ds)
        (throw t)))))

(defn stop
  "Stops what `start` started: the server (its in-flight requests answered), then the JDBC
  pool."
  [{:keys [stop close]}]
  (stop)
  (.close ^java.io.Closeable close))

(defn -main [& [mode port]]
  (when-not (and (#{"sync" "vt" "nb" "jetty"} mode) port)
    (binding [*out* *err*] (println "usage: donkey.tfb.app sync|vt|nb|jetty PORT"))
    (System/exit 2))
  (let [app (start mode (Integer/parseInt port) (db-port))]
    (.addShutdownHook (Runtime/getRuntime) (Thread. ^Runnable #(stop app)))
    (println (str "TechEmpower app, " mode ", on 127.0.0.1:" ((:port app))
                  " (database 127.0.0.1:" (db-port) ", Java " (System/getProperty "java.version")
                  ")"))
    @(promise)))
