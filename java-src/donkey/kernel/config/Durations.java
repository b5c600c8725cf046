package donkey.kernel.config;

/**
 * The one conversion of the options' milliseconds into the nanoseconds the kernel's clocks
 * count. The options take Jetty's {@code Long/MAX_VALUE} (and anything past 2^63 ns), which
 * multiplied out would wrap to a short or negative time. Any thread; stateless.
 */
public final class Durations {
  private Durations() {}

  /** {@code ms} in nanoseconds, at most {@code Long.MAX_VALUE}; 0 or less stays as it is. */
  public static long nanos(long ms) {
    return ms > Long.MAX_VALUE / 1_000_000L ? Long.MAX_VALUE : ms * 1_000_000L;
  }
}
