(ns donkey.metrics
  "The server's metrics on Micrometer (`io.micrometer/micrometer-core`, which the application
  adds: donkey does not depend on it). Give run-server a `MeterRegistry` as `:metrics` and it
  reports these meters, every one with the tags of `:metrics-tags`:

    donkey.requests              timer: each request from its head's arrival to the end of its
                                 answer; tags route, method, status
    donkey.requests.active       gauge: requests begun and not over
    donkey.kernel.answers        counter: answers the kernel gave on its own (a malformed or
                                 refused request, no route, a timeout, a body too large, a
                                 full queue, a failed handler); tag status (\"404\")
    donkey.connections           gauge: open connections; tag protocol (http1, h2c, h2,
                                 websocket)
    donkey.connections.refused   counter: connections closed at accept over :max-connections
    donkey.http2.resets          counter: HTTP/2 streams the server reset
    donkey.bytes.read            counter: bytes read from the sockets (TLS records as sent)
    donkey.bytes.written         counter: bytes written to the sockets
    donkey.workers.busy          gauge: worker threads not idle
    donkey.workers.queued        gauge: sync requests waiting for a worker
    donkey.workers.threads       gauge: worker threads alive

  The tags of donkey.requests have few values, whatever clients send: route is the path
  pattern of the route that took the request (\"/users/:id\"), \"unmatched\" when none did
  (404, 405, 406, 415, and refusals before routing) and \"*\" for a server given a single
  handler; method is one of the nine of RFC 9110 or \"other\"; status is the class (\"2xx\"),
  or \"none\" when the connection closed before the answer ended.

  When the server stops it takes its meters out of the registry, so a server started again
  on the same registry starts from zero. Two servers sharing a registry should tell
  themselves apart with `:metrics-tags`: meters with the same name and tags are one."
  (:import (donkey.kernel.metrics ServerMetrics)
           (donkey.kernel.workers WorkerPool)
           (donkey.route Route)
           (io.micrometer.core.instrument FunctionCounter Gauge Meter MeterRegistry Tag Tags
                                           Timer)
           (java.util.concurrent ConcurrentHashMap ConcurrentLinkedQueue TimeUnit)
           (java.util.concurrent.atomic AtomicInteger AtomicReferenceArray LongAdder)
           (java.util.function Function Supplier ToDoubleFunction)))

(set! *warn-on-reflection* true)

(def ^:private method-names
  "The methods the method tag names; any other is \"other\"."
  ["GET" "HEAD" "POST" "PUT" "DELETE" "PATCH" "OPTIONS" "TRACE" "CONNECT"])

(def ^:private statuses ["none" "1xx" "2xx" "3xx" "4xx" "5xx"])

(def ^:private protocols
  "The protocol tag, by ServerMetrics' protocol number."
  ["http1" "h2c" "h2" "websocket"])

(def ^:private ^java.util.Map method-indexes
  "Each of `method-names` to its index."
  (java.util.HashMap. ^java.util.Map (zipmap method-names (map int (range)))))

(defn- method-index
  "The index of `m` in `method-names`, or (count method-names) for any other."
  ^long [^String m]
  (let [i (.get method-indexes m)]
    (if i (long i) (count method-names))))

(defn- status-index
  "The index of `status`'s class in `statuses`: 0 for none, 1 to 5 for 1xx to 5xx."
  ^long [^long status]
  ;; (two-argument comparisons: the three-argument < is a call on boxed numbers)
  (if (and (< 99 status) (< status 600)) (quot status 100) 0))

(defn- tags
  "Micrometer Tags from a map of names to values (keywords by their name)."
  ^Tags [m]
  (let [^Iterable ts (for [[k v] m] (Tag/of (if (keyword? k) (name k) (str k))
                                           (if (keyword? v) (name v) (str v))))]
    (Tags/of ts)))

(defn server-metrics
  "What the kernel reports to (a `donkey.kernel.metrics.ServerMetrics`), on `registry`, with
  `common-tags` (a map, or nil) on every meter. Called by run-server when it checks
  `:metrics`; not for applications. Meters are registered when the server starts and
  removed when it stops. Counts are kept in adders that the registry reads, so what the
  kernel reports per read or write is one addition. The options check `common-tags`."
  {:no-doc true}
  ^ServerMetrics [^MeterRegistry registry common-tags]
  (let [common (tags common-tags)
        meters (ConcurrentLinkedQueue.)
        keep! (fn [^Meter m] (.add meters m) m)
        active (AtomicInteger.)
        open (vec (repeatedly (count protocols) #(AtomicInteger.)))
        read (LongAdder.)
        written (LongAdder.)
        refused (LongAdder.)
        resets (LongAdder.)
        ;; status -> LongAdder, each registered when its status is first answered
        answers (ConcurrentHashMap.)
        counter (fn [^String n ^String desc extra ^String unit ^LongAdder adder]
                  (keep! (-> (FunctionCounter/builder n adder
                                                      (reify ToDoubleFunction
                                                        (applyAsDouble [_ a]
                                                          (double (.sum ^LongAdder a)))))
                             (.description desc) (.baseUnit unit)
                             (.tags common) (.tags (tags extra)) (.register registry))))
        new-answer (reify Function
                     (apply [_ status]
                       (let [a (LongAdder.)]
                         (counter "donkey.kernel.answers" "Answers the kernel gave on its own"
                                  {"status" status} nil a)
                         a)))
        ;; route path (or the null route's tag) -> AtomicReferenceArray of timers, by
        ;; [method status]
        timers (ConcurrentHashMap.)
        no-route (volatile! "unmatched")
        slot-count (* (inc (count method-names)) (count statuses))
        new-slots (reify Function (apply [_ _] (AtomicReferenceArray. (int slot-count))))
        timer (fn ^Timer [route-tag ^long slot]
                (keep! (-> (Timer/builder "donkey.requests")
                           (.description "Requests, from the head's arrival to the answer's end")
                           (.tags common)
                           (.tags (tags {"route" route-tag
                                         "method" (get method-names (quot slot (count statuses))
                                                       "other")
                                         "status" (statuses (rem slot (count statuses)))}))
                           (.register registry))))
        gauge (fn [^String n ^String desc extra ^Supplier f]
                (keep! (-> (Gauge/builder n f) (.description desc)
                           (.tags common) (.tags (tags extra)) (.strongReference true)
                           (.register registry))))]
    (reify ServerMetrics
      (start [_ workers route-table]
        (vreset! no-route (if route-table "unmatched" "*"))
        (gauge "donkey.requests.active" "Requests begun and not over" {}
               (reify Supplier (get [_] (.get active))))
        (doseq [[i p] (map-indexed vector protocols)]
          (gauge "donkey.connections" "Open connections" {"protocol" p}
                 (let [^AtomicInteger n (open i)] (reify Supplier (get [_] (.get n))))))
        (when-let [^WorkerPool w workers]
          (gauge "donkey.workers.busy" "Worker threads not idle" {}
                 (reify Supplier (get [_] (.busy w))))
          (gauge "donkey.workers.queued" "Sync requests waiting for a worker" {}
                 (reify Supplier (get [_] (.queued w))))
          (gauge "donkey.workers.threads" "Worker threads alive" {}
                 (reify Supplier (get [_] (.threadCount w)))))
        (counter "donkey.connections.refused" "Connections closed at accept over :max-connections"
                 {} nil refused)
        (counter "donkey.http2.resets" "HTTP/2 streams the server reset" {} nil resets)
        (counter "donkey.bytes.read" "Bytes read from the sockets" {} "bytes" read)
        (counter "donkey.bytes.written" "Bytes written to the sockets" {} "bytes" written))
      (stop [_]
        (doseq [^Meter m meters] (.remove registry m))
        (.clear meters)
        (.clear timers)
        (.clear answers))
      (requestStarted [_]
        (.incrementAndGet active))
      (requestEnded [_ route method status nanos]
        (.decrementAndGet active)
        (let [^Object k (if route (.path ^Route route) @no-route)
              ^AtomicReferenceArray slots (.computeIfAbsent timers k new-slots)
              slot (+ (* (method-index method) (count statuses)) (status-index status))
              ^Timer t (or (.get slots slot)
                           (let [t (timer k slot)] (.set slots slot t) t))]
          (.record t nanos TimeUnit/NANOSECONDS)))
      (kernelAnswered [_ status]
        (.increment ^LongAdder (.computeIfAbsent answers status new-answer)))
      (connectionOpened [_ protocol]
        (.incrementAndGet ^AtomicInteger (open protocol)))
      (connectionClosed [_ protocol]
        (.decrementAndGet ^AtomicInteger (open protocol)))
      (connectionRefused [_]
        (.increment refused))
      (streamReset [_]
        (.increment resets))
      (bytesRead [_ n]
        (.add read n))
      (bytesWritten [_ n]
        (.add written n)))))
