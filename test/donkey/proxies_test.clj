(ns donkey.proxies-test
  "Behind a proxy (:trusted-proxies): Forwarded and X-Forwarded-* set :remote-addr, :scheme,
  :server-name and :server-port on connections from a trusted proxy, hops through trusted
  proxies passed over; from any other peer, and for values that do not parse, the socket's
  values stay. Every request comes from 127.0.0.1 over a real socket."
  (:require [clojure.edn :as edn]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.h2-client :as h2]
            [donkey.server :as server]
            [donkey.test-util :as u :refer [with-server]])
  (:import (donkey.ring Proxies)))

(set! *warn-on-reflection* true)

(defn- echo [req]
  {:status 200
   :headers {"Content-Type" "application/edn"}
   :body (pr-str (select-keys req [:remote-addr :scheme :server-name :server-port]))})

(defn- seen
  "What the handler saw of a GET / with `headers` (a vector of [name value] lines)."
  [headers]
  (let [resp (:resp (u/exchange (str "GET / HTTP/1.1\r\nHost: app.internal:8080\r\n"
                                      (apply str (for [[k v] headers] (str k ": " v "\r\n")))
                                      "Connection: close\r\n\r\n")))]
    (edn/read-string (subs resp (+ 4 (str/index-of resp "\r\n\r\n"))))))

(def ^:private direct
  {:remote-addr "127.0.0.1" :scheme :http :server-name "app.internal" :server-port 8080})

(deftest an-untrusted-peer-is-not-believed
  (with-server echo {:trusted-proxies ["10.0.0.0/8"]}
    (is (= direct (seen [["X-Forwarded-For" "203.0.113.7"] ["X-Forwarded-Proto" "https"]
                         ["X-Forwarded-Host" "shop.example"] ["X-Forwarded-Port" "8443"]])))
    (is (= direct (seen [["Forwarded" "for=203.0.113.7;proto=https;host=shop.example"]]))))
  (testing "nor without :trusted-proxies"
    (with-server echo {}
      (is (= direct (seen [["X-Forwarded-For" "203.0.113.7"] ["X-Forwarded-Proto" "https"]]))))))

(deftest x-forwarded-headers-from-a-trusted-proxy
  (with-server echo {:trusted-proxies ["127.0.0.1" "10.0.0.0/8"]}
    (is (= {:remote-addr "203.0.113.7" :scheme :https :server-name "shop.example" :server-port 443}
           (seen [["X-Forwarded-For" "203.0.113.7"] ["X-Forwarded-Proto" "https"]
                  ["X-Forwarded-Host" "shop.example"]])))
    (testing "ports: X-Forwarded-Port, the forwarded host's, the scheme's default"
      (is (= 8443 (:server-port (seen [["X-Forwarded-Host" "shop.example:9000"]
                                       ["X-Forwarded-Port" "8443"]]))))
      (is (= 9000 (:server-port (seen [["X-Forwarded-Host" "shop.example:9000"]]))))
      (is (= 80 (:server-port (seen [["X-Forwarded-Host" "shop.example"]]))))
      (is (= {:scheme :https :server-name "app.internal" :server-port 8080}
             (dissoc (seen [["X-Forwarded-Proto" "HTTPS"]]) :remote-addr))
          "a scheme alone keeps the Host header's name and port"))
    (testing "hops through trusted proxies are passed over; what the client wrote is not read"
      (is (= "198.51.100.9" (:remote-addr (seen [["X-Forwarded-For" "198.51.100.9, 10.1.2.3"]]))))
      (is (= "198.51.100.9" (:remote-addr (seen [["X-Forwarded-For" "6.6.6.6, 198.51.100.9, 10.1.2.3"]]))))
      (is (= "198.51.100.9" (:remote-addr (seen [["X-Forwarded-For" "6.6.6.6"]
                                                 ["X-Forwarded-For" "198.51.100.9"]])))
          "several header lines are one list")
      (is (= "10.9.9.9" (:remote-addr (seen [["X-Forwarded-For" "10.9.9.9, 10.1.2.3"]])))
          "when every hop is a trusted proxy, the farthest is the client"))
    (testing "a list with one entry per hop: the client's hop's entry"
      (is (= {:remote-addr "198.51.100.9" :scheme :https :server-name "shop.example" :server-port 443}
             (seen [["X-Forwarded-For" "6.6.6.6, 198.51.100.9, 10.1.2.3"]
                    ["X-Forwarded-Proto" "http, https, http"]
                    ["X-Forwarded-Host" "evil.example, shop.example, lb.internal"]]))))
    (testing "a shorter list: its last entry, which the nearest proxy that set it wrote"
      (is (= :https (:scheme (seen [["X-Forwarded-For" "6.6.6.6, 198.51.100.9, 10.1.2.3"]
                                    ["X-Forwarded-Proto" "http, https"]])))))
    (testing "an address with a port, and IPv6"
      (is (= "198.51.100.9" (:remote-addr (seen [["X-Forwarded-For" "198.51.100.9:5555"]]))))
      (is (= "2001:db8::7" (:remote-addr (seen [["X-Forwarded-For" "[2001:db8::7]:5555"]]))))
      (is (= "2001:db8::7" (:remote-addr (seen [["X-Forwarded-For" "2001:db8::7"]])))))
    (testing "values that do not parse are ignored"
      (is (= direct (seen [["X-Forwarded-Proto" "gopher"]])))
      (is (= direct (seen [["X-Forwarded-Port" "99999"]])))
      (is (= direct (seen [["X-Forwarded-Port" "-1"]])))
      (is (= direct (seen [["X-Forwarded-Host" "bad host"]])))
      (is (= direct (seen [["X-Forwarded-Host" "a/b"]])))
      (is (= "127.0.0.1" (:remote-addr (seen [["X-Forwarded-For" "unknown"]])))
          "a hop that is not an address: the nearest known hop stands for the client")
      (is (= "10.1.2.3" (:remote-addr (seen [["X-Forwarded-For" "not-an-ip, 10.1.2.3"]])))))))

