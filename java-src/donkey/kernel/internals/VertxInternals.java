package donkey.kernel.internals;

import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFactory;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOption;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.EventLoop;
import io.netty.channel.ServerChannel;
import io.netty.handler.codec.http.HttpRequestDecoder;
import io.netty.handler.codec.http.websocketx.WebSocket13FrameEncoder;
import io.netty.handler.ssl.SslHandler;
import io.netty.util.AttributeKey;
import io.vertx.core.Context;
import io.vertx.core.Handler;
import io.vertx.core.MultiMap;
import io.vertx.core.http.Http1ServerConfig;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.impl.http1.Http1ServerConnection;
import io.vertx.core.http.impl.http1.Http1ServerRequest;
import io.vertx.core.http.impl.http1.VertxHttpRequestDecoder;
import io.vertx.core.impl.transports.NioTransport;
import io.vertx.core.internal.ContextInternal;
import io.vertx.core.net.SocketAddress;
import io.vertx.core.net.impl.ConnectionBase;
import io.vertx.core.net.impl.SocketAddressImpl;
import io.vertx.core.transport.Transport;
import java.net.InetSocketAddress;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * Every use the kernel makes of Vert.x's implementation classes ({@code impl} and
 * {@code internal} packages) and of a connection's Netty channel: the one file to look at when
 * Vert.x is upgraded. Each method says what it relies on. It is longer than a class with one
 * concern would be for that reason: splitting it would give an upgrade several files to check.
 *
 * <p>Threading: as each method says; most run on the connection's event loop.
 */
public final class VertxInternals {
  private VertxInternals() {}

  /** The Netty event loop behind a Vert.x event-loop context (any thread). */
  public static EventLoop nettyLoop(Context context) {
    return ((ContextInternal) context).nettyEventLoop();
  }

  /**
   * The address a server listens on. A negative port asks Vert.x for one random port shared by
   * every server instance that asks for the same negative port; the public factory refuses it,
   * the implementation class does not.
   */
  public static SocketAddress listenAddress(int port, String host) {
    return new SocketAddressImpl(port, host);
  }

  /**
   * Event loop, from the connection handler: has {@code handler} receive {@code c}'s requests
   * instead of the server-wide request handler (which Vert.x installs just before it calls the
   * connection handler). False when {@code c} is not an HTTP/1.x connection.
   */
  public static boolean handleRequests(HttpConnection c, Handler<HttpServerRequest> handler) {
    if (!(c instanceof Http1ServerConnection)) return false;
    ((Http1ServerConnection) c).handler(handler);
    return true;
  }

  /**
   * The protocol version of {@code r}'s request line as the client wrote it ({@code HTTP/9.9}
   * for a version Vert.x does not know, where {@link HttpServerRequest#version()} is null), or
   * "" when unknown.
   */
  public static String protocol(HttpServerRequest r) {
    return r instanceof Http1ServerRequest
        ? ((Http1ServerRequest) r).nettyRequest().protocolVersion().text() : "";
  }

  /**
   * The Netty request behind {@code r} (its line and headers as decoded), or null for a request
   * that is not HTTP/1.x.
   */
  public static io.netty.handler.codec.http.HttpRequest nettyRequest(HttpServerRequest r) {
    return r instanceof Http1ServerRequest ? ((Http1ServerRequest) r).nettyRequest() : null;
  }

  /**
   * Event loop: {@code c}'s channel when the kernel can turn it into a WebSocket (an HTTP/1.x
   * connection whose pipeline still has Vert.x's handler, named {@code "handler"}), else null.
   */
  public static Channel upgradable(HttpConnection c) {
    ChannelPipeline p = pipeline(c);
    return p == null || p.get("handler") == null ? null : p.channel();
  }

  /**
   * Event loop, while Vert.x delivers a request that asks for a WebSocket and has no body (so
   * the decoder has passed on all of it, up to its end, in the same read): puts an
   * {@link InputHold} in the place of Vert.x's HTTP decoder, which hands it the bytes it has
   * not decoded yet. False when {@code c} has no such decoder.
   */
  public static boolean holdInput(HttpConnection c) {
    ChannelPipeline p = pipeline(c);
    if (p == null || p.get("httpDecoder") == null || p.get(InputHold.NAME) != null) return false;
    // replace, not remove: the decoder passes what it holds to the handler that replaces it
    p.replace("httpDecoder", InputHold.NAME, new InputHold());
    return true;
  }

