(ns donkey.tls-test
  "TLS: key stores (JKS, PKCS12, a KeyStore), PEM files and an SSLContext; the TLS listener
  beside the plaintext one or alone; :scheme and :ssl-client-cert; client authentication; the
  protocols and cipher suites on offer; SNI; reloading the certificate; bad files and bad
  clients. The keys and certificates are made when the tests run, by the JDK's keytool (no
  private key is kept in the repository). Real sockets on :port 0."
  (:require [clojure.edn :as edn]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing use-fixtures]]
            [donkey.options.check]
            [donkey.server :as server]
            [donkey.test-pki :as test-pki :refer [load-store pass path run-server]])
  (:import (donkey.kernel Server)
           (donkey.kernel.config ServerConfig)
           (io.netty.handler.ssl OpenSsl)
           (java.io ByteArrayOutputStream File IOException InputStream OutputStream)
           (java.net InetSocketAddress Socket SocketTimeoutException URI)
           (java.net.http HttpClient HttpClient$Version HttpRequest HttpResponse
                          HttpResponse$BodyHandlers)
           (java.nio.charset StandardCharsets)
           (java.nio.file Files)
           (java.nio.file.attribute FileAttribute)
           (java.security KeyStore KeyStore$PasswordProtection KeyStore$SecretKeyEntry PrivateKey)
           (java.security.cert Certificate CertificateFactory X509Certificate)
           (java.time Duration)
           (java.util Base64)
           (javax.crypto.spec SecretKeySpec)
           (javax.net.ssl KeyManagerFactory SNIHostName SNIServerName SSLContext SSLSocket
                          SSLSocketFactory TrustManagerFactory)))

(set! *warn-on-reflection* true)

(def ^:private pki
  "Set by the fixture: the CA, the leaves and the files made from them."
  nil)