(deftest rfc-7239-forwarded
  (with-server echo {:trusted-proxies ["127.0.0.0/8" "10.0.0.0/8"]}
    (is (= {:remote-addr "192.0.2.60" :scheme :https :server-name "api.example" :server-port 443}
           (seen [["Forwarded" "for=192.0.2.60;proto=https;host=api.example, for=10.0.0.5;proto=http"]])))
    (testing "quoted values, IPv6 with a port, case-insensitive names"
      (is (= {:remote-addr "2001:db8:cafe::17" :scheme :http :server-name "api.example" :server-port 8443}
             (seen [["Forwarded" "For=\"[2001:db8:cafe::17]:4711\";Host=\"api.example:8443\""]]))))
    (testing "spoofed elements left of the client are not read"
      (is (= "192.0.2.60" (:remote-addr (seen [["Forwarded" "for=6.6.6.6;proto=https"]
                                               ["Forwarded" "for=192.0.2.60, for=10.0.0.5"]]))))
      (is (= :http (:scheme (seen [["Forwarded" "for=6.6.6.6;proto=https, for=192.0.2.60"]])))))
    (testing "an obfuscated or unknown client: the nearest known hop stands for it"
      (is (= "10.0.0.5" (:remote-addr (seen [["Forwarded" "for=_hidden;proto=https, for=10.0.0.5"]]))))
      (is (= "127.0.0.1" (:remote-addr (seen [["Forwarded" "for=unknown"]])))))
    (testing "Forwarded wins over X-Forwarded-*"
      (is (= "192.0.2.60" (:remote-addr (seen [["Forwarded" "for=192.0.2.60"]
                                               ["X-Forwarded-For" "198.51.100.9"]])))))
    (testing "a Forwarded header outside the grammar is ignored; X-Forwarded-* still count"
      (is (= "198.51.100.9" (:remote-addr (seen [["Forwarded" "for=\"unclosed"]
                                                 ["X-Forwarded-For" "198.51.100.9"]]))))
      (is (= direct (seen [["Forwarded" "for 192.0.2.60"]])))
      (is (= direct (seen [["Forwarded" "=x"]])))
      (is (= direct (seen [["Forwarded" "proto=gopher"]]))))))

(deftest over-http2
  (with-server echo {:h2c? true :trusted-proxies ["127.0.0.1"]}
    (let [c (h2/connect u/*port*)]
      (try
        (is (= {:remote-addr "203.0.113.7" :scheme :https :server-name "shop.example" :server-port 443}
               (edn/read-string (:body (h2/request! c 1 "GET" "/"
                                                    [["x-forwarded-for" "203.0.113.7"]
                                                     ["x-forwarded-proto" "https"]
                                                     ["x-forwarded-host" "shop.example"]]
                                                    nil)))))
        (finally (h2/close! c))))))

(deftest trusted-ranges
  (let [p (Proxies. ["10.0.0.0/8" "192.168.1.7" "fd00::/8" "::ffff:172.16.0.0/112"])]
    (is (.trusts p "10.255.1.1"))
    (is (not (.trusts p "11.0.0.1")))
    (is (.trusts p "192.168.1.7"))
    (is (not (.trusts p "192.168.1.8")))
    (is (.trusts p "fd12::1"))
    (is (not (.trusts p "fe80::1")))
    (is (.trusts p "::ffff:10.0.0.1") "an IPv4-mapped address is its IPv4 address")
    (is (.trusts p "172.16.3.4") "a mapped range matches IPv4 addresses")
    (is (not (.trusts p "172.17.0.1")))
    (is (not (.trusts p "example.com")) "names are never looked up")
    (is (not (.trusts p "")))))

(deftest the-option-is-checked
  (doseq [[bad msg] [[["10.0.0.0/33"] #"not an IP address or CIDR range: \"10.0.0.0/33\""]
                     [["example.com"] #"not an IP address or CIDR range: \"example.com\""]
                     [["10.0.0.0/"] #"not an IP address or CIDR range"]
                     ["10.0.0.0/8" #"a non-empty collection"]
                     [[] #"a non-empty collection"]]]
    (is (thrown-with-msg? IllegalArgumentException
                          (re-pattern (str ":trusted-proxies must be .*" msg))
                          (server/run-server echo {:port 0 :join? false :trusted-proxies bad}))
        (pr-str bad)))
  (is (thrown-with-msg? IllegalArgumentException
                        #":legacy-unsafe-remote-addr\? and :trusted-proxies both set :remote-addr"
                        (server/run-server echo {:port 0 :join? false
                                                 :legacy-unsafe-remote-addr? true
                                                 :trusted-proxies ["127.0.0.1"]}))))
