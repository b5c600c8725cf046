(ns donkey.content-type-test
  "donkey.codec.ContentType, the one parser of media types, their parameters and charsets, and
  of Accept lists: tables of well-formed, odd and malformed values."
  (:require [clojure.test :refer [deftest is testing]])
  (:import (donkey.codec Accept ContentType)
           (java.nio.charset Charset StandardCharsets UnsupportedCharsetException)))

(set! *warn-on-reflection* true)

(def ^:private utf-8 StandardCharsets/UTF_8)
(def ^:private latin-1 StandardCharsets/ISO_8859_1)

(deftest media-types
  (doseq [[value expected]
          [[nil nil]
           ["" nil]
           ["   " nil]
           ["application/json" "application/json"]
           ["Application/JSON; charset=UTF-8" "application/json"]
           ["  text/html  ;q=1" "text/html"]
           ["text/plain\t;\tcharset=utf-8 " "text/plain"]
           ["text/plain;" "text/plain"]
           ["text/plain;;;charset=utf-8" "text/plain"]
           ["*/*" "*/*"]
           ["application/vnd.api+json" "application/vnd.api+json"]
           ["text/plain; garbage" "text/plain"]
           ;; no media type
           ["text" nil]
           ["text/" nil]
           ["/plain" nil]
           ["text /plain" nil]
           ["text/ plain" nil]
           ["text/plain/x" nil]
           ["text/plain junk" nil]
           ["text/plain, text/html" nil]
           ["t\u00ebxt/plain" nil]
           ["\"text/plain\"" nil]
           ["; charset=utf-8" nil]]]
    (is (= expected (ContentType/mediaType value)) (pr-str value))))

(deftest is-a-media-type
  (testing "exact type and subtype, any case, any parameters"
    (doseq [v ["application/x-www-form-urlencoded"
               "application/x-www-form-urlencoded; charset=UTF-8"
               " Application/X-WWW-Form-URLEncoded ;charset=utf-8"
               "application/x-www-form-urlencoded;"]]
      (is (ContentType/is v "application" "x-www-form-urlencoded") v))
    (doseq [v [nil "" "application/json" "application/x-www-form-urlencodedx"
               "application/x-www-form-urlencoded junk" "multipart/form-data; boundary=x"
               "application /x-www-form-urlencoded" "application"]]
      (is (not (ContentType/is v "application" "x-www-form-urlencoded")) (pr-str v))))
  (testing "isJson: application/json and application/*+json"
    (doseq [v ["application/json" "application/json; charset=utf-8" "APPLICATION/JSON"
               " application/json ;charset=UTF-8" "application/vnd.api+json"
               "application/problem+json; x=y" "application/merge-patch+JSON"]]
      (is (ContentType/isJson v) v))
    (doseq [v [nil "" "text/json" "application/jsonp" "application/json-seq" "application/+json"
               "text/plain" "application/x-www-form-urlencoded" "multipart/form-data; a=application/json"
               "application/json garbage" "application/json, text/plain" "application"]]
      (is (not (ContentType/isJson v)) (pr-str v)))))

