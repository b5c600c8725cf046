package donkey.kernel;

import clojure.lang.IFn;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.compression.DecompressionException;
import io.netty.handler.codec.http.websocketx.BinaryWebSocketFrame;
import io.netty.handler.codec.http.websocketx.CloseWebSocketFrame;
import io.netty.handler.codec.http.websocketx.ContinuationWebSocketFrame;
import io.netty.handler.codec.http.websocketx.CorruptedWebSocketFrameException;
import io.netty.handler.codec.http.websocketx.PingWebSocketFrame;
import io.netty.handler.codec.http.websocketx.PongWebSocketFrame;
import io.netty.handler.codec.http.websocketx.TextWebSocketFrame;
import io.netty.handler.codec.http.websocketx.WebSocketFrame;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.ScheduledFuture;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * An open WebSocket: the socket a Ring listener is given (donkey extends
 * {@code ring.websocket.protocols/Socket} and {@code AsyncSocket} to this class when ring-core
 * 1.11+ is on the classpath; {@code donkey.websocket} has the same operations as functions),
 * and the Netty handler that replaces the connection's HTTP handler once the handshake is
 * done ({@link WebSocketUpgrade}).
 *
 * <p>What it does with frames: fragments are reassembled into one message (a String for text,
 * a heap ByteBuffer for binary) within {@code :ws-max-text-size} / {@code :ws-max-binary-size},
 * else the socket is closed with 1009; a ping is answered with a pong unless the listener has
 * {@code on-ping}; a close frame is answered with one echoing its code, then the connection is
 * closed. Frames that break the protocol (an unmasked frame, a frame over
 * {@code :ws-max-frame-size}, invalid UTF-8 in text, a bad close frame, an RSV bit no
 * extension defined) are found by Netty's decoder and validator or by this handler, which
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
 * <p>Threading: the socket's methods may be called from any thread. The handler runs on the
 * connection's event loop, where its state lives. Listener callbacks run as the handler that
 * answered the upgrade ran: on the event loop for an async (non-blocking) handler, else on the
 * worker pool, one at a time and in order for each socket ({@link WebSocketCallbacks}), so a callback that
 * blocks holds a worker, never the loop or other sockets. {@code on-close} runs exactly once,
 * last, if and only if {@code on-open} ran, with the code and reason of the close that ended
 * the socket: the peer's when the peer closed first (1005 when its close had no code), this
 * side's when it closed first (the application's, 1001 for an idle socket or a server that
 * stops, 1002/1007/1009 for a protocol error or limit, 1011 after a callback threw), and 1006
 * when the connection ended without a close.
 */
public final class WebSocket {
  private static final System.Logger LOG = System.getLogger("donkey");

  /** How long a close this side sent waits for the peer's close before the connection closes. */
  static final long CLOSE_WAIT_MS = 5_000;

  private final ServerVerticle loop;
  private final Channel channel;
  private final WebSocketListener listener;
  /** Runs callbacks for a sync handler's socket; null: on the event loop. */
  private final WebSocketCallbacks callbacks;
  private final WebSocketSendQueue queue;
  /** The request line's target, for log lines. */
  private final String where;
  final Handler handler = new Handler();

  // loop-confined
  private ChannelHandlerContext ctx;
  private boolean opened;
  private boolean closeSent;
  private boolean closeReceived;
  /** True when the peer's close came before this side sent one: on-close reports the peer's. */
  private boolean peerClosedFirst;
  private boolean closed;
  private int localCode = 1006;
  private String localReason = "";
  private int peerCode = -1;
  private String peerReason = "";
  private ScheduledFuture<?> closeWait;
  private final WebSocketMessages messages;
  /** Frames read and application frames written, counted for the idle sweep. */
  private long reads;
  private long writes;
  private long sweptReads = -1;
  private long sweptWrites = -1;
  private long readAt;
  private long activeAt;
  private long pingedAt;

  WebSocket(ServerVerticle loop, Channel channel, WebSocketListener listener,
            WorkerPool workers, String where) {
    this.loop = loop;
    this.channel = channel;
    this.listener = listener;
    this.callbacks = workers == null ? null
        : new WebSocketCallbacks(workers, () -> onLoop(this::resumeReading));
    ServerConfig cfg = loop.config;
    this.queue = new WebSocketSendQueue(cfg.wsMaxQueuedBytes);
    this.messages = new WebSocketMessages(ServerConfig.wsLimit(cfg.wsMaxTextSize),
        ServerConfig.wsLimit(cfg.wsMaxBinarySize));
    this.where = where;
  }