(use-fixtures :once
  (fn [run]
    (let [p (test-pki/make-pki)]
      (alter-var-root #'pki (constantly p))
      (try (run)
           (finally (test-pki/delete-pki! p))))))

;; every test runs on each TLS engine: the JDK's, and OpenSSL's when it is available
(use-fixtures :each test-pki/each-engine)

(defn- openssl? [] (= :openssl test-pki/*engine*))

(defn- leaf-of ^X509Certificate [k] (first (:chain (get pki k))))

;; ---- clients -----------------------------------------------------------------------------

(defn- client-context ^SSLContext [cert?] (test-pki/client-context pki cert?))

(defn- https-get
  "GET https://127.0.0.1:`port``path` with java.net.http (host name verification on):
  {:status :body}."
  ([port path] (https-get port path false))
  ([port path cert?]
   (let [^HttpClient c (-> (HttpClient/newBuilder)
                           (.sslContext (client-context cert?))
                           (.version HttpClient$Version/HTTP_1_1)
                           (.connectTimeout (Duration/ofSeconds 5))
                           (.build))
         ^HttpResponse r (.send c (-> (HttpRequest/newBuilder (URI/create (str "https://127.0.0.1:" port path)))
                                      (.timeout (Duration/ofSeconds 10))
                                      (.build))
                                (HttpResponse$BodyHandlers/ofString))]
     {:status (.statusCode r) :body (.body r)})))

(defn- http-get [port path]
  (let [^HttpResponse r (.send (HttpClient/newHttpClient)
                               (.build (HttpRequest/newBuilder (URI/create (str "http://127.0.0.1:" port path))))
                               (HttpResponse$BodyHandlers/ofString))]
    {:status (.statusCode r) :body (.body r)}))

(defn- tls-socket
  "A TLS socket to 127.0.0.1:`port`, handshake done, with `protocols` and `suites` (nil: the
  JDK's), asking for the server name `sni` (nil: none), with the client certificate when
  `cert?`."
  ^SSLSocket [port & {:keys [protocols suites sni cert?]}]
  (let [^SSLSocketFactory f (.getSocketFactory (client-context cert?))
        ^SSLSocket s (.createSocket f "127.0.0.1" (int port))]
    (.setSoTimeout s 5000)
    (when protocols (.setEnabledProtocols s (into-array String protocols)))
    (when suites (.setEnabledCipherSuites s (into-array String suites)))
    (when sni
      (let [p (.getSSLParameters s)]
        (.setServerNames p [(SNIHostName. ^String sni)])
        (.setSSLParameters s p)))
    (.startHandshake s)
    s))

(defn- peer ^X509Certificate [^SSLSocket s]
  (first (.getPeerCertificates (.getSession s))))

(defn- read-response
  "Reads one HTTP/1.1 response with a Content-Length from `in`: {:status :body}."
  [^InputStream in]
  (let [head (ByteArrayOutputStream.)]
    (loop []
      (let [b (.read in)]
        (when (neg? b) (throw (IOException. "connection closed before a response")))
        (.write head b)
        (when-not (str/ends-with? (.toString head "ISO-8859-1") "\r\n\r\n") (recur))))
    (let [h (.toString head "ISO-8859-1")
          n (Long/parseLong (second (re-find #"(?i)\r\ncontent-length: *(\d+)" h)))
          body (.readNBytes in (int n))]
      {:status (Long/parseLong (second (re-find #"^HTTP/1.1 (\d+)" h)))
       :body (String. body StandardCharsets/UTF_8)})))

(defn- exchange
  "Sends a keep-alive GET of `path` on `s` and reads its response."
  [^Socket s path]
  (let [^OutputStream out (.getOutputStream s)]
    (.write out (.getBytes (str "GET " path " HTTP/1.1\r\nHost: localhost\r\n\r\n")
                           StandardCharsets/ISO_8859_1))
    (.flush out)
    (read-response (.getInputStream s))))

(defn- refused?
  "True when a TLS handshake or exchange on `port` with `opts` (see tls-socket) fails, false
  when it is served."
  [port & opts]
  (try (with-open [s ^SSLSocket (apply tls-socket port opts)]
         (not= 200 (:status (exchange s "/"))))
       (catch IOException _ true)))

(defn- raw-answer
  "Writes `bytes` on a plain socket to `port`; returns {:bytes what came back :closed? whether
  the server closed the connection within 5 s}."
  [port ^bytes bytes]
  (with-open [s (Socket.)]
    (.connect s (InetSocketAddress. "127.0.0.1" (int port)) 5000)
    (.setSoTimeout s 5000)
    (.write (.getOutputStream s) bytes)
    (.flush (.getOutputStream s))
    (let [in (.getInputStream s)
          got (ByteArrayOutputStream.)
          closed? (try (loop []
                         (let [b (.read in)]
                           (if (neg? b) true (do (.write got b) (recur)))))
                       (catch SocketTimeoutException _ false)
                       (catch IOException _ true))]
      {:bytes (.toByteArray got) :closed? closed?})))

(defn- client-hello
  "A TLS ClientHello record of the legacy `version` (0x0301 for TLS 1.0, 0x0302 for 1.1)
  without extensions, offering CBC suites of that era, as an old client sends it."
  ^bytes [version]
  (let [suites [0xc0 0x09 0xc0 0x0a 0xc0 0x13 0x00 0x2f]
        body (concat [(bit-shift-right version 8) (bit-and version 0xff)]
                     (repeat 32 7)                ; random
                     [0]                          ; no session id
                     [0 (count suites)] suites
                     [1 0])                       ; compression: null only
        hs (concat [1 0 0 (count body)] body)
        rec (concat [0x16 0x03 0x01 0 (count hs)] hs)]
    (byte-array (map unchecked-byte rec))))

;; ---- the servers ---------------------------------------------------------------------------

(defn- describe
  "The test handler: what the request says about its connection, as EDN."
  [req]
  {:status 200
   :headers {"content-type" "application/edn"}
   :body (pr-str {:scheme (:scheme req)
                  :cert? (contains? req :ssl-client-cert)
                  :cert (when-let [^X509Certificate c (:ssl-client-cert req)]
                          (.getName (.getSubjectX500Principal c)))
                  :in-seq? (boolean (some #{:ssl-client-cert} (keys req)))
                  ;; the lazy map agrees with the plain map it stands for
                  :map-ok? (let [plain (into {} (seq req))]
                             (and (= (count req) (count plain)) (= req plain) (= plain req)
                                  (= (hash req) (hash plain))
                                  (= (:ssl-client-cert req) (:ssl-client-cert plain))))})})

(defmacro ^:private with-tls
  "Runs `body` with `s` bound to a server of `describe` started with `opts` (TLS on a free
  port beside plaintext on another)."
  [[s opts] & body]
  `(with-open [~s (run-server describe (merge {:port 0 :ssl-port 0 :join? false
                                                :event-loops 2}
                                               ~opts))]
     ~@body))

(defn- start-failure
  "The message of the IllegalArgumentException run-server throws for `opts`, or nil."
  [opts]
  (try (server/stop (run-server describe (merge {:port 0 :ssl-port 0 :join? false} opts)))
       nil
       (catch IllegalArgumentException e (ex-message e))))

(defn- described [resp] (edn/read-string (:body resp)))

;; ---- key material ----------------------------------------------------------------------------

(deftest key-stores-pem-files-and-ssl-contexts-serve-https
  (doseq [[what opts] [["a JKS file (the default type)" {:keystore (:jks pki) :key-password pass}]
                       ["a PKCS12 file, by its extension" {:keystore (:sni pki) :key-password pass}]
                       ["a PKCS12 file, by :keystore-type" {:keystore (:p12 pki) :keystore-type "PKCS12"
                                                            :key-password pass}]
                       ["a loaded KeyStore" {:keystore (load-store (:jks pki) "JKS") :key-password pass}]
                       ["PEM files" {:ssl-cert (first (:pem-one pki)) :ssl-key (second (:pem-one pki))}]
                       ["an SSLContext"
                        {:ssl-context (let [kmf (doto (KeyManagerFactory/getInstance "PKIX")
                                                  (.init (load-store (:jks pki) "JKS") (.toCharArray ^String pass)))]
                                        (doto (SSLContext/getInstance "TLS")
                                          (.init (.getKeyManagers kmf) nil nil)))}]]]
    (testing what
      (with-tls [s (assoc opts :ssl? true)]
        (let [tls (server/ssl-port s)]
          (is (pos? tls))
          (is (not= tls (server/port s)) "two listeners")
          (let [r (https-get tls "/")]
            (is (= 200 (:status r)))
            (is (= {:scheme :https :cert? false :cert nil :in-seq? false :map-ok? true} (described r))))
          (with-open [sock (tls-socket tls)]
            (is (= (leaf-of :one) (peer sock)) "the configured certificate, with its chain")
            (is (= 2 (count (.getPeerCertificates (.getSession sock)))))))))))

(deftest the-plaintext-listener-runs-beside-the-tls-one-on-every-event-loop
  (with-tls [s {:keystore (:p12 pki) :key-password pass :event-loops 3}]
    (testing ":ssl-port turns TLS on, as with ring-jetty"
      (is (some? (server/ssl-port s))))
    (testing "plaintext on :port says :scheme :http and has no :ssl-client-cert"
      (let [r (http-get (server/port s) "/")]
        (is (= 200 (:status r)))
        (is (= {:scheme :http :cert? false :cert nil :in-seq? false :map-ok? true} (described r)))))
    (testing "many connections to each listener at once are all served"
      (let [fs (doall (for [i (range 12)]
                        (future (if (even? i)
                                  (:status (https-get (server/ssl-port s) "/"))
                                  (:status (http-get (server/port s) "/"))))))]
        (is (= (repeat 12 200) (map #(deref % 20000 :timeout) fs))))))
  (testing "each listener's connections are spread over every event loop"
    (let [loops (atom {})
          h (fn [req respond _]
              ;; an async handler runs on the event loop of its connection
              (swap! loops update (:scheme req) (fnil conj #{}) (.getName (Thread/currentThread)))
              (respond {:status 200 :body "ok"}))]
      (with-open [s (run-server h {:port 0 :ssl-port 0 :join? false :async? true
                                   :event-loops 3 :keystore (:p12 pki) :key-password pass})]
        (dotimes [_ 9]
          (is (= 200 (:status (https-get (server/ssl-port s) "/"))))
          (is (= 200 (:status (http-get (server/port s) "/")))))
        (is (= 3 (count (:https @loops))) (pr-str @loops))
        (is (= 3 (count (:http @loops))) (pr-str @loops))))))

(deftest http-false-serves-tls-only
  (with-open [s (run-server describe {:http? false :ssl-port 0 :join? false
                                      :keystore (:p12 pki) :key-password pass})]
    (is (= (server/port s) (server/ssl-port s)) "one listener, the TLS one")
    (is (= 200 (:status (https-get (server/ssl-port s) "/"))))
    (let [{:keys [^bytes bytes closed?]} (raw-answer (server/port s)
                                                     (.getBytes "GET / HTTP/1.1\r\nHost: x\r\n\r\n"))]
      (is (not (str/starts-with? (String. bytes StandardCharsets/ISO_8859_1) "HTTP/")))
      (is closed?)))
  (testing ":http? false without TLS serves nothing: refused"
    (is (re-find #"^donkey.server/run-server: :http\? false .*:ssl"
                 (str (try (run-server describe {:port 0 :join? false :http? false})
                           (catch IllegalArgumentException e (ex-message e))))))))

(deftest an-http2-client-is-served-http-1-1
  ;; no ALPN: a client that offers h2 in its handshake gets HTTP/1.1, as donkey serves no HTTP/2
  (with-tls [s {:keystore (:p12 pki) :key-password pass}]
    (let [^HttpClient c (-> (HttpClient/newBuilder) (.sslContext (client-context false))
                            (.version HttpClient$Version/HTTP_2) (.build))
          ^HttpResponse r (.send c (.build (HttpRequest/newBuilder
                                            (URI/create (str "https://127.0.0.1:" (server/ssl-port s) "/"))))
                                 (HttpResponse$BodyHandlers/ofString))]
      (is (= 200 (.statusCode r)))
      (is (= HttpClient$Version/HTTP_1_1 (.version r))))))

;; ---- client certificates -----------------------------------------------------------------

(deftest client-auth-need-want-and-none
  (let [base {:keystore (:p12 pki) :key-password pass :truststore (:trust pki) :trust-password pass}
        client-dn (.getName (.getSubjectX500Principal (leaf-of :client)))]
    (testing ":need with a client certificate: :ssl-client-cert is its first certificate"
      (with-tls [s (assoc base :client-auth :need)]
        (let [r (described (https-get (server/ssl-port s) "/" true))]
          (is (= {:scheme :https :cert? true :cert client-dn :in-seq? true :map-ok? true} r)))
        (testing "on every request of the connection"
          (with-open [sock (tls-socket (server/ssl-port s) :cert? true)]
            (dotimes [_ 3]
              (is (= client-dn (:cert (described (exchange sock "/"))))))))
        (testing "without one the handshake fails, and the server goes on serving"
          (is (refused? (server/ssl-port s)))
          (is (refused? (server/ssl-port s) :protocols ["TLSv1.2"]))
          (is (= 200 (:status (https-get (server/ssl-port s) "/" true)))))
        (testing "the plaintext listener is not affected"
          (is (= 200 (:status (http-get (server/port s) "/")))))))
    (testing ":want: the certificate when presented, none when not"
      (with-tls [s (assoc base :client-auth :want :truststore (load-store (:trust pki) "PKCS12"))]
        (is (= client-dn (:cert (described (https-get (server/ssl-port s) "/" true)))))
        (is (= {:scheme :https :cert? false :cert nil :in-seq? false :map-ok? true}
               (described (https-get (server/ssl-port s) "/" false))))))
    (testing ":none (the default): not asked for, so absent even from a client that has one"
      (with-tls [s base]
        (is (false? (:cert? (described (https-get (server/ssl-port s) "/" true)))))))
    (testing "an :ssl-context's own trust managers check client certificates"
      (let [ks (load-store (:p12 pki) "PKCS12")
            kmf (doto (KeyManagerFactory/getInstance "PKIX") (.init ks (.toCharArray ^String pass)))
            tmf (doto (TrustManagerFactory/getInstance "PKIX") (.init (load-store (:trust pki) "PKCS12")))
            ctx (doto (SSLContext/getInstance "TLS") (.init (.getKeyManagers kmf) (.getTrustManagers tmf) nil))]
        (with-tls [s {:ssl-context ctx :client-auth :need}]
          (is (= client-dn (:cert (described (https-get (server/ssl-port s) "/" true)))))
          (is (refused? (server/ssl-port s))))))))

(defn- dn-of [k] (.getName (.getSubjectX500Principal (leaf-of k))))

(defn- authenticates-clients
  "Checks servers started with `opts` under :need and under :want: a client presenting the
  certificate of `client` (a key of pki: :client, :one) is served with it as
  :ssl-client-cert, and one without a certificate is refused under :need and served without
  one under :want. The server's certificate is still :one."
  [opts client]
  (testing ":need"
    (with-tls [s (assoc opts :client-auth :need)]
      (let [port (server/ssl-port s)]
        (is (= (dn-of client) (:cert (described (https-get port "/" client)))))
        (with-open [sock (tls-socket port :cert? client :protocols ["TLSv1.2"])]
          (is (= (leaf-of :one) (peer sock)) "the key store's key is the one served")
          (is (= (dn-of client) (:cert (described (exchange sock "/")))) "over TLS 1.2 too"))
        (is (refused? port) "a client without a certificate")
        (is (refused? port :protocols ["TLSv1.2"]) "a TLS 1.2 client without a certificate"))))
  (testing ":want"
    (with-tls [s (assoc opts :client-auth :want)]
      (let [port (server/ssl-port s)]
        (is (= (dn-of client) (:cert (described (https-get port "/" client)))))
        (is (= {:scheme :https :cert? false :cert nil :in-seq? false :map-ok? true}
               (described (https-get port "/" false))))))))

;; As with ring-jetty (Jetty's SslContextFactory), a key store given without a trust store is
;; the trust store too: its trusted certificate entries, and the certificates of its key
;; entries themselves, which is how the JDK's trust manager takes a key store.
(deftest client-auth-without-a-truststore-trusts-the-keystore
  (testing "a key store file with the CA beside the server's key: clients the CA signed"
    (authenticates-clients {:keystore (:with-ca pki) :key-password pass} :client))
  (testing "the same as a loaded KeyStore"
    (authenticates-clients {:keystore (load-store (:with-ca pki) "PKCS12") :key-password pass}
                           :client))
  (testing "a key store of the server's key alone trusts that key's certificate"
    (authenticates-clients {:keystore (:p12 pki) :key-password pass} :one)
    (authenticates-clients {:keystore (:jks pki) :key-password pass} :one)
    (with-tls [s {:keystore (:p12 pki) :key-password pass :client-auth :need}]
      (is (refused? (server/ssl-port s) :cert? true)
          "not the CA that signed it: a client certificate the CA signed is not trusted")))
  (testing ":trust-password opens the key store as the trust store, :key-password when it is absent"
    (authenticates-clients {:keystore (:with-ca pki) :key-password pass :trust-password pass}
                           :client)
    (is (re-find #"^donkey\.server/run-server: :trust-password does not open :keystore .*one-with-ca\.p12"
                 (str (start-failure {:keystore (:with-ca pki) :key-password pass
                                      :trust-password "wrong" :client-auth :need})))))
  (testing "a reload that turns client authentication on without a trust store"
    (with-tls [s {:keystore (:with-ca pki) :key-password pass}]
      (let [port (server/ssl-port s)]
        (is (= 200 (:status (https-get port "/"))))
        (server/reload-ssl! s {:keystore (:with-ca pki) :key-password pass :client-auth :need})
        (is (refused? port))
        (is (= (dn-of :client) (:cert (described (https-get port "/" true))))))))
  (testing "PEM files are no trust store: :client-auth with them and no :truststore is refused"
    (let [[one-crt one-key] (:pem-one pki)]
      (is (re-find #"^donkey\.server/run-server: :client-auth :need with :ssl-cert/:ssl-key needs a :truststore"
                   (str (start-failure {:ssl-cert one-crt :ssl-key one-key :client-auth :need}))))
      (is (re-find #"^donkey\.server/run-server: :client-auth :want with :ssl-cert/:ssl-key needs a :truststore"
                   (str (start-failure {:ssl-cert one-crt :ssl-key one-key :client-auth :want}))))
      (testing "and served with one"
        (authenticates-clients {:ssl-cert one-crt :ssl-key one-key :truststore (:trust pki)
                                :trust-password pass}
                               :client)))))

;; The JDK's trust manager, given a key store, trusts the certificates of its key entries as
;; well as its trusted certificate entries; a :truststore is taken the same way.
(deftest a-truststore-of-key-entries-trusts-their-certificates
  (let [base {:keystore (:p12 pki) :key-password pass}]
    (testing "the CA's own key store: clients the CA signed"
      (authenticates-clients (assoc base :truststore (:ca-store pki) :trust-password pass) :client))
    (testing "the same as a loaded KeyStore"
      (authenticates-clients (assoc base :truststore (load-store (:ca-store pki) "PKCS12"))
                             :client))
    (testing "a client's own key store: that client"
      (authenticates-clients (assoc base :truststore (:client-store pki) :trust-password pass)
                             :client))
    (testing "a trust store with no certificate at all is refused, naming it"
      (is (re-find #"^donkey\.server/run-server: :truststore .*empty\.p12 holds no certificate to trust"
                   (str (start-failure (assoc base :truststore (:empty pki) :trust-password pass
                                              :client-auth :need)))))
      (let [secret-only (doto (KeyStore/getInstance "PKCS12")
                          (.load nil nil)
                          (.setEntry "aes" (KeyStore$SecretKeyEntry. (SecretKeySpec. (byte-array 16) "AES"))
                                     (KeyStore$PasswordProtection. (.toCharArray ^String pass))))]
        (is (re-find #"^donkey\.server/run-server: :truststore holds no certificate to trust"
                     (str (start-failure (assoc base :truststore secret-only :client-auth :want)))))))))

;; ---- the engine -----------------------------------------------------------------------------

(defn- own-ssl-context ^SSLContext []
  (let [kmf (doto (KeyManagerFactory/getInstance "PKIX")
              (.init (load-store (:jks pki) "JKS") (.toCharArray ^String pass)))]
    (doto (SSLContext/getInstance "TLS") (.init (.getKeyManagers kmf) nil nil))))

(deftest ssl-provider-chooses-the-tls-engine
  (testing "the engine asked for serves, and ssl-provider says which"
    (with-tls [s {:keystore (:p12 pki) :key-password pass}]
      (is (= test-pki/*engine* (server/ssl-provider s)))
      (is (= 200 (:status (https-get (server/ssl-port s) "/"))))))
  (testing ":auto (the default) is OpenSSL when it is available, else the JDK's"
    (with-tls [s {:keystore (:p12 pki) :key-password pass :ssl-provider :auto}]
      (is (= (if (OpenSsl/isAvailable) :openssl :jdk) (server/ssl-provider s)))))
  (testing "no TLS listener, no engine"
    (with-open [s (run-server describe {:port 0 :join? false})]
      (is (nil? (server/ssl-provider s)))))
  (testing "an :ssl-context is the JDK's, so the JDK's engine serves it under :auto"
    (with-tls [s {:ssl-context (own-ssl-context) :ssl-provider :auto}]
      (is (= :jdk (server/ssl-provider s)))
      (is (= 200 (:status (https-get (server/ssl-port s) "/"))))
      (testing "and a reload to key files takes the listener's engine again"
        (server/reload-ssl! s {:keystore (:p12 pki) :key-password pass})
        (is (= (if (OpenSsl/isAvailable) :openssl :jdk) (server/ssl-provider s)))
        (is (= 200 (:status (https-get (server/ssl-port s) "/")))))))
  (testing "refused at start-up, naming the option"
    (is (re-find #"^donkey.server/run-server: :ssl-provider must be one of :auto, :jdk, :openssl"
                 (str (start-failure {:keystore (:p12 pki) :key-password pass
                                      :ssl-provider :boringssl}))))
    (is (re-find #"^donkey.server/run-server: :ssl-provider :openssl and :ssl-context"
                 (str (start-failure {:ssl-context (own-ssl-context) :ssl-provider :openssl}))))
    (when-not (OpenSsl/isAvailable)
      (is (re-find #"^donkey.server/run-server: :ssl-provider :openssl .*netty-tcnative"
                   (str (start-failure {:keystore (:p12 pki) :key-password pass
                                        :ssl-provider :openssl})))))))

;; ---- protocols and cipher suites -----------------------------------------------------------

(deftest tls-1-3-and-1-2-only
  (with-tls [s {:keystore (:p12 pki) :key-password pass}]
    (let [port (server/ssl-port s)]
      (testing "TLS 1.3 by default, and TLS 1.2 for a client that asks for it"
        (with-open [sock (tls-socket port)]
          (is (= "TLSv1.3" (.getProtocol (.getSession sock))))
          (is (= 200 (:status (exchange sock "/")))))
        (with-open [sock (tls-socket port :protocols ["TLSv1.2"])]
          (is (= "TLSv1.2" (.getProtocol (.getSession sock))))
          (is (= 200 (:status (exchange sock "/"))))))
      (testing "a TLS 1.0 or 1.1 ClientHello gets an alert or nothing, never a ServerHello, and
                the connection is closed"
        (doseq [v [0x0301 0x0302]]
          (let [{:keys [^bytes bytes closed?]} (raw-answer port (client-hello v))]
            (is closed? (format "version %04x" v))
            (is (or (zero? (alength bytes)) (= 0x15 (aget bytes 0)))
                (format "version %04x: %s" v (vec bytes))))))
      (testing "the server still serves"
        (is (= 200 (:status (https-get port "/"))))))))

(deftest only-forward-secret-aead-cipher-suites
  (with-tls [s {:keystore (:p12 pki) :key-password pass}]
    (let [port (server/ssl-port s)
          jdk (.getSupportedCipherSuites ^SSLSocketFactory (.getSocketFactory (client-context false)))
          ecdsa-12 (filter #(str/starts-with? % "TLS_ECDHE_ECDSA_WITH_") jdk)
          weak (remove #(re-find #"_GCM_|_CHACHA20_POLY1305_" %) ecdsa-12)
          strong (filter #(re-find #"_GCM_|_CHACHA20_POLY1305_" %) ecdsa-12)]
      (is (seq weak) "the JDK offers CBC suites to try")
      (testing "a TLS 1.2 client offering only a CBC (or SHA-1 MAC) suite is refused"
        (doseq [suite weak]
          (is (refused? port :protocols ["TLSv1.2"] :suites [suite]) suite)))
      (testing "the AEAD ones are served"
        (doseq [suite strong]
          (is (not (refused? port :protocols ["TLSv1.2"] :suites [suite])) suite)))
      (testing "what a default client negotiates"
        (with-open [sock (tls-socket port :protocols ["TLSv1.2"])]
          (is (re-find #"^TLS_ECDHE_ECDSA_WITH_.*(_GCM_|CHACHA20)" (.getCipherSuite (.getSession sock))))))
      (testing "the server still serves"
        (is (= 200 (:status (https-get port "/")))))))
  (testing "with an RSA certificate: no static-RSA key exchange (no forward secrecy)"
    (with-tls [s {:keystore (:rsa-store pki) :key-password pass}]
      (let [port (server/ssl-port s)
            jdk (set (.getSupportedCipherSuites ^SSLSocketFactory (.getSocketFactory (client-context false))))]
        (doseq [suite ["TLS_RSA_WITH_AES_128_GCM_SHA256" "TLS_RSA_WITH_AES_256_GCM_SHA384"
                       "TLS_RSA_WITH_AES_128_CBC_SHA" "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256"]
                :when (jdk suite)]
          (is (refused? port :protocols ["TLSv1.2"] :suites [suite]) suite))
        ;; BoringSSL has no finite-field DHE: its forward secrecy is ECDHE's alone
        (doseq [suite (cond-> ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
                               "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"]
                        (not (openssl?)) (conj "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384"))
                :when (jdk suite)]
          (is (not (refused? port :protocols ["TLSv1.2"] :suites [suite])) suite))
        (with-open [sock (tls-socket port)]
          (is (= (leaf-of :rsa) (peer sock))))))))

(deftest exclude-protocols-and-ciphers
  (testing ":exclude-protocols"
    (with-tls [s {:keystore (:p12 pki) :key-password pass :exclude-protocols ["TLSv1.3"]}]
      (is (refused? (server/ssl-port s) :protocols ["TLSv1.3"]))
      (with-open [sock (tls-socket (server/ssl-port s))]
        (is (= "TLSv1.2" (.getProtocol (.getSession sock)))))))
  (testing ":exclude-ciphers, by name and by regular expression"
    (with-tls [s {:keystore (:p12 pki) :key-password pass
                  :exclude-ciphers ["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384" ".*ECDSA.*CHACHA20.*"]}]
      (let [port (server/ssl-port s)]
        (is (refused? port :protocols ["TLSv1.2"] :suites ["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"]))
        (is (refused? port :protocols ["TLSv1.2"]
                      :suites ["TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"]))
        (is (not (refused? port :protocols ["TLSv1.2"]
                           :suites ["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"]))))))
  (testing ":exclude-ciphers of TLS 1.3 suites"
    (if (openssl?)
      (is (re-find #"^donkey.server/run-server: :exclude-ciphers TLS_AES_256_GCM_SHA384: .*:ssl-provider :jdk"
                   (str (start-failure {:keystore (:p12 pki) :key-password pass
                                        :exclude-ciphers ["TLS_AES_256_GCM_SHA384"]})))
          "BoringSSL always offers every TLS 1.3 suite: refused rather than ignored")
      (with-tls [s {:keystore (:p12 pki) :key-password pass
                    :exclude-ciphers ["TLS_AES_256_GCM_SHA384" ".*CHACHA20.*"]}]
        (let [port (server/ssl-port s)]
          (is (refused? port :protocols ["TLSv1.3"] :suites ["TLS_AES_256_GCM_SHA384"]))
          (is (refused? port :protocols ["TLSv1.3"] :suites ["TLS_CHACHA20_POLY1305_SHA256"]))
          (is (not (refused? port :protocols ["TLSv1.3"] :suites ["TLS_AES_128_GCM_SHA256"])))))))
  (testing "with TLS 1.3 excluded, its suites may be excluded on either engine"
    (with-tls [s {:keystore (:p12 pki) :key-password pass :exclude-protocols ["TLSv1.3"]
                  :exclude-ciphers ["TLS_AES_256_GCM_SHA384"]}]
      (is (= 200 (:status (https-get (server/ssl-port s) "/"))))))
  (testing ":replace-exclude-ciphers? true starts from every suite the JDK enables"
    (with-tls [s {:keystore (:p12 pki) :key-password pass :replace-exclude-ciphers? true
                  :exclude-ciphers [".*_CBC_SHA$"]}]
      (let [port (server/ssl-port s)]
        ;; BoringSSL has CBC with SHA-1 MACs only, so it has nothing to serve here
        (is (= (openssl?) (refused? port :protocols ["TLSv1.2"]
                                    :suites ["TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256"]))
            "a CBC suite donkey leaves out by default")
        (is (refused? port :protocols ["TLSv1.2"] :suites ["TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA"])
            "but not what :exclude-ciphers names"))))
  (testing "excluding everything is refused at start-up, naming the option"
    (is (re-find #"^donkey.server/run-server: :exclude-protocols leaves no protocol"
                 (str (start-failure {:keystore (:p12 pki) :key-password pass
                                      :exclude-protocols ["TLSv1.3" "TLSv1.2"]}))))
    (is (re-find #":exclude-ciphers leaves no cipher suite"
                 (str (start-failure {:keystore (:p12 pki) :key-password pass
                                      :exclude-ciphers [".*"]}))))))

;; ---- bad input ---------------------------------------------------------------------------

(deftest bad-bytes-on-the-tls-port-close-that-connection-only
  ;; a handshake must end within the header timeout (at most 10 s): 2 s here
  (with-tls [s {:keystore (:p12 pki) :key-password pass :header-timeout 2000}]
    (let [port (server/ssl-port s)]
      (doseq [[what ^bytes data] [["a plaintext request" (.getBytes "GET / HTTP/1.1\r\nHost: x\r\n\r\n")]
                                  ["garbage" (byte-array (map unchecked-byte (range 7 1031 3)))]
                                  ["a TLS record header announcing more than ever comes"
                                   (byte-array (map unchecked-byte [0x16 0x03 0x03 0x3f 0xff 1 2 3]))]
                                  ["half a ClientHello" (byte-array (take 30 (client-hello 0x0303)))]]]
        (testing what
          (let [{:keys [^bytes bytes closed?]} (raw-answer port data)]
            (is closed? "the connection is closed")
            (is (not (str/starts-with? (String. bytes StandardCharsets/ISO_8859_1) "HTTP/"))
                "no HTTP answer in the clear"))
          (is (= 200 (:status (https-get port "/"))) "and the server goes on serving")))
      (testing "a client that connects and sends nothing does not hold the server up, and is
                closed after the handshake timeout"
        (let [{:keys [closed?]} (raw-answer port (byte-array 0))]
          (is closed?))))))

;; A TLS connection counts toward :max-connections from its accept, as a plaintext one
;; does, not once its handshake is done: otherwise connections that never send a ClientHello
;; could pile up beyond the limit, bounded only by the handshake timeout.
(deftest silent-tls-connections-count-toward-max-connections
  (let [;; the acceptor counts a connection a moment after the client's connect returns: on a
        ;; loaded machine, later than a fixed sleep
        soon-refused? (fn [port]
                        (let [deadline (+ (System/currentTimeMillis) 2000)]
                          (loop []
                            (cond (refused? port) true
                                  (> (System/currentTimeMillis) deadline) false
                                  :else (do (Thread/sleep 100) (recur))))))
        silent! (fn [port n]
                  (vec (repeatedly n #(doto (Socket.)
                                        (.connect (InetSocketAddress. "127.0.0.1" (int port)) 5000)))))]
    (with-open [s (run-server describe {:http? false :ssl-port 0 :join? false
                                        :event-loops 2 :max-connections 4
                                        :keystore (:p12 pki) :key-password pass})]
      (let [port (server/ssl-port s)
            held (silent! port 4)]
        (try
          (let [t0 (System/nanoTime)]
            (is (soon-refused? port) "a fifth connection, a real TLS client, is refused")
            (is (< (/ (- (System/nanoTime) t0) 1e6) 3000) "at once, not after a handshake timeout"))
          (finally (run! #(.close ^Socket %) held)))
        (Thread/sleep 300)
        (is (not (refused? port)) "once the silent connections are closed, a TLS client is served")))
    (testing "silent connections leave their places when the handshake timeout closes them"
      (with-open [s (run-server describe {:http? false :ssl-port 0 :join? false
                                          :event-loops 2 :max-connections 4
                                          :header-timeout 3000
                                          :keystore (:p12 pki) :key-password pass})]
        (let [port (server/ssl-port s)
              held (silent! port 4)]
          (try
            (is (soon-refused? port) "while the silent connections are open")
            ;; the handshake timeout is the header timeout's 3 s
            (Thread/sleep 4000)
            (is (not (refused? port)) "served while the silent clients still hold their sockets")
            (finally (run! #(.close ^Socket %) held))))))))

(deftest bad-tls-options-fail-start-up-naming-the-option
  (let [[one-crt one-key] (:pem-one pki)
        [_ two-key] (:pem-two pki)
        prefix "^donkey\\.server/run-server: "]
    (doseq [[what opts re] [["a wrong key store password (PKCS12)"
                             {:keystore (:p12 pki) :key-password "wrong"} ":key-password does not open :keystore"]
                            ["a wrong key store password (JKS)"
                             {:keystore (:jks pki) :key-password "wrong"} ":key-password does not open :keystore"]
                            ["a key store's key with another password"
                             {:keystore (load-store (:jks pki) "JKS") :key-password "wrong"}
                             ":key-password does not unlock the key \"one\""]
                            ["a missing key store" {:keystore "/no/such/keystore.jks" :key-password pass}
                             ":keystore /no/such/keystore.jks: no such file"]
                            ["a missing certificate file" {:ssl-cert "/no/such/cert.pem" :ssl-key one-key}
                             ":ssl-cert /no/such/cert.pem: no such file"]
                            ["a missing key file" {:ssl-cert one-crt :ssl-key "/no/such/key.pem"}
                             ":ssl-key /no/such/key.pem: no such file"]
                            ["a key that does not match its certificate" {:ssl-cert one-crt :ssl-key two-key}
                             ":ssl-key .* for :ssl-cert .* does not match its certificate"]
                            ["a certificate file without a certificate" {:ssl-cert one-key :ssl-key one-key}
                             ":ssl-cert .* holds no -----BEGIN CERTIFICATE----- block"]
                            ["a key file without a key" {:ssl-cert one-crt :ssl-key one-crt}
                             ":ssl-key .* holds no -----BEGIN PRIVATE KEY----- block"]
                            ["a certificate without its key" {:ssl-cert one-crt} ":ssl-cert needs :ssl-key"]
                            ["two keys for one listener" {:keystore (:p12 pki) :ssl-cert one-crt :ssl-key one-key}
                             ":keystore and :ssl-cert/:ssl-key both"]
                            ["TLS without a key" {:ssl? true} ":ssl\\? needs the server's key"]
                            ["a trust store with a wrong password"
                             {:keystore (:p12 pki) :key-password pass :truststore (:trust pki)
                              :trust-password "wrong" :client-auth :want}
                             ":trust-password does not open :truststore"]
                            ["an unknown key store type" {:keystore (:p12 pki) :keystore-type "NOPE"}
                             ":keystore-type NOPE is not a key store type"]
                            ["one port for both listeners" {:port 18443 :ssl-port 18443 :keystore (:p12 pki)
                                                            :key-password pass}
                             ":ssl-port 18443 is :port too"]
                            ["a client-auth that is not one" {:keystore (:p12 pki) :key-password pass
                                                              :client-auth :maybe}
                             ":client-auth must be one of :none, :want, :need"]
                            ["a keystore that is not one" {:keystore 42} ":keystore must be a path or a java.security.KeyStore"]]]
      (testing what
        (is (re-find (re-pattern (str prefix re)) (str (start-failure opts))))))))

;; ---- SNI -----------------------------------------------------------------------------------

(deftest sni-chooses-the-certificate-by-name
  (let [[one-crt one-key] (:pem-one pki)
        [two-crt two-key] (:pem-two pki)]
    (doseq [[what opts first-served] [["a key store with two key entries (alias order)"
                                       {:keystore (:sni pki) :key-password pass} :one]
                                      ["PEM pairs, in the order given" {:ssl-cert [one-crt two-crt]
                                                                        :ssl-key [one-key two-key]} :one]
                                      ["PEM pairs, the other way round" {:ssl-cert [two-crt one-crt]
                                                                         :ssl-key [two-key one-key]} :two]]]
      (testing what
        (with-tls [s opts]
          (let [port (server/ssl-port s)]
            (doseq [[sni expected] [["a.test" :one] ["b.test" :two] [nil first-served]
                                    ["unknown.test" first-served]]]
              (doseq [protocol ["TLSv1.3" "TLSv1.2"]]
                (with-open [sock (tls-socket port :sni sni :protocols [protocol])]
                  (is (= (leaf-of expected) (peer sock)) (str protocol " asking for " (pr-str sni)))
                  (is (= 200 (:status (exchange sock "/")))))))))))
    (testing "the name wins over the key type the client prefers (EC before RSA)"
      (with-tls [s {:keystore (:mixed pki) :key-password pass}]
        (doseq [[sni expected] [["c.test" :rsa] ["a.test" :one] [nil :one]]
                protocol ["TLSv1.3" "TLSv1.2"]]
          (with-open [sock (tls-socket (server/ssl-port s) :sni sni :protocols [protocol])]
            (is (= (leaf-of expected) (peer sock)) (str protocol " asking for " (pr-str sni)))))))
    (testing "vectors of unequal length are refused"
      (is (re-find #":ssl-cert and :ssl-key must name as many files"
                   (str (start-failure {:ssl-cert [one-crt two-crt] :ssl-key [one-key]})))))))

;; ---- reload --------------------------------------------------------------------------------

(deftest reload-ssl-changes-the-certificate-of-new-connections-only
  (let [[two-crt two-key] (:pem-two pki)]
    (with-tls [s {:keystore (:p12 pki) :key-password pass}]
      (let [port (server/ssl-port s)]
        (with-open [old (tls-socket port)]
          (is (= (leaf-of :one) (peer old)))
          (is (= 200 (:status (exchange old "/"))))
          (is (nil? (server/reload-ssl! s {:ssl-cert two-crt :ssl-key two-key :port 1234}))
              "other options are ignored")
          (testing "new connections get the new certificate, on every event loop"
            (dotimes [_ 4]
              (with-open [new (tls-socket port)]
                (is (= (leaf-of :two) (peer new)))
                (is (= 200 (:status (exchange new "/")))))))
          (testing "an open keep-alive connection is untouched"
            (is (= 200 (:status (exchange old "/"))))
            (is (= (leaf-of :one) (peer old)))))
        (testing "java.net.http sees the new certificate too"
          (is (= 200 (:status (https-get port "/")))))
        (testing "reload can turn client authentication on"
          (server/reload-ssl! s {:keystore (:p12 pki) :key-password pass :client-auth :need
                                 :truststore (:trust pki) :trust-password pass})
          (is (refused? port))
          (is (true? (:cert? (described (https-get port "/" true))))))
        (testing "a bad reload throws, naming the option, and leaves the server as it was"
          (is (thrown-with-msg? IllegalArgumentException
                                #"^donkey\.server/reload-ssl!: :keystore /no/such\.p12: no such file"
                                (server/reload-ssl! s {:keystore "/no/such.p12" :key-password pass})))
          (is (thrown-with-msg? IllegalArgumentException #"^donkey\.server/reload-ssl!: :client-auth must be"
                                (server/reload-ssl! s {:keystore (:p12 pki) :client-auth "need"})))
          (is (true? (:cert? (described (https-get port "/" true))))))
        (testing "the plaintext listener never changed"
          (is (= 200 (:status (http-get (server/port s) "/")))))))
    (testing "a server without TLS cannot reload it"
      (with-open [s (run-server describe {:port 0 :join? false})]
        (is (nil? (server/ssl-port s)))
        (is (thrown-with-msg? IllegalStateException #"no TLS listener"
                              (server/reload-ssl! s {:ssl-cert two-crt :ssl-key two-key})))))))

;; ---- :keystore-scan-interval ----------------------------------------------------------------

(deftest keystore-scan-interval-reloads-files-whose-contents-change
  (let [dir (:dir pki)
        crt (path dir "scanned-chain.pem")
        k (path dir "scanned-key.pem")
        [one-crt one-key] (:pem-one pki)
        [two-crt two-key] (:pem-two pki)
        copy (fn [from to] (io/copy (io/file from) (io/file to)))
        served (fn [port] (with-open [sock (tls-socket port)] (peer sock)))
        eventually (fn [f] (loop [i 0]
                             (let [v (f)]
                               (if (or v (> i 60)) v (do (Thread/sleep 100) (recur (inc i)))))))]
    (copy one-crt crt)
    (copy one-key k)
    (with-tls [s {:ssl-cert crt :ssl-key k :keystore-scan-interval 1}]
      (let [port (server/ssl-port s)]
        (is (= (leaf-of :one) (served port)))
        (testing "half a change (a key that does not match its certificate) is not used"
          (copy two-key k)
          (Thread/sleep 2500)
          (is (= (leaf-of :one) (served port)) "the previous pair stays"))
        (testing "once the pair is whole again, new connections get it"
          (copy two-crt crt)
          (is (eventually #(= (leaf-of :two) (served port)))))))
    (testing "the interval is checked"
      (is (re-find #":keystore-scan-interval must be an integer in 0\.\.86400"
                   (str (start-failure {:ssl-cert one-crt :ssl-key one-key
                                        :keystore-scan-interval -1})))))))

;; ---- bodies ------------------------------------------------------------------------------

(deftest bodies-go-both-ways-over-tls
  ;; the kernel's write paths (a file, a stream, a fixed body) and its body reads sit in the
  ;; pipeline above the TLS handler; each must work through it
  (let [f (doto (File/createTempFile "donkey-tls" ".bin") (.deleteOnExit))
        data (byte-array (map unchecked-byte (take (* 3 1024 1024) (cycle (range 251)))))
        _ (with-open [out (io/output-stream f)] (.write out ^bytes data))
        sha (fn [^bytes b] (vec (.digest (java.security.MessageDigest/getInstance "SHA-256") b)))
        handler (fn [req]
                  (case (:uri req)
                    "/file" {:status 200 :body f}
                    "/stream" {:status 200 :body (java.io.ByteArrayInputStream. data)}
                    "/echo" {:status 200 :body (let [b (.readAllBytes ^InputStream (:body req))]
                                                 (str (count b) " " (hash (sha b))))}))]
    (with-open [s (run-server handler {:port 0 :ssl-port 0 :join? false :event-loops 2
                                       :keystore (:p12 pki) :key-password pass})]
      (let [^HttpClient c (-> (HttpClient/newBuilder) (.sslContext (client-context false))
                              (.version HttpClient$Version/HTTP_1_1) (.build))
            get-bytes (fn [path]
                        (.body ^HttpResponse
                               (.send c (.build (HttpRequest/newBuilder
                                                 (URI/create (str "https://127.0.0.1:" (server/ssl-port s) path))))
                                      (HttpResponse$BodyHandlers/ofByteArray))))]
        (testing "a file (sent through the TLS handler, not zero-copy)"
          (is (= (sha data) (sha (get-bytes "/file")))))
        (testing "a streamed body, chunked"
          (is (= (sha data) (sha (get-bytes "/stream")))))
        (testing "a request body read by a sync handler"
          (let [^HttpResponse r (.send c (-> (HttpRequest/newBuilder
                                              (URI/create (str "https://127.0.0.1:" (server/ssl-port s) "/echo")))
                                             (.POST (java.net.http.HttpRequest$BodyPublishers/ofByteArray data))
                                             (.build))
                                       (HttpResponse$BodyHandlers/ofString))]
            (is (= (str (alength data) " " (hash (sha data))) (.body r)))))))))

;; The JDK's PKIX key manager reads its entry from the key store on every call, which for a
;; PKCS12 store decrypts the key (PBKDF2, milliseconds of CPU) in every handshake, on the
;; event loop. The server's keys are read once.
(deftest a-handshake-does-not-decrypt-the-key-again
  (doseq [[what opts] [["PEM files" {:ssl-cert (first (:pem-one pki)) :ssl-key (second (:pem-one pki))}]
                       ["a key store" {:keystore (:p12 pki) :key-password pass}]]]
    (testing what
      (let [cfg (doto (ServerConfig.) (donkey.options.check/configure! (assoc opts :ssl? true)))
            m (doto (.getDeclaredMethod (Class/forName "donkey.kernel.tls.KeyMaterial") "keyManagers"
                                        (into-array Class [ServerConfig]))
                (.setAccessible true))
            ^KeyManagerFactory kmf (.invoke m nil (object-array [cfg]))
            ^javax.net.ssl.X509ExtendedKeyManager km (first (.getKeyManagers kmf))
            alias-of #(.chooseEngineServerAlias km "EC" nil nil)]
        (is (some? (alias-of)))
        (is (identical? (.getPrivateKey km (alias-of)) (.getPrivateKey km (alias-of)))
            "the same key object, read once")
        (is (= (seq (.getCertificateChain km (alias-of))) (seq (.getCertificateChain km (alias-of)))))))))
