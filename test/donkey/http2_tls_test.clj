(ns donkey.http2-tls-test
  "HTTP/2 over TLS: ALPN chooses h2 when the client offers it and :h2? is on, HTTP/1.1
  otherwise; the request says :scheme :https and carries the client's certificate. Real
  clients: java.net.http, curl and openssl s_client. Keys are made when the tests run
  (donkey.test-pki)."
  (:require [clojure.edn :as edn]
            [clojure.java.shell :as sh]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing use-fixtures]]
            [donkey.server :as server]
            [donkey.test-pki :as test-pki :refer [pass run-server]])
  (:import (donkey.kernel Server)
           (java.net URI)
           (java.net.http HttpClient HttpClient$Version HttpRequest HttpRequest$BodyPublishers
                          HttpResponse HttpResponse$BodyHandlers)
           (java.security.cert X509Certificate)
           (java.time Duration)))

(set! *warn-on-reflection* true)

(def ^:private pki "Set by the fixture." nil)

(use-fixtures :once
  (fn [run]
    (let [p (test-pki/make-pki)]
      (alter-var-root #'pki (constantly p))
      (try (run) (finally (test-pki/delete-pki! p))))))

;; every test runs on each TLS engine: the JDK's, and OpenSSL's when it is available
(use-fixtures :each test-pki/each-engine)

(defn- describe [req]
  {:status 200
   :headers {"content-type" "application/edn"}
   :body (pr-str {:protocol (:protocol req) :scheme (:scheme req)
                  :cert (when-let [^X509Certificate c (:ssl-client-cert req)]
                          (.getName (.getSubjectX500Principal c)))
                  :body (when-let [b (:body req)] (count (.readAllBytes ^java.io.InputStream b)))})})

(defn- start ^Server [opts]
  (run-server describe (merge {:port 0 :ssl-port 0 :join? false :event-loops 1
                               :keystore (:p12 pki) :key-password pass :h2? true}
                              opts)))

(defn- send-request
  "Sends a request with java.net.http preferring `version`: [protocol-version edn-body]."
  ([port version] (send-request port version false nil))
  ([port version cert? body]
   (let [^HttpClient c (-> (HttpClient/newBuilder)
                           (.sslContext (test-pki/client-context pki cert?))
                           (.version version)
                           (.connectTimeout (Duration/ofSeconds 5))
                           (.build))
         b (HttpRequest/newBuilder (URI/create (str "https://localhost:" port "/")))
         _ (when body (.POST b (HttpRequest$BodyPublishers/ofByteArray body)))
         ^HttpResponse r (.send c (.build (.timeout b (Duration/ofSeconds 10)))
                                (HttpResponse$BodyHandlers/ofString))]
     [(.version r) (edn/read-string (.body r))])))

(deftest alpn-chooses-h2-and-falls-back-to-http-1-1
  (with-open [s (start {})]
    (let [port (server/ssl-port s)]
      (testing "a client that offers h2 gets it"
        (is (= [HttpClient$Version/HTTP_2 {:protocol "HTTP/2.0" :scheme :https :cert nil :body nil}]
               (send-request port HttpClient$Version/HTTP_2))))
      (testing "with a body of 2 MiB"
        (is (= 2097152 (:body (second (send-request port HttpClient$Version/HTTP_2 false
                                                    (byte-array 2097152)))))))
      (testing "a client that offers HTTP/1.1 only keeps it"
        (is (= [HttpClient$Version/HTTP_1_1 {:protocol "HTTP/1.1" :scheme :https :cert nil :body nil}]
               (send-request port HttpClient$Version/HTTP_1_1))))
      (testing "the plaintext listener stays HTTP/1.1 without :h2c?"
        (let [^HttpResponse r (.send (-> (HttpClient/newBuilder) (.version HttpClient$Version/HTTP_2) (.build))
                                     (.build (HttpRequest/newBuilder (URI/create (str "http://127.0.0.1:" (server/port s) "/"))))
                                     (HttpResponse$BodyHandlers/ofString))]
          (is (= HttpClient$Version/HTTP_1_1 (.version r))))))))

(deftest without-h2-alpn-offers-http-1-1-only
  (with-open [s (start {:h2? false})]
    (is (= HttpClient$Version/HTTP_1_1
           (first (send-request (server/ssl-port s) HttpClient$Version/HTTP_2))))))

(deftest a-client-certificate-reaches-h2-requests
  (with-open [s (start {:truststore (:trust pki) :trust-password pass :client-auth :need})]
    (is (= [HttpClient$Version/HTTP_2 {:protocol "HTTP/2.0" :scheme :https
                                       :cert "CN=donkey test client" :body nil}]
           (send-request (server/ssl-port s) HttpClient$Version/HTTP_2 true nil)))))

(defn- curl [& args]
  (apply sh/sh "curl" "-sS" "--max-time" "10" args))

(deftest curl-speaks-h2-over-tls-and-h2c
  (with-open [s (start {:h2c? true})]
    (let [ca (str (test-pki/path (:dir pki) "ca.pem"))]
      (spit ca (test-pki/pem-of (:ca pki)))
      (doseq [[what flag url scheme]
              [["--http2 over TLS (ALPN)" ["--http2" "--cacert" ca]
                (str "https://localhost:" (server/ssl-port s) "/") ":https"]
               ["--http2-prior-knowledge over cleartext" ["--http2-prior-knowledge"]
                (str "http://127.0.0.1:" (server/port s) "/") ":http"]
               ["--http2 over cleartext: Upgrade: h2c" ["--http2"]
                (str "http://127.0.0.1:" (server/port s) "/") ":http"]]]
        (testing what
          (let [{:keys [out exit err]} (apply curl (concat flag ["-w" "\n%{http_version}" url]))]
            (is (zero? exit) err)
            (is (str/ends-with? out "\n2"))
            (is (str/includes? out ":protocol \"HTTP/2.0\""))
            (is (str/includes? out (str ":scheme " scheme)))))))))

(deftest openssl-sees-alpn-and-sni
  (with-open [s (run-server describe {:port 0 :ssl-port 0 :join? false :event-loops 1
                                      :keystore (:sni pki) :key-password pass :h2? true})]
    (let [port (server/ssl-port s)
          out (sh/sh "openssl" "s_client" "-connect" (str "127.0.0.1:" port) "-alpn" "h2,http/1.1"
                     "-servername" "b.test" :in "")
          text (str (:out out) (:err out))]
      (is (re-find #"ALPN protocol: h2" text) text)
      (is (str/includes? text (str/trim (test-pki/pem-of (first (:chain (:two pki))))))
          "the certificate SNI chose for b.test")
      (let [text (let [r (sh/sh "openssl" "s_client" "-connect" (str "127.0.0.1:" port)
                                "-alpn" "http/1.1" :in "")]
                   (str (:out r) (:err r)))]
        (is (re-find #"ALPN protocol: http/1.1" text))))))

(deftest a-reloaded-certificate-keeps-h2
  (with-open [s (start {})]
    (let [[crt k] (:pem-two pki)]
      (server/reload-ssl! s {:ssl-cert crt :ssl-key k})
      (is (= HttpClient$Version/HTTP_2
             (first (send-request (server/ssl-port s) HttpClient$Version/HTTP_2)))))))

(deftest an-ssl-context-of-ones-own-offers-h2-too
  (let [kmf (doto (javax.net.ssl.KeyManagerFactory/getInstance "PKIX")
              (.init (test-pki/load-store (:p12 pki) "PKCS12") (.toCharArray ^String pass)))
        ctx (doto (javax.net.ssl.SSLContext/getInstance "TLS") (.init (.getKeyManagers kmf) nil nil))]
    (with-open [s (run-server describe {:port 0 :ssl-port 0 :join? false :event-loops 1
                                        :ssl-context ctx :h2? true})]
      (is (= HttpClient$Version/HTTP_2
             (first (send-request (server/ssl-port s) HttpClient$Version/HTTP_2)))))))
