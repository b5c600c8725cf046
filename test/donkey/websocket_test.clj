(ns donkey.websocket-test
  "WebSockets with Ring's API: handshakes, both listener forms, threads, the close handshake,
  limits, protocol errors, backpressure, compression, origins and the stop. Real servers on
  :port 0; java.net.http's WebSocket client for well-behaved clients, raw sockets for the rest."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.server :as server]
            [donkey.test-util :as u :refer [with-server]]
            [donkey.websocket :as dws]
            [ring.websocket :as ws]
            [ring.websocket.protocols :as wsp])
  (:import (donkey.kernel.websocket WebSocket)
           (java.io ByteArrayOutputStream DataInputStream EOFException IOException InputStream
                    OutputStream)
           (java.lang.management ManagementFactory MemoryMXBean)
           (java.net Socket SocketException SocketTimeoutException URI)
           (java.net.http HttpClient WebSocket$Listener WebSocketHandshakeException)
           (java.nio ByteBuffer)
           (java.nio.charset StandardCharsets)
           (java.util.concurrent CompletableFuture CountDownLatch ExecutionException
                                 LinkedBlockingQueue TimeUnit)
           (java.util.zip Deflater Inflater)))

(set! *warn-on-reflection* true)

;; ---- java.net.http client -----------------------------------------------------------------

(def ^:private ^HttpClient client (HttpClient/newHttpClient))

(defn- take! [^LinkedBlockingQueue q]
  (.poll q 5 TimeUnit/SECONDS))