(deftest parameters
  (doseq [[value name expected why]
          [["text/plain; charset=\"utf-8\"" "charset" "utf-8" "quoted"]
           ["text/plain;CHARSET=utf-8 ; q=1" "charset" "utf-8" "name in any case, spaces before ;"]
           ["text/plain; charset = utf-8" "charset" "utf-8" "spaces around ="]
           ["a/b; x=\"a\\\"b\"" "x" "a\"b" "an escaped quote"]
           ["a/b; x=\"a\\\\b\"" "x" "a\\b" "an escaped backslash"]
           ["a/b; x=\"a\\qb\"" "x" "aqb" "any quoted pair"]
           ["a/b; x=\"a;b\"; y=2" "x" "a;b" "a semicolon inside quotes"]
           ["a/b; x=\"a;b\"; y=2" "y" "2" "and the parameter after it"]
           ["a/b; x=\"a, b\"" "x" "a, b" "a comma inside quotes"]
           ["a/b; x=1; X=2" "x" "1" "the first of a repeated name"]
           ["a/b; x=\"\"" "x" "" "an empty quoted value"]
           ["a/b;;x=1;" "x" "1" "empty parameters"]
           ["a/b; boundary=----=_Part_0.123" "boundary" "----=_Part_0.123" "lenient unquoted value"]
           ["a/b; boundary=a,b" "boundary" "a,b" "a comma in a Content-Type value"]
           ["a/b; x=\u00e9t\u00e9" "x" "\u00e9t\u00e9" "non-ASCII unquoted"]
           ["a/b; y=2; =1" "y" "2" "parameters before a malformed one are kept"]
           [nil "x" nil "no value"]
           ["a/b" "x" nil "no parameters"]
           ["a/b; xcharset=utf-8" "charset" nil "another name"]
           ["a/b; x=" "x" nil "an empty unquoted value"]
           ["a/b; x=; y=2" "y" nil "ends the list"]
           ["a/b; flag; y=2" "y" nil "a parameter without = ends the list"]
           ["a/b; x=1 2; y=3" "x" nil "text after a value"]
           ["a/b; x=\"a\"junk" "x" nil "text after a quoted value"]
           ["a/b; x=\"unterminated" "x" nil "an unterminated quoted string"]
           ["a/b; x=\"ends in a backslash\\\"" "x" nil "an escaped closing quote"]
           ["a/b; =1; y=2" "y" nil "an empty name"]
           ["a/b; x y=1" "y" nil "a name with a space"]
           ["a/b; x=a\"b" "x" nil "a quote inside an unquoted value"]
           ["garbage; charset=utf-8" "charset" nil "no media type, no parameters"]
           ["text/plain junk; charset=utf-8" "charset" nil "junk after the subtype"]]]
    (is (= expected (ContentType/param value name)) (str why ": " (pr-str value)))))

(deftest request-charsets
  (doseq [[value expected]
          [[nil nil]
           ["text/plain" nil]
           ["text/plain; charset=\"\"" nil]
           ["text/plain; charset=UTF-8" utf-8]
           ["text/plain; charset=utf8" utf-8]
           ["text/plain; charset=\"ISO-8859-1\"" latin-1]
           ["text/plain; charset=iso-8859-1" latin-1]
           ["text/plain; charset=latin1" latin-1]
           ["text/plain; charset=\"utf\\-8\"" utf-8]
           ["text/plain; charset=us-ascii" StandardCharsets/US_ASCII]
           ["text/plain; charset=windows-1252" (Charset/forName "windows-1252")]
           ["text/plain; charset=latin1; charset=utf-8" latin-1]
           ["text/plain; charset=utf-8 x" nil]
           ["garbage; charset=latin1" nil]]]
    (is (= expected (ContentType/charset value)) (pr-str value)))
  (testing "a charset this JVM does not have, or an illegal name, is the client's error"
    (doseq [v ["text/plain; charset=no-such" "text/plain; charset=\"bad name!\""
               "text/plain; charset=\"\\\"\"" "text/plain; charset=+"]]
      (is (thrown? UnsupportedCharsetException (ContentType/charset v)) v)))
  (testing "UTF-8 and ISO-8859-1 are the JVM's own instances"
    (is (identical? utf-8 (ContentType/charset "a/b;charset=utf-8")))
    (is (identical? latin-1 (ContentType/charset "a/b;charset=ISO-8859-1")))))

(deftest response-charsets
  (doseq [[value expected]
          [[nil utf-8]
           ["text/plain" utf-8]
           ["text/plain; charset=ISO-8859-1" latin-1]
           ["text/html;charset=\"iso-8859-1\"" latin-1]
           ["text/plain; charset=no-such" utf-8]
           ["text/plain; charset=\"bad name!\"" utf-8]
           ["text/plain; charset=" utf-8]
           ["text; charset=latin1" utf-8]
           ["text/plain; format=flowed; charset=windows-1252" (Charset/forName "windows-1252")]]]
    (is (= expected (ContentType/responseCharset value)) (pr-str value))))

