package donkey.kernel.tls;

import donkey.kernel.config.ServerConfig;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.Supplier;
import java.util.zip.CRC32;

/**
 * {@code :keystore-scan-interval} (ring-jetty's): reloads the TLS settings in use when the
 * contents of their files have changed. Contents, not modification times, which a copy may
 * keep and a coarse file system rounds. A change that cannot be used (a half-written file,
 * say) is logged and the previous settings stay; the next change is tried again.
 *
 * <p>Threading: the server's watchdog thread, every interval; never an event loop (it reads
 * the files, and a reload blocks).
 */
public final class TlsFileWatch {
  private TlsFileWatch() {}

  /**
   * Checks the files of {@code inUse()} every {@code seconds} on {@code watchdog} and calls
   * {@code reload} with it when their contents have changed. Settings reloaded by other means
   * (a new {@code inUse()}) are watched from then on, without a reload.
   */
  public static void start(ScheduledExecutorService watchdog, int seconds, Supplier<ServerConfig> inUse,
                    Consumer<ServerConfig> reload) {
    ServerConfig[] scanned = {inUse.get()};
    long[] print = {fingerprint(scanned[0])};
    watchdog.scheduleWithFixedDelay(() -> {
      ServerConfig c = inUse.get();
      long now = fingerprint(c);
      if (c != scanned[0]) {
        // reloaded by hand: watch the files it named from now on
        scanned[0] = c;
        print[0] = now;
        return;
      }
      if (now == print[0]) return;
      print[0] = now;
      try {
        reload.accept(c);
        System.getLogger("donkey").log(System.Logger.Level.INFO,
            "donkey: the TLS files changed; new connections use them");
      } catch (IllegalArgumentException e) {
        // the files' own fault, said by the option it concerns
        System.getLogger("donkey").log(System.Logger.Level.WARNING,
            "donkey: the TLS files changed but cannot be used, so the previous ones stay: "
            + e.getMessage());
      } catch (RuntimeException e) {
        System.getLogger("donkey").log(System.Logger.Level.WARNING,
            "donkey: the TLS files changed but could not be loaded, so the previous ones stay",
            e);
      }
    }, seconds, seconds, TimeUnit.SECONDS);
  }

  /**
   * A checksum of the contents of the TLS files {@code c} names (a key store or trust store
   * given as a path, the PEM files), with a mark for each that cannot be read; 0 when it names
   * none.
   */
  static long fingerprint(ServerConfig c) {
    List<String> files = new ArrayList<>();
    if (c.keystore instanceof String) files.add((String) c.keystore);
    if (c.truststore instanceof String) files.add((String) c.truststore);
    for (Object v : new Object[] {c.sslCert, c.sslKey}) {
      if (v instanceof String) files.add((String) v);
      if (v instanceof List) {
        for (Object p : (List<?>) v) files.add(String.valueOf(p));
      }
    }
    if (files.isEmpty()) return 0;
    CRC32 crc = new CRC32();
    for (String f : files) {
      try {
        crc.update(Files.readAllBytes(Path.of(f)));
      } catch (IOException | RuntimeException e) {
        crc.update(-1);
      }
      crc.update(0);
    }
    return crc.getValue() | 1L << 32;
  }
}
