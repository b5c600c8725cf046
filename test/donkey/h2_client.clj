(ns donkey.h2-client
  "A frame-level HTTP/2 client for tests (RFC 9113): writes exactly the frames a test names,
  including the ones a well-behaved client never sends, and reads the server's frames back.
  Header blocks are HPACK-coded by Netty's codec; frames are laid out here."
  (:import (io.netty.buffer ByteBuf Unpooled)
           (io.netty.handler.codec.http2 DefaultHttp2Headers DefaultHttp2HeadersDecoder
                                         DefaultHttp2HeadersEncoder Http2Headers)
           (java.io DataInputStream EOFException IOException OutputStream)
           (java.net InetSocketAddress Socket SocketTimeoutException)
           (java.nio.charset StandardCharsets)))

(set! *warn-on-reflection* true)

(def types
  "Frame type codes by name."
  {:data 0 :headers 1 :priority 2 :rst-stream 3 :settings 4 :push-promise 5 :ping 6
   :goaway 7 :window-update 8 :continuation 9})

(def ^:private type-names (into {} (map (fn [[k v]] [v k]) types)))

(def end-stream "The END_STREAM flag." 0x1)
(def end-headers "The END_HEADERS flag." 0x4)
(def ack "The ACK flag of SETTINGS and PING." 0x1)

(def preface "The client connection preface."
  (.getBytes "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" StandardCharsets/ISO_8859_1))

(defn frame
  "The bytes of one frame of `type` (a keyword or code) with `flags`, on `stream`, carrying
  `payload` (bytes)."
  ^bytes [type flags stream ^bytes payload]
  (let [n (alength payload)
        t (if (keyword? type) (types type) type)
        b (Unpooled/buffer (+ 9 n))]
    (.writeMedium b n)
    (.writeByte b (int t))
    (.writeByte b (int flags))
    (.writeInt b (int stream))
    (.writeBytes b payload)
    (let [out (byte-array (.readableBytes b))] (.readBytes b out) out)))

(defn settings
  "A SETTINGS frame of `params`, id -> value."
  ^bytes [params]
  (let [b (Unpooled/buffer)]
    (doseq [[id v] params] (.writeShort b (int id)) (.writeInt b (unchecked-int v)))
    (frame :settings 0 0 (let [a (byte-array (.readableBytes b))] (.readBytes b a) a))))

(defn u32
  "`n` as four big-endian bytes."
  ^bytes [n]
  (let [b (Unpooled/buffer 4)] (.writeInt b (unchecked-int n)) (let [a (byte-array 4)] (.readBytes b a) a)))

(defn rst-stream
  "A RST_STREAM frame for `stream` with error `code`."
  ^bytes [stream code]
  (frame :rst-stream 0 stream (u32 code)))

(defn window-update
  "A WINDOW_UPDATE of `n` bytes for `stream` (0: the connection)."
  ^bytes [stream n]
  (frame :window-update 0 stream (u32 n)))

(defn request-headers
  "Netty headers for a request: :method `method`, :path `path`, :scheme http, :authority
  localhost (or the value of a \":authority\" pair in `extra`), then `extra`'s other
  [name value] pairs (lower-case names)."
  ^Http2Headers [method path extra]
  (let [authority (some (fn [[k v]] (when (= ":authority" k) v)) extra)
        h (doto (DefaultHttp2Headers. false)
            (.method method) (.path path) (.scheme "http") (.authority (or authority "localhost")))]
    (doseq [[k v] extra :when (not= ":authority" k)] (.add h ^CharSequence k ^CharSequence v))
    h))

(defn encoder
  "An HPACK encoder: one per connection, as its dynamic table is the connection's."
  []
  (DefaultHttp2HeadersEncoder.))

(defn header-block
  "`headers` HPACK-coded by `enc`."
  ^bytes [^DefaultHttp2HeadersEncoder enc stream ^Http2Headers headers]
  (let [b (Unpooled/buffer)]
    (.encodeHeaders enc (int stream) headers b)
    (let [a (byte-array (.readableBytes b))] (.readBytes b a) a)))

(defn headers-frame
  "A HEADERS frame opening `stream` with `headers` in one block; `end?` also ends the stream."
  ^bytes [enc stream headers end?]
  (frame :headers (bit-or end-headers (if end? end-stream 0)) stream
         (header-block enc stream headers)))

(defn connect
  "A socket to 127.0.0.1:`port` that has sent the preface and an empty SETTINGS (plus
  `params`): {:socket :out :in :enc :dec}. Reads time out after `timeout-ms` (5 s)."
  ([port] (connect port {}))
  ([port params] (connect port params 5000))
  ([port params timeout-ms]
   (let [s (Socket.)]
     (.connect s (InetSocketAddress. "127.0.0.1" (int port)) 5000)
     (.setSoTimeout s (int timeout-ms))
     (let [out (.getOutputStream s)]
       (.write out ^bytes preface)
       (.write out (settings params))
       (.flush out)
       {:socket s :out out :in (DataInputStream. (.getInputStream s))
        :enc (encoder) :dec (DefaultHttp2HeadersDecoder. false)}))))

(defn send!
  "Writes `frames` (byte arrays) on `c` and flushes."
  [{:keys [^OutputStream out]} & frames]
  (doseq [^bytes f frames] (.write out f))
  (.flush out))

