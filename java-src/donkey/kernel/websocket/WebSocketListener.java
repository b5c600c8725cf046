package donkey.kernel.websocket;

import clojure.lang.IFn;
import clojure.lang.IPersistentMap;
import clojure.lang.IRecord;
import clojure.lang.Keyword;

/**
 * The callbacks of a Ring WebSocket listener, as the kernel calls them: each a Clojure fn taking
 * the socket first, as {@code ring.websocket.protocols/Listener}'s methods take it after the
 * listener. A plain map listener ({@code {:on-open f ...}}) is read here; any other listener is
 * adapted by the {@code (fn [listener])} donkey builds when {@code ring.websocket.protocols} is
 * on the classpath (see {@code donkey.websocket}).
 *
 * <p>Threading: immutable once built; the callbacks run as {@link WebSocket} says.
 */
public final class WebSocketListener {
  private static final Keyword ON_OPEN = Keyword.intern("on-open");
  private static final Keyword ON_MESSAGE = Keyword.intern("on-message");
  private static final Keyword ON_PING = Keyword.intern("on-ping");
  private static final Keyword ON_PONG = Keyword.intern("on-pong");
  private static final Keyword ON_ERROR = Keyword.intern("on-error");
  private static final Keyword ON_CLOSE = Keyword.intern("on-close");

  /** {@code (fn [socket])}, or null. */
  final IFn onOpen;
  /** {@code (fn [socket message])}: a String or a java.nio.ByteBuffer; or null. */
  final IFn onMessage;
  /** {@code (fn [socket data])}; null: the kernel answers each ping with a pong itself. */
  final IFn onPing;
  /** {@code (fn [socket data])}, or null. */
  final IFn onPong;
  /** {@code (fn [socket throwable])}, or null. */
  final IFn onError;
  /** {@code (fn [socket code reason])}, or null. */
  final IFn onClose;

  /** Any of the fns may be null, for a callback the listener does not have. */
  public WebSocketListener(IFn onOpen, IFn onMessage, IFn onPing, IFn onPong, IFn onError,
                           IFn onClose) {
    this.onOpen = onOpen;
    this.onMessage = onMessage;
    this.onPing = onPing;
    this.onPong = onPong;
    this.onError = onError;
    this.onClose = onClose;
  }

  /**
   * The callbacks of {@code listener}, the value of a response's
   * {@code :ring.websocket/listener}: a plain map of {@code :on-open} ... {@code :on-close}
   * (and {@code :on-ping}) to fns, read here whether or not ring-core is on the classpath;
   * anything else through {@code adapter} ({@code (fn [listener])} returning a
   * WebSocketListener, or nil when the listener does not satisfy the Listener protocol).
   *
   * @param adapter null when {@code ring.websocket.protocols} is not on the classpath
   * @throws IllegalArgumentException when the listener is neither
   */
  public static WebSocketListener of(Object listener, IFn adapter) {
    if (listener instanceof IPersistentMap && !(listener instanceof IRecord)) {
      IPersistentMap m = (IPersistentMap) listener;
      return new WebSocketListener(fn(m, ON_OPEN), fn(m, ON_MESSAGE), fn(m, ON_PING),
          fn(m, ON_PONG), fn(m, ON_ERROR), fn(m, ON_CLOSE));
    }
    Object adapted = adapter == null || listener == null ? null : adapter.invoke(listener);
    if (adapted instanceof WebSocketListener) return (WebSocketListener) adapted;
    throw new IllegalArgumentException(":ring.websocket/listener must be a map of :on-open, "
        + ":on-message, ... fns or satisfy ring.websocket.protocols/Listener, got "
        + (listener == null ? "nil" : listener.getClass().getName()));
  }

  private static IFn fn(IPersistentMap m, Keyword k) {
    Object f = m.valAt(k);
    if (f == null) return null;
    if (f instanceof IFn) return (IFn) f;
    throw new IllegalArgumentException("the listener's " + k + " must be a function, got "
        + f.getClass().getName());
  }
}
