(ns donkey.ring-request-test
  "The Ring request map, key by key (DESIGN.md section 4), over real sockets."
  (:require [clojure.test :refer [deftest is testing]]
            [donkey.test-util :as u :refer [with-server GET request raw]])
  (:import (java.io InputStream)))

(defn- capture
  "A handler that hands the request it got to `p` (body slurped) and answers 200."
  [p]
  (fn [req]
    (deliver p (assoc req :body-class (some-> (:body req) class)
                      :body-text (some-> ^InputStream (:body req) slurp)))
    {:status 200 :body "ok"}))

(defn- seen [opts f]
  (let [p (promise)]
    (with-server (capture p) opts
      (f)
      (deref p 5000 ::timeout))))

(deftest checklist-keys
  (let [req (seen {} #(GET "/a/b%20c?x=1&y=%C3%A9" {:headers {"X-Trace" "t1"}}))]
    (is (= u/*port* nil) "sanity: binding gone after with-server")
    (is (integer? (:server-port req)))
    (is (instance? Integer (:server-port req)) ":server-port is an Integer")
    (is (= "127.0.0.1" (:server-name req)) ":server-name has no port")
    (is (= "127.0.0.1" (:remote-addr req)))
    (is (= "/a/b%20c" (:uri req)) ":uri is the raw path without the query")
    (is (= "x=1&y=%C3%A9" (:query-string req)))
    (is (= :http (:scheme req)))
    (is (= :get (:request-method req)))
    (is (= "HTTP/1.1" (:protocol req)))
    (is (= "t1" (get-in req [:headers "x-trace"])) "header names are lower-case")
    (is (every? #(= % (.toLowerCase ^String %)) (keys (:headers req))))
    (is (nil? (:body req)) "a GET without a body has :body nil")
    (is (not (contains? req :ssl-client-cert)) "no TLS, no :ssl-client-cert")))

(deftest server-port-and-name-from-host-header
  (let [p (promise)]
    (with-server (capture p) {}
      (raw (str "GET /h HTTP/1.1\r\nHost: example.com:9999\r\nConnection: close\r\n\r\n"))
      (let [req (deref p 5000 nil)]
        (is (= "example.com" (:server-name req)))
        (is (= 9999 (:server-port req))))))
  (let [p (promise)]
    (with-server (capture p) {}
      (raw (str "GET /h HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n"))
      (let [req (deref p 5000 nil)]
        (is (= "example.com" (:server-name req)))
        (is (= u/*port* (:server-port req)) "no port in Host: the local port")))))

(deftest query-string-nil-when-absent
  (is (nil? (:query-string (seen {} #(GET "/plain")))))
  (is (= "" (:query-string (seen {} #(raw "GET /empty? HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))))
      "a bare ? is an empty query"))

(deftest request-methods
  (doseq [m [:get :post :put :delete :patch :options]]
    (is (= m (:request-method (seen {} #(request m "/m" {:body (when (#{:post :put :patch} m) "x")}))))))
  (let [p (promise)]
    (with-server (capture p) {}
      (raw "PROPFIND /dav HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
      (is (= :propfind (:request-method (deref p 5000 nil)))))))

(deftest repeated-headers-are-joined
  (let [p (promise)]
    (with-server (capture p) {}
      (raw (str "GET /r HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nx-a: 2\r\nX-A: 3\r\n"
                "Cookie: a=1\r\nCookie: b=2\r\nConnection: close\r\n\r\n"))
      (let [req (deref p 5000 nil)]
        (is (= "1,2,3" (get-in req [:headers "x-a"])) "joined with , in arrival order")
        (is (= "a=1; b=2" (get-in req [:headers "cookie"])) "cookie joined with ; ")))))

(deftest many-headers
  (let [hs (into {} (map (fn [i] [(str "X-H" i) (str "v" i)])) (range 40))
        req (seen {} #(GET "/many" {:headers hs}))]
    (is (every? (fn [i] (= (str "v" i) (get-in req [:headers (str "x-h" i)]))) (range 40)))))

(deftest header-counts-around-the-scan-growth-points
  ;; the scan keeps names in an array that grows at 8 and 16 names, then moves to a hash map:
  ;; a repeated name must be joined whichever side of a move its lines fall on
  (doseq [n [1 6 7 8 9 14 15 16 17 40]]
    (let [p (promise)
          names (map #(str "X-N" %) (range n))]
      (with-server (capture p) {}
        (raw (str "GET /h HTTP/1.1\r\nHost: x\r\n"
                  (apply str (map #(str % ": " % "\r\n") names))
                  "X-N0: again\r\nConnection: close\r\n\r\n"))
        (let [hs (:headers (deref p 5000 nil))]
          (is (= (+ n 2) (count hs)) (str n " names + host + connection"))
          (is (= "X-N0,again" (get hs "x-n0")) (str n " names: repeat joined"))
          (is (every? #(= % (get hs (.toLowerCase ^String %))) (rest names)) (str n " names: all present"))
          (is (= "x" (get hs "host"))))))))

(deftest header-scans-in-a-row-share-nothing
  ;; requests on one event loop, one after another with header counts on both sides of the
  ;; scan's growth points: each sees only its own headers (guards any reuse of scan state)
  (let [seen (atom [])]
    (with-server (fn [req] (swap! seen conj (:headers req)) {:status 200 :body "ok"}) {}
      (doseq [n [40 1 6 16 0 9 3]]
        (raw (str "GET /h HTTP/1.1\r\nHost: h" n "\r\n"
                  (apply str (map #(str "X-N" % ": v" n "\r\n") (range n)))
                  "Connection: close\r\n\r\n"))))
    (is (= [40 1 6 16 0 9 3] (map #(- (count %) 2) @seen)) "each request: its names + host + connection")
    (is (every? true? (map (fn [hs n] (and (= (str "h" n) (get hs "host"))
                                           (every? #(= (str "v" n) (get hs (str "x-n" %))) (range n))))
                           @seen [40 1 6 16 0 9 3])))))

(deftest body-is-an-input-stream
  (let [req (seen {} #(request :post "/b" {:body "hello body" :headers {"Content-Type" "text/plain"}}))]
    (is (isa? (:body-class req) InputStream) ":body is an InputStream, not a byte[]")
    (is (= "hello body" (:body-text req))))
  (testing "chunked request body"
    (let [p (promise)]
      (with-server (capture p) {}
        (raw (str "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                  "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"))
        (is (= "hello world" (:body-text (deref p 5000 nil))))))))

(deftest http-1-0
  (let [p (promise)]
    (with-server (capture p) {}
      (let [resp (raw "GET /old HTTP/1.0\r\n\r\n")]
        (is (re-find #"^HTTP/1.[01] 200" resp))
        (is (= "HTTP/1.0" (:protocol (deref p 5000 nil))))))))

(deftest remote-addr-is-the-socket-peer
  (testing "X-Forwarded-For is ignored unless the user opts in"
    (is (= "127.0.0.1" (:remote-addr (seen {} #(GET "/" {:headers {"X-Forwarded-For" "6.6.6.6"}}))))))
  (testing ":trust-forwarded-for? true takes the first X-Forwarded-For entry"
    (is (= "10.1.2.3" (:remote-addr (seen {:trust-forwarded-for? true}
                                          #(GET "/" {:headers {"X-Forwarded-For" "10.1.2.3, 10.0.0.1"}})))))
    (is (= "127.0.0.1" (:remote-addr (seen {:trust-forwarded-for? true} #(GET "/")))))))

(deftest the-request-is-a-real-clojure-map
  (let [req (dissoc (seen {} #(GET "/map?q=1")) :body-class :body-text)]
    (is (map? req))
    (is (= #{:server-port :server-name :remote-addr :uri :query-string :scheme
             :request-method :protocol :headers :body
             :content-type :content-length :character-encoding}
           (set (keys req))))
    (is (= 13 (count req)))
    (is (= "/map" (get req :uri)) "get")
    (is (= "/map" (:uri req)) "keyword invoke")
    (is (= "/map" (req :uri)) "map invoke")
    (is (= :x (:new (assoc req :new :x))) "assoc")
    (is (not (contains? (dissoc req :uri) :uri)) "dissoc")
    (is (= req (into {} req)) "= against a hash map built from its seq")
    (is (= (hash req) (hash (into {} req))) "hash agrees with =")
    (is (= (dissoc req :body) (read-string (pr-str (dissoc req :body)))) "prints and reads back (without :body)")
    (let [{:keys [uri request-method] {host "host"} :headers} req]
      (is (= ["/map" :get] [uri request-method]) "destructuring")
      (is (string? host)))
    (is (= (count (seq req)) (count req)) "seq")
    (is (map? (:headers req)))
    (is (= (:headers req) (into {} (:headers req))))))

(deftest header-names-of-any-case-are-lower-cased
  (let [p (promise)]
    (with-server (capture p) {}
      (raw (str "GET /c HTTP/1.1\r\nHOST: x\r\nACCEPT: a\r\nUser-Agent: ua\r\nx-forwarded-FOR: 1.2.3.4\r\n"
                "X-CuStOm-ThInG: y\r\nConnection: close\r\n\r\n"))
      (is (= {"host" "x" "accept" "a" "user-agent" "ua" "x-forwarded-for" "1.2.3.4"
              "x-custom-thing" "y" "connection" "close"}
             (:headers (deref p 5000 nil)))))))

(defn- untouched
  "The request map exactly as the handler got it (nothing read, nothing assoc'ed), from a sync
  handler or, with `:routes`, a non-blocking route handler on the event loop."
  [mode path-spec send]
  (let [p (promise)
        handler (case mode
                  :sync (fn [req] (deliver p req) {:status 200 :body "ok"})
                  :non-blocking {:routes [{:path path-spec :handler-mode :non-blocking
                                           :handler (fn [req respond _]
                                                      (deliver p req)
                                                      (respond {:status 200 :body "ok"}))}]})]
    (with-server handler {}
      (send)
      (deref p 5000 ::timeout))))

(deftest the-map-handlers-get-behaves-as-a-map-before-and-after-realising
  ;; the kernel's map computes :headers, :server-name and :server-port on first read and builds
  ;; the whole map for seq/assoc; every operation must agree with a plain map of its entries
  (doseq [mode [:sync :non-blocking]]
    (testing (name mode)
      (let [req (untouched mode "/lazy/:id" #(GET "/lazy/7?q=1" {:headers {"X-A" "1"}}))]
        (is (not (instance? clojure.lang.PersistentArrayMap req))
            "premise: the kernel's own map, as handlers get it, not a realised copy")
        (is (= "/lazy/7" (:uri req)) "a direct read")
        (is (= "1" (get-in req [:headers "x-a"]))
            ":headers read before anything realised it (and after the server stopped)")
        (is (= "127.0.0.1" (:server-name req)))
        (is (instance? Integer (:server-port req)))
        (is (= ::d (get req :nope ::d)) "get with a default for an absent key")
        (is (= ::d (req :nope ::d)) "invoke with a default")
        (is (nil? (find req :nope)))
        (is (= [:uri "/lazy/7"] (find req :uri)) "find")
        (is (= (if (= mode :sync) 13 14) (count req)) ":path-params only with a route")
        (is (= (= mode :non-blocking) (contains? req :path-params)))
        (when (= mode :non-blocking) (is (= {:id "7"} (:path-params req))))
        (is (every? #(contains? req %) [:server-port :server-name :remote-addr :uri :query-string
                                         :scheme :request-method :protocol :headers :body
                                         :content-type :content-length :character-encoding]))
        (let [plain (into {} (seq req))]
          (is (= (count req) (count plain) (count (keys req)) (count (vals req))))
          (is (= plain req) "a plain map = this one")
          (is (= req plain) "this one = a plain map")
          (is (.equals ^Object req plain) "Java equals")
          (is (= (hash plain) (hash req)) "hash agrees")
          (is (= (.hashCode ^Object plain) (.hashCode ^Object req)) "Java hashCode agrees")
          (is (= plain (reduce-kv assoc {} req)) "reduce-kv")
          (is (= plain (reduce (fn [m [k v]] (assoc m k v)) {} req)) "reduce over entries")
          (is (= plain (merge {} req)))
          (is (= (assoc plain :new 1) (assoc req :new 1)) "assoc keeps every entry")
          (is (= (dissoc plain :uri) (dissoc req :uri)) "dissoc")
          (is (= (conj plain [:x 2]) (conj req [:x 2])) "conj an entry")
          (is (= {} (empty req)) "empty")
          (is (= (assoc plain :t 1) (persistent! (assoc! (transient req) :t 1))) "transient")
          (is (= (assoc plain :i 1) (into req {:i 1})) "into")
          (is (= {:m 1} (meta (with-meta req {:m 1}))) "with-meta")
          (is (= plain (with-meta req {:m 1})) "with-meta keeps the entries")
          (is (nil? (meta req)))
          (is (= (dissoc plain :body) (read-string (pr-str (dissoc req :body)))) "prints"))))))

(deftest lazy-values-read-from-many-threads-agree
  (let [req (untouched :sync "/" #(GET "/t" {:headers {"X-B" "2"}}))
        reads (doall (for [_ (range 8)]
                       (future [(:headers req) (:server-name req) (:server-port req)])))]
    (is (apply = (map deref reads)))
    (is (= "2" (get (first @(first reads)) "x-b")))))

(deftest lazy-remote-addr-from-x-forwarded-for
  (let [p (promise)]
    (with-server (fn [req] (deliver p req) {:status 200}) {:trust-forwarded-for? true}
      (GET "/" {:headers {"X-Forwarded-For" " 10.9.8.7 , 10.0.0.1"}})
      (let [req (deref p 5000 nil)]
        (is (= "10.9.8.7" (:remote-addr req)) "read first, before :headers")
        (is (= "10.9.8.7" (:remote-addr (into {} (seq req)))))))))

(deftest deprecated-content-keys
  ;; what Ring's servlet adapter (ring-jetty) and http-kit set: older middleware reads them
  (testing "present with nil on a request without a body (no Content-Length, no Content-Type)"
    (doseq [mode [:sync :non-blocking]]
      (let [req (untouched mode "/nb" #(raw "GET /nb HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))]
        (is (every? #(contains? req %) [:content-type :content-length :character-encoding]) (name mode))
        (is (= [nil nil nil] (map req [:content-type :content-length :character-encoding])) (name mode))
        (is (= [nil nil nil] (map (into {} (seq req)) [:content-type :content-length :character-encoding]))
            "the same in the whole map"))))
  (testing "an empty body declared with Content-Length: 0"
    (is (= 0 (:content-length (seen {} #(request :post "/e" {}))))))
  (testing "from the headers of a request with a body"
    (let [req (seen {} #(request :post "/b" {:body "hello" :headers {"Content-Type" "text/plain; charset=ISO-8859-1"}}))]
      (is (= "text/plain; charset=ISO-8859-1" (:content-type req)) "the header value as sent")
      (is (= 5 (:content-length req)))
      (is (instance? Long (:content-length req)) ":content-length is a Long")
      (is (= "ISO-8859-1" (:character-encoding req)) "the charset parameter")))
  (testing "no charset parameter, a quoted one, one among others"
    (doseq [[ct enc] [["application/json" nil]
                      ["application/x-www-form-urlencoded ; Charset=\"utf-8\"" "utf-8"]
                      ["multipart/form-data; boundary=\"a;b\"; charset=windows-1252" "windows-1252"]
                      ["text/plain; format=flowed" nil]]]
      (let [req (seen {} #(request :post "/c" {:body "x" :headers {"Content-Type" ct}}))]
        (is (= ct (:content-type req)))
        (is (= enc (:character-encoding req)) ct)
        (is (= 1 (:content-length req))))))
  (testing "a chunked body has no :content-length"
    (let [p (promise)]
      (with-server (capture p) {}
        (raw (str "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                  "Content-Type: text/plain\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n"))
        (let [req (deref p 5000 nil)]
          (is (contains? req :content-length))
          (is (nil? (:content-length req)))
          (is (= "text/plain" (:content-type req)))))))
  (testing "a Content-Length the kernel cannot read never reaches a handler: 400 first"
    (let [called (atom 0)]
      (with-server (fn [_] (swap! called inc) {:status 200}) {}
        (doseq [cl ["abc" "-1" "5, 6" "99999999999999999999"]]
          (let [resp (raw (str "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: " cl "\r\n\r\nhello"))]
            (is (re-find #"^HTTP/1.1 400" resp) cl))))
      (is (zero? @called)))))

(deftest deprecated-keys-agree-with-the-whole-map
  (let [req (untouched :sync "/" #(request :post "/w" {:body "abc" :headers {"Content-Type" "text/csv;charset=utf-8"}}))
        plain (into {} (seq req))]
    (is (= "utf-8" (:character-encoding plain)))
    (is (= 3 (:content-length plain)))
    (is (= plain req))
    (is (= (hash plain) (hash req)))
    (is (= (find plain :content-length) (find req :content-length)) "entryAt")
    (is (re-find #":content-length 3" (pr-str (dissoc req :body))) "printed")))

;; ---------------------------------------------------------------------------------------------
;; header names of colliding hashes

(deftest header-scan-stays-linear-with-colliding-names
  ;; lower-case names of one String.hashCode (blocks "a~" and "b_"): more than the default
  ;; 16 KiB head holds, as a server with a raised :max-header-size could get. They took
  ;; seconds to put in a hash map; now the map is a sorted one. Generous bound: shared machine.
  (let [names (u/colliding-names 20000 "x-" "a~" "b_")
        lines (io.vertx.core.http.HttpHeaders/headers)]
    (doseq [^String n names] (.add lines n "v"))
    (.add lines "x-AaBB" "1")
    (.add lines ^String (first names) "again")
    (let [[head ms] (u/millis (donkey.ring.RequestMap/scan lines))
          hs (.headers ^donkey.ring.RequestMap$Head head)]
      (is (< ms 2000) (str ms " ms"))
      (is (= 20001 (count hs)))
      (is (= "v,again" (get hs (first names))) "a repeated name is joined")
      (is (every? #(= "v" (get hs %)) (rest names)))
      (is (= "1" (get hs "x-aabb")) "names are lower-cased"))))

(deftest colliding-header-names-on-a-server
  ;; 600 such names fit in the default 16 KiB head: the request is served, and :headers is a
  ;; map that behaves as any other, whether the kernel scanned the head (a body) or the
  ;; handler's first read did
  (let [names (u/colliding-names 600 "" "a~" "b_")
        head (apply str (map #(str % ":v\r\n") names))]
    (doseq [[label opts target] [["lazy, sync" {} "GET /h HTTP/1.1\r\n"]
                                 ["scanned by the kernel, async" {:async? true}
                                  "POST /h HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n"]]]
      (testing label
        (let [p (promise)
              h (if (:async? opts)
                  (fn [req respond _] (deliver p req) (respond {:status 200 :body "ok"}))
                  (fn [req] (deliver p req) {:status 200 :body "ok"}))]
          (with-server h opts
            (let [resp (raw (str target "Host: x\r\n" head "Connection: close\r\n\r\n"
                                 (when (:async? opts) "hi")))
                  req (deref p 5000 nil)
                  hs (:headers req)]
              (is (= "HTTP/1.1 200 OK" (u/status-line resp)))
              (is (= (+ 600 (if (:async? opts) 4 2)) (count hs)))
              (is (every? #(= "v" (get hs %)) names))
              (is (= "x" (get hs "host")))
              (is (nil? (get hs :host)) "a keyword lookup is a miss, not an exception")
              (is (nil? (get hs "x-absent")))
              (is (= (inc (count hs)) (count (assoc hs "x-new" "1"))))
              (is (= (assoc (into {} hs) "x-new" "1") (assoc hs "x-new" "1")))
              (is (= (dec (count hs)) (count (dissoc hs (first names)))))
              (is (= hs (into {} hs)) "equal to a hash map of the same entries")
              (is (= (hash hs) (hash (into {} hs))))
              (when (:async? opts)
                (is (= "text/plain" (get hs "content-type")))))))))))