  /**
   * Event loop, before Netty's handshaker answers {@code ch}'s upgrade: the handshaker puts its
   * frame decoder in the HTTP decoder's place, so an {@link InputHold} gets an empty HTTP
   * decoder behind it for that.
   */
  public static void beforeHandshake(Channel ch) {
    ChannelPipeline p = ch.pipeline();
    if (p.get(InputHold.NAME) != null && p.get("httpDecoder") == null) {
      p.addAfter(InputHold.NAME, "httpDecoder", new HttpRequestDecoder());
    }
  }

  /**
   * Event loop, once the request {@link #holdInput} held input for is over without becoming a
   * WebSocket: a new HTTP decoder takes the hold's place and the bytes it kept, in a task of
   * its own (the next request they hold must not start inside the end of this one), and
   * reading resumes.
   */
  public static void resumeHttp(HttpConnection c, Http1ServerConfig http1) {
    ChannelPipeline p = pipeline(c);
    if (p == null) return;
    p.channel().eventLoop().execute(() -> {
      InputHold hold = (InputHold) p.get(InputHold.NAME);
      if (hold == null || hold.toWebSocket || !p.channel().isActive()) return;
      // the empty decoder beforeHandshake added, when the handshake was refused after it
      if (p.get("httpDecoder") != null) p.remove("httpDecoder");
      p.replace(InputHold.NAME, "httpDecoder", new VertxHttpRequestDecoder(http1));
      if (hold.pausedReading) p.channel().config().setAutoRead(true);
    });
  }

  /**
   * Event loop, as a WebSocket on {@code ch} starts reading: the bytes an {@link InputHold}
   * kept, the client's first frames, go to the frame decoder ahead of any read after them.
   */
  public static void releaseInput(Channel ch) {
    ChannelPipeline p = ch.pipeline();
    if (p.get(InputHold.NAME) != null) p.remove(InputHold.NAME);
  }

  /**
   * Event loop, once Netty's handshaker has answered {@code c}'s upgrade (its frame decoder in
   * place, named {@code "wsdecoder"}): makes the pipeline a WebSocket's. The frame encoder moves
   * before the decoder, where Netty's handshaker would put it after (in Vert.x's HTTP encoder's
   * place), so that the close the decoder or a handler after it writes is encoded too. The
   * handlers the kernel put in for HTTP ({@link #gateFlushes}, {@link #watchInput}) go,
   * and the end of the client's input closes the connection again, as a WebSocket without a
   * close frame ends. Then {@code frames} (in pipeline order) and {@code socket} take the place
   * of Vert.x's HTTP handler. An {@link InputHold} stays ahead of the frame decoder until
   * {@link #releaseInput}.
   */
  public static void becomeWebSocket(HttpConnection c, ChannelHandler socket, ChannelHandler... frames) {
    ChannelPipeline p = pipeline(c);
    InputHold hold = (InputHold) p.get(InputHold.NAME);
    if (hold != null) hold.toWebSocket = true;
    p.remove("wsencoder");
    p.addBefore("wsdecoder", "wsencoder", new WebSocket13FrameEncoder(false));
    if (p.get(FlushGate.NAME) != null) p.remove(FlushGate.NAME);
    if (p.get(ConnectionInput.NAME) != null) p.remove(ConnectionInput.NAME);
    p.channel().config().setOption(ChannelOption.ALLOW_HALF_CLOSURE, false);
    p.replace("handler", "handler", socket);
    String next = "handler";
    for (int i = frames.length - 1; i >= 0; i--) {
      String name = "donkey-ws-" + i;
      p.addBefore(next, name, frames[i]);
      next = name;
    }
  }

  /**
   * Event loop, at accept of an HTTP/2 connection: Netty's view of its streams, or null when
   * {@code c} is not one the kernel knows of.
   */
  public static io.netty.handler.codec.http2.Http2Connection http2(HttpConnection c) {
    if (!(c instanceof ConnectionBase)) return null;
    ChannelHandler h = ((ConnectionBase) c).channelHandlerContext().handler();
    return h instanceof io.netty.handler.codec.http2.Http2ConnectionHandler
        ? ((io.netty.handler.codec.http2.Http2ConnectionHandler) h).connection() : null;
  }

