package donkey.kernel.internals;

/**
 * Decides, on the event loop, whether a connection's flush goes out now ({@link FlushGate}).
 */
public interface FlushPolicy {
  /** True to hold this flush until {@link FlushGate#release}. */
  boolean hold();
}
