(ns donkey.workers-test
  "The worker pool that runs sync handlers (donkey.kernel.workers.WorkerPool) and the batched hand-back
  of their responses (donkey.kernel.Outbox): only as many workers as cores run while they keep
  up, but blocked workers never hold up other requests, :worker-threads is a hard limit, and a
  pipelined response is never held long behind a slow handler."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [donkey.test-util :as u :refer [with-server GET]])
  (:import (donkey.kernel.workers OsThreads OsThreads$Stat WorkerPool)
           (java.io InputStream OutputStream)
           (java.net Socket)
           (java.nio.charset StandardCharsets)
           (java.util.concurrent Callable CountDownLatch ExecutorService Executors Future TimeUnit)
           (java.util.concurrent.atomic AtomicInteger)
           (java.util.concurrent.locks LockSupport)))

(defn- submit
  "Submits `f` to `pool` as a Callable (its value is the Future's)."
  ^Future [^ExecutorService pool ^Callable f]
  (.submit pool f))

(defn- in-parallel
  "Starts `n` GETs of `path` on their own threads; returns their futures."
  [n path]
  (let [pool (Executors/newFixedThreadPool n)
        fs (mapv (fn [_] (submit pool (bound-fn [] (GET path)))) (range n))]
    (.shutdown pool)
    fs))

