package donkey.kernel;

import clojure.lang.IPersistentMap;
import clojure.lang.Keyword;
import donkey.kernel.config.ServerConfig;
import donkey.kernel.internals.VertxInternals;
import donkey.kernel.websocket.WebSocket;
import donkey.kernel.websocket.WebSocketListener;
import donkey.kernel.websocket.WebSockets;
import donkey.ring.ResponseMap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelPromise;
import io.netty.handler.codec.compression.ZlibCodecFactory;
import io.netty.handler.codec.http.DefaultFullHttpRequest;
import io.netty.handler.codec.http.DefaultHttpHeaders;
import io.netty.handler.codec.http.EmptyHttpHeaders;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.websocketx.Utf8FrameValidator;
import io.netty.handler.codec.http.websocketx.WebSocketDecoderConfig;
import io.netty.handler.codec.http.websocketx.WebSocketHandshakeException;
import io.netty.handler.codec.http.websocketx.WebSocketServerHandshaker13;
import io.netty.handler.codec.http.websocketx.extensions.WebSocketExtensionData;
import io.netty.handler.codec.http.websocketx.extensions.WebSocketExtensionUtil;
import io.netty.handler.codec.http.websocketx.extensions.WebSocketServerExtension;
import io.netty.handler.codec.http.websocketx.extensions.compression.PerMessageDeflateServerExtensionHandshaker;
import io.vertx.core.MultiMap;
import io.vertx.core.http.Http1ServerConfig;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpVersion;
import java.lang.System.Logger.Level;
import java.util.Base64;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.RejectedExecutionException;

/**
 * Turns a request whose handler answered with {@code :ring.websocket/listener} into a
 * WebSocket: checks the handshake (RFC 6455 4.2.1), answers 101 through Netty's handshaker and
 * puts a {@link WebSocket} in place of Vert.x's HTTP handler in the connection's pipeline.
 *
 * <p>Why the kernel does the handshake rather than Vert.x's {@code toWebSocket()}: the Ring
 * handler decides after the request has ended (a sync handler runs on a worker), which
 * {@code toWebSocket()} refuses; and Vert.x's WebSocket answers every ping itself, closes with
 * 1000 whatever the protocol error, and delivers over-long messages by failing them, where Ring
 * wants {@code on-ping}, 1002/1007/1009 and a bound. Vert.x's permessage-deflate support would
 * also put an extension handler in every HTTP connection's pipeline; here compression is
 * negotiated for the upgrade request alone.
 *
 * <p>Refusals, all before anything is switched: a request that is not a WebSocket upgrade (no
 * {@code Upgrade: websocket}, {@code Connection} without {@code upgrade}, not GET, not
 * HTTP/1.1, or with a body) or whose {@code Sec-WebSocket-Key} is not 16 bytes in base64 gets
 * 400; a {@code Sec-WebSocket-Version} other than 13 gets 426 with
 * {@code Sec-WebSocket-Version: 13}; an {@code Origin} not in {@code :ws-allowed-origins} gets
 * 403 (a handshake without one, which is not a browser's, is accepted). The connection stays
 * open after these answers.
 *
 * <p>Threading: {@link #later} from any thread; the rest on the connection's event loop. Made
 * once per upgrade, which is rare beside requests.
 */
final class WebSocketUpgrade {
  private static final System.Logger LOG = System.getLogger("donkey");
  private static final Keyword PROTOCOL = Keyword.intern("ring.websocket", "protocol");

  private final Exchange x;
  private final IPersistentMap response;

  /** The upgrade of {@code x} (already answered) for its handler's {@code response}. */
  WebSocketUpgrade(Exchange x, IPersistentMap response) {
    this.x = x;
    this.response = response;
  }

  /**
   * Any thread: upgrades the request to a WebSocket, in a task of its own on the event loop:
   * never inside the read that delivered the request, whose HTTP decoder the handshake
   * replaces.
   */
  void later() {
    try {
      x.loop().later(() -> {
        try {
          upgrade();
        } catch (Throwable t) {
          x.fail(t);
        }
      });
    } catch (RejectedExecutionException e) {
      LOG.log(Level.DEBUG, "server stopped before {0} could become a WebSocket", x.where());
    }
  }

