(ns donkey.static-test
  "Static files (donkey.static) over real sockets: content types, validators and conditional
  requests, ranges, precompressed siblings, index files and redirects, and every way a path
  could try to leave the root."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing use-fixtures]]
            [donkey.server :as server]
            [donkey.static :as static]
            [donkey.test-util :as u :refer [with-server]])
  (:import (java.io ByteArrayOutputStream File)
           (java.nio.charset StandardCharsets)
           (java.nio.file Files LinkOption Path)
           (java.nio.file.attribute FileAttribute FileTime)
           (java.util.zip GZIPInputStream GZIPOutputStream)))

(set! *warn-on-reflection* true)

(def ^:dynamic ^File *root* nil)
(def ^:dynamic ^File *outside* nil)

(def ^:private text (apply str (repeat 400 "0123456789")))

(defn- write! [^File dir ^String rel content]
  (let [f (io/file dir rel)]
    (io/make-parents f)
    (if (bytes? content) (io/copy ^bytes content f) (spit f content))
    (Files/setLastModifiedTime (.toPath f) (FileTime/fromMillis 1700000000000))
    f))

(defn- gzip-bytes ^bytes [^String s]
  (let [out (ByteArrayOutputStream.)]
    (with-open [z (GZIPOutputStream. out)] (.write z (.getBytes s StandardCharsets/UTF_8)))
    (.toByteArray out)))

(defn- tree [f]
  (let [base (.toFile (Files/createTempDirectory "donkey-static" (make-array FileAttribute 0)))
        root (io/file base "root")
        outside (io/file base "outside")]
    (write! root "index.html" "<h1>home</h1>")
    (write! root "a.txt" text)
    (write! root "a.txt.gz" (gzip-bytes text))
    (write! root "app.js" "console.log(1)")
    (write! root "data.weird" "x")
    (write! root "noext" "x")
    (write! root "docs/index.html" "<h1>docs</h1>")
    (write! root "empty/.keep" "")
    (write! root ".env" "SECRET=1")
    (write! root ".git/config" "secret")
    (write! root ".well-known/security.txt" "Contact: x")
    (write! root "dir with space/f.txt" "spaced")
    (write! root "caf\u00e9.txt" "unicode")
    (write! outside "secret.txt" "outside the root")
    (Files/createSymbolicLink (.toPath (io/file root "out-link.txt"))
                              (.toPath (io/file outside "secret.txt")) (make-array FileAttribute 0))
    (Files/createSymbolicLink (.toPath (io/file root "out-dir"))
                              (.toPath outside) (make-array FileAttribute 0))
    (Files/createSymbolicLink (.toPath (io/file root "in-link.txt"))
                              (.toPath (io/file root "app.js")) (make-array FileAttribute 0))
    (try
      (binding [*root* root *outside* outside] (f))
      (finally
        (doseq [^File x (reverse (file-seq base))]
          (Files/deleteIfExists (.toPath x)))))))

(use-fixtures :each tree)

