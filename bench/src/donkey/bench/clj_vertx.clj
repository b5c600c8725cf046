(ns donkey.bench.clj-vertx
  "The smallest Clojure server on Vert.x, loaded from source like the bench app: GET /plaintext
  and GET /json (a fresh map through a Jackson ObjectMapper), with Server and Date, on one
  event loop. bench/footprint.sh's `clj-vertx`: what Clojure itself adds to raw Vert.x's
  start-up and memory, the floor any Clojure server on Vert.x starts from (http-kit, the
  usual comparator, is on Clojars, which this project cannot reach).

  Usage: java -cp ... clojure.main -m donkey.bench.clj-vertx PORT"
  (:import (com.fasterxml.jackson.databind ObjectMapper)
           (io.vertx.core Handler Vertx VertxOptions)
           (io.vertx.core.http HttpServerRequest HttpServerResponse)
           (java.time ZoneOffset ZonedDateTime)
           (java.time.format DateTimeFormatter)))

(set! *warn-on-reflection* true)

(def ^:private ^ObjectMapper mapper (ObjectMapper.))

(defn- date ^String []
  (.format DateTimeFormatter/RFC_1123_DATE_TIME (ZonedDateTime/now ZoneOffset/UTC)))

(defn- answer [^HttpServerResponse resp ^String content-type ^bytes body]
  (-> resp
      (.putHeader "Server" "clj-vertx")
      (.putHeader "Date" (date))
      (.putHeader "Content-Type" content-type)
      (.end (io.vertx.core.buffer.Buffer/buffer body))))

(defn- handle [^HttpServerRequest req]
  (let [resp (.response req)]
    (case (.path req)
      "/plaintext" (answer resp "text/plain" (.getBytes "Hello, World!" "UTF-8"))
      "/json" (answer resp "application/json" (.writeValueAsBytes mapper {"message" "Hello, World!"}))
      (-> resp (.setStatusCode 404) (.end)))))

(defn -main [port]
  (let [vertx (Vertx/vertx (-> (VertxOptions.) (.setEventLoopPoolSize 1)))]
    (-> (.createHttpServer vertx)
        (.requestHandler (reify Handler (handle [_ req] (handle req))))
        (.listen (Integer/parseInt port) "127.0.0.1"))
    (println (str "clj-vertx on 127.0.0.1:" port))))
