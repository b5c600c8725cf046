(ns donkey.scope
  "Work tied to the request a non-blocking handler is serving, for middleware that holds what
  a request may outlive (an upload's temp files, say) or has blocking work to do.

  Every function here acts only while the calling thread runs a non-blocking donkey handler
  (`:async? true`, or a route with `:handler-mode :non-blocking`), on its event loop, and
  answers false elsewhere, doing nothing: a sync handler's middleware already runs on a worker
  thread and can release what it holds in a `finally`. A request is over when its response
  has been sent, when it was answered without its handler (a `:request-timeout`, say), or
  when its connection closed."
  (:import (donkey.kernel RequestScope)))

(set! *warn-on-reflection* true)

(defn at-end!
  "Has `(f)` run on the event loop once the current request is over (at once when it is over
  already). An exception from `f` is logged. Returns true when registered, false (nothing
  registered) when the calling thread is not running a non-blocking donkey handler."
  [f]
  (RequestScope/atEnd f))

(defn at-end-on-worker!
  "As `at-end!`, but `(f)` runs on one of the server's worker threads, so it may block
  (deleting files, say); on the event loop once the server's workers have stopped. Returns
  true when registered, false otherwise."
  [f]
  (RequestScope/atEndOnWorker f))

(defn offload!
  "Runs `(blocking)` on one of the server's worker threads, then `(then)` on the request's event
  loop, as part of the handler: `at-end!` and `over?` work in `then`, and an exception from
  either goes to the handler's `raise` (when `blocking` throws, `then` does not run). `then`
  runs even when the request ended meanwhile, so that it can release what `blocking` made; it
  checks `over?` before it answers. Returns true when started, false (nothing run) when the
  calling thread is not running a non-blocking donkey handler. Throws
  RejectedExecutionException when the server is stopping."
  [blocking then]
  (RequestScope/offload blocking then))

(defn over?
  "True when the request whose non-blocking handler the calling thread runs is already over;
  false while it is not, and on any thread not running a non-blocking donkey handler."
  []
  (RequestScope/isOver))

(defn context
  "The Vert.x `Context` of the event loop running the non-blocking handler on the calling
  thread, or nil on any other thread (a sync handler's worker included). A Vert.x client made
  from the server's instance (`donkey.server/vertx`) and called from the handler runs its
  callbacks on this loop already; `(.runOnContext ctx f)` brings other work there."
  ^io.vertx.core.Context []
  (RequestScope/context))