  /**
   * Event loop, in a request handler: whether the client has sent all of stream
   * {@code streamId} (its HEADERS or a DATA frame said END_STREAM). Vert.x runs the request
   * handler before it marks a request that came in one HEADERS frame ended; Netty's stream
   * state already says so. True for a stream Netty no longer has.
   */
  public static boolean remoteEnded(io.netty.handler.codec.http2.Http2Connection h2, int streamId) {
    io.netty.handler.codec.http2.Http2Stream st = h2.stream(streamId);
    return st == null || st.state() == io.netty.handler.codec.http2.Http2Stream.State.CLOSED
        || st.state() == io.netty.handler.codec.http2.Http2Stream.State.HALF_CLOSED_REMOTE;
  }

  /**
   * The header lines of a request head as Netty keeps them, names and values as they were
   * decoded (no String made of each), in order; null for a header map of another kind. An
   * HTTP/1.x head's map is Netty's own; an HTTP/2 one's wraps Netty's, pseudo-headers first.
   * Any thread that may read the request.
   */
  public static Iterator<Map.Entry<CharSequence, CharSequence>> lines(MultiMap headers) {
    if (headers instanceof io.netty.handler.codec.http.HttpHeaders) {
      return ((io.netty.handler.codec.http.HttpHeaders) headers).iteratorCharSequence();
    }
    if (headers instanceof io.vertx.core.http.impl.headers.HttpHeaders) {
      return ((io.vertx.core.http.impl.headers.HttpHeaders) headers).unwrap().iterator();
    }
    return null;
  }

  /** {@code c}'s Netty pipeline, or null when it has none the kernel knows of. */
  static ChannelPipeline pipeline(HttpConnection c) {
    return c instanceof ConnectionBase ? ((ConnectionBase) c).channelHandlerContext().pipeline()
        : null;
  }

  /**
   * Event loop, at accept on a TLS connection (Vert.x calls the connection handler once the
   * handshake is done): the first certificate of the client's chain when the server asked for
   * one and the client presented it, else null. The TLS handler's engine says whether it was
   * asked for, so a connection that was not asked costs no exception.
   */
  public static java.security.cert.X509Certificate clientCertificate(HttpConnection c) {
    ChannelPipeline p = pipeline(c);
    SslHandler h = p == null ? null : p.get(SslHandler.class);
    if (h == null) return null;
    javax.net.ssl.SSLEngine engine = h.engine();
    if (!engine.getNeedClientAuth() && !engine.getWantClientAuth()) return null;
    try {
      java.security.cert.Certificate[] chain = engine.getSession().getPeerCertificates();
      return chain.length > 0 && chain[0] instanceof java.security.cert.X509Certificate
          ? (java.security.cert.X509Certificate) chain[0] : null;
    } catch (javax.net.ssl.SSLPeerUnverifiedException none) {
      return null;
    }
  }

  /** Event loop: bytes written to {@code c} and not yet flushed to its socket (0 when unknown). */
  public static long pendingWriteBytes(HttpConnection c) {
    ChannelOutboundBuffer out = outbound(c);
    return out == null ? 0 : out.totalPendingWriteBytes();
  }

  /**
   * Event loop: how far the message being written to {@code c}'s socket has got (a file is one
   * message, which Vert.x counts as written when it hands it over); 0 when unknown.
   */
  public static long writeProgress(HttpConnection c) {
    ChannelOutboundBuffer out = outbound(c);
    return out == null ? 0 : out.currentProgress();
  }

  private static ChannelOutboundBuffer outbound(HttpConnection c) {
    return c instanceof ConnectionBase
        ? ((ConnectionBase) c).channel().unsafe().outboundBuffer() : null;
  }

  /**
   * Closes {@code c} at once, whatever it is doing. {@link HttpConnection#close()} is a
   * graceful shutdown in Vert.x 5 that waits for the response in progress to end, which a
   * stalled or failed response never does, and so is a close of the channel, which Vert.x's
   * handler intercepts the same way. This closes from Vert.x's handler context toward the
   * socket, past that interception: the client sees the response cut short, Vert.x sees the
   * connection closed, and a thread blocked writing the response gets an error. Any thread.
   */
  public static void abort(HttpConnection c) {
    if (c instanceof ConnectionBase) {
      ((ConnectionBase) c).channelHandlerContext().close();
    } else {
      c.close();
    }
  }

