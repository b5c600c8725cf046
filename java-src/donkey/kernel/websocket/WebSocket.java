package donkey.kernel.websocket;

import clojure.lang.IFn;
import donkey.kernel.config.ServerConfig;
import donkey.kernel.workers.WorkerPool;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.handler.codec.http.websocketx.BinaryWebSocketFrame;
import io.netty.handler.codec.http.websocketx.PingWebSocketFrame;
import io.netty.handler.codec.http.websocketx.PongWebSocketFrame;
import io.netty.handler.codec.http.websocketx.TextWebSocketFrame;
import io.netty.handler.codec.http.websocketx.WebSocketFrame;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.RejectedExecutionException;

/**
 * An open WebSocket: the socket a Ring listener is given (donkey extends
 * {@code ring.websocket.protocols/Socket} and {@code AsyncSocket} to this class when ring-core
 * 1.11+ is on the classpath; {@code donkey.websocket} has the same operations as functions).
 * Its connection side, the Netty handler that replaces the connection's HTTP handler once the
 * handshake is done (the kernel's {@code WebSocketUpgrade}), is its {@link WebSocketSession};
 * what this class does is send, within the bound of its {@link WebSocketSendQueue}.
 *
 * <p>What it does with frames: fragments are reassembled into one message (a String for text,
 * a heap ByteBuffer for binary) within {@code :ws-max-text-size} / {@code :ws-max-binary-size},
 * else the socket is closed with 1009; a ping is answered with a pong unless the listener has
 * {@code on-ping}; a close frame is answered with one echoing its code, then the connection is
 * closed. The answer follows whatever the listener sends in its callbacks for the messages and
 * pings that came before the close: a sync listener's callbacks run on a worker after the close
 * has been read, and the answer waits for them, {@link WebSocketSession#CLOSE_WAIT_MS} at
 * most. Frames that break the protocol (an unmasked frame, a frame over
 * {@code :ws-max-frame-size}, invalid UTF-8 in text, a bad close frame, an RSV bit no
 * extension defined) are found by Netty's decoder and validator or by the session, which
 * answers them with a close (1002, 1009, 1007) and then closes the connection.
 *
 * <p>Sending and its bound: every frame sent counts its payload as queued until Netty has
 * written it to the socket. Past {@code :ws-max-queued-bytes} (an empty queue always takes one
 * message, whatever its size), {@link #sendAsync} does not queue and calls its fail callback
 * with an IOException, and {@link #send} waits for room (on the event loop, where it must not
 * wait, it throws that IOException instead). So a client that stops reading holds at most the
 * bound plus one message of heap, and a sender that waits is released by
 * {@code :ws-idle-timeout} at the latest, which closes a socket on which nothing moves.
 *
 * <p>Threading: the socket's methods may be called from any thread. The session runs on the
 * connection's event loop, where its state lives. Listener callbacks run as the handler that
 * answered the upgrade ran: on the event loop for an async (non-blocking) handler, else on the
 * worker pool, one at a time and in order for each socket ({@link WebSocketCallbacks}), so a
 * callback that blocks holds a worker, never the loop or other sockets. {@code on-close} runs
 * exactly once, last, if and only if {@code on-open} ran, with the code and reason of the close
 * that ended the socket: the peer's when the peer closed first (1005 when its close had no
 * code), this side's when it closed first (the application's, 1001 for an idle socket or a
 * server that stops, 1002/1007/1009 for a protocol error or limit, 1011 after a callback
 * threw), and 1006 when the connection ended without a close.
 */
public final class WebSocket {
  private static final System.Logger LOG = System.getLogger("donkey");

  private final Channel channel;
  private final WebSocketSendQueue queue;
  /** The connection side, the handler in the pipeline. */
  final WebSocketSession session;
  /** The request line's target, for log lines. */
  private final String where;

  WebSocket(WebSockets loop, Channel channel, WebSocketListener listener,
            WorkerPool workers, String where) {
    this.channel = channel;
    this.where = where;
    // a sender waits for room at most as long as the socket may idle, else the connection
    ServerConfig c = loop.config;
    this.queue = new WebSocketSendQueue(c.wsMaxQueuedBytes,
        c.wsIdleTimeoutMs > 0 ? c.wsIdleTimeoutMs : c.idleTimeoutMs);
    this.session = new WebSocketSession(this, loop, channel, listener, workers, queue, where);
  }

  // ---- the socket ------------------------------------------------------------------------------

  /**
   * Any thread: true while messages can be sent: connected, {@link #close} not called, and no
   * close sent. The peer's close is answered once a sync listener's callbacks for what came
   * before it have run, so that they can still send; it is false from then on.
   */
  public boolean isOpen() {
    return queue.isOpen();
  }

  /**
   * Any thread: sends {@code message} (a CharSequence as a text message, a ByteBuffer or
   * byte[] as a binary one; the bytes are copied, so the caller may reuse its buffer). Off the
   * event loop it waits while more than {@code :ws-max-queued-bytes} are queued; on the event
   * loop it does not wait and throws instead. Returns once the message is queued.
   *
   * @throws IOException when the socket is closed (or closes while waiting), or, on the event
   *     loop, when the queue is over its bound
   * @throws IllegalArgumentException for another type of message
   */
  public void send(Object message) throws IOException {
    WebSocketFrame f = dataFrame(message);
    queue.reserve(f, !channel.eventLoop().inEventLoop());
    write(f, null, null, true);
  }

