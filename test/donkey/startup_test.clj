(ns donkey.startup-test
  "What run-server loads: in a fresh JVM, a server whose app has not loaded ring-core's
  protocols starts without loading them (nor donkey.websocket), and serves a
  StreamableResponseBody and a Ring WebSocket listener that the app brings in after the
  server started."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is]]))

(set! *warn-on-reflection* true)

(def ^:private script
  "Run in the fresh JVM; prints one `key value` line per finding."
  "(require '[donkey.server :as s])
   (import '(java.net URI) '(java.net.http HttpClient WebSocket$Listener)
           '(java.util.concurrent CompletableFuture TimeUnit))
   (def body (promise))
   (def listener (promise))
   (def srv (s/run-server (fn [r]
                            (case (:uri r)
                              \"/late\" {:status 200 :body @body}
                              \"/ws\" {:ring.websocket/listener @listener}
                              {:status 200 :body \"x\"}))
                          {:port 0 :join? false}))
   (println \"ring-core-at-start\" (boolean (find-ns 'ring.core.protocols)))
   (println \"donkey.websocket-at-start\" (boolean (find-ns 'donkey.websocket)))
   (println \"plain\" (slurp (str \"http://127.0.0.1:\" (s/port srv) \"/\")))
   (require 'ring.core.protocols 'ring.websocket.protocols)
   (deliver body (reify ring.core.protocols/StreamableResponseBody
                   (write-body-to-stream [_ _ out]
                     (.write ^java.io.OutputStream out (.getBytes \"late\"))
                     (.close ^java.io.OutputStream out))))
   (println \"streamable\" (slurp (str \"http://127.0.0.1:\" (s/port srv) \"/late\")))
   (deliver listener (reify ring.websocket.protocols/Listener
                       (on-open [_ socket] (ring.websocket.protocols/-send socket \"hello\"))
                       (on-message [_ _ _]) (on-pong [_ _ _]) (on-error [_ _ _])
                       (on-close [_ _ _ _])))
   (def got (CompletableFuture.))
   (.join (.buildAsync (.newWebSocketBuilder (HttpClient/newHttpClient))
                       (URI. (str \"ws://127.0.0.1:\" (s/port srv) \"/ws\"))
                       (reify WebSocket$Listener
                         (onText [_ ws data last]
                           (.complete got (str data))
                           nil))))
   (println \"websocket\" (.get got 10 TimeUnit/SECONDS))
   (s/stop srv)
   (shutdown-agents)")

(defn- run-fresh-jvm
  "Runs `script` in a new JVM on this one's classpath; {:exit n :out text}."
  [script]
  (let [f (doto (io/file "target" "startup-test.clj") (io/make-parents))
        _ (spit f script)
        java (str (System/getProperty "java.home") "/bin/java")
        ^java.util.List cmd [java "-cp" (System/getProperty "java.class.path") "clojure.main" (str f)]
        p (-> (ProcessBuilder. cmd)
              (.redirectErrorStream true)
              (.start))
        out (slurp (.getInputStream p))]
    {:exit (.waitFor p) :out out}))

(deftest protocols-are-looked-up-not-loaded
  (let [{:keys [exit out]} (run-fresh-jvm script)
        found (into {} (keep #(let [[k v] (str/split % #" " 2)] (when v [k v])))
                    (str/split-lines out))]
    (is (zero? exit) out)
    (is (= "false" (found "ring-core-at-start"))
        "a server whose app has not loaded ring-core does not load it")
    (is (= "false" (found "donkey.websocket-at-start"))
        "nor donkey.websocket")
    (is (= "x" (found "plain")))
    (is (= "late" (found "streamable"))
        "a StreamableResponseBody the app loads after start is written")
    (is (= "hello" (found "websocket"))
        "a Ring WebSocket listener the app loads after start is served")))
