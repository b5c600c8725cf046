package donkey.codec;

import clojure.lang.IPersistentMap;
import java.io.File;
import java.util.Arrays;
import java.util.List;

/**
 * A parsed multipart body: the parameter map and the temp files behind its file parts.
 *
 * <p>Contract: the temp files belong to whoever holds this object, who deletes them with
 * {@link #deleteTempFiles} (or {@link #close}) once the request is answered. A file moved away
 * beforehand (for example with {@code Files.move}) is not touched: deletion goes by path.
 *
 * <p>Threading: immutable apart from the files on disk; {@link #deleteTempFiles} may be called
 * from any thread, any number of times.
 */
public final class MultipartResult implements AutoCloseable {
  private final IPersistentMap params;
  private final File[] tempFiles;

  MultipartResult(IPersistentMap params, File[] tempFiles) {
    this.params = params;
    this.tempFiles = tempFiles;
  }

  /**
   * The parameters: names (Strings, or Keywords when asked for) to a String, a file map
   * {@code {:filename :content-type :tempfile :size}} (with a store: what it returned), or a
   * vector of those for a repeated name, in arrival order.
   */
  public IPersistentMap params() {
    return params;
  }

  /** The temp files written, in arrival order (unmodifiable); none with a store. */
  public List<File> tempFiles() {
    return List.of(tempFiles);
  }

  /** True if {@code o} is one of this body's temp files (the same {@code File} object). */
  public boolean isTempFile(Object o) {
    for (File f : tempFiles) {
      if (f == o) return true;
    }
    return false;
  }

  /** Deletes the temp files that still exist; never throws. */
  public void deleteTempFiles() {
    Multipart.delete(Arrays.asList(tempFiles));
  }

  /** Same as {@link #deleteTempFiles}. */
  @Override
  public void close() {
    deleteTempFiles();
  }
}
