(ns donkey.test-pki
  "Keys and certificates for the TLS tests, made when the tests run by the JDK's keytool (no
  private key is kept in the repository), and a client SSLContext that trusts them."
  (:require [clojure.java.io :as io]
            [clojure.test :refer [testing]]
            [donkey.server :as server])
  (:import (donkey.kernel Server)
           (io.netty.handler.ssl OpenSsl)
           (java.io File)
           (java.nio.charset StandardCharsets)
           (java.nio.file Files)
           (java.nio.file.attribute FileAttribute)
           (java.security KeyStore PrivateKey)
           (java.security.cert Certificate CertificateFactory X509Certificate)
           (java.util Base64)
           (javax.net.ssl KeyManager KeyManagerFactory SSLContext TrustManagerFactory
                          X509ExtendedKeyManager)))

(set! *warn-on-reflection* true)

(def pass "The password of every key store made here." "changeit")

;; ---- the TLS engines under test --------------------------------------------------------------

(def ^:dynamic *engine*
  "The :ssl-provider the running test starts its servers with; `each-engine` binds it."
  :jdk)

(defn engines
  "The TLS engines to test: the JDK's, and OpenSSL when netty-tcnative is on the classpath and
  loads (the :dev profile puts Linux x86-64's there)."
  []
  (if (OpenSsl/isAvailable) [:jdk :openssl] [:jdk]))

(defonce ^:private warned
  (delay (when-not (OpenSsl/isAvailable)
           (println "donkey.test-pki: OpenSSL is not available here, so the TLS tests run on the"
                    "JDK engine only:" (str (OpenSsl/unavailabilityCause))))))

(defn each-engine
  "A clojure.test :each fixture: runs the test once per engine of `engines`, with `*engine*`
  bound to it and its name in the failure context."
  [run]
  @warned
  (doseq [e (engines)]
    (binding [*engine* e]
      (testing (str "[" (name e) " engine]")
        (run)))))

(defn run-server
  "donkey.server/run-server on the TLS engine under test (`opts` may name another)."
  ^Server [handler opts]
  ;; an :ssl-context is the JDK engine's whatever the test runs on; :openssl refuses one
  (server/run-server handler (merge {:ssl-provider (if (:ssl-context opts) :auto *engine*)}
                                    opts)))

(defn- keytool
  "Runs the keytool of the JDK running the tests; throws with its output when it fails."
  [& args]
  (let [exe (str (System/getProperty "java.home") File/separator "bin" File/separator "keytool")
        p (.start (doto (ProcessBuilder. ^java.util.List (into [exe] args))
                    (.redirectErrorStream true)))
        out (slurp (.getInputStream p))]
    (when-not (zero? (.waitFor p))
      (throw (ex-info (str "keytool " (first args) " failed: " out) {:args args})))
    out))

(defn load-store
  "The key store of `type` at `path`, opened with `pass`."
  ^KeyStore [path ^String type]
  (with-open [in (io/input-stream path)]
    (doto (KeyStore/getInstance type) (.load in (.toCharArray ^String pass)))))

(defn- read-cert ^X509Certificate [path]
  (with-open [in (io/input-stream path)]
    (.generateCertificate (CertificateFactory/getInstance "X.509") in)))

(defn- pem
  "`der` as a PEM block of `type`."
  [type ^bytes der]
  (str "-----BEGIN " type "-----\n"
       (.encodeToString (Base64/getMimeEncoder 64 (.getBytes "\n" StandardCharsets/US_ASCII)) der)
       "\n-----END " type "-----\n"))

(defn path
  "The path of the file `name` in `dir`."
  [^File dir name] (str (io/file dir name)))

(defn- leaf!
  "A key pair `alias` made by keytool and signed by the CA in `dir`, with the subject
  alternative names `san` (or none): {:key PrivateKey :chain [leaf-cert ca-cert]}. An EC key
  on P-256, or `key-args` for keytool."
  [dir alias dname san ^X509Certificate ca & key-args]
  (let [ks (path dir (str alias ".p12"))
        req (path dir (str alias ".csr"))
        crt (path dir (str alias ".crt"))]
    (apply keytool "-genkeypair" "-keystore" ks "-storetype" "PKCS12" "-storepass" pass "-alias" alias
             "-dname" dname "-validity" "3"
             (or key-args ["-keyalg" "EC" "-groupname" "secp256r1"]))
    (keytool "-certreq" "-keystore" ks "-storepass" pass "-alias" alias "-file" req)
    (apply keytool "-gencert" "-keystore" (path dir "ca.p12") "-storepass" pass "-alias" "ca"
           "-infile" req "-outfile" crt "-rfc" "-validity" "3"
           (when san ["-ext" (str "SAN=" san)]))
    {:key (.getKey (load-store ks "PKCS12") alias (.toCharArray ^String pass))
     :chain [(read-cert crt) ca]}))

(defn- store!
  "Writes a key store of `type` at `file` with `entries`, alias -> {:key :chain}, and
  `trusted`, alias -> certificate; returns the path."
  [file ^String type entries trusted]
  (let [ks (doto (KeyStore/getInstance type) (.load nil nil))]
    (doseq [[alias {:keys [key chain]}] entries]
      (.setKeyEntry ks ^String alias ^PrivateKey key (.toCharArray ^String pass)
                    (into-array Certificate chain)))
    (doseq [[alias cert] trusted]
      (.setCertificateEntry ks ^String alias ^Certificate cert))
    (with-open [out (io/output-stream file)]
      (.store ks out (.toCharArray ^String pass)))
    (str file)))

(defn- pem-files!
  "Writes `leaf`'s chain and PKCS#8 key as PEM files named after `n`; returns [cert key]."
  [dir n {:keys [^PrivateKey key chain]}]
  (let [crt (path dir (str n "-chain.pem"))
        k (path dir (str n "-key.pem"))]
    (spit crt (apply str (map #(pem "CERTIFICATE" (.getEncoded ^X509Certificate %)) chain)))
    (spit k (pem "PRIVATE KEY" (.getEncoded key)))
    [crt k]))

(defn make-pki
  "A CA and keys signed by it, in a temporary directory (:dir), made by keytool: server
  certificates for localhost and 127.0.0.1 (:one, :two and :rsa, each also for a name of its
  own: a.test, b.test, c.test), a client certificate (:client), and key stores and PEM files
  of them. Among the stores: the server's key beside the CA as a trusted certificate
  (:with-ca), as a Jetty key store that is its own trust store holds them; stores of one key
  entry and nothing else (:ca-store, the CA's own, and :client-store); and a store with no
  certificate at all (:empty)."
  []
  (let [dir (.toFile (Files/createTempDirectory "donkey-tls" (make-array FileAttribute 0)))
        _ (keytool "-genkeypair" "-keystore" (path dir "ca.p12") "-storetype" "PKCS12"
                   "-storepass" pass "-alias" "ca" "-keyalg" "EC" "-groupname" "secp256r1"
                   "-dname" "CN=donkey test CA" "-ext" "bc:c" "-validity" "3")
        ca (.getCertificate (load-store (path dir "ca.p12") "PKCS12") "ca")
        ;; two server certificates for the same host, each with a name of its own for SNI
        one (leaf! dir "one" "CN=localhost" "dns:localhost,ip:127.0.0.1,dns:a.test" ca)
        two (leaf! dir "two" "CN=localhost" "dns:localhost,ip:127.0.0.1,dns:b.test" ca)
        ;; an RSA one, for SNI across key types
        rsa (leaf! dir "rsa" "CN=localhost" "dns:localhost,ip:127.0.0.1,dns:c.test" ca
                   "-keyalg" "RSA" "-keysize" "2048")
        client (leaf! dir "client" "CN=donkey test client" nil ca)]
    {:dir dir :ca ca :one one :two two :rsa rsa :client client
     :jks (store! (io/file dir "one.jks") "JKS" {"one" one} {})
     :p12 (store! (io/file dir "one-store.p12") "PKCS12" {"one" one} {})
     :sni (store! (io/file dir "sni.p12") "PKCS12" {"a" one "b" two} {})
     :mixed (store! (io/file dir "mixed.p12") "PKCS12" {"a" one "c" rsa} {})
     :rsa-store (store! (io/file dir "rsa.p12") "PKCS12" {"rsa" rsa} {})
     :trust (store! (io/file dir "trust.p12") "PKCS12" {} {"ca" ca})
     :with-ca (store! (io/file dir "one-with-ca.p12") "PKCS12" {"one" one} {"ca" ca})
     :ca-store (path dir "ca.p12")
     :client-store (store! (io/file dir "client-store.p12") "PKCS12" {"client" client} {})
     :empty (store! (io/file dir "empty.p12") "PKCS12" {} {})
     :pem-one (pem-files! dir "one" one)
     :pem-two (pem-files! dir "two" two)}))


(defn- presenting
  "`km`, choosing its client certificate whatever CAs the server's request names, as curl's
  --cert does: the JDK's own offers only a certificate one of those CAs issued, so it would
  offer none to a server whose trust store trusts a certificate itself rather than its CA."
  ^X509ExtendedKeyManager [^X509ExtendedKeyManager km]
  (proxy [X509ExtendedKeyManager] []
    (chooseClientAlias [key-types _ socket] (.chooseClientAlias km key-types nil socket))
    (chooseEngineClientAlias [key-types _ engine] (.chooseEngineClientAlias km key-types nil engine))
    (getClientAliases [key-type _] (.getClientAliases km key-type nil))
    (chooseServerAlias [key-type issuers socket] (.chooseServerAlias km key-type issuers socket))
    (getServerAliases [key-type issuers] (.getServerAliases km key-type issuers))
    (getCertificateChain [alias] (.getCertificateChain km alias))
    (getPrivateKey [alias] (.getPrivateKey km alias))))

(defn client-context
  "An SSLContext trusting the CA of `pki` (from make-pki), presenting its client's
  certificate when `cert?` is true, or the certificate of another of its keys when `cert?`
  names one (:one, say), whatever CAs the server names."
  ^SSLContext [pki cert?]
  (let [trust (doto (KeyStore/getInstance "PKCS12") (.load nil nil)
                (.setCertificateEntry "ca" ^Certificate (:ca pki)))
        tmf (doto (TrustManagerFactory/getInstance "PKIX") (.init trust))
        kmf (when cert?
              (let [{:keys [^PrivateKey key chain]} (get pki (if (keyword? cert?) cert? :client))
                    ks (doto (KeyStore/getInstance "PKCS12") (.load nil nil)
                         (.setKeyEntry "client" key (.toCharArray ^String pass)
                                       (into-array Certificate chain)))]
                (doto (KeyManagerFactory/getInstance "PKIX") (.init ks (.toCharArray ^String pass)))))]
    (doto (SSLContext/getInstance "TLS")
      (.init (when kmf
               (into-array KeyManager [(presenting (first (.getKeyManagers ^KeyManagerFactory kmf)))]))
             (.getTrustManagers tmf) nil))))

(defn delete-pki!
  "Deletes the files of `pki`."
  [pki]
  (doseq [^File f (reverse (file-seq (:dir pki)))] (.delete f)))

(defn pem-of
  "The certificate `cert` as a PEM block."
  [^X509Certificate cert]
  (pem "CERTIFICATE" (.getEncoded cert)))