  /**
   * Event loop: writes {@code bytes} (a whole HTTP/1.1 response) on {@code c} as they are,
   * below Vert.x's HTTP encoder, flushes them after whatever the connection has already
   * written, then closes the connection. For answers Vert.x would frame wrongly: to a request
   * line the decoder could not parse, Vert.x answers with the version of the placeholder request
   * Netty made for it (HTTP/1.0), or with the client's unknown version. False (nothing written)
   * when the connection has no HTTP/1.x encoder.
   */
  public static boolean writeRawAndClose(HttpConnection c, byte[] bytes) {
    ChannelPipeline p = pipeline(c);
    ChannelHandlerContext encoder = p == null ? null : p.context("httpEncoder");
    if (encoder == null) return false;
    encoder.writeAndFlush(Unpooled.wrappedBuffer(bytes)).addListener(ChannelFutureListener.CLOSE);
    return true;
  }

  /**
   * Event loop, at accept: routes {@code c}'s flushes through {@code policy}; returns the gate
   * that releases a held one, or null when {@code c} has no pipeline the kernel knows of (its
   * flushes then always go out).
   */
  public static FlushGate gateFlushes(HttpConnection c, FlushPolicy policy) {
    ChannelPipeline p = pipeline(c);
    if (p == null || p.get("handler") == null) return null;
    FlushGate g = new FlushGate(policy);
    p.addBefore("handler", FlushGate.NAME, g);
    return g;
  }

  /**
   * Event loop, at accept: runs {@code onReadDone} each time Vert.x has handled a batch of
   * {@code c}'s input (Netty's read-complete event, after Vert.x's HTTP handler).
   */
  public static void afterReads(HttpConnection c, Runnable onReadDone) {
    ChannelPipeline p = pipeline(c);
    if (p != null && p.get("handler") != null) {
      p.addAfter("handler", "donkey-read-done", new ReadDone(onReadDone));
    }
  }

  private static final class ReadDone extends ChannelInboundHandlerAdapter {
    private final Runnable onReadDone;

    ReadDone(Runnable onReadDone) {
      this.onReadDone = onReadDone;
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
      onReadDone.run();
      ctx.fireChannelReadComplete();
    }
  }

  /**
   * Event loop, at accept: puts one handler first in {@code c}'s pipeline that counts the
   * batches its socket delivers, before any decoding (so a request head that has only begun
   * to arrive counts), and returns it; null when {@code c} has no pipeline the kernel knows of.
   *
   * <p>With {@code onInputShutdown} (HTTP/1.x; null for HTTP/2, which ends its input with
   * GOAWAY), the connection also stays open for writing after the client has shut down its
   * side, so a client that sends its request and then half-closes still gets its answer; the
   * handler calls {@code onInputShutdown} on the loop once the rest of the pipeline has seen
   * the end of the input (the decoder has ended or failed the request in progress). Without
   * this, Netty closes the connection as soon as it reads the end of the input, and an answer
   * still being made is lost. One handler does both, so a connection's set-up adds one
   * handler to its pipeline, not two.
   */
  public static ConnectionInput watchInput(HttpConnection c, Runnable onInputShutdown) {
    ChannelPipeline p = pipeline(c);
    if (p == null || p.get("handler") == null) return null;
    ConnectionInput in = new ConnectionInput(onInputShutdown);
    if (onInputShutdown != null) {
      p.channel().config().setOption(ChannelOption.ALLOW_HALF_CLOSURE, true);
    }
    p.addFirst(ConnectionInput.NAME, in);
    return in;
  }

  /** Marks a channel {@link AcceptCount} counted (read once, when Vert.x hands it over). */
  private static final AttributeKey<Boolean> COUNTED = AttributeKey.valueOf("donkey-counted");

  /**
   * The transport of a Vert.x instance whose listeners {@link #countAtAccept} may watch:
   * Vert.x's own NIO transport (a subclass, so that Vert.x still sees NIO), which also keeps
   * the listening channels it opens; Vert.x's listeners offer no other way to their channel.
   * Any thread.
   */
  public static final class Listeners implements Transport {
    private final List<ServerChannel> channels = new CopyOnWriteArrayList<>();
    private final NioTransport nio = new NioTransport() {
      @Override
      public ChannelFactory<? extends ServerChannel> serverChannelFactory(boolean domain) {
        ChannelFactory<? extends ServerChannel> made = super.serverChannelFactory(domain);
        return () -> {
          ServerChannel ch = made.newChannel();
          channels.add(ch);
          return ch;
        };
      }
    };

    @Override
    public String name() {
      return "nio";
    }

    @Override
    public boolean available() {
      return true;
    }