(defn- behind-blocked-workers
  "Runs `(f blocked)` on a server whose `blocked` (cores + 2: more than the workers kept
  running) requests to /block sit in their handler until `f` returns; other paths answer
  \"fast\" at once. :worker-threads is `blocked` + `spare`. Checks that all of them got in
  at once and were answered once released."
  [spare f]
  (let [cores (.availableProcessors (Runtime/getRuntime))
        blocked (+ cores 2)
        inside (CountDownLatch. blocked)
        release (CountDownLatch. 1)
        handler (fn [req]
                  (if (= "/block" (:uri req))
                    (do (.countDown inside)
                        (.await release 10 TimeUnit/SECONDS)
                        {:status 200 :body "released"})
                    {:status 200 :body "fast"}))]
    (with-server handler {:worker-threads (+ blocked spare)}
      (let [fs (in-parallel blocked "/block")]
        (try
          (is (.await inside 5 TimeUnit/SECONDS)
              (str "all " blocked " blocking requests run at once although only " cores
                   " workers are kept running while they keep up"))
          (f blocked)
          (finally (.countDown release)))
        (is (every? #(= "released" (:body (.get ^Future % 10 TimeUnit/SECONDS))) fs))))))

(deftest blocked-workers-do-not-hold-up-other-requests
  (behind-blocked-workers
   4
   (fn [blocked]
     (let [t0 (System/nanoTime)
           r (GET "/fast")
           ms (/ (- (System/nanoTime) t0) 1e6)]
       (is (= "fast" (:body r)))
       (is (< ms 1000) (str "a fast request behind " blocked " blocked ones took " (long ms) " ms"))))))

(deftest a-request-arriving-while-the-pool-is-quiet-is-looked-at-within-its-ticks
  ;; every running worker blocked, nothing queued and no response waiting: the monitor ticks
  ;; every QUIET_TICKS stall periods (4 ms) instead of every period. A request that arrives
  ;; then still gets a thread of its own within a few ticks; five in a row, each after the
  ;; pool has been quiet for 100 ms
  (behind-blocked-workers
   10
   (fn [_]
     (GET "/fast")                            ; a connection and a worker ready
     (let [times (vec (for [_ (range 5)]
                        (do (Thread/sleep 100)
                            (let [t0 (System/nanoTime)
                                  r (GET "/fast")]
                              (is (= "fast" (:body r)))
                              (/ (- (System/nanoTime) t0) 1e6)))))
           median (nth (sort times) 2)]
       (is (< median 100) (str "fast requests while the pool was quiet took "
                               (mapv long times) " ms"))))))

(defn- with-silent-peer
  "Calls `(f read-blocked close-peers)` beside a local server that accepts connections and
  never writes. `(read-blocked latch)` connects to it, counts `latch` down and blocks reading
  until the peer closes, then returns a response whose body is \"read -1\";
  `(close-peers)` closes every connection accepted so far, which ends those reads."
  [f]
  (with-open [silent (java.net.ServerSocket. 0 100 (java.net.InetAddress/getLoopbackAddress))]
    (let [accepted (java.util.concurrent.ConcurrentLinkedQueue.)
          acceptor (future (try (loop [] (.add accepted (.accept silent)) (recur))
                                (catch java.io.IOException _ nil)))]
      (try
        (f (fn [^CountDownLatch inside]
             (with-open [s (Socket. "127.0.0.1" (.getLocalPort silent))]
               (.setSoTimeout s 20000)
               (.countDown inside)
               {:status 200 :body (str "read " (.read (.getInputStream s)))}))
           (fn [] (doseq [^Socket a (repeatedly #(.poll accepted)) :while a] (.close a))))
        (finally
          (.close silent)
          (deref acceptor 2000 nil))))))

(deftest workers-blocked-in-a-socket-read-do-not-hold-up-other-requests
  ;; A thread blocked reading a socket (a database call, say) is RUNNABLE to Java; the pool
  ;; asks the OS (Linux /proc) whether it is running, and must still count it as blocked.
  (let [cores (.availableProcessors (Runtime/getRuntime))
        blocked (+ cores 2)
        inside (CountDownLatch. blocked)]
    (with-silent-peer
      (fn [read-blocked close-peers]
        (let [handler (fn [req]
                        (if (= "/read" (:uri req))
                          (read-blocked inside)
                          {:status 200 :body "fast"}))]
          (with-server handler {:worker-threads (+ blocked 4)}
            (let [fs (in-parallel blocked "/read")]
              (try
                (is (.await inside 5 TimeUnit/SECONDS)
                    (str "all " blocked " socket-blocked requests run at once, with " cores " core(s)"))
                (let [t0 (System/nanoTime)
                      r (GET "/fast")
                      ms (/ (- (System/nanoTime) t0) 1e6)]
                  (is (= "fast" (:body r)))
                  (is (< ms 1000) (str "a fast request behind " blocked " socket-blocked ones took "
                                       (long ms) " ms")))
                (finally (close-peers)))
              (is (every? #(= "read -1" (:body (.get ^Future % 10 TimeUnit/SECONDS))) fs)))))))))

;; Every worker blocked in a socket read (a slow database) and requests queued behind them:
;; the monitor ticks every 1 ms while they wait, and asking the OS about each worker costs
;; 3-15 us. At :worker-threads no thread can be added, so it must not ask at all (before: 17%
;; of a core for 50 such workers).
(deftest the-monitor-stays-cheap-while-every-worker-is-blocked
  (let [n 20
        inside (CountDownLatch. n)
        mx (java.lang.management.ManagementFactory/getThreadMXBean)
        monitor-cpu (fn [] (reduce + (for [^long id (.getAllThreadIds mx)
                                           :let [i (.getThreadInfo mx id)]
                                           :when (and i (= "donkey-worker-monitor"
                                                           (.getThreadName i)))]
                                       (max 0 (.getThreadCpuTime mx id)))))]
    (with-silent-peer
      (fn [read-blocked close-peers]
        (with-server (fn [_] (read-blocked inside)) {:worker-threads n}
          (let [fs (in-parallel (* 2 n) "/read")]
            (try
              (is (.await inside 5 TimeUnit/SECONDS) (str "all " n " workers blocked in a read"))
              (Thread/sleep 200)
              (let [c0 (monitor-cpu)
                    t0 (System/nanoTime)
                    _ (Thread/sleep 2000)
                    share (/ (double (- (monitor-cpu) c0)) (- (System/nanoTime) t0))]
                (is (< share 0.10)
                    (format "the pool's monitor used %.1f%% of a core while %d workers were blocked and %d requests waited"
                            (* 100 share) n n)))
              (finally
                ;; each closed peer ends one read; the waiting requests then get workers and
                ;; are accepted in turn
                (loop [left 200]
                  (close-peers)
                  (when (and (pos? left) (not (every? #(.isDone ^Future %) fs)))
                    (Thread/sleep 50)
                    (recur (dec left))))))
            (is (every? #(= "read -1" (:body (.get ^Future % 10 TimeUnit/SECONDS))) fs))))))))

(deftest worker-threads-is-a-hard-limit
  (let [running (AtomicInteger.)
        most (AtomicInteger.)
        handler (fn [_]
                  (let [n (.incrementAndGet running)]
                    (loop [m (.get most)]
                      (when (and (> n m) (not (.compareAndSet most m n))) (recur (.get most))))
                    (Thread/sleep 150)
                    (.decrementAndGet running)
                    {:status 200 :body "ok"}))]
    (with-server handler {:worker-threads 2}
      (let [fs (in-parallel 6 "/")]
        (is (every? #(= "ok" (:body (.get ^Future % 10 TimeUnit/SECONDS))) fs))
        (is (= 2 (.get most)) "never more than :worker-threads handlers at once")))))

(defn- read-until
  "Reads from `in` until the text read so far contains every string in `marks` or `ms`
  passes; returns [text elapsed-ms]."
  [^Socket s ^String request marks ms]
  (.setSoTimeout s 100)
  (let [^OutputStream out (.getOutputStream s)
        ^InputStream in (.getInputStream s)
        buf (byte-array 8192)
        sb (StringBuilder.)
        t0 (System/nanoTime)
        elapsed #(/ (- (System/nanoTime) t0) 1e6)]
    (.write out (.getBytes request StandardCharsets/ISO_8859_1))
    (.flush out)
    (loop []
      (let [text (str sb)]
        (if (or (every? #(str/includes? text %) marks) (> (elapsed) ms))
          [text (elapsed)]
          (let [n (try (.read in buf) (catch java.net.SocketTimeoutException _ 0))]
            (when (pos? n) (.append sb (String. buf 0 (int n) StandardCharsets/ISO_8859_1)))
            (if (neg? n) [(str sb) (elapsed)] (recur))))))))

(deftest pipelined-response-is-not-held-behind-a-slow-handler
  ;; responses to pipelined requests leave together when they are ready together; one whose
  ;; successor is slow must still leave at once (once the successor has run Workers/STALL_MS,
  ;; and within Outbox/MAX_HOLD_MS in any case)
  (with-server (fn [req]
                 (when (= "/slow" (:uri req)) (Thread/sleep 2000))
                 {:status 200 :body (str "done" (:uri req))})
    {}
    (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
      (let [[text ms] (read-until s (str "GET /fast HTTP/1.1\r\nHost: x\r\n\r\n"
                                         "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
                                  ["done/fast"] 5000)]
        (is (str/includes? text "done/fast"))
        (is (not (str/includes? text "done/slow")))
        (is (< ms 1000) (str "the first response took " (long ms) " ms behind a 2 s handler")))
      (let [[text] (read-until s "" ["done/slow"] 5000)]
        (is (str/includes? text "done/slow") "the slow one follows")))))

(deftest request-timeout-covers-pipelined-requests
  ;; the second pipelined request becomes the connection's current one while the first
  ;; response is still being ended; the timeout must watch it
  (with-server (fn [req]
                 (if (= "/hang" (:uri req))
                   (do (Thread/sleep 5000) {:status 200 :body "too late"})
                   {:status 200 :body "first"}))
    {:request-timeout 300}
    (with-open [s (Socket. "127.0.0.1" (int u/*port*))]
      (let [[text ms] (read-until s (str "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n"
                                         "GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
                                  ["first" "503"] 4000)]
        (is (str/includes? text "first"))
        (is (str/includes? text "HTTP/1.1 503") "the hanging pipelined request timed out")
        (is (< ms 3000) (str "after " (long ms) " ms"))))))

(deftest many-connections-many-workers-in-order
  ;; batches of responses from several workers to several connections, each in order
  (with-server (fn [req]
                 (when (str/ends-with? (:uri req) "7") (Thread/sleep 5))
                 {:status 200 :body (:uri req)})
    {:worker-threads 4}
    (let [pool (Executors/newFixedThreadPool 8)
          fs (mapv (fn [c]
                     (submit pool
                              (bound-fn []
                                (u/raw (str (apply str (for [i (range 30)]
                                                         (str "GET /c" c "-" i " HTTP/1.1\r\nHost: x\r\n\r\n")))
                                            "GET /end HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                                       10000))))
                   (range 8))]
      (.shutdown pool)
      (doseq [[c ^Future f] (map vector (range 8) fs)]
        (let [resp (.get f 20 TimeUnit/SECONDS)]
          (is (= (concat (for [i (range 30)] (str "/c" c "-" i)) ["/end"])
                 (re-seq #"/c\d+-\d+|/end" resp))
              (str "connection " c ": every response, in order")))))))

(deftest the-pool-grows-when-the-queue-moves-but-too-slowly
  ;; all but one of the workers kept running are blocked; the last one serves a backlog of
  ;; short requests. The queue keeps moving, but its oldest request waits longer than 1 ms:
  ;; more workers must join.
  (let [cores (.availableProcessors (Runtime/getRuntime))
        blocked (max 0 (dec cores))
        inside (CountDownLatch. blocked)
        release (CountDownLatch. 1)
        served-by (java.util.concurrent.ConcurrentHashMap.)
        spin (fn [micros] (let [end (+ (System/nanoTime) (* 1000 micros))]
                            (while (< (System/nanoTime) end))))
        handler (fn [req]
                  (if (= "/block" (:uri req))
                    (do (.countDown inside) (.await release 20 TimeUnit/SECONDS) {:status 200 :body "b"})
                    (do (spin 400)
                        (.put served-by (.getName (Thread/currentThread)) true)
                        {:status 200 :body "fast"})))]
    (with-server handler {:worker-threads 16}
      (let [bs (in-parallel blocked "/block")]
        (try
          (is (.await inside 5 TimeUnit/SECONDS))
          (let [pool (Executors/newFixedThreadPool 16)
                fs (mapv (fn [_] (submit pool (bound-fn [] (dotimes [_ 20] (GET "/fast")) :done)))
                         (range 16))]
            (.shutdown pool)
            (is (every? #(= :done (.get ^Future % 30 TimeUnit/SECONDS)) fs))
            (is (> (count served-by) 1)
                (str "the backlog was served by " (count served-by) " worker(s) while " blocked
                     " of " cores " were blocked")))
          (finally (.countDown release)))
        (doseq [^Future f bs] (.get f 20 TimeUnit/SECONDS))))))

(defn- spin
  "Keeps the calling thread busy on its core for `micros` microseconds."
  [micros]
  (let [end (+ (System/nanoTime) (* 1000 micros))]
    (while (< (System/nanoTime) end))))

(defn- workers-serving
  "Runs `work` as the handler of a server with 50 workers while `clients` (16) clients send `n`
  (10) GETs of `path` each; returns {:done? (every client finished) :workers (how many
  distinct threads ran the handler)}."
  [work path & [clients n]]
  (let [served-by (java.util.concurrent.ConcurrentHashMap.)
        handler (fn [_]
                  (work)
                  (.put served-by (.getName (Thread/currentThread)) true)
                  {:status 200 :body "busy"})]
    (with-server handler {:worker-threads 50}
      (let [clients (or clients 16)
            pool (Executors/newFixedThreadPool clients)
            fs (mapv (fn [_] (submit pool (bound-fn [] (dotimes [_ (or n 10)] (GET path)) :done)))
                     (range clients))]
        (.shutdown pool)
        {:done? (every? #(= :done (.get ^Future % 60 TimeUnit/SECONDS)) fs)
         :workers (count served-by)}))))

;; Workers busy on the cores are not stuck: a thread that is only waiting for a core (the
;; cores are saturated) looks as late as a blocked one, but another thread would just take turns
;; with it. The pool grew to 27 threads on one core under the bench's JSON load before the
;; monitor asked the OS whether a late worker was running.
(deftest the-pool-does-not-grow-for-handlers-busy-on-the-cores
  (let [cores (.availableProcessors (Runtime/getRuntime))
        {:keys [done? workers]} (workers-serving #(spin 3000) "/busy")]
    (is done?)
    (is (<= workers (+ cores 2))
        (str "160 requests each busy for 3 ms on " cores " core(s) were served by "
             workers " workers"))))

;; A thread that blocks for less than the pool's 1 ms tick is caught blocked by at most one
;; look; counting it on that one look would wake a thread per catch (the pool's monitor looks
;; every 1 ms while requests wait, each handler here sleeps once for 0.3 ms).
(deftest the-pool-does-not-grow-for-handlers-that-block-only-briefly
  (let [cores (.availableProcessors (Runtime/getRuntime))
        {:keys [done? workers]} (workers-serving #(do (spin 1500)
                                                      (LockSupport/parkNanos 300000)
                                                      (spin 1500))
                                                 "/brief")]
    (is done?)
    (is (<= workers (+ cores 2))
        (str "160 requests each busy for 3 ms and asleep for 0.3 ms on " cores
             " core(s) were served by " workers " workers"))))

;; A handler that mostly waits (a database round trip per request) blocks too briefly for any
;; worker to look stuck, but at every look most workers are asleep: the pool must grow past
;; its cores or the requests queue behind a few threads that leave the cores idle.
(deftest the-pool-grows-for-handlers-that-mostly-wait
  (let [cores (.availableProcessors (Runtime/getRuntime))
        {:keys [done? workers]} (workers-serving #(do (spin 50)
                                                      (LockSupport/parkNanos 1000000)
                                                      (spin 50))
                                                 "/waits" 32 25)]
    (is done?)
    (is (>= workers (+ cores 2))
        (str "800 requests each asleep for 1 ms and busy for 0.1 ms, 32 at a time, on "
             cores " core(s) were served by " workers " workers"))))

(deftest an-interrupt-does-not-leak-into-the-next-request
  ;; e.g. a timeout helper that interrupts the handler's thread just after it returned
  (with-server (fn [req]
                 (if (= "/interrupt-me" (:uri req))
                   (do (.interrupt (Thread/currentThread)) {:status 200 :body "ok"})
                   {:status 200 :body (str (.isInterrupted (Thread/currentThread)))}))
    {:worker-threads 1}
    (is (= "ok" (:body (GET "/interrupt-me"))))
    (is (= "false" (:body (GET "/next"))) "the next request on the same worker starts clean")
    (is (= "ok" (:body (GET "/interrupt-me"))))
    (Thread/sleep 50)
    (is (= "false" (:body (GET "/after-idle"))) "also after the worker parked in between")))

(deftest a-request-that-timed-out-in-the-queue-is-not-run
  (let [ran (AtomicInteger.)]
    (with-server (fn [req]
                   (if (= "/hold" (:uri req))
                     (do (Thread/sleep 1200) {:status 200 :body "held"})
                     (do (.incrementAndGet ran) {:status 200 :body "ran"})))
      {:worker-threads 1 :request-timeout 300}
      (let [[held] (in-parallel 1 "/hold")]
        (Thread/sleep 100)                   ; /hold has the only worker
        (is (= 503 (:status (GET "/queued"))) "the queued request timed out")
        (.get ^Future held 5 TimeUnit/SECONDS)
        (Thread/sleep 200)
        (is (zero? (.get ran)) "and its handler never ran once a worker was free")))))

(deftest bodiless-statuses-through-the-outbox
  ;; a worker's 304 and 204 and a HEAD answer are ended on the loop in a batch; the pipelined
  ;; request after each must still parse (no stray body or length)
  (with-server (fn [req]
                 (case (:uri req)
                   "/304" {:status 304 :headers {"ETag" "\"v1\""}}
                   "/204" {:status 204}
                   {:status 200 :body "tail"}))
    {}
    (let [resp (u/raw (str "GET /304 HTTP/1.1\r\nHost: x\r\n\r\n"
                           "GET /204 HTTP/1.1\r\nHost: x\r\n\r\n"
                           "HEAD /x HTTP/1.1\r\nHost: x\r\n\r\n"
                           "GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
          statuses (map second (re-seq #"HTTP/1.1 (\d+)" resp))]
      (is (= ["304" "204" "200" "200"] statuses) resp)
      (is (re-find #"(?i)etag: \"v1\"" resp))
      (is (str/ends-with? resp "tail") "only the last response has a body"))))

(defn- platform-pool
  "A donkey.kernel.workers.WorkerPool of at most `max` daemon platform threads, one kept running
  while they keep up, a 1 ms stall period and a `keep-alive-ms` keep-alive."
  ^WorkerPool [max keep-alive-ms]
  (let [factory (reify java.util.concurrent.ThreadFactory
                  (newThread [_ r] (doto (Thread. ^Runnable r) (.setDaemon true))))]
    (WorkerPool. "test-pool" factory false (int max) (int 1) (long 1000000)
                 (long (* keep-alive-ms 1000000)))))

(defn- pool-keep-alive
  "Exercises a donkey.kernel.workers.WorkerPool of daemon platform threads with a `keep-alive-ms` keep-alive: `n` tasks blocked at once get `n` threads; once
  released and idle for the keep-alive, every thread ends; then the pool runs a new task.
  Returns {:grown :idle-states :left :after}: the thread count with the tasks blocked, the
  states of the idle threads shortly after release, the count after the keep-alive, and what
  the new task returned."
  [n keep-alive-ms]
  (let [pool (platform-pool 64 keep-alive-ms)
        count-threads #(.threadCount pool)
        inside (java.util.concurrent.CountDownLatch. n)
        release (java.util.concurrent.CountDownLatch. 1)
        seen (java.util.concurrent.ConcurrentHashMap/newKeySet)]
    (try
      (dotimes [_ n]
        (.execute pool ^Runnable (fn []
                                   (.add seen (Thread/currentThread))
                                   (.countDown inside)
                                   (.await release 10 java.util.concurrent.TimeUnit/SECONDS))))
      (when-not (.await inside 5 java.util.concurrent.TimeUnit/SECONDS)
        (throw (ex-info "the blocked tasks did not all start" {:started (- n (.getCount inside))})))
      (let [grown (count-threads)]
        (.countDown release)
        (Thread/sleep (long (quot keep-alive-ms 3)))
        (let [idle-states (set (map #(.getState ^Thread %) seen))
              deadline (+ (System/currentTimeMillis) (* 3 keep-alive-ms) 2000)]
          (while (and (pos? (count-threads)) (< (System/currentTimeMillis) deadline))
            (Thread/sleep 20))
          (let [left (count-threads)
                f (.submit pool ^java.util.concurrent.Callable (fn [] :ran))]
            {:grown grown :idle-states idle-states :left left
             :after (.get f 5 java.util.concurrent.TimeUnit/SECONDS)})))
      (finally
        (.countDown release)
        (.shutdownNow pool)))))

(deftest idle-platform-workers-end-after-the-keep-alive
  (let [{:keys [grown idle-states left after]}
        (pool-keep-alive 5 300)]
    (is (= 5 grown) "five blocked tasks run on five threads")
    (is (= #{Thread$State/TIMED_WAITING} idle-states) "idle platform workers wait on their keep-alive")
    (is (= 0 left) "every thread ended once idle for the keep-alive")
    (is (= :ran after) "the pool starts a thread again for new work")))

(deftest the-pool-tracks-how-long-its-tasks-run
  ;; The event loop yields its core after a hand-off only while the workers' recent tasks were
  ;; short (WorkerPool/SHORT_TASK_NANOS): a worker that computes for milliseconds would
  ;; otherwise keep the loop's other connections waiting. The average follows the tasks both
  ;; ways.
  (let [pool (platform-pool 4 60000)
        limit WorkerPool/SHORT_TASK_NANOS
        recent-nanos #(.recentTaskNanos pool)
        run-all (fn [n f]
                  (dotimes [_ n]
                    (.get (.submit pool ^Callable f) 5 java.util.concurrent.TimeUnit/SECONDS)))]
    (try
      (is (= 0 (recent-nanos)) "nothing has run yet")
      (run-all 40 (fn [] (Thread/sleep 2) :slept))
      (is (> (recent-nanos) (max limit 1000000)) "tasks of 2 ms: over the limit, about 2 ms")
      (run-all 400 (fn [] :quick))
      (is (< (recent-nanos) limit) "quick tasks bring it back under the limit")
      (finally
        (.shutdownNow pool)))))

;; The event loop queues a whole batch of sync requests before it wakes a worker: a worker woken
;; for the first could take the core from the loop and the batch would go a request at a time.
(deftest a-queued-batch-waits-for-one-signal
  (let [pool (platform-pool 4 60000)
        enqueue #(.enqueue pool ^Runnable %)
        n 200
        done (java.util.concurrent.CountDownLatch. n)
        threads (java.util.concurrent.ConcurrentHashMap/newKeySet)]
    (try
      ;; the pool's monitor rescues tasks that wait a stall period with no worker running: let
      ;; it reach its idle park first (it starts with the pool), or it may run them unsignalled
      (loop [i 0]
        (when (and (< i 500) (not (.monitorResting pool)))
          (Thread/sleep 1)
          (recur (inc i))))
      (dotimes [_ n]
        (enqueue (fn [] (.add threads (Thread/currentThread)) (.countDown done))))
      (Thread/sleep 50)
      (is (= n (.getCount done)) "queued tasks do not run before the signal")
      (.signal pool)
      (is (.await done 5 java.util.concurrent.TimeUnit/SECONDS) "one signal runs the whole batch")
      (is (= 1 (count threads)) "on the one thread it woke (the pool's target here)")
      (.shutdown pool)
      (is (thrown? java.util.concurrent.RejectedExecutionException (enqueue (fn [])))
          "a shut-down pool refuses a queued task as it refuses execute")
      (finally
        (.shutdownNow pool)))))

(defn- os-stat-fns
  "donkey.kernel.workers.OsThreads: returns [self running? close] as functions, `self` to be called
  on the thread it describes."
  []
  [#(OsThreads/self)
   #(.running ^OsThreads$Stat %)
   #(.close ^OsThreads$Stat %)])

(deftest the-os-says-whether-a-worker-is-blocked
  ;; The pool's monitor keeps each platform worker's /proc stat open and reads it again at
  ;; every look: the same handle must show the thread's state now, not when it was opened.
  (let [[self running? close] (os-stat-fns)]
    (if-not (.exists (java.io.File. "/proc/thread-self"))
      (is (nil? (self)) "no /proc: nothing is known")
      (let [handle (promise)
            go (CountDownLatch. 1)
            done (java.util.concurrent.atomic.AtomicBoolean.)
            t (doto (Thread. (fn []
                               (deliver handle (self))
                               (.await go)                       ; blocked
                               (while (not (.get done)))))       ; then busy
                (.setDaemon true)
                (.start))
            h (deref handle 5000 nil)]
        (try
          (is (some? h) "a handle for a platform thread on Linux")
          (while (not= Thread$State/WAITING (.getState t)) (Thread/sleep 5))
          (Thread/sleep 50)
          (is (not (running? h)) "a thread waiting on a latch is not running")
          (.countDown go)
          (let [deadline (+ (System/currentTimeMillis) 2000)]
            (while (and (not (running? h)) (< (System/currentTimeMillis) deadline))
              (Thread/sleep 5)))
          (is (running? h) "the same handle, read again, sees it running once released")
          (finally
            (.set done true)
            (.join t 2000)))
        (close h)
        (is (not (running? h)) "a closed handle says nothing runs")))))