  /**
   * Any thread, never waits: sends {@code message} as {@link #send} does, then calls
   * {@code succeed} ({@code (fn [])}) once it has been written to the socket, or {@code fail}
   * ({@code (fn [throwable])}) when it could not be: at once, on the calling thread, with an
   * IOException when the socket is closed or more than {@code :ws-max-queued-bytes} are queued
   * (the message is then not sent); later, on the event loop, when the connection fails. The
   * callbacks must not block; either may be nil.
   *
   * @throws IllegalArgumentException for another type of message
   */
  public void sendAsync(Object message, IFn succeed, IFn fail) {
    WebSocketFrame f = dataFrame(message);
    try {
      queue.reserve(f, false);
    } catch (IOException e) {
      callback(fail, e, where);
      return;
    }
    write(f, succeed, fail, true);
  }

  /**
   * Any thread: sends a ping with {@code data} (at most 125 bytes; null for none), with the
   * bound and waiting of {@link #send}.
   */
  public void ping(ByteBuffer data) throws IOException {
    WebSocketFrame f = new PingWebSocketFrame(control(data));
    queue.reserve(f, !channel.eventLoop().inEventLoop());
    write(f, null, null, false);
  }

  /** Any thread: sends an unsolicited pong with {@code data}, as {@link #ping}. */
  public void pong(ByteBuffer data) throws IOException {
    WebSocketFrame f = new PongWebSocketFrame(control(data));
    queue.reserve(f, !channel.eventLoop().inEventLoop());
    write(f, null, null, false);
  }

  /**
   * Any thread, never waits: starts the close handshake with {@code code} and {@code reason}
   * (at most 123 bytes of UTF-8): from this call on {@link #isOpen} is false and no message can
   * be sent, even before the close frame has gone out, and the connection closes
   * once the peer has answered, or {@link WebSocketSession#CLOSE_WAIT_MS} after the close was
   * sent. Does nothing when a close was already sent or received.
   *
   * @throws IllegalArgumentException for a code a close frame may not carry, or a longer reason
   */
  public void close(int code, String reason) {
    String r = reason == null ? "" : reason;
    if (!(code >= 1000 && code <= 1003 || code >= 1007 && code <= 1014
        || code >= 3000 && code <= 4999)) {
      throw new IllegalArgumentException("invalid WebSocket close code " + code);
    }
    if (ByteBufUtil.utf8Bytes(r) > 123) {
      throw new IllegalArgumentException("a WebSocket close reason has at most 123 bytes");
    }
    // shut here, not when the loop gets to the close: from this call on open? is false and no
    // send is taken, whichever thread asks and however busy the loop is
    queue.shut();
    session.onLoop(() -> session.closeLocally(code, r));
  }

  /** Bytes queued for the socket and not yet written, for tests and monitoring. Any thread. */
  public long queuedBytes() {
    return queue.queuedBytes();
  }

  @Override
  public String toString() {
    return "#<donkey.WebSocket " + where + (queue.isOpen() ? " open" : " closed") + ">";
  }

  private static WebSocketFrame dataFrame(Object message) {
    if (message instanceof CharSequence) {
      // String's own encoder (vectorized for ASCII), not a CharsetEncoder over a CharBuffer
      return new TextWebSocketFrame(Unpooled.wrappedBuffer(
          message.toString().getBytes(StandardCharsets.UTF_8)));
    }
    if (message instanceof ByteBuffer) {
      return new BinaryWebSocketFrame(Unpooled.copiedBuffer(((ByteBuffer) message).duplicate()));
    }
    if (message instanceof byte[]) {
      return new BinaryWebSocketFrame(Unpooled.copiedBuffer((byte[]) message));
    }
    throw new IllegalArgumentException("a WebSocket message is a CharSequence, a ByteBuffer or a "
        + "byte[], not " + (message == null ? "nil" : message.getClass().getName()));
  }

  private static ByteBuf control(ByteBuffer data) {
    if (data == null) return Unpooled.EMPTY_BUFFER;
    if (data.remaining() > 125) {
      throw new IllegalArgumentException("ping and pong data has at most 125 bytes");
    }
    return Unpooled.copiedBuffer(data.duplicate());
  }

  /**
   * Any thread: writes a frame the queue counted, on the loop, where a frame that comes
   * after this side's close is dropped ({@link WebSocketSession#write}).
   */
  private void write(WebSocketFrame f, IFn succeed, IFn fail, boolean application) {
    long n = f.content().readableBytes();
    if (channel.eventLoop().inEventLoop()) {
      session.write(f, n, succeed, fail, application);
      return;
    }
    try {
      channel.eventLoop().execute(() -> session.write(f, n, succeed, fail, application));
    } catch (RejectedExecutionException e) {
      f.release();
      queue.written(n);
      callback(fail, new IOException("the server has stopped"), where);
    }
  }

  /** The thread that has the outcome: calls a send's {@code succeed} or {@code fail}, if any. */
  static void callback(IFn f, Throwable t, String where) {
    if (f == null) return;
    try {
      if (t == null) {
        f.invoke();
      } else {
        f.invoke(t);
      }
    } catch (Throwable e) {
      LOG.log(Level.ERROR, "a WebSocket send callback failed for " + where, e);
    }
  }

}
