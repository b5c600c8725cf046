package donkey.kernel.websocket;

import clojure.lang.IFn;
import donkey.kernel.config.ServerConfig;
import donkey.kernel.internals.VertxInternals;
import donkey.kernel.workers.WorkerPool;
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
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * The connection side of a {@link WebSocket}: the Netty handler that takes the place of
 * Vert.x's HTTP handler once the handshake is done (the kernel's {@code WebSocketUpgrade}), with
 * the socket's state machine (open, closing, closed), the close handshake and its wait, the idle
 * sweep, and the listener's callbacks in their order. {@link WebSocket} describes what it does
 * with frames and when each callback runs. Frame handling, the close handshake and the sweep
 * stay in one class because they read and write the same loop-confined close state.
 *
 * <p>Threading: confined to the connection's event loop, but for {@link #onLoop}; the
 * callbacks of a sync handler's socket run on a worker ({@link WebSocketCallbacks}).
 */
final class WebSocketSession extends ChannelInboundHandlerAdapter {
  private static final System.Logger LOG = System.getLogger("donkey");

  /**
   * How long a close this side sent waits for the peer's close before the connection closes,
   * and how long the peer's close waits for a sync listener's callbacks before it is answered.
   */
  static final long CLOSE_WAIT_MS = 5_000;

  private final WebSocket socket;
  private final WebSockets loop;
  private final Channel channel;
  private final WebSocketListener listener;
  /** Runs callbacks for a sync handler's socket; null: on the event loop. */
  private final WebSocketCallbacks callbacks;
  private final WebSocketSendQueue queue;
  private final WebSocketMessages messages;
  /** The request line's target, for log lines. */
  private final String where;

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
  /** Set while the peer's close waits for a sync listener's callbacks before it is answered. */
  private ScheduledFuture<?> answerWait;
  /** Frames read and application frames written, counted for the idle sweep. */
  private long reads;
  private long writes;
  private long sweptReads = -1;
  private long sweptWrites = -1;
  private long readAt;
  private long activeAt;
  private long pingedAt;

  WebSocketSession(WebSocket socket, WebSockets loop, Channel channel,
                   WebSocketListener listener, WorkerPool workers, WebSocketSendQueue queue,
                   String where) {
    this.socket = socket;
    this.loop = loop;
    this.channel = channel;
    this.listener = listener;
    this.queue = queue;
    this.where = where;
    this.callbacks = workers == null ? null
        : new WebSocketCallbacks(workers, loop.handOff, () -> onLoop(this::resumeReading));
    ServerConfig cfg = loop.config;
    this.messages = new WebSocketMessages(ServerConfig.wsLimit(cfg.wsMaxTextSize),
        ServerConfig.wsLimit(cfg.wsMaxBinarySize));
  }

  /** Event loop: the handshake's 101 has been written: reading starts, on-open runs. */
  void opened(long now) {
    if (!channel.isActive()) return;
    opened = true;
    queue.open();
    readAt = activeAt = pingedAt = now;
    loop.open.add(this);
    dispatch(listener.onOpen, null, 0);
    // frames the client sent right behind its upgrade request, then what is read after them
    VertxInternals.releaseInput(channel);
    channel.config().setAutoRead(true);
  }

