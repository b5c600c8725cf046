(ns donkey.static
  "Static files: Ring handlers (sync and async arities) that serve a directory or classpath
  resources for GET and HEAD, and route maps that mount them under a path of a route table.

    (server/run-server
      {:routes [(static/files-route \"/assets\" \"public\" {:cache-control \"max-age=3600\"})
                {:path \"/api/users\" :handler users}]}
      {:port 8080})

  Each answer has its Content-Type by extension, an ETag and Last-Modified, and honours
  If-None-Match / If-Modified-Since (304), If-Match / If-Unmodified-Since (412), one byte
  range (206, 416, If-Range) and a `.br` or `.gz` sibling the client accepts. A whole file is
  sent without copying it through the heap. Paths that would leave the root are refused
  whatever their encoding (400), hidden files are not served (404), and neither are files
  reached through a symbolic link that leads out of the root, unless allowed. Not-found paths
  get 404, other methods 405.

  Options (all optional):
    :index-files      files served for a directory, in order (default [\"index.html\"]); a
                      directory asked for without its trailing slash is redirected to it.
                      Ring's :index-files? false is [] here
    :cache-control    the Cache-Control value of every file answer (default none)
    :precompressed?   serve `name.br` / `name.gz` for `name` to a client whose
                      Accept-Encoding takes it (default true)
    :allow-symlinks?  serve files reached through symbolic links that lead out of the root
                      (default false; Ring's name)
    :hidden-files?    serve files and directories whose name starts with a dot (default
                      false; `.well-known` is always served)
    :mime-types       {\"ext\" \"media/type\"}: extensions added to or replacing the built-in
                      table (Ring's option of the same name)
    :loader           the ClassLoader of `resources-handler` (default: the thread's context
                      loader, as Ring's wrap-resource)
    :handler-mode     of a route map: :blocking (default; reading file attributes blocks) or
                      :non-blocking"
  (:require [donkey.middleware.options :as opt])
  (:import (donkey.files MediaTypes StaticFiles StaticFiles$Options)
           (java.io File)
           (java.util.regex Pattern)))

(set! *warn-on-reflection* true)

(def ^:private known
  #{:index-files :index-files? :cache-control :precompressed? :allow-symlinks? :hidden-files?
    :mime-types :loader :handler-mode :prefix})

(defn- options
  "A StaticFiles$Options from `opts`, checked: throws IllegalArgumentException naming `who`
  and the option for a bad value."
  ^StaticFiles$Options [who opts]
  (let [opts (opt/map-or-nil who opts known)
        o (StaticFiles$Options.)
        {:keys [index-files cache-control mime-types prefix]} opts]
    (when-not (or (nil? index-files) (and (sequential? index-files) (every? string? index-files)))
      (opt/fail who ":index-files must be a vector of file names, got " (pr-str index-files)))
    (when (some #(or (empty? %) (re-find #"[/\\\x00]" %)) index-files)
      (opt/fail who ":index-files must be plain file names, got " (pr-str index-files)))
    (when-not (or (nil? cache-control) (string? cache-control))
      (opt/fail who ":cache-control must be a string, got " (pr-str cache-control)))
    (when-not (or (nil? mime-types) (map? mime-types))
      (opt/fail who ":mime-types must be a map of extension to media type, got "
                (pr-str mime-types)))
    (when-not (or (nil? prefix) (and (string? prefix) (or (= "" prefix) (.startsWith ^String prefix "/"))))
      (opt/fail who ":prefix must be a path starting with /, got " (pr-str prefix)))
    (set! (.indexFiles o) (into-array String (cond index-files index-files
                                                   (false? (opt/boolean-or-nil who opts :index-files?)) []
                                                   :else ["index.html"])))
    (set! (.cacheControl o) cache-control)
    (set! (.precompressed o) (not (false? (opt/boolean-or-nil who opts :precompressed?))))
    (set! (.followSymlinks o) (true? (opt/boolean-or-nil who opts :allow-symlinks?)))
    (set! (.hidden o) (true? (opt/boolean-or-nil who opts :hidden-files?)))
    (set! (.prefix o) (or prefix ""))
    (set! (.types o) (try (MediaTypes/with (some-> mime-types
                                                   (update-keys name)))
                          (catch IllegalArgumentException e (opt/fail who (ex-message e)))))
    o))

(defn files-handler
  "A Ring handler (1- and 3-arity) serving the files under the directory `root` (a path or a
  java.io.File) for requests whose :uri is `:prefix` (default \"\") followed by the file's path
  under `root`. Throws IllegalArgumentException when `root` is not a readable directory or an
  option is bad (see the namespace doc for the options)."
  ([root] (files-handler root nil))
  ([root opts]
   (let [who "donkey.static/files-handler"
         o (options who opts)]
     (try (StaticFiles/directory (if (instance? File root) root (File. (str root))) o)
          (catch IllegalArgumentException e (opt/fail who (ex-message e)))))))

(defn resources-handler
  "A Ring handler (1- and 3-arity) serving the classpath resources under `prefix` (\"public\")
  for requests whose :uri is `:prefix` (default \"\") followed by the resource's name under
  `prefix`. Resources in jars are streamed, with their length; ones in directories are sent as
  files. Throws IllegalArgumentException for a bad option."
  ([prefix] (resources-handler prefix nil))
  ([prefix opts]
   (let [who "donkey.static/resources-handler"
         o (options who opts)
         loader (or (:loader opts) (.getContextClassLoader (Thread/currentThread)))]
     (when-not (string? prefix) (opt/fail who "the prefix must be a string, got " (pr-str prefix)))
     (when-not (instance? ClassLoader loader)
       (opt/fail who ":loader must be a ClassLoader, got " (pr-str loader)))
     (StaticFiles/resources prefix loader o))))

(defn- route [who path handler opts]
  (when-not (and (string? path) (.startsWith ^String path "/"))
    (opt/fail who "the path must start with /, got " (pr-str path)))
  (let [mode (or (:handler-mode opts) :blocking)
        base (if (= "/" path) "" (.replaceAll ^String path "/+$" ""))]
    (when-not (#{:blocking :non-blocking} mode)
      (opt/fail who ":handler-mode must be :blocking or :non-blocking, got " (pr-str mode)))
    {:path (str (Pattern/quote base) "(?:/.*)?")
     :match-type :regex
     :methods [:get :head]
     :handler-mode mode
     :handler (handler base)}))

(defn files-route
  "A route map for a route table: the files under the directory `root` served under `path`
  (\"/assets\": /assets/app.js is root/app.js). Options as for `files-handler`, and
  :handler-mode."
  ([path root] (files-route path root nil))
  ([path root opts]
   (route "donkey.static/files-route" path
          #(files-handler root (assoc (dissoc opts :handler-mode) :prefix %)) opts)))

(defn resources-route
  "A route map for a route table: the classpath resources under `prefix` served under `path`.
  Options as for `resources-handler`, and :handler-mode."
  ([path prefix] (resources-route path prefix nil))
  ([path prefix opts]
   (route "donkey.static/resources-route" path
          #(resources-handler prefix (assoc (dissoc opts :handler-mode) :prefix %)) opts)))
