package donkey.ring;

import clojure.lang.IFn;

/**
 * A response body that the application writes over time through a {@link ResponseChannel}:
 * the server sends the status and headers at once (chunked), then calls {@code onOpen} with
 * the channel. This is what Server-Sent Events and other long-lived streams build on. Made by
 * {@code donkey.stream/channel}.
 */
public final class StreamingBody {
  final IFn onOpen;

  /** @param onOpen {@code (fn [channel])}, called once the head has been sent */
  public StreamingBody(IFn onOpen) {
    if (onOpen == null) throw new IllegalArgumentException("a streaming body needs an on-open fn");
    this.onOpen = onOpen;
  }
}
