package donkey.files;

import java.io.IOException;
import java.net.JarURLConnection;
import java.net.URL;
import java.net.URLConnection;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Finds the file a request's path segments ({@link StaticPath}) name under a directory or a
 * classpath prefix: index files for a directory, the redirect of a directory asked for without
 * its slash, precompressed siblings, and, without {@code :allow-symlinks?}, nothing reached
 * through a link that leads out of the root. Owns the caches that spare a request the costly
 * look-ups (a directory's real path, a file's missing siblings), each trusted for a second.
 *
 * <p>Threading: any thread; the caches are concurrent maps.
 */
final class FileLookup {
  private static final long RECHECK_NANOS = 1_000_000_000L;

  private final Path root;
  private final Path realRoot;
  private final String resourcePrefix;
  private final ClassLoader loader;
  private final String[] indexFiles;
  private final boolean followSymlinks;

  /** A lookup under the directory {@code root} ({@code loader} null) or a classpath prefix. */
  FileLookup(Path root, String resourcePrefix, ClassLoader loader, String[] indexFiles,
             boolean followSymlinks) throws IOException {
    this.root = root;
    this.realRoot = root == null ? null : root.toRealPath();
    this.resourcePrefix = resourcePrefix;
    this.loader = loader;
    this.indexFiles = indexFiles;
    this.followSymlinks = followSymlinks;
  }

  /** Signals a directory asked for without its trailing slash. */
  static final class Redirect extends Exception {
    Redirect() {
      super(null, null, false, false);
    }
  }

  Found find(List<String> segments, boolean slash) throws IOException, Redirect {
    return root != null ? findFile(segments, slash) : findResource(segments, slash);
  }

  private Found findFile(List<String> segments, boolean slash) throws IOException, Redirect {
    Path p = root;
    for (String s : segments) p = p.resolve(s);
    p = p.normalize();
    if (!p.startsWith(root)) return null;
    BasicFileAttributes a = attributes(p);
    if (a == null) return null;
    if (a.isDirectory()) {
      if (!slash) {
        for (String index : indexFiles) {
          if (attributes(p.resolve(index)) != null) throw new Redirect();
        }
        return null;
      }
      for (String index : indexFiles) {
        Path ip = p.resolve(index);
        BasicFileAttributes ia = attributes(ip);
        if (ia != null && ia.isRegularFile()) return found(ip, ia);
      }
      return null;
    }
    return a.isRegularFile() && !slash ? found(p, a) : null;
  }

  private Found found(Path p, BasicFileAttributes a) {
    return new Found(p, null, p.getFileName().toString(), a.size(),
        a.lastModifiedTime().toMillis());
  }

  /**
   * The attributes of {@code p} when it may be served (null when it does not exist, cannot be
   * read, or leads out of the root through a link that is not allowed). Without
   * {@code :allow-symlinks?}, {@code p} itself is looked at without following a link (a link
   * is resolved and checked), and its directory's real path is checked once a second at most
   * ({@link #inRoot}): a real path costs a system call per component of the path.
   */
  private BasicFileAttributes attributes(Path p) throws IOException {
    try {
      if (followSymlinks) return Files.readAttributes(p, BasicFileAttributes.class);
      BasicFileAttributes a = Files.readAttributes(p, BasicFileAttributes.class,
          LinkOption.NOFOLLOW_LINKS);
      if (a.isSymbolicLink()) {
        if (!p.toRealPath().startsWith(realRoot)) return null;
        a = Files.readAttributes(p, BasicFileAttributes.class);
      }
      if (p.equals(root)) return a;
      Path dir = p.getParent();
      return dir != null && inRoot(dir) ? a : null;
    } catch (NoSuchFileException | java.nio.file.AccessDeniedException e) {
      return null;
    }
  }

  /** Directories whose real path was found inside the root, and when (System.nanoTime()). */
  private final ConcurrentHashMap<Path, Long> checkedDirs =
      new ConcurrentHashMap<>();
  private static final int MAX_CHECKED_DIRS = 4096;

  /** Whether the directory {@code dir} really lies under the root, links resolved. */
  private boolean inRoot(Path dir) throws IOException {
    long now = System.nanoTime();
    Long at = checkedDirs.get(dir);
    if (at != null && now - at < RECHECK_NANOS) return true;
    if (!dir.toRealPath().startsWith(realRoot)) {
      checkedDirs.remove(dir);
      return false;
    }
    if (checkedDirs.size() >= MAX_CHECKED_DIRS) checkedDirs.clear();
    checkedDirs.put(dir, now);
    return true;
  }

  private Found findResource(List<String> segments, boolean slash) throws IOException, Redirect {
    String name = String.join("/", segments);
    String base = resourcePrefix.isEmpty() ? name
        : name.isEmpty() ? resourcePrefix : resourcePrefix + "/" + name;
    if (!slash && !name.isEmpty()) {
      Found f = resource(base);
      if (f != null) return f;
    }
    for (String index : indexFiles) {
      Found f = resource(base.isEmpty() ? index : base + "/" + index);
      if (f != null) {
        if (!slash) throw new Redirect();
        return f;
      }
    }
    return null;
  }

  private Found resource(String name) throws IOException {
    URL url = loader.getResource(name);
    if (url == null) return null;
    if ("file".equals(url.getProtocol())) {
      Path p;
      try {
        p = Path.of(url.toURI());
      } catch (java.net.URISyntaxException | IllegalArgumentException e) {
        return null;
      }
      BasicFileAttributes a = Files.readAttributes(p, BasicFileAttributes.class);
      return a.isRegularFile() ? found(p, a) : null;
    }
    URLConnection c = url.openConnection();
    c.setUseCaches(false);
    if (c instanceof JarURLConnection) {
      java.util.jar.JarEntry e = ((JarURLConnection) c).getJarEntry();
      if (e == null || e.isDirectory()) return null;
      long modified = e.getTime() < 0 ? 0 : e.getTime();
      return new Found(null, url, name.substring(name.lastIndexOf('/') + 1), e.getSize(),
          modified);
    }
    long length = c.getContentLengthLong();
    if (length < 0) return null;
    return new Found(null, url, name.substring(name.lastIndexOf('/') + 1), length,
        Math.max(0, c.getLastModified()));
  }

  /** Files found without precompressed siblings, and when (System.nanoTime()). */
  private final ConcurrentHashMap<Path, Long> noSiblings =
      new ConcurrentHashMap<>();

  /**
   * Whether {@code f} has no precompressed sibling, as last seen less than a second ago: two
   * file look-ups a request saved for the common case.
   */
  boolean knownAlone(Found f) {
    Long at = noSiblings.get(f.path);
    return at != null && System.nanoTime() - at < RECHECK_NANOS;
  }

  void alone(Found f) {
    if (noSiblings.size() >= MAX_CHECKED_DIRS) noSiblings.clear();
    noSiblings.put(f.path, System.nanoTime());
  }

  /** The precompressed sibling of {@code f} ({@code name.gz}), when it is a file to serve. */
  Found sibling(Found f, String ext) {
    Path p = f.path.resolveSibling(f.path.getFileName() + ext);
    // the common case, no sibling, without the exception a missing file's attributes throw
    if (!p.toFile().isFile()) return null;
    try {
      BasicFileAttributes a = attributes(p);
      return a != null && a.isRegularFile() ? found(p, a) : null;
    } catch (IOException e) {
      return null;
    }
  }
}
