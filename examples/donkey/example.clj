(ns donkey.example
  "The example service of `make run`: plaintext, JSON and an echo of the Ring request map,
  on port 8080 (or the PORT environment variable)."
  (:require [donkey.server :as server]))

(set! *warn-on-reflection* true)

(defn handler
  "A plain sync Ring handler: what a service would pass to run-jetty today."
  [req]
  (case (:uri req)
    "/plaintext" {:status 200 :headers {"content-type" "text/plain"} :body "Hello, World!"}
    ;; a map or vector :body is written as JSON by the kernel
    "/json" {:status 200 :body {"message" "Hello, World!"}}
    "/echo" {:status 200 :headers {"content-type" "application/edn"}
             :body (pr-str (update req :body #(some-> ^java.io.InputStream % slurp)))}
    {:status 404 :headers {"content-type" "text/plain"} :body "try /plaintext, /json or /echo\n"}))

(defn -main [& _]
  (let [port (Integer/parseInt (or (System/getenv "PORT") "8080"))]
    (println (str "donkey example on http://127.0.0.1:" port "/ (/plaintext /json /echo); Ctrl-C stops it"))
    (server/run-server #'handler {:port port})))
