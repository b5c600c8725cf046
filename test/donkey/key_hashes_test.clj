(ns donkey.key-hashes-test
  "donkey.codec.KeyHashes, the hash-flooding check every decoder of client keys runs, and the
  colliding names the other tests make."
  (:require [clojure.test :refer [deftest is testing]]
            [donkey.test-util :as u])
  (:import (clojure.lang IHashEq Murmur3)
           (donkey.codec KeyHashes)))

(set! *warn-on-reflection* true)

(defn- shared? [keys] (KeyHashes/tooManyShared (object-array keys) 0 1 (count keys)))

(defn- with-hash
  "A key equal only to keys of the same id, whose hash is `h` whatever its id."
  [id h]
  (reify IHashEq
    (hasheq [_] (int h))
    Object
    (hashCode [_] (int h))
    (equals [this o] (or (identical? this o) (and (instance? IHashEq o) (= (str this) (str o)))))
    (toString [_] (str "key-" id))))

(deftest the-bound
  (is (= 8 KeyHashes/MAX_SHARED))
  (testing "up to 8 distinct keys of one hash pass, 9 do not"
    (is (not (shared? (map #(with-hash % 7) (range 8)))))
    (is (shared? (map #(with-hash % 7) (range 9))))
    (is (shared? (concat (map #(with-hash % 7) (range 9)) (map #(with-hash % %) (range 100 200))))
        "among others"))
  (testing "a repeated key counts once"
    (is (not (shared? (concat (repeat 50 (with-hash 0 7)) (map #(with-hash % 7) (range 1 8))))))
    (is (not (shared? (repeat 100 "same")))))
  (testing "distinct hashes never add up, whatever their bits"
    (is (not (shared? (map #(with-hash % (bit-shift-left % 16)) (range 1000)))))
    (is (not (shared? (map str (range 10000)))))
    (let [golden-inverse (loop [x 0x9E3779B9 i 0] ; of the counting pass's multiplier, mod 2^32
                           (if (= i 5) x (recur (bit-and 0xffffffff (unchecked-multiply x (bit-and 0xffffffff (- 2 (unchecked-multiply 0x9E3779B9 x)))))
                                                (inc i))))]
      (is (= 1 (bit-and 0xffffffff (unchecked-multiply golden-inverse 0x9E3779B9))))
      (is (not (shared? (map #(with-hash % (unchecked-int (unchecked-multiply % golden-inverse))) (range 100))))
          "100 distinct hashes in the counting pass's one bucket: the exact pass clears them")
      (is (shared? (concat (map #(with-hash % (unchecked-int (unchecked-multiply % golden-inverse))) (range 100))
                           (map #(with-hash (+ 1000 %) 0) (range 9))))
          "and still finds 9 of one hash among them")))
  (testing "the stride and offset select the keys of a key-value array"
    (let [kv (object-array (interleave (map #(with-hash % 7) (range 9)) (range 9)))]
      (is (KeyHashes/tooManyShared kv 0 2 9))
      (is (not (KeyHashes/tooManyShared kv 1 2 9)) "the values 0..8 have 9 hashes")
      (is (not (KeyHashes/tooManyShared kv 0 2 8)))))
  (testing "small inputs are not even looked at"
    (is (not (KeyHashes/tooManyShared (object-array 0) 0 1 0)))))

(deftest the-test-names-collide
  (testing "String.hashCode collisions, as Strings and so as hasheq"
    (let [names (u/colliding-names 1000)]
      (is (= 1000 (count (set names))))
      (is (= 1 (count (set (map #(.hashCode ^String %) names)))))
      (is (shared? names))
      (is (not (shared? (take 8 names))))
      (is (= 1 (count (set (map #(.hashCode ^String %) (u/colliding-names 64 "x-" "a~" "b_")))))
          "lower-case header names too")))
  (testing "keyword hash collisions of names whose Strings do not collide"
    (let [names (u/keyword-colliding-names 9)]
      (is (= 1 (count (set (map #(Murmur3/hashUnencodedChars ^String %) names)))))
      (is (not (shared? names)))
      (is (every? #(re-matches #"\p{L}+" %) names) "letters only: keyword syntax everywhere"))))
