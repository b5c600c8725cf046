package donkey.route;

/**
 * What one event loop's last request to a literal route worked out: its path and that path's
 * precomputed outcomes ({@link Router#match(String, String, String, String, PathMemo)}). A
 * request usually repeats the previous one's target, and the kernel hands such a request the
 * same path instance again, so the memo answers it with one identity comparison instead of
 * finding the path among the table's.
 *
 * <p>Threading: one instance per event loop, read and written by that loop only.
 */
public final class PathMemo {
  Router router;
  String path;
  Router.Match[] outcomes;
}
