(ns ring.websocket.protocols
  "Test-only stand-in for ring-core 1.11+'s namespace of the same name (Debian has ring-core
  1.8.2, which has none): the protocols of Ring's WebSocket SPEC, with the SPEC's method
  signatures, so that the tests use donkey's sockets and listeners as an application on
  ring-core 1.12 would. Not part of donkey's jar.")

(defprotocol Listener
  (on-open [listener socket])
  (on-message [listener socket message])
  (on-pong [listener socket data])
  (on-error [listener socket throwable])
  (on-close [listener socket code reason]))

(defprotocol PingListener
  (on-ping [listener socket data]))

(defprotocol Socket
  (-open? [socket])
  (-send [socket message])
  (-ping [socket data])
  (-pong [socket data])
  (-close [socket code reason]))

(defprotocol AsyncSocket
  (-send-async [socket message succeed fail]))