  /** Event loop: checks the handshake, then answers it. */
  private void upgrade() {
    IPersistentMap r = response;
    if (x.gone()) return;
    ServerVerticle loop = x.loop();
    ServerConfig cfg = loop.config;
    HttpServerRequest req = x.request();
    MultiMap h = req.headers();
    if (!lists(h.getAll("upgrade"), "websocket")) {
      x.keepConnection(400, "Bad Request: a WebSocket listener answers WebSocket "
          + "upgrade requests only");
      return;
    }
    if (req.method() != HttpMethod.GET || req.version() != HttpVersion.HTTP_1_1
        || !lists(h.getAll("connection"), "upgrade")) {
      x.keepConnection(400, "Bad Request: a WebSocket handshake is an HTTP/1.1 GET "
          + "with Connection: upgrade");
      return;
    }
    if (x.body() != null) {
      x.keepConnection(400, "Bad Request: a WebSocket handshake has no body");
      return;
    }
    String version = h.get("sec-websocket-version");
    if (version == null || !version.trim().equals("13")) {
      x.keepConnection(426, "Upgrade Required: Sec-WebSocket-Version 13",
          "sec-websocket-version", "13");
      return;
    }
    if (!validKey(h.get("sec-websocket-key"))) {
      x.keepConnection(400, "Bad Request: invalid Sec-WebSocket-Key");
      return;
    }
    String origin = h.get("origin");
    if (loop.wsOrigins != null && origin != null
        && !loop.wsOrigins.contains(origin.trim().toLowerCase(Locale.ROOT))) {
      x.keepConnection(403,
          "Forbidden: WebSocket connections from this origin are not allowed");
      return;
    }
    WebSocketListener listener =
        WebSocketListener.of(r.valAt(ResponseMap.LISTENER), cfg.wsListenerAdapter);
    Object p = r.valAt(PROTOCOL);
    if (p != null && !(p instanceof String)) {
      throw new IllegalArgumentException(":ring.websocket/protocol must be a String, got "
          + p.getClass().getName());
    }
    HttpConnection c = x.connection();
    Channel ch = VertxInternals.upgradable(c);
    HttpRequest head = VertxInternals.nettyRequest(req);
    if (ch == null || head == null) {
      throw new IllegalStateException("this connection cannot be upgraded to a WebSocket");
    }
    WebSocketServerExtension deflate = cfg.wsCompression
        ? deflate(h.getAll("sec-websocket-extensions"),
            ServerConfig.wsLimit(Math.max(cfg.wsMaxTextSize, cfg.wsMaxBinarySize)))
        : null;
    DefaultHttpHeaders extra = new DefaultHttpHeaders();
    if (loop.serverHeader != null) extra.set("server", loop.serverHeader);
    if (deflate != null) extra.set("sec-websocket-extensions", format(deflate.newReponseData()));
    WebSocketDecoderConfig decoding = WebSocketDecoderConfig.newBuilder()
        .maxFramePayloadLength(ServerConfig.wsLimit(cfg.wsMaxFrameSize))
        .expectMaskedFrames(true)
        .allowMaskMismatch(false)
        .allowExtensions(deflate != null)
        // WebSocket sends the close for a protocol error (WebSocket.failed)
        .closeOnProtocolViolation(false)
        .build();
    WebSocketServerHandshaker13 handshaker =
        new WebSocketServerHandshaker13(head.uri(), (String) p, decoding);
    FullHttpRequest full = new DefaultFullHttpRequest(head.protocolVersion(), head.method(),
        head.uri(), Unpooled.EMPTY_BUFFER, head.headers(), EmptyHttpHeaders.INSTANCE);
    ChannelPromise shaken = ch.newPromise();
    VertxInternals.beforeHandshake(ch);
    try {
      // replaces the HTTP decoder at once and the encoder once the 101 is written
      handshaker.handshake(ch, full, extra, shaken);
    } catch (WebSocketHandshakeException e) {
      x.keepConnection(400, "Bad Request: " + e.getMessage());
      return;
    }
    // nothing is read until the 101 is out and on-open has run
    ch.config().setAutoRead(false);
    WebSocket ws = loop.webSockets.socket(ch, listener, x.async() ? null : loop.workers, x.where());
    // text is validated once inflated; WebSocket sends the close for invalid UTF-8
    Utf8FrameValidator utf8 = new Utf8FrameValidator(false);
    if (deflate != null) {
      VertxInternals.becomeWebSocket(c, WebSockets.handler(ws), deflate.newExtensionDecoder(),
          deflate.newExtensionEncoder(), utf8);
    } else {
      VertxInternals.becomeWebSocket(c, WebSockets.handler(ws), utf8);
    }
    loop.upgraded(c, ch);
    // the request is over (its RequestScope actions run) without an HTTP response end
    ConnectionGuard.State s = x.connection;
    if (s != null) s.leftHttp(x);
    x.becameWebSocket();
    shaken.addListener(f -> {
      if (f.isSuccess()) {
        WebSockets.opened(ws, System.nanoTime());
      } else {
        LOG.log(Level.DEBUG, "the WebSocket handshake of {0} could not be written", x.where());
        ch.close();
      }
    });
  }

