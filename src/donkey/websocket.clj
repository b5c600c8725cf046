(ns donkey.websocket
  "WebSockets with Ring's own API (Ring 1.11+). A handler answers an upgrade request with
  `{:ring.websocket/listener listener}` (and optionally `:ring.websocket/protocol`, the chosen
  subprotocol); the listener is a map of `:on-open`, `:on-message`, `:on-ping`, `:on-pong`,
  `:on-error` and `:on-close` fns, or anything that satisfies
  `ring.websocket.protocols/Listener`. The socket it is given is a
  `donkey.kernel.websocket.WebSocket`: `ring.websocket`'s `send`, `ping`, `pong`, `close` and
  `open?` work on it when ring-core 1.11+ is on the classpath, and the functions here do the
  same without it.

  Which thread runs the listener: an async handler's (or a `:non-blocking` route's) on the
  event loop, so they must not block; a sync handler's (or `:blocking` route's) on a worker
  thread, one callback at a time and in order for each socket."
  (:refer-clojure :exclude [send])
  (:require [clojure.string :as str])
  (:import (donkey.kernel.websocket WebSocket WebSocketListener)
           (java.nio ByteBuffer)))

(set! *warn-on-reflection* true)

(defn- byte-buffer ^ByteBuffer [data]
  (cond (nil? data) nil
        (instance? ByteBuffer data) data
        (bytes? data) (ByteBuffer/wrap ^bytes data)
        :else (throw (IllegalArgumentException.
                      (str "ping and pong data is a ByteBuffer or byte[], not " (type data))))))

(defn open?
  "True while messages can be sent on `socket`: false from the call to `close` on, and once a
  close has been sent or the connection has ended. A client's close is answered once the
  listener's callbacks for what came before it have run, so they can still send. Any thread."
  [^WebSocket socket]
  (.isOpen socket))

(defn send
  "Sends `message` on `socket`: a String (any CharSequence) as a text message, a ByteBuffer or
  byte[] as a binary one. With two arguments it returns once the message is queued, waiting
  while more than `:ws-max-queued-bytes` wait for the client (on the event loop, where it must
  not wait, it throws instead); it throws IOException when the socket is closed. With
  `succeed` (`(fn [])`) and `fail` (`(fn [throwable])`) it never waits: one of them is called
  once, `succeed` when the message has been written, `fail` when it cannot be (at once, on the
  calling thread, when the socket is closed or the queue is over its bound). Returns nil. Any
  thread."
  ([^WebSocket socket message]
   (.send socket message))
  ([^WebSocket socket message succeed fail]
   (.sendAsync socket message succeed fail)))

(defn ping
  "Sends a ping on `socket`, with `data` (a ByteBuffer or byte[] of at most 125 bytes). Waits
  and throws as `send` does. Returns nil. Any thread."
  ([socket] (ping socket nil))
  ([^WebSocket socket data]
   (.ping socket (byte-buffer data))))

(defn pong
  "Sends an unsolicited pong on `socket`, as `ping`. Returns nil. Any thread."
  ([socket] (pong socket nil))
  ([^WebSocket socket data]
   (.pong socket (byte-buffer data))))

(defn close
  "Starts the close handshake of `socket`: code 1000 and \"Normal Closure\", or `code` and
  `reason` (at most 123 bytes of UTF-8). From the call on `open?` is false and nothing can be
  sent, before the close frame has gone out; the connection closes when the client answers, or
  5 s later. Returns nil. Never waits; any thread."
  ([socket] (close socket 1000 "Normal Closure"))
  ([^WebSocket socket code reason]
   (.close socket (int code) (str reason))))

(defn upgrade-request?
  "True when `request` asks for a WebSocket (`Upgrade: websocket`, `Connection: upgrade`)."
  [request]
  (let [{{:strs [upgrade connection]} :headers} request
        has? (fn [v token] (and v (some #(.equalsIgnoreCase (str/trim %) ^String token)
                                         (str/split v #","))))]
    (boolean (and (has? upgrade "websocket") (has? connection "upgrade")))))

(defn requested-protocols
  "The subprotocols `request` offers (`Sec-WebSocket-Protocol`), in order; nil when none."
  [request]
  (some->> (get-in request [:headers "sec-websocket-protocol"])
           (#(str/split % #","))
           (map str/trim)
           (remove str/blank?)
           seq
           vec))

;; ---- ring.websocket.protocols, when it is on the classpath -----------------------------------

(defn- protocol-var [sym]
  (try (requiring-resolve sym) (catch Exception _ nil)))

(defn protocol-adapter
  "Internal (run-server calls it once): when `ring.websocket.protocols` (ring-core 1.11+) is on
  the classpath, extends its `Socket` and `AsyncSocket` to `donkey.kernel.websocket.WebSocket`
  and returns `(fn [listener])`, the kernel's `WebSocketListener` for a listener that satisfies
  `Listener` (nil for one that does not). Nil when the namespace is absent: plain map
  listeners, which the kernel reads itself, still work then."
  {:no-doc true}
  []
  (when-let [listener-var (protocol-var 'ring.websocket.protocols/Listener)]
    (let [listener-proto @listener-var
          ping-proto (some-> (protocol-var 'ring.websocket.protocols/PingListener) deref)
          ^Class ping-iface (:on-interface ping-proto)
          socket-proto @(protocol-var 'ring.websocket.protocols/Socket)
          async-proto (some-> (protocol-var 'ring.websocket.protocols/AsyncSocket) deref)
          method (fn [m] @(protocol-var (symbol "ring.websocket.protocols" m)))
          on-open (method "on-open")
          on-message (method "on-message")
          on-pong (method "on-pong")
          on-error (method "on-error")
          on-close (method "on-close")
          on-ping (when ping-proto (method "on-ping"))]
      (extend WebSocket
        socket-proto
        {:-open? (fn [^WebSocket s] (.isOpen s))
         :-send (fn [^WebSocket s message] (.send s message))
         :-ping (fn [^WebSocket s data] (.ping s (byte-buffer data)))
         :-pong (fn [^WebSocket s data] (.pong s (byte-buffer data)))
         :-close (fn [^WebSocket s code reason] (.close s (int code) (str reason)))})
      (when async-proto
        (extend WebSocket
          async-proto
          {:-send-async (fn [^WebSocket s message succeed fail]
                          (.sendAsync s message succeed fail))}))
      (fn [listener]
        (when (satisfies? listener-proto listener)
          (let [pings? (and ping-proto
                            ;; a record is a map, which ring.websocket extends PingListener to
                            ;; without an on-ping of its own: only a listener that has one
                            ;; answers pings itself
                            (or (and ping-iface (.isInstance ping-iface listener))
                                (and (not (map? listener)) (satisfies? ping-proto listener))))]
            (WebSocketListener.
             (fn [s] (on-open listener s))
             (fn [s m] (on-message listener s m))
             (when pings? (fn [s d] (on-ping listener s d)))
             (fn [s d] (on-pong listener s d))
             (fn [s e] (on-error listener s e))
             (fn [s code reason] (on-close listener s code reason)))))))))