  // ---- the socket ------------------------------------------------------------------------------

  /** Any thread: true while messages can be sent (no close sent or received, connected). */
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
    queue.reserve(f, Thread.currentThread() != loop.thread);
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
      callback(fail, e);
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
    queue.reserve(f, Thread.currentThread() != loop.thread);
    write(f, null, null, false);
  }

  /** Any thread: sends an unsolicited pong with {@code data}, as {@link #ping}. */
  public void pong(ByteBuffer data) throws IOException {
    WebSocketFrame f = new PongWebSocketFrame(control(data));
    queue.reserve(f, Thread.currentThread() != loop.thread);
    write(f, null, null, false);
  }

  /**
   * Any thread, never waits: starts the close handshake with {@code code} and {@code reason}
   * (at most 123 bytes of UTF-8): no message can be sent after it, and the connection closes
   * once the peer has answered, or {@link #CLOSE_WAIT_MS} after the close was sent. Does
   * nothing when a close was already sent or received.
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
    onLoop(() -> closeLocally(code, r));
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
      return new TextWebSocketFrame(Unpooled.copiedBuffer((CharSequence) message,
          StandardCharsets.UTF_8));
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
   * after this side's close is dropped (a sender may pass {@link #enqueue} just before the
   * close); its completion runs on the loop.
   */
  private void write(WebSocketFrame f, IFn succeed, IFn fail, boolean application) {
    long n = f.content().readableBytes();
    if (Thread.currentThread() == loop.thread) {
      writeOnLoop(f, n, succeed, fail, application);
      return;
    }
    try {
      channel.eventLoop().execute(() -> writeOnLoop(f, n, succeed, fail, application));
    } catch (RejectedExecutionException e) {
      f.release();
      queue.written(n);
      callback(fail, new IOException("the server has stopped"));
    }
  }

  private void writeOnLoop(WebSocketFrame f, long n, IFn succeed, IFn fail,
                           boolean application) {
    if (closeSent || closed) {
      f.release();
      queue.written(n);
      callback(fail, new IOException("the WebSocket is closed"));
      return;
    }
    ChannelFuture done = ctx.writeAndFlush(f);
    done.addListener(future -> {
      queue.written(n);
      if (future.isSuccess()) {
        if (application) writes++;
        callback(succeed, null);
      } else {
        callback(fail, future.cause());
      }
    });
  }

  private void callback(IFn f, Throwable t) {
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

  private void onLoop(Runnable r) {
    if (Thread.currentThread() == loop.thread) {
      r.run();
    } else {
      try {
        channel.eventLoop().execute(r);
      } catch (RejectedExecutionException e) {
        LOG.log(Level.DEBUG, "server stopped before a WebSocket close for {0}", where);
      }
    }
  }

  // ---- the connection (event loop) -------------------------------------------------------------

  /** Event loop: the handshake's 101 has been written: reading starts, on-open runs. */
  void opened(long now) {
    if (!channel.isActive()) return;
    opened = true;
    queue.open();
    readAt = activeAt = pingedAt = now;
    loop.webSockets.add(this);
    dispatch(listener.onOpen, null, 0);
    channel.config().setAutoRead(true);
  }

  /** Event loop: sends a close with {@code code}; the connection closes as {@link #close} says. */
  void closeLocally(int code, String reason) {
    if (closeSent || closed) return;
    closeSent = true;
    localCode = code;
    localReason = reason;
    queue.shut();
    ctx.writeAndFlush(new CloseWebSocketFrame(code, reason)).addListener(done -> {
      if (closeReceived || !done.isSuccess()) channel.close();
    });
    awaitClose();
  }

  /**
   * Event loop, once a close is sent (or on its way): the connection closes
   * {@link #CLOSE_WAIT_MS} later at the latest. Armed when the close is queued, not when it is
   * written: a client that stops reading would otherwise keep its close, and the connection,
   * unwritten forever.
   */
  private void awaitClose() {
    if (closeWait == null && !closed) {
      closeWait = ctx.executor().schedule(() -> {
        channel.close();
      }, CLOSE_WAIT_MS, TimeUnit.MILLISECONDS);
    }
  }

  /**
   * Event loop (a sweep of the loop's sockets): closes with 1001 a socket on which no frame was
   * read and no message written for {@code idleNs} (0: never), and pings one from which nothing
   * was read for {@code pingNs} (0: never), once per period. The server's own pings do not
   * count as activity; the peer's pongs do.
   */
  void sweep(long now, long idleNs, long pingNs) {
    if (!opened || closed) return;
    if (reads != sweptReads) {
      sweptReads = reads;
      readAt = now;
      activeAt = now;
    }
    if (writes != sweptWrites) {
      sweptWrites = writes;
      activeAt = now;
    }
    if (closeSent) return;
    if (idleNs > 0 && now - activeAt > idleNs) {
      closeLocally(1001, "idle timeout");
    } else if (pingNs > 0 && now - readAt > pingNs && now - pingedAt > pingNs
        && channel.isWritable()) {
      pingedAt = now;
      ctx.writeAndFlush(new PingWebSocketFrame(Unpooled.EMPTY_BUFFER));
    }
  }

  /**
   * Event loop: the peer broke the protocol or a limit: sends a close with {@code code} and
   * closes the connection once it is written, without waiting for an answer.
   */
  private void refuse(int code, String reason) {
    if (closed) return;
    if (closeSent) {
      channel.close();
      return;
    }
    closeSent = true;
    localCode = code;
    localReason = reason;
    queue.shut();
    ctx.writeAndFlush(new CloseWebSocketFrame(code, reason))
        .addListener(ChannelFutureListener.CLOSE);
    awaitClose();
  }

  private void frame(WebSocketFrame f) {
    reads++;
    if (f.rsv() != 0) {
      // the decoder lets any RSV bit through once an extension is negotiated; permessage-deflate
      // takes RSV1 off the data frames it inflates, so a bit still set is one no one defined
      refuse(1002, "reserved bits set");
      return;
    }
    if (f instanceof TextWebSocketFrame || f instanceof BinaryWebSocketFrame
        || f instanceof ContinuationWebSocketFrame) {
      data(f);
    } else if (f instanceof PingWebSocketFrame) {
      if (closeSent) return;
      if (listener.onPing != null) {
        dispatch(listener.onPing, WebSocketMessages.bytes(f.content()), 0);
      } else if (channel.isWritable()) {
        // a client that pings and does not read gets no more pongs (RFC 6455 5.5.3 lets an
        // endpoint answer only the latest ping), so its pings cannot grow the heap
        ctx.writeAndFlush(new PongWebSocketFrame(f.content().retain()));
      }
    } else if (f instanceof PongWebSocketFrame) {
      if (!closeSent) dispatch(listener.onPong, WebSocketMessages.bytes(f.content()), 0);
    } else if (f instanceof CloseWebSocketFrame) {
      closeFrame((CloseWebSocketFrame) f);
    }
  }

  private void data(WebSocketFrame f) {
    if (closeSent) return; // the application or a limit closed: the rest is not delivered
    Object message = messages.add(f, ctx.alloc());
    if (message == WebSocketMessages.TOO_BIG) {
      refuse(1009, messages.tooBig());
    } else if (message != null) {
      dispatch(listener.onMessage, message, messages.size());
    }
  }

  private void closeFrame(CloseWebSocketFrame f) {
    if (closeReceived) return;
    closeReceived = true;
    peerCode = f.statusCode();
    peerReason = f.reasonText();
    if (peerReason == null) peerReason = "";
    if (closeSent) {
      // our close answered: the server closes the TCP connection (RFC 6455 7.1.1)
      cancelCloseWait();
      channel.close();
      return;
    }
    closeSent = true;
    peerClosedFirst = true;
    queue.shut();
    CloseWebSocketFrame answer;
    try {
      answer = peerCode < 0 ? new CloseWebSocketFrame() : new CloseWebSocketFrame(peerCode, "");
    } catch (IllegalArgumentException e) {
      answer = new CloseWebSocketFrame();
    }
    ctx.writeAndFlush(answer).addListener(ChannelFutureListener.CLOSE);
    awaitClose();
  }

  private void cancelCloseWait() {
    if (closeWait != null) {
      closeWait.cancel(false);
      closeWait = null;
    }
  }

  /** Event loop: the connection has closed: on-close runs, once, with what is known. */
  private void ended() {
    if (closed) return;
    closed = true;
    queue.shut();
    cancelCloseWait();
    messages.drop();
    loop.webSockets.remove(this);
    if (!opened) return;
    int code;
    String reason;
    if (peerClosedFirst) {
      code = peerCode < 0 ? 1005 : peerCode;
      reason = peerReason;
    } else if (closeSent) {
      code = localCode;
      reason = localReason;
    } else {
      code = 1006;
      reason = "";
    }
    dispatchClose(code, reason);
  }

  private void failed(Throwable cause) {
    if (cause instanceof CorruptedWebSocketFrameException) {
      // the decoder and the UTF-8 validator leave the close to this handler: the decoder sends
      // none for a bad close frame, and its own would not be bounded by the close wait
      CorruptedWebSocketFrameException e = (CorruptedWebSocketFrameException) cause;
      int code = e.closeStatus().code();
      String m = e.getMessage();
      String reason = m != null && ByteBufUtil.utf8Bytes(m) <= 123 ? m
          : e.closeStatus().reasonText();
      LOG.log(Level.DEBUG, "WebSocket {0} closed with {1}: {2}", where, code, reason);
      if (opened && !closed) dispatch(listener.onError, cause, 0);
      refuse(code, reason);
    } else if (cause instanceof DecompressionException) {
      if (opened) dispatch(listener.onError, cause, 0);
      String m = String.valueOf(cause.getMessage());
      if (m.contains("maximum size")) {
        refuse(1009, "message over the size limit");
      } else {
        refuse(1007, "invalid compressed data");
      }
    } else {
      LOG.log(Level.DEBUG, "WebSocket " + where + " failed", cause);
      if (opened && !closed) dispatch(listener.onError, cause, 0);
      channel.close();
    }
  }

  // ---- listener callbacks ----------------------------------------------------------------------

  /**
   * Event loop: runs {@code f} with this socket and {@code arg} (none when null, for on-open) in
   * the socket's callback order: now on the loop, or queued for a worker. {@code bytes} counts
   * toward the backlog that pauses reading for a sync listener.
   */
  private void dispatch(IFn f, Object arg, long bytes) {
    if (f == null) return;
    if (callbacks == null) {
      call(f, arg);
      return;
    }
    if (callbacks.add(() -> call(f, arg), bytes, true)) channel.config().setAutoRead(false);
  }

  private void dispatchClose(int code, String reason) {
    IFn f = listener.onClose;
    if (f == null) return;
    Runnable r = () -> {
      try {
        f.invoke(this, code, reason);
      } catch (Throwable t) {
        LOG.log(Level.ERROR, "the WebSocket on-close callback failed for " + where, t);
      }
    };
    if (callbacks == null) {
      r.run();
    } else {
      callbacks.add(r, 0, false);
    }
  }

  /**
   * The callback's thread: calls {@code f}. A callback that throws is logged, reported to
   * on-error (unless it is on-error) and the socket closed with 1011, as a handler that throws
   * gets its client a 500.
   */
  private void call(IFn f, Object arg) {
    try {
      if (arg == null) {
        f.invoke(this);
      } else {
        f.invoke(this, arg);
      }
    } catch (Throwable t) {
      LOG.log(Level.ERROR, "a WebSocket listener callback failed for " + where, t);
      IFn onError = listener.onError;
      if (onError != null && f != onError) {
        try {
          onError.invoke(this, t);
        } catch (Throwable e) {
          LOG.log(Level.ERROR, "the WebSocket on-error callback failed for " + where, e);
        }
      }
      onLoop(() -> closeLocally(1011, "Internal Server Error"));
    }
  }

  /** Event loop: a sync listener has caught up: reading resumes. */
  private void resumeReading() {
    if (callbacks.resume() && !closed) channel.config().setAutoRead(true);
  }

  /** The socket's place in the connection's pipeline, where Vert.x's HTTP handler was. */
  final class Handler extends ChannelInboundHandlerAdapter {
    @Override
    public void handlerAdded(ChannelHandlerContext c) {
      ctx = c;
    }

    @Override
    public void channelRead(ChannelHandlerContext c, Object msg) {
      if (!(msg instanceof WebSocketFrame)) {
        ReferenceCountUtil.release(msg);
        return;
      }
      WebSocketFrame f = (WebSocketFrame) msg;
      try {
        frame(f);
      } finally {
        f.release();
      }
    }

    @Override
    public void channelInactive(ChannelHandlerContext c) {
      ended();
    }

    @Override
    @SuppressWarnings("deprecation") // ChannelHandler's declaration is deprecated, not this one
    public void exceptionCaught(ChannelHandlerContext c, Throwable cause) {
      failed(cause);
    }

    @Override
    public void userEventTriggered(ChannelHandlerContext c, Object evt) {
      // Vert.x's shutdown events are for its HTTP handler, which is gone; the server verticle
      // closes its sockets itself when it stops
      ReferenceCountUtil.release(evt);
    }
  }
}
