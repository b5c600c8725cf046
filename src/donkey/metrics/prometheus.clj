(ns donkey.metrics.prometheus
  "Prometheus's scrape of a Micrometer registry as a Ring handler. Needs
  `io.micrometer/micrometer-registry-prometheus`, which the application adds:

    (def registry (prometheus/registry))
    (server/run-server {:routes [{:path \"/metrics\" :methods [:get] :handler
                                  (prometheus/scrape-handler registry)} ...]}
                       {:port 8080 :metrics registry})"
  (:require [clojure.string :as str])
  (:import (io.micrometer.prometheusmetrics PrometheusConfig PrometheusMeterRegistry)
           (io.prometheus.metrics.expositionformats OpenMetricsTextFormatWriter
                                                    PrometheusTextFormatWriter)))

(set! *warn-on-reflection* true)

(defn registry
  "A new PrometheusMeterRegistry with Micrometer's default settings, to give run-server as
  `:metrics` and `scrape-handler` to serve."
  ^PrometheusMeterRegistry []
  (PrometheusMeterRegistry. PrometheusConfig/DEFAULT))

(defn- accepts-openmetrics?
  [request]
  (let [accept (get-in request [:headers "accept"])]
    (boolean (and (string? accept)
                  (str/includes? (str/lower-case accept) "application/openmetrics-text")))))

(defn scrape-response
  "The Ring response to a scrape of `registry` (a PrometheusMeterRegistry): 200 with every
  meter in OpenMetrics text when the request's Accept names application/openmetrics-text, else
  in Prometheus's text format 0.0.4. Takes as long as the registry's meters take to read: serve
  it from a sync handler (a worker thread), not the event loop."
  [^PrometheusMeterRegistry registry request]
  (let [content-type (if (accepts-openmetrics? request)
                       OpenMetricsTextFormatWriter/CONTENT_TYPE
                       PrometheusTextFormatWriter/CONTENT_TYPE)]
    {:status 200
     :headers {"Content-Type" content-type "Cache-Control" "no-store"}
     :body (.scrape registry content-type)}))

(defn scrape-handler
  "A Ring handler (both arities) that answers every request with `scrape-response` of
  `registry`. Mount it on a sync route: a scrape reads every meter."
  [^PrometheusMeterRegistry registry]
  (fn
    ([request] (scrape-response registry request))
    ([request respond raise]
     (try
       (respond (scrape-response registry request))
       (catch Throwable t (raise t))))))