(deftest charset-names
  (is (identical? utf-8 (ContentType/forName "UTF-8")))
  (is (identical? utf-8 (ContentType/forName " utf8 ")))
  (is (identical? latin-1 (ContentType/forName "iso-8859-1")))
  (is (= (Charset/forName "windows-1252") (ContentType/forName "cp1252")))
  (doseq [bad ["" "no-such" "bad name!" "+"]]
    (is (thrown? UnsupportedCharsetException (ContentType/forName bad)) (pr-str bad))))

(deftest ranges
  (testing "isRange: what a route's :consumes and :produces may name"
    (doseq [r ["*/*" "text/*" "text/plain" "application/vnd.api+json"]]
      (is (ContentType/isRange r) r))
    (doseq [r [nil "" "json" "*/json" "text/" "/plain" "text/plain; q=1" " text/plain" "text/plain "
               "text/plain/x" "text/html,text/plain"]]
      (is (not (ContentType/isRange r)) (pr-str r))))
  (testing "inRange: a Content-Type against a range"
    (doseq [[value range expected]
            [["application/json; charset=utf-8" "application/json" true]
             ["Application/JSON" "application/json" true]
             ["text/csv" "text/*" true]
             ["TEXT/CSV" "text/*" true]
             ["anything/at-all" "*/*" true]
             ["textile/x" "text/*" false]
             ["application/json" "application/xml" false]
             ["application/jsonx" "application/json" false]
             [nil "*/*" false]
             ["garbage" "*/*" false]
             ["text/csv junk" "text/*" false]]]
      (is (= expected (ContentType/inRange value range)) (pr-str value range)))))

(deftest accept-qualities
  (doseq [[accept type expected]
          [[nil "application/json" 1.0]
           ["" "application/json" 1.0]
           ["  " "application/json" 1.0]
           ["*/*" "application/json" 1.0]
           ["application/json" "application/json" 1.0]
           ["Application/JSON" "application/json" 1.0]
           ["text/html" "application/json" 0.0]
           ["text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" "text/html" 1.0]
           ["text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" "application/json" 0.8]
           ["text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" "application/xml" 0.9]
           ["application/*;q=0.3, */*;q=0.1" "application/json" 0.3]
           ["*/*;q=0.1, application/json;q=0.5, application/*;q=0.3" "application/json" 0.5]
           ["application/json;q=0" "application/json" 0.0]
           ["application/json; Q=0.25" "application/json" 0.25]
           ["application/json;q=1.000" "application/json" 1.0]
           ["application/json;q=0.001" "application/json" 0.001]
           ["application/json;q=\"0.5\"" "application/json" 0.5]
           ["application/json;level=1;q=0.4" "application/json" 0.4]
           ["application/json;q=0.4;q=0.9" "application/json" 0.4]
           ["text/html;a=\"x,y\";q=0.2, application/json;q=0.7" "application/json" 0.7]
           ["text/html;a=\"x,y\";q=0.2, application/json;q=0.7" "text/html" 0.2]
           [",, application/json ,," "application/json" 1.0]
           ;; q values that are not a weight count as 0
           ["application/json;q=2" "application/json" 0.0]
           ["application/json;q=abc" "application/json" 0.0]
           ["application/json;q=-1" "application/json" 0.0]
           ;; malformed elements are skipped up to the next comma
           ["*/json, application/json;q=0.6" "application/json" 0.6]
           ["garbage, application/json;q=0.6" "application/json" 0.6]
           ["application/json;q, */*;q=0.2" "application/json" 0.2]
           ["application/json junk, */*;q=0.2" "application/json" 0.2]
           ["text/html;a=\"unterminated, application/json" "application/json" 0.0]]]
    (is (== expected (Accept/quality accept type)) (pr-str accept type))))
