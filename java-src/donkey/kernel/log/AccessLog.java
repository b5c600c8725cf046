package donkey.kernel.log;

import java.lang.System.Logger.Level;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Locale;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The access log ({@code :access-log}): one line per request, through {@code System.Logger}
 * {@code "donkey.access"} at INFO, so that a logging library bridged to it (SLF4J, Logback, Log4j
 * through their JUL bridges) gets it among its logs. The event loop only queues an entry; a
 * thread of the log's own formats and writes it, so a slow appender never holds a loop. When
 * that thread falls 8192 entries behind, entries are dropped and the count is logged (WARNING).
 *
 * <p>Formats: {@code :common}, Apache's common log format followed by the duration in
 * milliseconds and the route in quotes ({@code 127.0.0.1 - - [29/Nov/2026:06:40:00 +0000] "GET
 * /a?b=1 HTTP/1.1" 200 1234 0.412 "GET /a"}); {@code :json}, one JSON object per line.
 *
 * <p>Threading: {@link #record} from the event loops; {@link #close} once, at stop.
 */
public final class AccessLog {
  private static final System.Logger LOG = System.getLogger("donkey.access");
  private static final int CAPACITY = 8192;
  /** Request targets longer than this are cut in the log (the request line may be 8 KiB+). */
  private static final int MAX_TARGET = 2048;
  private static final DateTimeFormatter CLF_TIME =
      DateTimeFormatter.ofPattern("dd/MMM/yyyy:HH:mm:ss Z", Locale.US).withZone(ZoneOffset.UTC);

  private final boolean json;
  private final ArrayBlockingQueue<Entry> queue = new ArrayBlockingQueue<>(CAPACITY);
  private final AtomicLong dropped = new AtomicLong();
  private final Thread writer;
  private volatile boolean closing;

  /** One request, as the loop hands it over. */
  private static final class Entry {
    final long startMillis;
    final String remote;
    final String method;
    final String target;
    final String protocol;
    final int status;
    final long bytes;
    final long durationNanos;
    final String route;

    Entry(long startMillis, String remote, String method, String target, String protocol,
          int status, long bytes, long durationNanos, String route) {
      this.startMillis = startMillis;
      this.remote = remote;
      this.method = method;
      this.target = target;
      this.protocol = protocol;
      this.status = status;
      this.bytes = bytes;
      this.durationNanos = durationNanos;
      this.route = route;
    }
  }

  /** @param format {@code "common"} or {@code "json"} */
  public AccessLog(String format) {
    this.json = "json".equals(format);
    this.writer = new Thread(this::drain, "donkey-access-log");
    writer.setDaemon(true);
    writer.start();
  }

  /**
   * Event loop: logs one request that ended: its start (epoch ms), the client's address, the
   * method, the target as requested (path and query), the protocol, the status, the response
   * body bytes written, how long it took, and its route (null: none). Never blocks.
   */
  public void record(long startMillis, String remote, String method, String target,
                     String protocol, int status, long bytes, long durationNanos, String route) {
    if (!queue.offer(new Entry(startMillis, remote, method, target, protocol, status, bytes,
        durationNanos, route))) {
      dropped.incrementAndGet();
    }
  }

  /** At stop: writes what is queued (for at most a second), then ends the writer thread. */
  public void close() {
    closing = true;
    try {
      writer.join(1000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    writer.interrupt();
  }

  private void drain() {
    StringBuilder sb = new StringBuilder(256);
    while (true) {
      Entry e;
      try {
        e = queue.poll(100, TimeUnit.MILLISECONDS);
      } catch (InterruptedException ie) {
        return;
      }
      long lost = dropped.getAndSet(0);
      if (lost > 0) {
        LOG.log(Level.WARNING, "the access log fell behind: " + lost + " entries dropped");
      }
      if (e == null) {
        if (closing) return;
        continue;
      }
      sb.setLength(0);
      try {
        LOG.log(Level.INFO, json ? json(sb, e) : common(sb, e));
      } catch (RuntimeException t) {
        // a failing appender must not end the log
      }
    }
  }

  static String common(StringBuilder sb, Entry e) {
    sb.append(e.remote == null ? "-" : e.remote).append(" - - [")
        .append(CLF_TIME.format(Instant.ofEpochMilli(e.startMillis))).append("] \"");
    quoted(sb, e.method).append(' ');
    quoted(sb, cut(e.target)).append(' ');
    quoted(sb, e.protocol).append("\" ").append(e.status).append(' ')
        .append(e.bytes > 0 ? Long.toString(e.bytes) : "-").append(' ');
    millis(sb, e.durationNanos).append(" \"");
    quoted(sb, e.route == null ? "-" : e.route).append('"');
    return sb.toString();
  }

  static String json(StringBuilder sb, Entry e) {
    sb.append("{\"time\":\"").append(Instant.ofEpochMilli(e.startMillis)).append("\",\"remote\":");
    string(sb, e.remote).append(",\"method\":");
    string(sb, e.method).append(",\"target\":");
    string(sb, cut(e.target)).append(",\"protocol\":");
    string(sb, e.protocol).append(",\"status\":").append(e.status)
        .append(",\"bytes\":").append(e.bytes).append(",\"duration_ms\":");
    millis(sb, e.durationNanos).append(",\"route\":");
    return string(sb, e.route).append('}').toString();
  }

  private static String cut(String s) {
    return s != null && s.length() > MAX_TARGET ? s.substring(0, MAX_TARGET) + "..." : s;
  }

  private static StringBuilder millis(StringBuilder sb, long nanos) {
    long micros = Math.max(0, nanos) / 1000;
    sb.append(micros / 1000).append('.');
    long frac = micros % 1000;
    if (frac < 100) sb.append('0');
    if (frac < 10) sb.append('0');
    return sb.append(frac);
  }

  /** {@code s} inside a CLF quoted field: quotes, backslashes and control bytes escaped. */
  private static StringBuilder quoted(StringBuilder sb, String s) {
    if (s == null) return sb.append('-');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"' || c == '\\') {
        sb.append('\\').append(c);
      } else if (c < 0x20 || c == 0x7f) {
        sb.append(String.format("\\x%02x", (int) c));
      } else {
        sb.append(c);
      }
    }
    return sb;
  }

  /** {@code s} as a JSON string, or null. */
  private static StringBuilder string(StringBuilder sb, String s) {
    if (s == null) return sb.append("null");
    sb.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"': sb.append("\\\""); break;
        case '\\': sb.append("\\\\"); break;
        case '\n': sb.append("\\n"); break;
        case '\r': sb.append("\\r"); break;
        case '\t': sb.append("\\t"); break;
        default:
          if (c < 0x20 || c == 0x7f || c == 0x2028 || c == 0x2029) {
            sb.append(String.format("\\u%04x", (int) c));
          } else {
            sb.append(c);
          }
      }
    }
    return sb.append('"');
  }
}