    @Override
    public Throwable unavailabilityCause() {
      return null;
    }

    @Override
    public io.vertx.core.spi.transport.Transport implementation() {
      return nio;
    }
  }

  /**
   * Any thread, once the listener on {@code port} is bound: counts each connection it accepts
   * toward {@code count} from then on, before Vert.x sees it (and so before any TLS
   * handshake), and closes it at once when {@code count} is at its limit; the count is
   * released when the connection's channel closes. Returns once the count is in place: the
   * connections accepted after that are all counted. False when {@code listeners} has no open
   * listener on that port (nothing is counted then).
   *
   * @throws IllegalStateException when the listener's event loop does not install the count
   *     within {@code timeoutMs}
   */
  public static boolean countAtAccept(Listeners listeners, int port, ConnectionCount count,
                               long handOverMs, long timeoutMs) {
    for (ServerChannel ch : listeners.channels) {
      if (ch.isActive() && ch.localAddress() instanceof InetSocketAddress
          && ((InetSocketAddress) ch.localAddress()).getPort() == port) {
        // Added from another thread, a handler only takes part once the channel's event loop
        // has run its handlerAdded, and connections accepted before that would pass
        // uncounted: so it is added on that loop, and start-up waits for it.
        io.netty.util.concurrent.Future<?> added = ch.eventLoop().submit(() -> {
          if (ch.pipeline().get(AcceptCount.class) == null) {
            // first, ahead of the bootstrap's acceptor that hands the connection to Vert.x
            ch.pipeline().addFirst("donkey-accept-count", new AcceptCount(count, handOverMs));
          }
        });
        if (!added.awaitUninterruptibly(timeoutMs) || !added.isSuccess()) {
          throw new IllegalStateException("the connection count could not be installed on the "
              + "listener of port " + port, added.cause());
        }
        return true;
      }
    }
    return false;
  }

  /**
   * Event loop, at accept: whether {@code c} was counted when its listener accepted it
   * ({@link #countAtAccept}); a connection accepted before the count was installed was not.
   */
  public static boolean countedAtAccept(HttpConnection c) {
    if (!(c instanceof ConnectionBase)) return false;
    Channel ch = ((ConnectionBase) c).channel();
    if (!ch.hasAttr(COUNTED)) return false;
    HandOverDeadline d = ch.pipeline().get(HandOverDeadline.class);
    if (d != null) ch.pipeline().remove(d);
    return true;
  }

  /**
   * On a listening channel: sees each accepted connection (a channel, not yet on its event
   * loop) before the bootstrap hands it to Vert.x. Acceptor thread.
   */
  private static final class AcceptCount extends ChannelInboundHandlerAdapter {
    private final ConnectionCount count;
    private final long handOverMs;

    AcceptCount(ConnectionCount count, long handOverMs) {
      this.count = count;
      this.handOverMs = handOverMs;
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      if (msg instanceof Channel) {
        Channel child = (Channel) msg;
        if (!count.admit()) {
          // not registered with an event loop yet: close its socket directly, as the
          // bootstrap does with a connection it cannot register
          child.unsafe().closeForcibly();
          return;
        }
        child.attr(COUNTED).set(Boolean.TRUE);
        child.closeFuture().addListener(closed -> count.release());
        if (handOverMs > 0) child.pipeline().addFirst(new HandOverDeadline(handOverMs));
      }
      ctx.fireChannelRead(msg);
    }
  }

  /**
   * On an accepted connection until Vert.x hands it over ({@link #countedAtAccept} takes it
   * out): closes the connection when that takes longer than its time. Vert.x hands a TLS
   * connection over after its handshake, and with h2c on a plaintext one only once its first
   * bytes say HTTP/2 or a first HTTP/1.x request head is complete; until then the connection
   * guard's timeouts do not see it. Event loop of the connection.
   */
  private static final class HandOverDeadline extends ChannelInboundHandlerAdapter {
    private final long ms;
    private io.netty.util.concurrent.ScheduledFuture<?> timer;

    HandOverDeadline(long ms) {
      this.ms = ms;
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
      // (called once the channel is registered with its event loop)
      timer = ctx.executor().schedule(() -> {
        ctx.channel().close();
      }, ms, java.util.concurrent.TimeUnit.MILLISECONDS);
    }

    @Override
    public void handlerRemoved(ChannelHandlerContext ctx) {
      if (timer != null) timer.cancel(false);
    }
  }
}
