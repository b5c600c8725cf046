(ns donkey.stream
  "Responses written over time: the handler answers with the status and headers at once and
  sends body chunks later, from any thread. Server-Sent Events, long polls and progress
  streams build on this.

    (defn events [request respond raise]
      (respond {:status 200
                :headers {\"content-type\" \"text/event-stream\" \"cache-control\" \"no-cache\"}
                :body (stream/channel
                        (fn [ch]
                          (let [f (future (loop [i 0]
                                            (when (stream/send! ch (stream/sse {:data i}))
                                              (Thread/sleep 1000)
                                              (recur (inc i)))))]
                            (stream/on-close ch #(future-cancel f)))))}))

  Works with sync and async handlers and in route tables. The head is sent chunked as soon as
  the response is given (to an HTTP/1.0 client, the body ends with the connection); on-open
  runs on the event loop (start long work elsewhere). When the client goes away, `send!`
  returns false and the on-close fns run, so producers stop cleanly. A HEAD request gets the
  head only. The server closes a connection with nothing written for `:idle-timeout` ms: send
  a comment (`(stream/sse {:comment \"\"})`) now and then to keep a quiet stream open.

  `send!` does not block. A producer should follow a slow client with `writable?` and
  `on-drain`; one that does not is stopped once `:max-queued-bytes` (8 MiB) wait for the
  client: its connection is closed, `send!` returns false and the on-close fns run, so a client
  that stops reading cannot grow the heap."
  (:require [clojure.string :as str])
  (:import (clojure.lang IFn)
           (donkey.ring ResponseChannel StreamingBody)))

(set! *warn-on-reflection* true)

(defn channel
  "A response :body whose chunks `on-open` sends later: `(on-open ch)` is called with the open
  channel once the head has gone out. Options: `:max-queued-bytes`, the most bytes that may
  wait for a slow client before its connection is closed (default 8 MiB)."
  ([on-open] (channel on-open {}))
  ([on-open {:keys [max-queued-bytes] :or {max-queued-bytes StreamingBody/MAX_QUEUED}}]
   (when-not (ifn? on-open)
     (throw (IllegalArgumentException. (str "channel needs an on-open fn, got " (pr-str on-open)))))
   (when-not (and (integer? max-queued-bytes) (pos? max-queued-bytes))
     (throw (IllegalArgumentException.
             (str ":max-queued-bytes must be a positive integer, got " (pr-str max-queued-bytes)))))
   (StreamingBody. ^IFn on-open (long max-queued-bytes))))

(defn send!
  "Sends `data` (a String, as UTF-8, or a byte array) as one chunk, flushed at once. Returns
  false when the channel is closed, or has just been closed because the client fell
  `:max-queued-bytes` behind. Does not block: see `writable?` for slow readers."
  [^ResponseChannel ch data]
  (.send ch data))

(defn close!
  "Ends the response. Idempotent. Returns nil."
  [^ResponseChannel ch]
  (.close ch))

(defn open?
  "True until the response has been closed, by `close!` or by the client."
  [^ResponseChannel ch]
  (.isOpen ch))

(defn writable?
  "True while the connection can take more without queueing in memory."
  [^ResponseChannel ch]
  (.writable ch))

(defn on-drain
  "Calls `f` (no arguments) once what was queued has been written out. Returns nil."
  [^ResponseChannel ch f]
  (.onDrain ch ^IFn f))

(defn on-close
  "Calls `f` (no arguments) once, when the channel closes for any reason (at once when it is
  already closed). Returns nil."
  [^ResponseChannel ch f]
  (.onClose ch ^IFn f))

(defn sse
  "Formats one Server-Sent Event (the text/event-stream format): `:data` (any value, str'ed;
  multi-line data becomes several data lines), and optional `:event`, `:id`, `:retry` (ms)
  and `:comment`."
  [{:keys [data event id retry comment]}]
  (let [field (fn [k v] (when (some? v) (str k ": " (str/replace (str v) #"[\r\n]" " ") "\n")))]
    (str (when (some? comment) (str ": " (str/replace (str comment) #"[\r\n]" " ") "\n"))
         (field "event" event)
         (field "id" id)
         (field "retry" retry)
         (when (some? data)
           (apply str (map #(str "data: " % "\n") (str/split-lines (let [d (str data)] (if (= d "") " " d))))))
         "\n")))
