(ns donkey.tfb.jetty
  "The database tests' comparator: the sync app's route handlers as one Ring handler on
  ring-jetty-adapter 1.8.2 (Jetty 9.4, the :bench profile's), what most Ring services run
  today. Loaded only for `donkey.tfb.app`'s jetty mode."
  (:require [donkey.tfb.rules :as rules]
            [ring.adapter.jetty :as jetty])
  (:import (com.fasterxml.jackson.databind ObjectMapper)
           (org.eclipse.jetty.server Server ServerConnector)))

(set! *warn-on-reflection* true)

(def ^:private ^ObjectMapper mapper (ObjectMapper.))

(defn- handler
  "`routes` (maps of :path and a one-argument :handler) as one Ring handler dispatched on
  :uri; a map or vector body is serialized with Jackson, as a ring-jetty service does."
  [routes]
  (let [by-path (into {} (map (juxt :path :handler)) routes)]
    (fn [request]
      (if-let [h (by-path (:uri request))]
        (let [r (h request)
              b (:body r)]
          (if (coll? b) (assoc r :body (.writeValueAsBytes mapper b)) r))
        {:status 404 :headers rules/text-headers :body "Not Found"}))))

(defn start
  "Serves `routes` on Jetty at 127.0.0.1:`port`: {:stop f :port f}."
  [routes port]
  (let [^Server s (jetty/run-jetty (handler routes) {:host "127.0.0.1" :port port :join? false})]
    {:stop #(.stop s)
     :port #(.getLocalPort ^ServerConnector (first (.getConnectors s)))}))
