package donkey.kernel.workers;

import java.io.Closeable;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;

/**
 * What the OS says of a platform thread: whether it is running or waiting for a core, as
 * opposed to asleep in the kernel (parked, sleeping, waiting for a lock, in a socket read).
 * Linux only, through {@code /proc}; elsewhere nothing is known and the callers fall back.
 *
 * <p>Threading: {@link #self} answers for the calling platform thread; a {@link Stat} is read
 * by one thread at a time.
 *
 * <p>Public for donkey's own tests; it is the kernel's, with no compatibility promise outside it.
 */
public final class OsThreads {
  private OsThreads() {}

  /**
   * The calling thread's {@code /proc/self/task/<tid>/stat}, held open, or null where the OS
   * does not say ({@code /proc/thread-self} links to {@code <pid>/task/<tid>}). Call it from
   * a platform thread: a virtual thread would get its carrier's. The caller closes it.
   */
  public static Stat self() {
    try {
      String link = Files.readSymbolicLink(Paths.get("/proc/thread-self")).toString();
      int tid = Integer.parseInt(link.substring(link.lastIndexOf('/') + 1));
      Path stat = Paths.get("/proc/self/task/" + tid + "/stat");
      return new Stat(FileChannel.open(stat, StandardOpenOption.READ));
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  /**
   * One thread's {@code stat} file, kept open and read again from its start on each
   * {@link #running} call: several times cheaper than opening, reading and closing it by name,
   * which the pool's monitor would pay for every thread it looks at, every tick.
   */
  public static final class Stat implements Closeable {
    private final FileChannel file;
    private final ByteBuffer buf = ByteBuffer.allocate(1024);

    private Stat(FileChannel file) {
      this.file = file;
    }

    /**
     * True when the thread is running or runnable (state {@code R}); false when it sleeps or
     * waits in the kernel, has exited, or the state cannot be read (this handle closed).
     */
    public boolean running() {
      buf.clear();
      int n;
      try {
        n = file.read(buf, 0);
      } catch (IOException e) {
        return false;
      }
      // "<tid> (<name>) <state> ...": the name may hold spaces and parentheses, so the state
      // is the first field after the last ')'
      for (int i = n - 1; i >= 0; i--) {
        if (buf.get(i) == ')') return i + 2 < n && buf.get(i + 2) == 'R';
      }
      return false;
    }

    @Override
    public void close() {
      try {
        file.close();
      } catch (IOException e) {
        // nothing was written; the descriptor is released either way
      }
    }
  }
}