(defn- raw-get
  "GET `path` as written (no client normalization) with `headers`; {:status :headers :body}."
  [path & [headers method]]
  (let [r (u/exchange (str (or method "GET") " " path " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                           (apply str (for [[k v] headers] (str k ": " v "\r\n")))
                           "\r\n")
                      {:timeout-ms 5000 :idle-ms 2000})
        [head body] (str/split (:resp r) #"\r\n\r\n" 2)
        [status-line & lines] (str/split-lines head)]
    {:status (some-> (re-find #" (\d{3}) " (str status-line)) second Long/parseLong)
     :headers (into {} (for [l lines :let [[k v] (str/split l #":\s*" 2)]] [(str/lower-case k) v]))
     :body body}))

(defmacro with-files [opts & body]
  `(with-server {:routes [(static/files-route "/s" *root* ~opts)]} {} ~@body))

(deftest serves-files-with-their-types-and-validators
  (with-files {:cache-control "public, max-age=60"}
    (let [r (u/GET "/s/a.txt")]
      (is (= 200 (:status r)))
      (is (= text (:body r)))
      (is (= "text/plain; charset=utf-8" (u/header r "content-type")))
      (is (= (str (count text)) (u/header r "content-length")))
      (is (= "Tue, 14 Nov 2023 22:13:20 GMT" (u/header r "last-modified")))
      (is (re-matches #"\"[0-9a-f]+-[0-9a-f]+\"" (u/header r "etag")))
      (is (= "public, max-age=60" (u/header r "cache-control")))
      (is (= "bytes" (u/header r "accept-ranges"))))
    (is (= "text/javascript; charset=utf-8" (u/header (u/GET "/s/app.js") "content-type")))
    (is (= "application/octet-stream" (u/header (u/GET "/s/noext") "content-type")))
    (is (= "spaced" (:body (u/GET "/s/dir%20with%20space/f.txt"))))
    (is (= "unicode" (:body (u/GET "/s/caf%C3%A9.txt"))))
    (is (= "Contact: x" (:body (u/GET "/s/.well-known/security.txt"))))
    (testing "HEAD: the headers, the length, no body"
      (let [r (raw-get "/s/a.txt" {} "HEAD")]
        (is (= 200 (:status r)))
        (is (= (str (count text)) (get-in r [:headers "content-length"])))
        (is (str/blank? (:body r)))))
    (testing "other methods: 405 with Allow"
      (let [r (u/request :post "/s/a.txt" {:body "x"})]
        (is (= 405 (:status r)))))
    (testing "a symbolic link that stays inside the root is followed"
      (is (= "console.log(1)" (:body (u/GET "/s/in-link.txt")))))))

(deftest mime-types-option-extends-the-table
  (with-files {:mime-types {"weird" "application/x-weird"}}
    (is (= "application/x-weird" (u/header (u/GET "/s/data.weird") "content-type")))))

(deftest index-files-and-directories
  (with-files {}
    (is (= "<h1>home</h1>" (:body (u/GET "/s/"))))
    (is (= "<h1>docs</h1>" (:body (u/GET "/s/docs/"))))
    (testing "a directory without its slash is redirected to it, query kept"
      (let [r (raw-get "/s/docs?x=1")]
        (is (= 301 (:status r)))
        (is (= "/s/docs/?x=1" (get-in r [:headers "location"]))))
      (is (= "/s/" (get-in (raw-get "/s") [:headers "location"]))))
    (testing "no listing of a directory without an index"
      (is (= 404 (:status (u/GET "/s/empty/")))))
    (testing "a file asked for as a directory"
      (is (= 404 (:status (u/GET "/s/a.txt/"))))))
  (with-files {:index-files? false}
    (is (= 404 (:status (u/GET "/s/"))))))

(deftest conditional-requests
  (with-files {}
    (let [etag (u/header (u/GET "/s/a.txt") "etag")
          lm (u/header (u/GET "/s/a.txt") "last-modified")]
      (testing "If-None-Match: 304 with the validators and no body"
        (let [r (raw-get "/s/a.txt" {"If-None-Match" etag})]
          (is (= 304 (:status r)))
          (is (= etag (get-in r [:headers "etag"])))
          (is (str/blank? (:body r))))
        (is (= 304 (:status (raw-get "/s/a.txt" {"If-None-Match" (str "\"other\", W/" etag)}))) "weak comparison")
        (is (= 304 (:status (raw-get "/s/a.txt" {"If-None-Match" "*"}))))
        (is (= 200 (:status (raw-get "/s/a.txt" {"If-None-Match" "\"other\""})))))
      (testing "If-Modified-Since: 304 unless modified since; ignored beside If-None-Match"
        (is (= 304 (:status (raw-get "/s/a.txt" {"If-Modified-Since" lm}))))
        (is (= 304 (:status (raw-get "/s/a.txt" {"If-Modified-Since" "Wed, 15 Nov 2023 00:00:00 GMT"}))))
        (is (= 200 (:status (raw-get "/s/a.txt" {"If-Modified-Since" "Mon, 13 Nov 2023 00:00:00 GMT"}))))
        (is (= 200 (:status (raw-get "/s/a.txt" {"If-Modified-Since" "not a date"}))))
        (is (= 200 (:status (raw-get "/s/a.txt" {"If-None-Match" "\"other\"" "If-Modified-Since" lm})))))
      (testing "If-Match and If-Unmodified-Since: 412"
        (is (= 412 (:status (raw-get "/s/a.txt" {"If-Match" "\"other\""}))))
        (is (= 412 (:status (raw-get "/s/a.txt" {"If-Match" (str "W/" etag)}))) "strong comparison")
        (is (= 200 (:status (raw-get "/s/a.txt" {"If-Match" etag}))))
        (is (= 412 (:status (raw-get "/s/a.txt" {"If-Unmodified-Since" "Mon, 13 Nov 2023 00:00:00 GMT"}))))
        (is (= 200 (:status (raw-get "/s/a.txt" {"If-Unmodified-Since" lm}))))))))

(deftest byte-ranges
  (with-files {}
    (let [etag (u/header (u/GET "/s/a.txt") "etag")
          n (count text)]
      (testing "one range: 206 with Content-Range and the bytes"
        (let [r (raw-get "/s/a.txt" {"Range" "bytes=10-19"})]
          (is (= 206 (:status r)))
          (is (= (str "bytes 10-19/" n) (get-in r [:headers "content-range"])))
          (is (= "0123456789" (:body r))))
        (is (= (subs text (- n 5)) (:body (raw-get "/s/a.txt" {"Range" "bytes=-5"}))) "a suffix")
        (is (= (subs text (- n 3)) (:body (raw-get "/s/a.txt" {"Range" (str "bytes=" (- n 3) "-")}))) "an open end")
        (is (= (str "bytes 0-" (dec n) "/" n)
               (get-in (raw-get "/s/a.txt" {"Range" "bytes=0-999999"}) [:headers "content-range"]))
            "an end past the file is the file's end"))
      (testing "ranges that merge are one"
        (is (= (str "bytes 0-29/" n)
               (get-in (raw-get "/s/a.txt" {"Range" "bytes=0-9,10-19,15-29"}) [:headers "content-range"]))))
      (testing "ranges apart, too many, or malformed: the whole file"
        (doseq [v ["bytes=0-1,100-101" (str "bytes=" (str/join "," (repeat 17 "0-1"))) "bytes=5-1"
                   "bytes=x-y" "items=0-1" "bytes=--1"]]
          (let [r (raw-get "/s/a.txt" {"Range" v})]
            (is (= 200 (:status r)) v)
            (is (= text (:body r)) v))))
      (testing "unsatisfiable: 416 with the length"
        (let [r (raw-get "/s/a.txt" {"Range" (str "bytes=" n "-")})]
          (is (= 416 (:status r)))
          (is (= (str "bytes */" n) (get-in r [:headers "content-range"]))))
        (is (= 416 (:status (raw-get "/s/a.txt" {"Range" "bytes=-0"})))))
      (testing "If-Range: the range only while the validator still matches"
        (is (= 206 (:status (raw-get "/s/a.txt" {"Range" "bytes=0-1" "If-Range" etag}))))
        (is (= 200 (:status (raw-get "/s/a.txt" {"Range" "bytes=0-1" "If-Range" "\"old\""}))))
        (is (= 206 (:status (raw-get "/s/a.txt" {"Range" "bytes=0-1"
                                                 "If-Range" "Tue, 14 Nov 2023 22:13:20 GMT"}))))
        (is (= 200 (:status (raw-get "/s/a.txt" {"Range" "bytes=0-1"
                                                 "If-Range" "Mon, 13 Nov 2023 00:00:00 GMT"}))))))))

(deftest precompressed-siblings
  (with-files {}
    (let [r (u/GET "/s/a.txt" {:as :bytes :headers {"Accept-Encoding" "gzip, deflate"}})]
      (is (= "gzip" (u/header r "content-encoding")))
      (is (= "text/plain; charset=utf-8" (u/header r "content-type")) "the original's type")
      (is (= "Accept-Encoding" (u/header r "vary")))
      (is (= text (slurp (GZIPInputStream. (io/input-stream ^bytes (:body r))))))
      (is (not= (u/header r "etag") (u/header (u/GET "/s/a.txt") "etag")) "its own ETag"))
    (testing "not accepted: the file itself, with Vary"
      (doseq [accept [nil "br" "gzip;q=0" "identity"]]
        (let [r (u/GET "/s/a.txt" {:headers (if accept {"Accept-Encoding" accept} {})})]
          (is (nil? (u/header r "content-encoding")) (str accept))
          (is (= "Accept-Encoding" (u/header r "vary")))
          (is (= text (:body r))))))
    (testing "a range is of the file itself"
      (let [r (raw-get "/s/a.txt" {"Accept-Encoding" "gzip" "Range" "bytes=0-3"})]
        (is (= 206 (:status r)))
        (is (= "0123" (:body r))))))
  (with-files {:precompressed? false}
    (is (nil? (u/header (u/GET "/s/a.txt" {:headers {"Accept-Encoding" "gzip"}}) "content-encoding")))))

(deftest paths-that-would-leave-the-root
  (with-files {}
    (doseq [[path status] [["/s/../outside/secret.txt" 400]
                           ["/s/%2e%2e/outside/secret.txt" 400]
                           ["/s/%2E%2E/outside/secret.txt" 400]
                           ["/s/.%2e/outside/secret.txt" 400]
                           ["/s/docs/../../outside/secret.txt" 400]
                           ["/s/..%2foutside%2fsecret.txt" 400]
                           ["/s/docs%2f..%2f..%2foutside%2fsecret.txt" 400]
                           ["/s/..%5coutside%5csecret.txt" 400]
                           ["/s/..\\outside\\secret.txt" 400]
                           ["/s/%c0%ae%c0%ae/outside/secret.txt" 400]
                           ["/s/%e0%80%ae%e0%80%ae/outside/secret.txt" 400]
                           ["/s/%c0%af" 400]
                           ["/s/a.txt%00.png" 400]
                           ["/s/a.txt%0a" 400]
                           ["/s/C:/Windows/win.ini" 400]
                           ["/s/c:%5cwindows" 400]
                           ["/s/a.txt::$DATA" 400]
                           ["/s/.../x" 400]
                           ["/s/%zz" 400]
                           ["/s/%2" 400]
                           ["/s/out-link.txt" 404]
                           ["/s/out-dir/secret.txt" 404]
                           ["/s/.env" 404]
                           ["/s/.git/config" 404]
                           ["/s/%2egit/config" 404]]]
      (let [r (raw-get path)]
        (is (= status (:status r)) path)
        (is (not (str/includes? (str (:body r)) "outside the root")) path)
        (is (not (str/includes? (str (:body r)) "secret")) path)))
    (testing "an absolute path after the prefix stays under the root"
      (is (= 404 (:status (raw-get (str "/s/" (.getPath *outside*) "/secret.txt"))))))
    (testing "a path that only shares the prefix's letters is not the mount"
      (is (= 404 (:status (raw-get "/secret.txt"))))
      (is (= 404 (:status (raw-get "/sa.txt"))))))
  (testing "a directory swapped for a link out of the root is refused within a second"
    (write! *root* "swap/x.txt" "inside")
    (write! *outside* "x.txt" "outside the root")
    (with-files {}
      (is (= "inside" (:body (u/GET "/s/swap/x.txt"))))
      (Files/delete (.toPath (io/file *root* "swap/x.txt")))
      (Files/delete (.toPath (io/file *root* "swap")))
      (Files/createSymbolicLink (.toPath (io/file *root* "swap")) (.toPath *outside*)
                               (make-array FileAttribute 0))
      (Thread/sleep 1100)
      (is (= 404 (:status (u/GET "/s/swap/x.txt"))))))
  (with-files {:allow-symlinks? true :hidden-files? true}
    (is (= "outside the root" (:body (u/GET "/s/out-link.txt"))) "allowed")
    (is (= "SECRET=1" (:body (u/GET "/s/.env"))) "allowed")))

(deftest classpath-resources
  ;; a jar on the test classpath (clojure's) and a directory resource (the test sources)
  (with-server {:routes [(static/resources-route "/clj" "clojure")
                         (static/resources-route "/t" "donkey")]}
    {}
    (let [r (u/GET "/clj/core.clj" {:as :bytes})
          expected (with-open [in (io/input-stream (io/resource "clojure/core.clj"))] (.readAllBytes in))]
      (is (= 200 (:status r)))
      (is (= (seq expected) (seq ^bytes (:body r))))
      (is (some? (u/header r "etag")))
      (let [etag (u/header r "etag")]
        (is (= 304 (:status (raw-get "/clj/core.clj" {"If-None-Match" etag}))))
        (let [rr (raw-get "/clj/core.clj" {"Range" "bytes=0-9"})]
          (is (= 206 (:status rr)))
          (is (= (String. ^bytes expected 0 10 StandardCharsets/ISO_8859_1) (:body rr))))))
    (is (= 404 (:status (u/GET "/clj/no-such.clj"))))
    (is (= 400 (:status (raw-get "/clj/%2e%2e/clojure/core.clj"))))
    (is (= 200 (:status (u/GET "/t/static_test.clj"))) "a directory on the classpath")))

(deftest options-are-checked
  (doseq [[opts re] [[{:index-files "index.html"} #":index-files"]
                     [{:index-files ["../x"]} #":index-files"]
                     [{:cache-control 60} #":cache-control"]
                     [{:precompressed? "yes"} #":precompressed\?"]
                     [{:mime-types {"x" "nope"}} #":mime-types"]
                     [{:handler-mode :async} #":handler-mode"]
                     [{:cache-controll "x"} #"did you mean :cache-control"]]]
    (is (thrown-with-msg? IllegalArgumentException re (static/files-route "/s" *root* opts))
        (pr-str opts)))
  (is (thrown-with-msg? IllegalArgumentException #"not a readable directory"
                        (static/files-handler (io/file *root* "nope"))))
  (is (thrown-with-msg? IllegalArgumentException #"must start with /"
                        (static/files-route "s" *root*))))

(deftest a-handler-usable-anywhere
  (testing "as a plain Ring handler, sync and async"
    (with-server (static/files-handler *root*) {}
      (is (= text (:body (u/GET "/a.txt"))))
      (is (= "<h1>home</h1>" (:body (u/GET "/")))))
    (with-server (static/files-handler *root* {:prefix "/p"}) {:async? true}
      (is (= text (:body (u/GET "/p/a.txt"))))
      (is (= 404 (:status (u/GET "/a.txt")))))))