(defn read-frame
  "The next frame from `c`: {:type :flags :stream :payload}, or {:type :eof} when the server
  closed, {:type :timeout} after the socket's timeout, {:type :reset} on a reset."
  [{:keys [^DataInputStream in]}]
  (try
    (let [n (bit-or (bit-shift-left (.readUnsignedByte in) 16)
                    (bit-shift-left (.readUnsignedByte in) 8)
                    (.readUnsignedByte in))
          t (.readUnsignedByte in)
          flags (.readUnsignedByte in)
          stream (bit-and (.readInt in) 0x7fffffff)
          payload (byte-array n)]
      (.readFully in payload)
      (let [type (type-names t t)
            ;; a HEADERS frame's block comes after its pad length and priority fields
            pad (if (and (= type :headers) (pos? (bit-and flags 0x8))) (bit-and 0xff (aget payload 0)) 0)
            from (+ (if (pos? pad) 1 0) (if (and (= type :headers) (pos? (bit-and flags 0x20))) 5 0))
            payload (if (and (= type :headers) (or (pos? from) (pos? pad)))
                      (java.util.Arrays/copyOfRange payload (int from) (int (- n pad)))
                      payload)]
        {:type type :flags flags :stream stream :payload payload}))
    (catch EOFException _ {:type :eof})
    (catch SocketTimeoutException _ {:type :timeout})
    (catch IOException _ {:type :reset})))

(defn decode-headers
  "The header block `payload` decoded by `c`'s HPACK decoder, as a map of name -> value."
  [{:keys [^DefaultHttp2HeadersDecoder dec]} stream ^bytes payload]
  (let [h (.decodeHeaders dec (int stream) (Unpooled/wrappedBuffer payload))]
    (into {} (map (fn [^java.util.Map$Entry e] [(str (.getKey e)) (str (.getValue e))])) h)))

(defn code
  "The error code of a RST_STREAM frame, or of a GOAWAY frame (after its last stream id)."
  [{:keys [type ^bytes payload]}]
  (let [b (Unpooled/wrappedBuffer payload)]
    (when (= type :goaway) (.readInt b))
    (.readUnsignedInt b)))

(defn read-response
  "Reads frames from `c` until `stream`'s response has ended, acknowledging SETTINGS and
  PINGs on the way: {:status :headers :body (String) :reset code-or-nil :goaway code-or-nil
  :end :done|:eof|:timeout|:reset :frames [types of every frame read]}."
  [c stream]
  (loop [r {:body (java.io.ByteArrayOutputStream.) :frames []}]
    (let [{:keys [type flags payload] :as f} (read-frame c)
          r (update r :frames conj type)
          mine? (= stream (:stream f))
          done (fn [r end] (-> r (assoc :end end)
                               (update :body #(.toString ^java.io.ByteArrayOutputStream % "UTF-8"))))]
      (case type
        (:eof :timeout :reset) (done r type)
        :settings (do (when (zero? (bit-and flags ack)) (send! c (frame :settings ack 0 (byte-array 0))))
                      (recur r))
        :ping (do (when (zero? (bit-and flags ack)) (send! c (frame :ping ack 0 payload)))
                  (recur r))
        :goaway (done (assoc r :goaway (code f)) :goaway)
        ;; every block is decoded: HPACK's table is the connection's
        :headers (let [h (decode-headers c (:stream f) payload)
                       status (some-> (get h ":status") parse-long)]
                   (cond (not mine?) (recur r)
                         (and status (< status 200)) (recur (update r :interim (fnil conj []) status))
                         :else (let [r (if (:status r) (assoc r :trailers h)
                                           (assoc r :status status :headers h))]
                                 (if (pos? (bit-and flags end-stream)) (done r :done) (recur r)))))
        :data (if mine?
                (do (.write ^java.io.ByteArrayOutputStream (:body r) ^bytes payload)
                    ;; keep the stream's and the connection's windows open
                    (when (pos? (alength ^bytes payload))
                      (send! c (window-update 0 (alength ^bytes payload))
                             (window-update stream (alength ^bytes payload))))
                    (if (pos? (bit-and flags end-stream)) (done r :done) (recur r)))
                (recur r))
        :rst-stream (if mine? (done (assoc r :reset (code f)) :reset-stream) (recur r))
        (recur r)))))

(defn request!
  "Sends a request on `stream` of `c` (HEADERS, then `body` as DATA frames of at most 16 KiB
  when given) and reads its response (see read-response)."
  ([c stream method path] (request! c stream method path [] nil))
  ([c stream method path extra body]
   (let [^bytes body (cond (nil? body) nil
                           (string? body) (.getBytes ^String body StandardCharsets/UTF_8)
                           :else body)]
     (send! c (headers-frame (:enc c) stream (request-headers method path extra) (nil? body)))
     (when body
       (let [n (alength body)]
         (loop [off 0]
           (let [len (min 16384 (- n off))
                 last? (= n (+ off len))]
             (send! c (frame :data (if last? end-stream 0) stream
                             (java.util.Arrays/copyOfRange body (int off) (int (+ off len)))))
             (when-not last? (recur (+ off len)))))))
     (read-response c stream))))

(defn close!
  "Closes `c`'s socket."
  [{:keys [^Socket socket]}]
  (.close socket))

(defn closed-within?
  "True when the server ends `c` (GOAWAY then close, or a close) within `ms`, reading and
  dropping what it sends meanwhile."
  [c ms]
  (let [deadline (+ (System/currentTimeMillis) ms)]
    (loop [goaway? false]
      (if (> (System/currentTimeMillis) deadline)
        false
        (let [{:keys [type]} (read-frame c)]
          (case type
            (:eof :reset) true
            :goaway (recur true)
            (recur goaway?)))))))