(defn- connect
  "Opens a java.net.http WebSocket to `path`; returns {:ws :events}, where events is a queue of
  [:text s], [:binary bytes], [:ping bytes], [:pong bytes], [:close code reason], [:error t]."
  ([path] (connect path {}))
  ([path {:keys [protocols]}]
   (let [q (LinkedBlockingQueue.)
         text (StringBuilder.)
         bin (ByteArrayOutputStream.)
         listener (reify WebSocket$Listener
                    (onOpen [_ w] (.request w 1))
                    (onText [_ w data last]
                      (.append text data)
                      (when last (.put q [:text (str text)]) (.setLength text 0))
                      (.request w 1)
                      nil)
                    (onBinary [_ w data last]
                      (let [b (byte-array (.remaining data))]
                        (.get data b)
                        (.write bin b))
                      (when last (.put q [:binary (.toByteArray bin)]) (.reset bin))
                      (.request w 1)
                      nil)
                    (onPing [_ w data]
                      (.put q [:ping (let [b (byte-array (.remaining data))] (.get data b) b)])
                      (.request w 1)
                      nil)
                    (onPong [_ w data]
                      (.put q [:pong (let [b (byte-array (.remaining data))] (.get data b) b)])
                      (.request w 1)
                      nil)
                    (onClose [_ w code reason]
                      (.put q [:close code reason])
                      nil)
                    (onError [_ w t]
                      (.put q [:error t])))
         b (.newWebSocketBuilder client)]
     (when (seq protocols)
       (.subprotocols b (first protocols) (into-array String (rest protocols))))
     {:ws (.get (.buildAsync b (URI/create (str "ws://127.0.0.1:" u/*port* path)) listener)
                5 TimeUnit/SECONDS)
      :events q})))

(defn- send-text [{:keys [^java.net.http.WebSocket ws]} ^String s]
  (.get (.sendText ws s true) 5 TimeUnit/SECONDS))

(defn- send-binary [{:keys [^java.net.http.WebSocket ws]} ^bytes b]
  (.get (.sendBinary ws (ByteBuffer/wrap b) true) 5 TimeUnit/SECONDS))

(defn- send-close [{:keys [^java.net.http.WebSocket ws]} code reason]
  (.get (.sendClose ws (int code) ^String reason) 5 TimeUnit/SECONDS))

(defn- next-event
  "The next event of `c` that is not a ping or pong (which the server may send any time)."
  [c]
  (loop []
    (let [e (take! (:events c))]
      (if (#{:ping :pong} (first e)) (recur) e))))

(defn- bytes-of ^bytes [^ByteBuffer b]
  (let [a (byte-array (.remaining b))]
    (.get (.duplicate b) a)
    a))

;; ---- raw sockets --------------------------------------------------------------------------

(def ^:private key-header "dGhlIHNhbXBsZSBub25jZQ==")

(defn- handshake
  "The text of an upgrade request for `path`; `headers` override (nil removes) the usual ones."
  [path headers]
  (let [base (array-map "Host" "127.0.0.1" "Upgrade" "websocket" "Connection" "Upgrade"
                        "Sec-WebSocket-Key" key-header "Sec-WebSocket-Version" "13")
        all (reduce-kv (fn [m k v] (if (nil? v) (dissoc m k) (assoc m k v))) base headers)]
    (str "GET " path " HTTP/1.1\r\n"
         (apply str (for [[k v] all] (str k ": " v "\r\n")))
         "\r\n")))

(defn- read-head
  "Reads an HTTP response head (up to the blank line) from `in`, as text."
  [^InputStream in]
  (let [sb (StringBuilder.)]
    (loop []
      (let [b (.read in)]
        (when (neg? b) (throw (EOFException. (str "connection closed after: " sb))))
        (.append sb (char b))
        (if (str/ends-with? (str sb) "\r\n\r\n") (str sb) (recur))))))

(defn- raw-connect
  "Opens a socket, sends an upgrade request for `path` and reads the answer's head. Returns
  {:socket :in :out :head :status}."
  ([path] (raw-connect path {}))
  ([path headers]
   (let [s (Socket. "127.0.0.1" (int u/*port*))
         _ (.setSoTimeout s 5000)
         out (.getOutputStream s)
         in (DataInputStream. (.getInputStream s))]
     (.write out (.getBytes ^String (handshake path headers) StandardCharsets/ISO_8859_1))
     (.flush out)
     (let [head (read-head in)]
       {:socket s :in in :out out :head head
        :status (Long/parseLong (second (re-find #"^HTTP/1\.1 (\d{3})" head)))}))))

(defn- header-value [head name]
  (some (fn [line]
          (let [[k v] (str/split line #":\s*" 2)]
            (when (.equalsIgnoreCase ^String name ^String k) v)))
        (str/split-lines head)))

(defn- ->bytes ^bytes [x]
  (cond (bytes? x) x
        (nil? x) (byte-array 0)
        :else (.getBytes (str x) StandardCharsets/UTF_8)))

(defn- frame
  "A client frame's bytes: masked unless :mask? false."
  ^bytes [{:keys [fin opcode payload mask? rsv1 rsv2] :or {fin true mask? true}}]
  (let [p (->bytes payload)
        n (alength p)
        out (ByteArrayOutputStream.)
        m (if mask? 0x80 0)]
    (.write out (int (bit-or (if fin 0x80 0) (if rsv1 0x40 0) (if rsv2 0x20 0) opcode)))
    (cond (< n 126) (.write out (int (bit-or m n)))
          (< n 65536) (do (.write out (int (bit-or m 126)))
                          (.write out (int (bit-shift-right n 8)))
                          (.write out (int (bit-and n 0xff))))
          :else (do (.write out (int (bit-or m 127)))
                    (dotimes [i 8]
                      (.write out (int (bit-and (bit-shift-right n (* 8 (- 7 i))) 0xff))))))
    (if mask?
      (let [k (byte-array [(byte 0x37) (byte -6) (byte 0x21) (byte 0x3d)])
            masked (byte-array n)]
        (.write out k)
        (dotimes [i n] (aset masked i (byte (bit-xor (aget p i) (aget k (mod i 4))))))
        (.write out masked))
      (.write out p))
    (.toByteArray out)))

(defn- write! [{:keys [^OutputStream out]} & frames]
  (doseq [f frames] (.write out (frame f)))
  (.flush out))

(defn- read-frame
  "The next server frame: {:fin :rsv1 :opcode :payload}, or :eof / :timeout / :reset."
  [{:keys [^DataInputStream in]}]
  (try
    (let [b0 (.readUnsignedByte in)
          b1 (.readUnsignedByte in)
          n0 (bit-and b1 0x7f)
          n (case n0 126 (.readUnsignedShort in) 127 (.readLong in) n0)
          p (byte-array n)]
      (.readFully in p)
      {:fin (bit-test b0 7) :rsv1 (bit-test b0 6) :opcode (bit-and b0 0x0f) :payload p})
    (catch EOFException _ :eof)
    (catch SocketTimeoutException _ :timeout)
    (catch SocketException _ :reset)))

(defn- close-code [{:keys [^bytes payload]}]
  (when (>= (alength payload) 2)
    (bit-or (bit-shift-left (bit-and (aget payload 0) 0xff) 8) (bit-and (aget payload 1) 0xff))))

(defn- text [{:keys [^bytes payload]}] (String. payload StandardCharsets/UTF_8))

(defn- until-close
  "Reads frames until a close frame (returned), or the end of the connection (nil)."
  [c]
  (loop []
    (let [f (read-frame c)]
      (cond (map? f) (if (= 8 (:opcode f)) f (recur))
            :else nil))))

(defn- eof? [c]
  (let [f (read-frame c)]
    (or (= :eof f) (= :reset f))))

;; ---- listeners ----------------------------------------------------------------------------

(defn- echo-listener
  "A map listener that echoes, and records its calls (with the thread) in `calls`."
  [calls]
  {:on-open (fn [s] (swap! calls conj [:open (.getName (Thread/currentThread))]))
   :on-message (fn [s m]
                 (swap! calls conj [:message m (.getName (Thread/currentThread))])
                 (if (= "bye" m)
                   (dws/close s 4001 "bye now")
                   (dws/send s (if (string? m) (str "echo:" m) m))))
   :on-close (fn [s code reason]
               (swap! calls conj [:close code reason (.getName (Thread/currentThread))]))})

(defn- wait-for [pred ms]
  (let [deadline (+ (u/now-ms) ms)]
    (loop []
      (cond (pred) true
            (> (u/now-ms) deadline) false
            :else (do (Thread/sleep 10) (recur))))))

(defn- closes [calls] (filter #(= :close (first %)) @calls))

;; ---- the basics ---------------------------------------------------------------------------

(deftest a-sync-handler-with-a-map-listener-echoes-on-worker-threads
  (let [calls (atom [])]
    (with-server (fn [_] {:ring.websocket/listener (echo-listener calls)}) {}
      (let [c (connect "/ws")]
        (send-text c "hello")
        (is (= [:text "echo:hello"] (next-event c)))
        (send-binary c (byte-array [1 2 3]))
        (let [[kind b] (next-event c)]
          (is (= :binary kind))
          (is (= [1 2 3] (vec ^bytes b))))
        (send-close c 1000 "done")
        (is (= [:close 1000 ""] (next-event c)) "the server answers the close echoing its code")
        (is (wait-for #(seq (closes calls)) 3000))
        (let [[open & more] @calls
              msgs (filter #(= :message (first %)) more)]
          (is (= :open (first open)))
          (is (= "hello" (second (first msgs))) "text arrives as a String")
          (is (instance? ByteBuffer (second (second msgs))) "binary arrives as a ByteBuffer")
          (is (= [1 2 3] (vec (bytes-of (second (second msgs))))))
          (is (every? #(str/starts-with? (peek %) "donkey-worker") @calls)
              "a sync handler's listener runs on the worker pool")
          (is (= [[:close 1000 "done"]] (map #(subvec % 0 3) (closes calls)))
              "on-close once, with the client's code and reason"))))))

(defrecord RecordListener [calls]
  wsp/Listener
  (on-open [_ s] (swap! calls conj [:open (.getName (Thread/currentThread))]))
  (on-message [_ s m]
    (swap! calls conj [:message m])
    (ws/send s (str "proto:" m)
             (fn [] (swap! calls conj [:sent]))
             (fn [e] (swap! calls conj [:failed e]))))
  (on-pong [_ s d] (swap! calls conj [:pong (String. (bytes-of d) StandardCharsets/UTF_8)]))
  (on-error [_ s e] (swap! calls conj [:error e]))
  (on-close [_ s code reason]
    (swap! calls conj [:close code reason (.getName (Thread/currentThread)) (ws/open? s)])))

(deftest an-async-handler-with-a-protocol-listener-runs-on-the-event-loop
  (let [calls (atom [])]
    (with-server (fn [req respond _] (respond {:ring.websocket/listener (->RecordListener calls)}))
      {:async? true}
      (let [c (connect "/ws")]
        (send-text c "hi")
        (is (= [:text "proto:hi"] (next-event c)) "ring.websocket/send with callbacks")
        (is (wait-for #(some #{[:sent]} @calls) 2000) "the succeed callback ran")
        (send-close c 1001 "away")
        (is (= :close (first (next-event c))))
        (is (wait-for #(seq (closes calls)) 3000))
        (is (str/includes? (second (first @calls)) "eventloop")
            "an async handler's listener runs on the event loop")
        (let [[_ code reason thread open?] (first (closes calls))]
          (is (= [1001 "away"] [code reason]))
          (is (str/includes? thread "eventloop"))
          (is (false? open?) "the socket is closed in on-close"))))))

(deftest route-tables-choose-the-thread-and-the-subprotocol
  (let [calls (atom [])
        listener (fn [req]
                   {:ring.websocket/listener (echo-listener calls)
                    :ring.websocket/protocol (last (dws/requested-protocols req))})]
    (with-server {:routes [{:path "/sync" :handler listener}
                           {:path "/loop" :handler-mode :non-blocking
                            :handler (fn [req respond _] (respond (listener req)))}]}
      {}
      (let [c (connect "/sync" {:protocols ["chat" "superchat"]})]
        (is (= "superchat" (.getSubprotocol ^java.net.http.WebSocket (:ws c)))
            "the protocol the handler chose is the one agreed")
        (send-text c "a")
        (is (= [:text "echo:a"] (next-event c)))
        (send-close c 1000 ""))
      (let [c (connect "/loop")]
        (is (= "" (.getSubprotocol ^java.net.http.WebSocket (:ws c))) "none asked, none agreed")
        (send-text c "b")
        (is (= [:text "echo:b"] (next-event c)))
        (send-close c 1000 ""))
      (is (wait-for #(= 2 (count (closes calls))) 3000))
      (let [threads (into {} (for [[k m t] @calls :when (= :message k)] [m t]))]
        (is (str/starts-with? (threads "a") "donkey-worker") ":blocking route: a worker")
        (is (str/includes? (threads "b") "eventloop") ":non-blocking route: the event loop")))))

(deftest jettys-no-limit-sizes-are-taken
  (let [calls (atom [])]
    (with-server (fn [_] {:ring.websocket/listener (echo-listener calls)})
      {:ws-max-frame-size Long/MAX_VALUE :ws-max-text-size Long/MAX_VALUE
       :ws-max-binary-size Long/MAX_VALUE}
      (let [c (connect "/ws")
            big (apply str (repeat 1200000 "y"))]
        (send-text c big)
        (is (= [:text (str "echo:" big)] (next-event c)) "a message over the 1 MiB default")
        (send-close c 1000 "")))))

(deftest upgrade-and-plain-requests-get-what-the-handler-decides
  (with-server (fn [req]
                 (if (= "/ws" (:uri req))
                   {:ring.websocket/listener {}}
                   {:status 200 :headers {"content-type" "text/plain"} :body "plain"}))
    {}
    (testing "a listener answering a request that is no upgrade is a 400"
      (let [r (u/GET "/ws")]
        (is (= 400 (:status r)))
        (is (str/includes? (:body r) "WebSocket"))))
    (testing "an upgrade request answered with a normal response gets that response"
      (let [{:keys [status head ^Socket socket]} (raw-connect "/plain")]
        (is (= 200 status))
        (is (= "5" (header-value head "content-length")))
        (.close socket)))
    (testing "the upgrade itself"
      (let [{:keys [status head ^Socket socket]} (raw-connect "/ws")]
        (is (= 101 status))
        (is (= "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" (header-value head "sec-websocket-accept"))
            "RFC 6455's sample key gets its sample answer")
        (is (= "websocket" (str/lower-case (header-value head "upgrade"))))
        (.close socket)))))

;; ---- bytes behind the upgrade request ----------------------------------------------------

(defn- raw-send-all
  "Opens a socket and writes `text` then `frames` (maps for `frame`) in one write, so that they
  reach the server together; returns {:socket :in :out}, nothing read yet."
  [^String text & frames]
  (let [s (Socket. "127.0.0.1" (int u/*port*))
        buf (ByteArrayOutputStream.)]
    (.setSoTimeout s 5000)
    (.setTcpNoDelay s true)
    (.write buf (.getBytes text StandardCharsets/ISO_8859_1))
    (doseq [f frames] (.write buf (frame f)))
    (.write (.getOutputStream s) (.toByteArray buf))
    {:socket s :in (DataInputStream. (.getInputStream s)) :out (.getOutputStream s)}))

(deftest frames-sent-with-the-upgrade-request-are-delivered-in-order
  (let [calls (atom [])
        listener (fn [_] {:ring.websocket/listener (echo-listener calls)})]
    (with-server {:routes [{:path "/sync" :handler listener}
                           {:path "/async" :handler-mode :non-blocking
                            :handler (fn [req respond _] (respond (listener req)))}]}
      {}
      (doseq [path ["/sync" "/async"]]
        (testing path
          (let [{:keys [^Socket socket] :as c}
                (raw-send-all (handshake path {})
                              {:opcode 1 :payload "one"} {:opcode 1 :payload "two"}
                              {:opcode 1 :payload "three"})]
            (is (str/starts-with? (read-head (:in c)) "HTTP/1.1 101"))
            (is (= ["echo:one" "echo:two" "echo:three"]
                   (for [_ (range 3) :let [f (read-frame c)]] (if (map? f) (text f) f))))
            (write! c {:opcode 1 :payload "four"})
            (is (= "echo:four" (let [f (read-frame c)] (if (map? f) (text f) f))))
            (.close socket)))))))

(deftest requests-behind-an-upgrade-answered-over-http-are-served
  (with-server (fn [req]
                 (if (= "/ws" (:uri req))
                   {:ring.websocket/listener {}}
                   {:status 200 :headers {"content-type" "text/plain"} :body (:uri req)}))
    {}
    (doseq [[what first-request status]
            [["an upgrade request the handler answers over HTTP"
              (handshake "/plain" {}) 200]
             ["a refused handshake" (handshake "/ws" {"Sec-WebSocket-Version" "8"}) 426]]]
      (testing what
        (let [{:keys [^Socket socket ^DataInputStream in]}
              (raw-send-all (str first-request "GET /next HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
              body (fn [head] (let [b (byte-array (Long/parseLong (header-value head "content-length")))]
                                (.readFully in b)
                                (String. b StandardCharsets/UTF_8)))
              h1 (read-head in)
              _ (body h1)
              h2 (read-head in)]
          (is (str/starts-with? h1 (str "HTTP/1.1 " status)))
          (is (str/starts-with? h2 "HTTP/1.1 200"))
          (is (= "/next" (body h2)))
          (.close socket))))))

;; ---- handshakes refused -------------------------------------------------------------------

(deftest bad-handshakes-are-refused
  (with-server (fn [_] {:ring.websocket/listener {}}) {:ws-allowed-origins ["https://app.example"]}
    (let [status (fn [headers]
                   (let [{:keys [status head ^Socket socket]} (raw-connect "/ws" headers)]
                     (.close socket)
                     [status head]))]
      (is (= 400 (first (status {"Sec-WebSocket-Key" "not base64!"}))) "bad key")
      (is (= 400 (first (status {"Sec-WebSocket-Key" "c2hvcnQ="}))) "a key of other than 16 bytes")
      (is (= 400 (first (status {"Sec-WebSocket-Key" nil}))) "no key")
      (let [[s head] (status {"Sec-WebSocket-Version" "8"})]
        (is (= 426 s) "an unsupported version")
        (is (= "13" (header-value head "sec-websocket-version")) "names the version it speaks"))
      (is (= 400 (first (status {"Connection" "keep-alive"}))) "no Connection: upgrade")
      (is (= 403 (first (status {"Origin" "https://evil.example"}))) "an origin not allowed")
      (is (= 101 (first (status {"Origin" "https://APP.example"}))) "an allowed origin, any case")
      (is (= 101 (first (status {}))) "no Origin: not a browser, accepted"))))

;; ---- the protocol -------------------------------------------------------------------------

(deftest the-server-pings-and-hears-pongs-through-the-protocols
  (let [pongs (atom [])
        opened (promise)]
    (with-server (fn [_] {:ring.websocket/listener
                          (reify wsp/Listener
                            (on-open [_ s] (deliver opened s))
                            (on-message [_ _ _])
                            (on-pong [_ _ data]
                              (swap! pongs conj (String. (bytes-of data) StandardCharsets/UTF_8)))
                            (on-error [_ _ _])
                            (on-close [_ _ _ _]))})
      {}
      (let [c (connect "/ws")
            s (deref opened 3000 nil)]
        (is (ws/open? s) "ring.websocket/open? through the Socket protocol")
        (ws/ping s (.getBytes "are you there"))
        (is (= "are you there" (String. ^bytes (second (take! (:events c))) StandardCharsets/UTF_8))
            "the client got the ping with its data")
        (is (wait-for #(= ["are you there"] @pongs) 3000) "and on-pong the client's answer")
        (ws/pong s (.getBytes "unasked"))
        (let [[kind data] (take! (:events c))]
          (is (= :pong kind) "an unsolicited pong")
          (is (= "unasked" (String. ^bytes data StandardCharsets/UTF_8))))
        (ws/close s)
        (is (= [:close 1000 "Normal Closure"] (next-event c)) "ring.websocket/close's defaults")
        (is (thrown? IOException (ws/send s "late")) "a closed socket refuses to send")))))

(deftest handshakes-other-than-http-1-1-gets-are-refused
  (with-server (fn [_] {:ring.websocket/listener {}}) {}
    (doseq [[what request] [["POST" (str/replace (handshake "/ws" {}) #"^GET" "POST")]
                            ["HTTP/1.0" (str/replace (handshake "/ws" {}) "HTTP/1.1" "HTTP/1.0")]]]
      (testing what
        (is (= [400] (u/statuses (:resp (u/exchange request)))))))))


(deftest fragments-are-reassembled-and-pings-answered
  (let [calls (atom [])]
    (with-server (fn [_] {:ring.websocket/listener (echo-listener calls)}) {}
      (let [c (raw-connect "/ws")]
        (is (= 101 (:status c)))
        (write! c {:fin false :opcode 1 :payload "Hel"}
                {:opcode 9 :payload "between"}
                {:fin false :opcode 0 :payload "l"}
                {:opcode 0 :payload "o"})
        (let [pong (read-frame c)]
          (is (= 10 (:opcode pong)) "a ping between fragments is answered at once")
          (is (= "between" (text pong)) "with its data"))
        (let [f (read-frame c)]
          (is (= 1 (:opcode f)))
          (is (= "echo:Hello" (text f)) "three fragments make one message"))
        (write! c {:fin false :opcode 2 :payload (byte-array [1 2])} {:opcode 0 :payload (byte-array [3])})
        (is (= [1 2 3] (vec (:payload (read-frame c)))) "binary fragments too")
        (write! c {:opcode 8 :payload (byte-array [3 (unchecked-byte 0xe8)])})
        (is (= 1000 (close-code (read-frame c))) "the close is echoed")
        (is (eof? c) "and the server closes the connection")
        (.close ^Socket (:socket c))))))

(deftest a-ping-listener-answers-pings-itself
  (let [pings (atom [])]
    (with-server (fn [_] {:ring.websocket/listener
                          {:on-ping (fn [s data]
                                      (swap! pings conj (String. (bytes-of data) StandardCharsets/UTF_8))
                                      (dws/pong s (.getBytes "mine")))}})
      {}
      (let [c (raw-connect "/ws")]
        (write! c {:opcode 9 :payload "yours"})
        (let [f (read-frame c)]
          (is (= 10 (:opcode f)))
          (is (= "mine" (text f)) "no automatic pong: the listener's own"))
        (is (= ["yours"] @pings))
        (.close ^Socket (:socket c))))))

(deftest the-server-closes-with-a-code-and-a-reason
  (let [calls (atom [])]
    (with-server (fn [_] {:ring.websocket/listener (echo-listener calls)}) {}
      (let [c (connect "/ws")]
        (send-text c "bye")
        (is (= [:close 4001 "bye now"] (next-event c)))
        (is (wait-for #(seq (closes calls)) 3000))
        (is (= [4001 "bye now"] (subvec (vec (first (closes calls))) 1 3))
            "on-close after the client's answer")))))

(deftest on-close-runs-once-when-the-client-vanishes
  (doseq [async? [false true]
          how [:reset :eof]]
    (testing (str (if async? "async " "sync ") (name how))
      (let [calls (atom [])
            opened (promise)
            listener {:on-open (fn [_] (deliver opened true))
                      :on-close (fn [_ code reason] (swap! calls conj [code reason]))}]
        (with-server (if async?
                       (fn [_ respond _] (respond {:ring.websocket/listener listener}))
                       (fn [_] {:ring.websocket/listener listener}))
          {:async? async?}
          (let [{:keys [^Socket socket status]} (raw-connect "/ws")]
            (is (= 101 status))
            (is (deref opened 3000 false))
            (when (= how :reset) (.setSoLinger socket true 0))
            (.close socket)
            (is (wait-for #(seq @calls) 3000))
            (Thread/sleep 200)
            (is (= [[1006 ""]] @calls) "abnormal closure, reported once")))))))

(deftest protocol-errors-close-with-their-codes
  (let [errors (atom [])
        closed (atom [])]
    (with-server (fn [_] {:ring.websocket/listener
                          {:on-error (fn [_ e] (swap! errors conj e))
                           :on-close (fn [_ code _] (swap! closed conj code))}})
      {:ws-max-frame-size 1000 :ws-max-text-size 2000 :ws-max-binary-size 2000}
      (doseq [[what frames code] [["an unmasked frame" [{:opcode 1 :payload "x" :mask? false}] 1002]
                                  ["invalid UTF-8" [{:opcode 1 :payload (byte-array [(unchecked-byte 0xc3) 0x28])}] 1007]
                                  ["a frame over :ws-max-frame-size" [{:opcode 2 :payload (byte-array 1001)}] 1009]
                                  ["a message over :ws-max-text-size in small frames"
                                   [{:fin false :opcode 1 :payload (apply str (repeat 900 "a"))}
                                    {:fin false :opcode 0 :payload (apply str (repeat 900 "a"))}
                                    {:opcode 0 :payload (apply str (repeat 900 "a"))}] 1009]
                                  ["a reserved opcode" [{:opcode 3 :payload "x"}] 1002]]]
        (testing what
          (reset! closed [])
          (let [c (raw-connect "/ws")]
            (apply write! c frames)
            (let [f (until-close c)]
              (is (= code (close-code f)) "the close frame's code"))
            (is (eof? c) "then the connection is closed")
            (.close ^Socket (:socket c))
            (is (wait-for #(seq @closed) 3000))
            (is (= [code] @closed) "on-close gets the code that was sent")))))
    (is (seq @errors) "on-error hears of the protocol errors")))

(deftest a-listener-that-throws-closes-with-1011
  (let [errors (atom [])]
    (with-server (fn [_] {:ring.websocket/listener
                          {:on-message (fn [_ _] (throw (ex-info "boom" {})))
                           :on-error (fn [_ e] (swap! errors conj (ex-message e)))}})
      {}
      (let [c (connect "/ws")]
        (send-text c "x")
        (is (= [:close 1011 "Internal Server Error"] (next-event c)))
        (is (= ["boom"] @errors))))))

;; ---- frame rules (RFC 6455 5) -------------------------------------------------------------

(defn- close-frame
  "A close frame's payload: `code` in two bytes, then `reason` (bytes or text)."
  ^bytes [code reason]
  (let [r (->bytes reason)
        b (byte-array (+ 2 (alength r)))]
    (aset b 0 (unchecked-byte (bit-shift-right code 8)))
    (aset b 1 (unchecked-byte (bit-and code 0xff)))
    (System/arraycopy r 0 b 2 (alength r))
    b))

(defn- closes-with
  "Writes `frames` on a fresh socket; returns [the code of the server's close, whether the
  connection then ended]."
  [path headers frames]
  (let [c (raw-connect path headers)]
    (try
      (apply write! c frames)
      (let [f (until-close c)]
        [(some-> f close-code) (eof? c)])
      (finally (.close ^Socket (:socket c))))))

(deftest frames-that-break-the-rules-close-with-1002
  (let [closed (atom [])]
    (with-server (fn [_] {:ring.websocket/listener
                          {:on-close (fn [_ code _] (swap! closed conj code))}})
      {}
      (doseq [[what frames] [["RSV1 without an extension" [{:opcode 1 :payload "x" :rsv1 true}]]
                             ["RSV2 without an extension" [{:opcode 2 :payload "x" :rsv2 true}]]
                             ["a continuation with no message started" [{:opcode 0 :payload "x"}]]
                             ["a new message inside a fragmented one"
                              [{:fin false :opcode 1 :payload "a"} {:opcode 1 :payload "b"}]]
                             ["a control frame over 125 bytes" [{:opcode 9 :payload (byte-array 126)}]]
                             ["a fragmented control frame" [{:fin false :opcode 9 :payload "x"}]]
                             ["a close frame of one byte" [{:opcode 8 :payload (byte-array [3])}]]
                             ["close code 1005, which is never sent" [{:opcode 8 :payload (close-frame 1005 "")}]]
                             ["close code 1006, which is never sent" [{:opcode 8 :payload (close-frame 1006 "")}]]
                             ["close code 1015, which is never sent" [{:opcode 8 :payload (close-frame 1015 "")}]]
                             ["close code 999" [{:opcode 8 :payload (close-frame 999 "")}]]
                             ["close code 1004" [{:opcode 8 :payload (close-frame 1004 "")}]]
                             ["close code 2999" [{:opcode 8 :payload (close-frame 2999 "")}]]]]
        (testing what
          (reset! closed [])
          (is (= [1002 true] (closes-with "/ws" {} frames)) "a 1002 close, then the end")
          (is (wait-for #(seq @closed) 3000))
          (is (= [1002] @closed) "on-close gets 1002"))))))

(deftest extension-bits-the-extension-does-not-define-close-with-1002
  (with-server (fn [_] {:ring.websocket/listener {}}) {:ws-compression? true}
    (let [offer {"Sec-WebSocket-Extensions" "permessage-deflate"}]
      (doseq [[what frames] [["RSV2 with permessage-deflate" [{:opcode 1 :payload "x" :rsv2 true}]]
                             ["RSV1 on a ping" [{:opcode 9 :payload "x" :rsv1 true}]]
                             ["RSV1 on a continuation"
                              [{:fin false :opcode 1 :payload "a"} {:opcode 0 :payload "b" :rsv1 true}]]]]
        (testing what
          (is (= [1002 true] (closes-with "/ws" offer frames))))))))

(deftest text-is-checked-as-utf-8-across-fragments
  (let [calls (atom [])]
    (with-server (fn [_] {:ring.websocket/listener (echo-listener calls)}) {}
      (testing "a code point split between fragments is accepted"
        (let [c (raw-connect "/ws")
              ^bytes b (.getBytes "h\u00e9\uD83D\uDE00!" StandardCharsets/UTF_8)
              part (fn [from to] (java.util.Arrays/copyOfRange b (int from) (int to)))]
          ;; é is bytes 1-2, the emoji 3-6: split inside both
          (write! c {:fin false :opcode 1 :payload (part 0 2)}
                  {:fin false :opcode 0 :payload (part 2 4)}
                  {:fin false :opcode 0 :payload (part 4 5)}
                  {:opcode 0 :payload (part 5 (alength b))})
          (is (= "echo:h\u00e9\uD83D\uDE00!" (text (read-frame c))))
          (.close ^Socket (:socket c))))
      (testing "invalid UTF-8 in a first fragment closes with 1007 before the message ends"
        (is (= [1007 true] (closes-with "/ws" {} [{:fin false :opcode 1
                                                    :payload (byte-array [0x61 (unchecked-byte 0xff)])}]))))
      (testing "a message that ends inside a code point closes with 1007"
        (is (= [1007 true] (closes-with "/ws" {} [{:fin false :opcode 1 :payload "a"}
                                                   {:opcode 0 :payload (byte-array [(unchecked-byte 0xc3)])}]))))
      (testing "a close reason that is not UTF-8 fails the connection"
        (is (contains? #{1002 1007}
                       (first (closes-with "/ws" {} [{:opcode 8 :payload (close-frame 1000 (byte-array [(unchecked-byte 0xff)]))}]))))))))

(deftest handshake-tokens-are-read-as-rfc-6455-says
  (with-server (fn [_] {:ring.websocket/listener {}}) {}
    (let [status (fn [headers]
                   (let [{:keys [status ^Socket socket]} (raw-connect "/ws" headers)]
                     (.close socket)
                     status))]
      (is (= 101 (status {"Upgrade" "WebSocket" "Connection" "keep-alive, UPGRADE"}))
          "Upgrade in any case, upgrade as one token of Connection")
      (is (= 400 (status {"Connection" "upgraded"})) "a token, not a substring")
      (is (= 400 (status {"Sec-WebSocket-Key" "AAAAAAAAAAAAAAAAAAAAAAAA"}))
          "24 base64 characters without padding are 18 bytes, not 16")
      (is (= 426 (status {"Sec-WebSocket-Version" "13, 8"})) "one version, 13"))))

(deftest a-close-the-client-never-reads-still-ends-the-connection
  (doseq [who [:server :client]]
    (testing (str "closed by the " (name who) " while the client does not read")
      (let [socket (promise)
            closed (promise)]
        (with-server (fn [_ respond _]
                       (respond {:ring.websocket/listener
                                 {:on-open (fn [s] (deliver socket s))
                                  :on-close (fn [_ code _] (deliver closed code))}}))
          {:async? true :ws-max-queued-bytes (* 64 1024) :ws-idle-timeout 0 :ws-ping-interval 0}
          (let [c (raw-connect "/ws")
                ^WebSocket s (deref socket 3000 nil)
                sent (atom 0)
                b (byte-array (* 16 1024))]
            ;; fill the client's socket buffers and the server's queue: the sender then waits
            (future (try (while true (dws/send s b) (swap! sent inc)) (catch IOException _)))
            (is (wait-for #(let [n @sent] (Thread/sleep 300) (and (pos? n) (= n @sent))) 10000)
                "the sender is held back")
            (Thread/sleep 200)
            (if (= who :server)
              (dws/close s 1000 "done")
              (write! c {:opcode 8 :payload (close-frame 1000 "")}))
            ;; the close wait is 5 s
            (is (not= :timeout (deref closed 8000 :timeout))
                "the connection ended within the close wait")
            (.close ^Socket (:socket c))))))))

(deftest on-close-runs-once-when-both-sides-close-at-once
  (doseq [async? [false true]]
    (testing (if async? "async" "sync")
      (let [calls (atom {})
            listener {:on-message (fn [s _] (dws/close s 4000 "mine"))
                      :on-close (fn [s code _] (swap! calls update s (fnil conj []) code))}]
        (with-server (if async?
                       (fn [_ respond _] (respond {:ring.websocket/listener listener}))
                       (fn [_] {:ring.websocket/listener listener}))
          {:async? async?}
          (dotimes [_ 20]
            (let [c (raw-connect "/ws")]
              (write! c {:opcode 1 :payload "x"} {:opcode 8 :payload (close-frame 1000 "")})
              (until-close c)
              (.close ^Socket (:socket c))))
          (is (wait-for #(= 20 (count @calls)) 5000) "every socket's on-close ran")
          (Thread/sleep 200)
          (is (every? #(= 1 (count %)) (vals @calls)) "once each")
          (is (every? #{[1000] [4000]} (vals @calls)) "with the code of whoever closed first"))))))

;; ---- what comes before a close -----------------------------------------------------------

(defn- write-at-once!
  "Writes `frames` (maps for `frame`) in one write, so that the server reads them together."
  [{:keys [^OutputStream out]} & frames]
  (let [buf (ByteArrayOutputStream.)]
    (doseq [f frames] (.write buf (frame f)))
    (.write out (.toByteArray buf))
    (.flush out)))

(defn- frames-to-close
  "The server's frames up to its close, as [opcode text] ([8 code] for the close), then what
  ended the reading: :eof or :reset when the connection closed, else :timeout or a frame."
  [c]
  (loop [acc []]
    (let [f (read-frame c)]
      (cond (not (map? f)) (conj acc f)
            (= 8 (:opcode f)) (let [g (read-frame c)]
                                (conj acc [8 (close-code f)] (if (map? g) [(:opcode g)] g)))
            :else (recur (conj acc [(:opcode f) (text f)]))))))

(deftest what-came-before-a-close-is-answered-before-it
  ;; the frames and the close arrive in one read: a sync listener's callbacks have not run yet
  ;; when the close is read, and what they send must still go out before the close's answer
  (let [calls (atom [])
        listener {:on-ping (fn [s data]
                             (let [d (String. (bytes-of data) StandardCharsets/UTF_8)]
                               (swap! calls conj [:ping d])
                               (dws/pong s (.getBytes (str "pong:" d) StandardCharsets/UTF_8))))
                  :on-message (fn [s m]
                                (swap! calls conj [:message m])
                                (dws/send s (str "echo:" m)))
                  :on-close (fn [_ code _] (swap! calls conj [:close code]))}
        close {:opcode 8 :payload (close-frame 1000 "")}]
    (with-server {:routes [{:path "/sync" :handler (fn [_] {:ring.websocket/listener listener})}
                           {:path "/async" :handler-mode :non-blocking
                            :handler (fn [_ respond _] (respond {:ring.websocket/listener listener}))}]}
      {}
      (doseq [path ["/sync" "/async"]
              [what frames answers heard]
              [["a ping, then a close" [{:opcode 9 :payload "a"}]
                [[10 "pong:a"]] [[:ping "a"]]]
               ["a message, then a close" [{:opcode 1 :payload "b"}]
                [[1 "echo:b"]] [[:message "b"]]]
               ["pings and messages, then a close"
                [{:opcode 9 :payload "c"} {:opcode 1 :payload "d"} {:opcode 9 :payload "e"}
                 {:opcode 1 :payload "f"}]
                [[10 "pong:c"] [1 "echo:d"] [10 "pong:e"] [1 "echo:f"]]
                [[:ping "c"] [:message "d"] [:ping "e"] [:message "f"]]]]]
        (testing (str path ": " what)
          (reset! calls [])
          (let [c (raw-connect path)]
            (apply write-at-once! c (conj frames close))
            (let [got (frames-to-close c)]
              (is (= (conj answers [8 1000]) (pop got))
                  "the listener's answers, then the close's echo")
              (is (#{:eof :reset} (peek got)) "then the server ends the connection"))
            (.close ^Socket (:socket c))
            (is (wait-for #(some (comp #{:close} first) @calls) 3000))
            (is (= (conj heard [:close 1000]) @calls)
                "each callback in order, on-close last, with the client's code")))))))

(deftest a-listener-that-does-not-return-holds-the-close-answer-for-a-bounded-time
  (let [release (CountDownLatch. 1)
        entered (promise)
        calls (atom [])]
    (with-server (fn [_] {:ring.websocket/listener
                          {:on-message (fn [s m]
                                         (deliver entered true)
                                         (.await release 30 TimeUnit/SECONDS)
                                         (swap! calls conj
                                                (try (dws/send s (str "echo:" m)) :sent
                                                     (catch IOException _ :refused))))
                           :on-close (fn [_ code _] (swap! calls conj [:close code]))}})
      {}
      (let [c (raw-connect "/ws")]
        (try
          (.setSoTimeout ^Socket (:socket c) 20000)
          (let [[got ms] (u/millis (do (write-at-once! c {:opcode 1 :payload "x"}
                                                       {:opcode 8 :payload (close-frame 1000 "")})
                                       (frames-to-close c)))]
            (is (deref entered 3000 false))
            (is (= [[8 1000]] (pop got)) "the close is answered without the listener")
            (is (#{:eof :reset} (peek got)))
            ;; the answer waits for the callbacks for 5 s at most
            (is (<= 4500 ms 15000) (str "answered after " ms " ms")))
          (finally
            (.countDown release)
            (.close ^Socket (:socket c))))
        (is (wait-for #(= 2 (count @calls)) 5000))
        (is (= [:refused [:close 1000]] @calls)
            "a send after the answer is refused; on-close runs after the callback returns")))))

;; ---- open? ---------------------------------------------------------------------------------

(deftest open?-is-false-from-the-close-call-on
  ;; one event loop, held by another socket's listener: the close the test thread starts cannot
  ;; reach the loop, so open? must answer from the call itself
  (let [socket (promise)
        holding (promise)
        release (CountDownLatch. 1)
        in-callback (promise)]
    (with-server {:routes [{:path "/sync"
                            :handler (fn [_] {:ring.websocket/listener
                                              {:on-open (fn [s] (deliver socket s))
                                               :on-message (fn [s _]
                                                             (dws/close s 4000 "from a worker")
                                                             (deliver in-callback (dws/open? s)))}})}
                           {:path "/hold" :handler-mode :non-blocking
                            :handler (fn [_ respond _]
                                       (respond {:ring.websocket/listener
                                                 {:on-message (fn [_ _]
                                                                (deliver holding true)
                                                                (.await release 10 TimeUnit/SECONDS))}}))}]}
      {:event-loops 1}
      (testing "from another thread, while the loop is busy"
        (let [c (raw-connect "/sync")
              s (deref socket 3000 nil)
              h (raw-connect "/hold")]
          (try
            (is (ws/open? s))
            (write! h {:opcode 1 :payload "hold the loop"})
            (is (deref holding 3000 false) "the loop is held")
            (ws/close s)
            (is (false? (ws/open? s)) "ring.websocket/open? is false at once")
            (is (false? (dws/open? s)) "and so is donkey.websocket/open?")
            (is (thrown? IOException (dws/send s "late")) "and nothing more is sent")
            (finally (.countDown release)))
          (let [f (until-close c)]
            (is (= 1000 (close-code f)) "the close goes out once the loop is free")
            (is (= "Normal Closure" (String. ^bytes (:payload f) 2 (- (alength ^bytes (:payload f)) 2)
                                             StandardCharsets/UTF_8))))
          (.close ^Socket (:socket c))
          (.close ^Socket (:socket h))))
      (testing "from the listener's own callback on a worker"
        (let [c (raw-connect "/sync")]
          (write! c {:opcode 1 :payload "x"})
          (is (false? (deref in-callback 3000 :timeout)))
          (is (= 4000 (close-code (until-close c))))
          (.close ^Socket (:socket c)))))))

;; ---- threads ------------------------------------------------------------------------------

(deftest a-blocking-listener-holds-its-socket-only
  (let [release (CountDownLatch. 1)
        order (atom [])
        in-flight (atom 0)
        overlap (atom false)]
    (with-server (fn [req]
                   {:ring.websocket/listener
                    {:on-message (fn [s m]
                                   (when (< 1 (swap! in-flight inc)) (reset! overlap true))
                                   (if (= "block" m)
                                     (.await release 10 TimeUnit/SECONDS)
                                     (swap! order conj m))
                                   (swap! in-flight dec)
                                   (dws/send s (str "done:" m)))}})
      {}
      (let [slow (connect "/ws")
            fast (connect "/ws")]
        (send-text slow "block")
        (Thread/sleep 100)
        (let [[r ms] (u/millis (do (send-text fast "quick") (next-event fast)))]
          (is (= [:text "done:quick"] r))
          (is (< ms 1000) "another socket is served while one listener blocks"))
        (.countDown release)
        (is (= [:text "done:block"] (next-event slow)))
        (reset! order [])
        (reset! overlap false)
        (doseq [i (range 200)] (send-text fast (str i)))
        (dotimes [_ 200] (next-event fast))
        (is (= (mapv str (range 200)) @order) "one socket's messages are handled in order")
        (is (not @overlap) "and one at a time")))))

(deftest a-slow-sync-listener-stops-its-socket-reading
  ;; 1000 messages of 32 KiB (32 MiB) cannot fit in the sockets' buffers: a client still
  ;; sending after a while is held back by a server that stopped reading, not buffered in heap
  (let [release (CountDownLatch. 1)
        received (atom 0)
        sent (atom 0)]
    (with-server (fn [_] {:ring.websocket/listener
                          {:on-message (fn [_ _]
                                         (.await release 30 TimeUnit/SECONDS)
                                         (swap! received inc))}})
      {}
      (let [c (connect "/ws")
            msg (apply str (repeat (* 32 1024) "x"))
            f (future (dotimes [_ 1000] (send-text c msg) (swap! sent inc)) :done)]
        (Thread/sleep 1500)
        (is (< @sent 1000) (str "the client is held back, " @sent " sent"))
        (is (zero? @received))
        (.countDown release)
        (is (= :done (deref f 30000 :timeout)) "it goes on once the listener catches up")
        (is (wait-for #(= 1000 @received) 30000) "every message arrives, in the end")))))

;; ---- limits -------------------------------------------------------------------------------

(deftest idle-sockets-are-pinged-then-closed
  (let [closed (atom [])]
    (with-server (fn [_] {:ring.websocket/listener {:on-close (fn [_ code _] (swap! closed conj code))}})
      {:ws-ping-interval 200 :ws-idle-timeout 800}
      (testing "a client that answers pings stays"
        (let [c (connect "/ws")]
          (Thread/sleep 1800)
          (is (empty? @closed))
          (is (some #(= :ping (first %)) (seq (:events c))) "it was pinged")
          (send-close c 1000 "")))
      (is (wait-for #(= [1000] @closed) 3000))
      (testing "a client that does not answer is closed with 1001"
        (reset! closed [])
        (let [c (raw-connect "/ws")
              [f ms] (u/millis (until-close c))]
          (is (= 1001 (close-code f)))
          (is (< 700 ms 4000) (str "after the idle timeout, took " ms " ms"))
          (.close ^Socket (:socket c))
          (is (wait-for #(= [1001] @closed) 3000)))))))

(deftest idle-times-past-what-nanoseconds-hold-mean-never
  ;; 18446744073710 ms is just over 2^64 ns: multiplied out, it would wrap to under a ms
  (with-server (fn [_] {:ring.websocket/listener {}})
    {:ws-idle-timeout 18446744073710 :ws-ping-interval 0}
    (let [c (raw-connect "/ws")]
      (.setSoTimeout ^Socket (:socket c) 1600)
      (is (= :timeout (read-frame c)) "no close after the first sweep")
      (.close ^Socket (:socket c)))))

(deftest websockets-count-toward-max-connections
  (with-server (fn [req] (if (= "/ws" (:uri req))
                           {:ring.websocket/listener {}}
                           {:status 200 :body "ok"}))
    {:max-connections 2}
    (let [a (connect "/ws")
          b (connect "/ws")]
      (Thread/sleep 100)
      (is (u/closed? (u/exchange "GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
          "a third connection is refused while two sockets are open")
      (send-close a 1000 "")
      (is (= :close (first (next-event a))))
      (is (wait-for #(= 200 (:status (try (u/GET "/") (catch Exception _ nil)))) 3000)
          "a closed socket frees its place")
      (send-close b 1000 ""))))

;; ---- backpressure -------------------------------------------------------------------------

(def ^:private ^MemoryMXBean memory (ManagementFactory/getMemoryMXBean))

(defn- heap-used ^long []
  (System/gc)
  (Thread/sleep 100)
  (System/gc)
  (.getUsed (.getHeapMemoryUsage memory)))

(def ^:private ^:const msg-size (* 64 1024))
(def ^:private ^:const total (* 256 1024 1024))

(deftest a-client-that-stops-reading-does-not-grow-the-heap
  (testing "sync sends wait for room; everything arrives once the client reads"
    (let [socket (promise)
          sent (atom 0)
          done (promise)]
      (with-server (fn [_] {:ring.websocket/listener
                            {:on-open (fn [s]
                                        (deliver socket s)
                                        (future
                                          (try
                                            (let [buf (ByteBuffer/allocate msg-size)]
                                              (while (< @sent total)
                                                (dws/send s (.duplicate buf))
                                                (swap! sent + msg-size)))
                                            (deliver done :ok)
                                            (catch Throwable t (deliver done t)))))}})
        {:ws-max-queued-bytes (* 1024 1024)}
        (let [before (heap-used)
              c (raw-connect "/ws")
              ^WebSocket s (deref socket 3000 nil)
              bound (+ (* 1024 1024) msg-size)
              peak (atom 0)]
          (is s)
          (dotimes [_ 20]
            (swap! peak max (.queuedBytes s))
            (Thread/sleep 50))
          (is (<= @peak bound) (str "queued bytes stay within the bound: " @peak))
          (is (< @sent total) "the sender waits while the client does not read")
          (is (not (realized? done)))
          (let [grown (- (heap-used) before)]
            (is (< grown (* 48 1024 1024)) (str "the heap did not grow with the sends: " grown)))
          (let [received (loop [n 0]
                           (if (>= n total)
                             n
                             (let [f (read-frame c)]
                               (if (map? f) (recur (+ n (alength ^bytes (:payload f)))) n))))]
            (is (= total received) "every byte arrives once the client reads")
            (is (= :ok (deref done 10000 :timeout))))
          (.close ^Socket (:socket c))))))
  (testing "async sends fail once the bound is passed"
    (let [result (promise)]
      (with-server (fn [_] {:ring.websocket/listener
                            {:on-open (fn [s]
                                        (future
                                          (let [buf (byte-array msg-size)
                                                failures (atom [])
                                                ok (atom 0)
                                                peak (atom 0)]
                                            (loop [n 0]
                                              (when (< n total)
                                                (dws/send s buf #(swap! ok inc) #(swap! failures conj %))
                                                (swap! peak max (.queuedBytes ^WebSocket s))
                                                (recur (+ n msg-size))))
                                            (deliver result {:failures @failures :peak @peak}))))}})
        {:ws-max-queued-bytes (* 1024 1024)}
        (let [c (raw-connect "/ws")
              {:keys [failures peak]} (deref result 30000 nil)]
          (is (seq failures) "the fail callback reports the full queue")
          (is (every? #(instance? IOException %) failures))
          (is (<= peak (+ (* 1024 1024) msg-size)) (str "queued bytes stay within the bound: " peak))
          (.close ^Socket (:socket c)))))))

(defn- stalled-sender-released
  "Checks that a sync sender, sending from a future to a client that never reads, is released
  with an IOException within 5 s, on a server with `opts`."
  [opts]
  (let [outcome (promise)]
    (with-server (fn [_] {:ring.websocket/listener
                          {:on-open (fn [s]
                                      (future
                                        (try (let [b (byte-array msg-size)]
                                               (dotimes [_ 4096] (dws/send s b)))
                                             (deliver outcome :all-sent)
                                             (catch IOException e (deliver outcome e)))))}})
      (merge {:ws-ping-interval 0 :ws-max-queued-bytes (* 1024 1024)} opts)
      (let [c (raw-connect "/ws")
            [r ms] (u/millis (deref outcome 10000 :timeout))]
        (is (instance? IOException r) (str r))
        (is (< ms 5000) (str "released after " ms " ms"))
        (.close ^Socket (:socket c))))))

(deftest a-stalled-sync-sender-is-released
  (testing "by :ws-idle-timeout, with an IOException, when its client never reads again"
    (stalled-sender-released {:ws-idle-timeout 500}))
  (testing "with :ws-idle-timeout off, after :idle-timeout: no send waits for ever"
    (stalled-sender-released {:ws-idle-timeout 0 :idle-timeout 800}))
  (testing "on the event loop a sync send cannot wait: past the bound it throws"
    (let [outcome (promise)]
      (with-server (fn [_ respond _]
                     (respond {:ring.websocket/listener
                               {:on-open (fn [s]
                                           (deliver outcome
                                                    (try (let [b (byte-array msg-size)]
                                                           (dotimes [_ 4096] (dws/send s b))
                                                           :all-sent)
                                                         (catch IOException e e))))}}))
        {:async? true :ws-max-queued-bytes (* 1024 1024)}
        (let [c (raw-connect "/ws")
              r (deref outcome 10000 :timeout)]
          (is (instance? IOException r) (str r))
          (is (str/includes? (ex-message r) ":ws-max-queued-bytes"))
          (.close ^Socket (:socket c)))))))

;; ---- compression --------------------------------------------------------------------------

(defn- deflate ^bytes [^bytes b]
  (let [d (Deflater. Deflater/DEFAULT_COMPRESSION true)
        out (byte-array (+ 64 (* 2 (alength b))))]
    (.setInput d b)
    (let [n (.deflate d out 0 (alength out) Deflater/SYNC_FLUSH)]
      ;; permessage-deflate drops the flush's 00 00 ff ff tail
      (java.util.Arrays/copyOf out (- n 4)))))

(defn- inflate ^bytes [^bytes b]
  (let [i (Inflater. true)
        in (byte-array (+ 4 (alength b)))
        out (byte-array 65536)]
    (System/arraycopy b 0 in 0 (alength b))
    (aset in (+ 0 (alength b)) (byte 0))
    (aset in (+ 1 (alength b)) (byte 0))
    (aset in (+ 2 (alength b)) (byte -1))
    (aset in (+ 3 (alength b)) (byte -1))
    (.setInput i in)
    (java.util.Arrays/copyOf out (.inflate i out))))

(deftest permessage-deflate-is-negotiated-when-enabled
  (let [calls (atom [])
        offer {"Sec-WebSocket-Extensions" "permessage-deflate; client_max_window_bits"}]
    (testing "off by default: not negotiated"
      (with-server (fn [_] {:ring.websocket/listener (echo-listener calls)}) {}
        (let [c (raw-connect "/ws" offer)]
          (is (= 101 (:status c)))
          (is (nil? (header-value (:head c) "sec-websocket-extensions")))
          (.close ^Socket (:socket c)))))
    (testing "with :ws-compression? true"
      (with-server (fn [_] {:ring.websocket/listener (echo-listener calls)}) {:ws-compression? true}
        (let [c (raw-connect "/ws" offer)
              ^String msg (apply str (repeat 50 "compressible "))]
          (is (str/starts-with? (str (header-value (:head c) "sec-websocket-extensions"))
                                "permessage-deflate"))
          (write! c {:opcode 1 :rsv1 true :payload (deflate (.getBytes msg StandardCharsets/UTF_8))})
          (let [f (read-frame c)]
            (is (:rsv1 f) "the answer is compressed")
            (is (< (alength ^bytes (:payload f)) (count msg)))
            (is (= (str "echo:" msg) (String. (inflate (:payload f)) StandardCharsets/UTF_8))))
          (.close ^Socket (:socket c)))))
    (testing "a compressed message that inflates past the limit closes with 1009"
      (with-server (fn [_] {:ring.websocket/listener {}}) {:ws-compression? true :ws-max-text-size 10000
                                                          :ws-max-binary-size 10000}
        (let [c (raw-connect "/ws" offer)]
          (write! c {:opcode 2 :rsv1 true :payload (deflate (byte-array 1000000))})
          (is (= 1009 (close-code (until-close c))))
          (.close ^Socket (:socket c)))))))

;; ---- the stop -----------------------------------------------------------------------------

(deftest stopping-the-server-closes-sockets-with-1001
  (let [closed (atom [])
        s (server/run-server (fn [_] {:ring.websocket/listener
                                      {:on-close (fn [_ code _] (swap! closed conj code))}})
                             {:port 0 :join? false :event-loops 2 :shutdown-timeout 5000})]
    (try
      (let [c (binding [u/*port* (server/port s)] (connect "/ws"))
            [_ ms] (u/millis (server/stop s))]
        (is (= [:close 1001 "server shutting down"] (next-event c)))
        (is (< ms 4000) (str "the stop did not wait for its timeout: " ms " ms"))
        (is (= [1001] @closed) "on-close ran, with the server's code"))
      (finally (server/stop s)))))

;; ---- without ring.websocket.protocols -----------------------------------------------------

(deftest map-listeners-need-no-ring-core
  (let [calls (atom [])]
    (with-redefs [dws/protocol-adapter (constantly nil)]
      (with-server (fn [req]
                     {:ring.websocket/listener
                      (if (= "/map" (:uri req))
                        (echo-listener calls)
                        (reify wsp/Listener
                          (on-open [_ _]) (on-message [_ _ _]) (on-pong [_ _ _])
                          (on-error [_ _ _]) (on-close [_ _ _ _])))})
        {}
        (let [c (connect "/map")]
          (send-text c "x")
          (is (= [:text "echo:x"] (next-event c)) "a map listener works without the protocols")
          (send-close c 1000 ""))
        (let [{:keys [status ^Socket socket]} (raw-connect "/proto")]
          (is (= 500 status) "a protocol listener needs the protocols namespace")
          (.close socket))))))

(deftest the-namespaces-have-no-reflection
  (let [err (java.io.StringWriter.)]
    (binding [*err* err *warn-on-reflection* true]
      (require 'donkey.websocket :reload))
    (is (not (re-find #"Reflection warning" (str err))) (str err))))
