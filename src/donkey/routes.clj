(ns donkey.routes
  "Compiles a route table (a vector of route maps) into the kernel's Java router, once, at
  start-up. Nothing here runs per request.

  A route map:
    :path          \"/users/:id\" (:simple) or a full-path regex (:regex); required
    :match-type    :simple (default) or :regex. :simple paths are literal segments and
                   :name segments; :regex capture groups become path params (by index, and by
                   name for named groups)
    :methods       request methods the route takes, e.g. [:get :post]; default all. A route
                   that takes :get also answers HEAD when no route takes :head
    :consumes      media types (or ranges like \"text/*\") the request body may have; a request
                   whose Content-Type matches none gets 415
    :produces      media types the handler can produce; a request whose Accept header allows
                   none gets 406
    :handler       the Ring handler; required
    :handler-mode  :blocking (default): a 1-arity handler run on the worker pool (or on
                   virtual threads with the server option :virtual-threads?);
                   :non-blocking: a 3-arity handler run on the event loop, which must not block
    :middleware    Ring middleware for this route, applied inside the server-wide :middleware;
                   the first one in the vector sees the request first
    :compress?     false: this route's responses are never compressed (with the server option
                   :compression? on); default true
    :max-body-size the largest request body this route takes, in bytes (larger gets 413);
                   default the server's :max-body-size

  Path params arrive in the request under :path-params, percent-decoded, with keyword keys."
  (:require [clojure.string :as str])
  (:import (clojure.lang AFunction IFn RestFn)
           (donkey.route Route Route$Mode Router)
           (java.lang.reflect Method)
           (java.util ArrayList List)))

(set! *warn-on-reflection* true)

(def ^:private route-keys
  #{:path :match-type :methods :consumes :produces :handler :handler-mode :middleware :name
    :compress? :max-body-size})

(defn- fail [route msg]
  (throw (IllegalArgumentException.
          (str "invalid route " (pr-str (select-keys route [:path :methods :name])) ": " msg))))

(defn- strings [route k]
  (let [v (get route k)]
    (when-not (or (nil? v) (and (sequential? v) (every? string? v)))
      (fail route (str k " must be a vector of strings, got " (pr-str v))))
    (into-array String (or v []))))

(defn- methods-of [route]
  (let [v (:methods route)]
    (when-not (or (nil? v) (and (sequential? v) (seq v) (every? keyword? v)))
      (fail route (str ":methods must be a non-empty vector of keywords, got " (pr-str v))))
    (into-array String (map name v))))

(defn wrap-middleware
  "Applies `middleware` (a seq of Ring middleware fns) to `handler`; the first middleware is
  the outermost, so it sees the request first."
  [handler middleware]
  (reduce (fn [h mw]
            (when-not (ifn? mw) (throw (IllegalArgumentException.
                                        (str "middleware must be a function, got " (pr-str mw)))))
            (mw h))
          handler
          (reverse middleware)))

(defn ^:no-doc arity-problem
  "How `f` falls short of being called with `n` arguments, as \"takes 3 arguments\", for a
  start-up refusal; nil when it takes `n`, or when its arities cannot be known before it is
  called (a var, a variadic or partial fn, an IFn that is not a plain fn)."
  [f n]
  (when (and (instance? AFunction f) (not (instance? RestFn f)))
    (let [arities (into (sorted-set)
                        (keep (fn [^Method m]
                                (when (= "invoke" (.getName m)) (.getParameterCount m))))
                        (.getDeclaredMethods (class f)))]
      (when (and (seq arities) (not (contains? arities n)))
        (str "takes " (str/join " or " arities) " argument" (when (not= #{1} arities) "s"))))))

(defn- compile-route
  ^Route [route server-middleware]
  (when-not (map? route) (throw (IllegalArgumentException. (str "a route must be a map, got " (pr-str route)))))
  (when-let [unknown (seq (remove route-keys (keys route)))]
    (fail route (str "unknown keys " (vec unknown))))
  (let [{:keys [path match-type handler handler-mode middleware]
         :or {match-type :simple handler-mode :blocking}} route]
    (when-not (string? path) (fail route ":path must be a string"))
    (when-not (#{:simple :regex} match-type) (fail route (str ":match-type must be :simple or :regex, got " (pr-str match-type))))
    (when-not (ifn? handler) (fail route ":handler must be a function"))
    (when-not (#{:blocking :non-blocking} handler-mode)
      (fail route (str ":handler-mode must be :blocking or :non-blocking, got " (pr-str handler-mode))))
    (when-not (contains? #{nil true false} (:compress? route))
      (fail route (str ":compress? must be true or false, got " (pr-str (:compress? route)))))
    (when-not (or (nil? (:max-body-size route))
                  (and (integer? (:max-body-size route)) (<= 0 (:max-body-size route) Long/MAX_VALUE)))
      (fail route (str ":max-body-size must be an integer >= 0, got " (pr-str (:max-body-size route)))))
    (when-not (or (nil? middleware) (sequential? middleware))
      (fail route ":middleware must be a vector of middleware fns"))
    ;; what the kernel calls is the handler inside its middleware
    (let [wrapped (wrap-middleware handler (concat server-middleware middleware))
          non-blocking? (= :non-blocking handler-mode)]
      (when-let [p (arity-problem wrapped (if non-blocking? 3 1))]
        (fail route (if non-blocking?
                      (str "its :handler " p ", and a :non-blocking route calls it as "
                           "(fn [request respond raise])")
                      (str "its :handler " p ", and a :blocking route (the default) calls it "
                           "as (fn [request]): give the route :handler-mode :non-blocking"))))
      (Route. ^String path (= :regex match-type) (methods-of route)
              (strings route :consumes) (strings route :produces)
              ^IFn wrapped
              (if non-blocking? Route$Mode/NON_BLOCKING Route$Mode/BLOCKING)
              (not (false? (:compress? route)))
              (long (or (:max-body-size route) -1))))))

(defn ^:no-doc compile-routes
  "Validates `routes` and compiles them into a donkey.route.Router. `server-middleware` wraps
  every route's handler, outside the route's own :middleware. Throws IllegalArgumentException
  naming the route for an invalid route or two routes that would serve the same requests."
  ^Router [routes server-middleware]
  (when-not (and (sequential? routes) (seq routes))
    (throw (IllegalArgumentException. (str ":routes must be a non-empty vector of route maps, got " (pr-str routes)))))
  (let [compiled (ArrayList.)]
    (doseq [r routes] (.add compiled (compile-route r server-middleware)))
    (Router/compile ^List compiled)))