  /** True when one of {@code values} (comma-separated lists) has {@code token}, in any case. */
  static boolean lists(List<String> values, String token) {
    for (String v : values) {
      if (donkey.ring.HeaderLines.lists(v, token)) return true;
    }
    return false;
  }

  /** RFC 6455 4.1: the key is 16 random bytes in base64. */
  static boolean validKey(String key) {
    if (key == null) return false;
    String k = key.trim();
    if (k.length() != 24) return false;
    try {
      return Base64.getDecoder().decode(k).length == 16;
    } catch (IllegalArgumentException e) {
      return false;
    }
  }

  /**
   * The permessage-deflate extension accepted from the client's offers, or null. Decompressed
   * frames are bounded by {@code maxMessage}, so a small compressed frame cannot expand past the
   * message limit. The client may ask the server not to keep its compression context between
   * messages; the server's own offer keeps Netty's defaults.
   */
  private static WebSocketServerExtension deflate(List<String> offers, int maxMessage) {
    if (offers.isEmpty()) return null;
    PerMessageDeflateServerExtensionHandshaker shaker =
        new PerMessageDeflateServerExtensionHandshaker(6,
            ZlibCodecFactory.isSupportingWindowSizeAndMemLevel(), 15, true, false, maxMessage);
    for (String offer : offers) {
      for (WebSocketExtensionData d : WebSocketExtensionUtil.extractExtensions(offer)) {
        WebSocketServerExtension e = shaker.handshakeExtension(d);
        if (e != null) return e;
      }
    }
    return null;
  }

  /** An extension's response data as a {@code Sec-WebSocket-Extensions} value. */
  private static String format(WebSocketExtensionData d) {
    StringBuilder b = new StringBuilder(d.name());
    for (Map.Entry<String, String> e : d.parameters().entrySet()) {
      b.append("; ").append(e.getKey());
      if (e.getValue() != null) b.append('=').append(e.getValue());
    }
    return b.toString();
  }

  /**
   * Event loop, while Vert.x delivers {@code req}, which asks for a WebSocket and has no body:
   * the bytes behind it are kept from the HTTP decoder ({@link InputHold}), for the WebSocket if
   * its handler answers with a listener, else for the next request once this one is over.
   *
   * @return what gives the held bytes back to HTTP, to run once the request is over; null when
   *     nothing is held
   */
  static Runnable holdInput(HttpServerRequest req, ServerVerticle loop) {
    HttpConnection c = req.connection();
    if (req.method() != HttpMethod.GET || !VertxInternals.holdInput(c)) return null;
    Http1ServerConfig http1 = loop.http1;
    return () -> VertxInternals.resumeHttp(c, http1);
  }
}