  /**
   * Event loop: sends a close with {@code code}; the connection closes as
   * {@link WebSocket#close} says. When the peer's close came first and its answer is waiting
   * for the listener, the answer goes now instead, with the peer's code.
   */
  void closeLocally(int code, String reason) {
    if (closeSent || closed) return;
    if (closeReceived) {
      answerClose();
      return;
    }
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
    // a received close is answered within its own bound (closeFrame)
    if (closeSent || closeReceived) return;
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

  /** Event loop: one frame from the peer, as the decoder and the extension left it. */
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

  /** Event loop: a data frame: on-message runs once it completes a message. */
  private void data(WebSocketFrame f) {
    if (closeSent) return; // the application or a limit closed: the rest is not delivered
    Object message = messages.add(f, ctx.alloc());
    if (message == WebSocketMessages.TOO_BIG) {
      refuse(1009, messages.tooBig());
    } else if (message != null) {
      dispatch(listener.onMessage, message, messages.size());
    }
  }

  /**
   * Event loop: the peer's close: the answer to this side's, or a close to echo (its code, no
   * reason) before the connection closes. A sync listener may still have callbacks to run for
   * what the peer sent before its close, and what they send goes out before the echo: the echo
   * waits for them, {@link #CLOSE_WAIT_MS} at most, so that a callback that does not return
   * cannot hold the close; what it sends after that is refused.
   */
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
    peerClosedFirst = true;
    if (callbacks == null) {
      // an event-loop listener's callbacks have run, and what they sent is in the channel
      // ahead of the answer
      answerClose();
      return;
    }
    // behind the callbacks queued so far: a worker reaches it once they have returned, and its
    // task reaches the loop after the writes they handed to the loop
    callbacks.add(() -> onLoop(this::answerClose), 0, false);
    answerWait = ctx.executor().schedule(() -> {
      answerWait = null;
      LOG.log(Level.DEBUG, "WebSocket {0}: a callback is still running, the close from the "
          + "client is answered without waiting for it", where);
      answerClose();
    }, CLOSE_WAIT_MS, TimeUnit.MILLISECONDS);
  }

  /** Event loop: answers the peer's close, echoing its code, then closes the connection. */
  private void answerClose() {
    if (closeSent || closed) return;
    cancelAnswerWait();
    closeSent = true;
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

  private void cancelAnswerWait() {
    if (answerWait != null) {
      answerWait.cancel(false);
      answerWait = null;
    }
  }

  /** Event loop: the connection has closed: on-close runs, once, with what is known. */
  private void ended() {
    if (closed) return;
    closed = true;
    queue.shut();
    cancelCloseWait();
    cancelAnswerWait();
    messages.drop();
    loop.open.remove(this);
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

  /**
   * Event loop: a handler before this one failed: a protocol error or limit closes with its
   * code; anything else ends the connection at once.
   */
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

  /** Event loop: queues on-close, after every other callback; it is not counted as backlog. */
  private void dispatchClose(int code, String reason) {
    IFn f = listener.onClose;
    if (f == null) return;
    Runnable r = () -> {
      try {
        f.invoke(socket, code, reason);
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
        f.invoke(socket);
      } else {
        f.invoke(socket, arg);
      }
    } catch (Throwable t) {
      LOG.log(Level.ERROR, "a WebSocket listener callback failed for " + where, t);
      IFn onError = listener.onError;
      if (onError != null && f != onError) {
        try {
          onError.invoke(socket, t);
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

  /**
   * Event loop: writes frame {@code f} of {@code n} payload bytes the send queue counted, or
   * drops it when this side's close has gone (a sender may pass the queue just before the
   * close); the queue and the callbacks hear of it once the write completes.
   */
  void write(WebSocketFrame f, long n, IFn succeed, IFn fail, boolean application) {
    if (closeSent || closed) {
      f.release();
      queue.written(n);
      WebSocket.callback(fail, new IOException("the WebSocket is closed"), where);
      return;
    }
    ChannelFuture done = ctx.writeAndFlush(f);
    done.addListener(future -> {
      queue.written(n);
      if (future.isSuccess()) {
        if (application) writes++;
        WebSocket.callback(succeed, null, where);
      } else {
        WebSocket.callback(fail, future.cause(), where);
      }
    });
  }

  /** Any thread: runs {@code r} on the loop, now when called there. */
  void onLoop(Runnable r) {
    if (channel.eventLoop().inEventLoop()) {
      r.run();
    } else {
      try {
        channel.eventLoop().execute(r);
      } catch (RejectedExecutionException e) {
        LOG.log(Level.DEBUG, "server stopped before a WebSocket task for {0}", where);
      }
    }
  }

  // ---- the pipeline ---------------------------------------------------------------------------

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
