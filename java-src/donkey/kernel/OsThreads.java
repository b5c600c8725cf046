package donkey.kernel;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * What the OS says of a platform thread: its id, and whether it is running or waiting for a
 * core (as opposed to sleeping in a system call, a socket read say). Linux only, through
 * {@code /proc}; elsewhere nothing is known and the callers fall back.
 *
 * <p>Threading: any thread; {@link #currentTid} answers for the calling platform thread.
 */
final class OsThreads {
  private static final Path SELF = Paths.get("/proc/thread-self");

  private OsThreads() {}

  /**
   * The calling thread's OS id ({@code /proc/thread-self} links to {@code <pid>/task/<tid>}),
   * or -1 when the OS does not say. Call it from a platform thread: a virtual thread would get
   * its carrier's id.
   */
  static int currentTid() {
    try {
      String link = Files.readSymbolicLink(SELF).toString();
      return Integer.parseInt(link.substring(link.lastIndexOf('/') + 1));
    } catch (IOException | RuntimeException e) {
      return -1;
    }
  }

  /**
   * True when the thread {@code tid} of this process is running or runnable (state {@code R}
   * in {@code /proc/self/task/<tid>/stat}); false when it sleeps or waits in the kernel, has
   * exited, or the state cannot be read.
   */
  static boolean running(int tid) {
    byte[] stat;
    try {
      stat = Files.readAllBytes(Paths.get("/proc/self/task/" + tid + "/stat"));
    } catch (IOException | RuntimeException e) {
      return false;
    }
    // "<tid> (<name>) <state> ...": the name may hold spaces and parentheses, so the state is
    // the first field after the last ')'
    String s = new String(stat, StandardCharsets.US_ASCII);
    int close = s.lastIndexOf(')');
    return close >= 0 && close + 2 < s.length() && s.charAt(close + 2) == 'R';
  }
}
