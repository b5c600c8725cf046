package donkey.ring;

import clojure.lang.IFn;

/**
 * A response body that the application writes over time through a {@link ResponseChannel}:
 * the server sends the status and headers at once (chunked), then calls {@code onOpen} with
 * the channel. This is what Server-Sent Events and other long-lived streams build on. Made by
 * {@code donkey.stream/channel}.
 */
public final class StreamingBody {
  /** The default of {@link #maxQueued}. */
  public static final long MAX_QUEUED = 8L * 1024 * 1024;

  final IFn onOpen;
  /**
   * The most bytes sent and not yet written to the client; a send past it closes the
   * connection (a client that stopped reading).
   */
  final long maxQueued;

  /** @param onOpen {@code (fn [channel])}, called once the head has been sent */
  public StreamingBody(IFn onOpen) {
    this(onOpen, MAX_QUEUED);
  }

  /**
   * @param onOpen {@code (fn [channel])}, called once the head has been sent
   * @param maxQueued bytes that may wait for a slow client before its connection is closed
   * @throws IllegalArgumentException for a null fn or a limit below 1
   */
  public StreamingBody(IFn onOpen, long maxQueued) {
    if (onOpen == null) throw new IllegalArgumentException("a streaming body needs an on-open fn");
    if (maxQueued < 1) throw new IllegalArgumentException("maxQueued must be >= 1, got " + maxQueued);
    this.onOpen = onOpen;
    this.maxQueued = maxQueued;
  }
}
