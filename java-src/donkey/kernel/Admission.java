package donkey.kernel;

import clojure.lang.IFn;
import clojure.lang.IPersistentMap;
import donkey.kernel.config.ServerConfig;
import donkey.ring.RequestMap;
import donkey.route.Route;
import donkey.route.Router;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.HostAndPort;
import java.io.InputStream;
import java.lang.System.Logger.Level;

/**
 * The part of an {@link Exchange} that takes a request from its head to its handler: the head
 * checked ({@link HeadCheck}), the body's framing read, the handler picked (the server's, or
 * the route table's), the body read ({@link RequestBody}), then {@link Exchange#dispatch}. A
 * request refused on the way is answered here (400, 404, 405 with Allow, 406, 415), before its
 * body is read; one with a body also closes its connection. What admission finds (the handler
 * and its mode, the route, the scanned headers, the body) is this class's own state, written
 * here alone and read by the exchange at dispatch.
 *
 * <p>An HTTP/2 request needs more on the way: its stream counted on its connection and ended
 * by the stream's close (a client's reset included), a Host from its {@code :authority}, and
 * whether its body has all arrived before Vert.x says so; what this needs of the connection is
 * its {@link donkey.kernel.http2.Http2Session}.
 *
 * <p>Threading: the connection's event loop; the findings are published to a worker with the
 * exchange (the worker pool's queue).
 */
abstract class Admission extends ErrorAnswers {
  private static final System.Logger LOG = System.getLogger("donkey");

  /**
   * The request's headers, scanned once: here when the kernel needs one of them (a body's
   * framing, media-type routing), else null and left to the request map.
   */
  private RequestMap.Head head;
  /** The handler this request runs: the server's, the matched route's or the not-found one. */
  private IFn handler;
  private boolean async;
  private IPersistentMap pathParams;
  /** The matched route, or null without a route table. */
  private Route route;
  /** The request's body, or null when it has none. */
  private RequestBody body;
  /** The request's path and query string (null without one), as the head check found them. */
  private String path;
  private String query;

  Admission(ServerVerticle loop, HttpServerRequest req, ConnectionGuard.State connection) {
    super(loop, req, connection);
  }

  /** Any thread: claims the answer and closes with it ({@link Exchange#refuse(int, String)}). */
  abstract boolean refuse(int status, String reason);

  /** Event loop: claims the answer ({@link Exchange#refuse(int, String, String, boolean)}). */
  abstract boolean refuse(int status, String reason, String allow, boolean close);

  /** Any thread: claims the answer for {@code answer} ({@link Exchange#answerWith}). */
  abstract boolean answerWith(Runnable answer);

  /** Any thread: the body could not be read ({@link Exchange#bodyBroke}). */
  abstract boolean bodyBroke();

  /** True once the request has been answered. */
  abstract boolean answered();

  /** Event loop: builds the Ring request and runs the handler ({@link Exchange#dispatch}). */
  abstract void dispatch(InputStream in);

  /** Event loop: runs {@code action} once the request is over ({@link Exchange#atEnd}). */
  abstract void atEnd(Runnable action);

  /**
   * Event loop: checks the head ({@link HeadCheck}), routes, reads the body when there is one,
   * then dispatches.
   *
   * <p>One method, not a chain of small ones, on purpose: at its size C2 will not inline it
   * into the Vert.x and Netty frames that call it, so the request path below it is compiled
   * once, as its own unit, instead of again into each of those frames while the JIT warms up
   * (and recompiled with them when one of them is deoptimized). donkey.jit-shape-test guards it.
   */
  final void admit() {
    ServerConfig cfg = loop.config;
    // watched by the idle check from here (its body may be read before dispatch); the request
    // timeout only counts from dispatch (dispatchedAt)
    if (connection != null) {
      if (h2) {
        connection.streamStarted(self());
        // after its response ended, or reset by either side before that; Vert.x calls the
        // response's close handler on the loop, and the exchange ends a stream once
        resp.closeHandler(self());
      } else {
        connection.serving(self());
      }
    }
    HeadCheck check = loop.headCheck;
    String bad;
    try {
      bad = check.check(req, connection);
      if (bad == null && h2 && !check.hasHost()) bad = hostFromAuthority(check);
    } catch (RuntimeException e) {
      LOG.log(Level.ERROR, "the head of " + where() + " could not be checked", e);
      bad = "Bad Request: malformed request";
    }
    if (bad != null) {
      refuse(check.status, bad);
      return;
    }
    path = check.path;
    query = check.query;
    // the client's last request (RFC 9112 9.6): no request read behind it is served, and the
    // connection closes after its answer, which says so
    if (check.close) closeAfterResponse();
    try {
      // A request without framing headers has no body, and needs no other header of the
      // kernel unless the routes negotiate media types: its headers are scanned only if the
      // handler reads :headers (LazyRequestMap). Otherwise the one pass picks up every value
      // needed, with repeated headers joined.
      String cl = check.contentLength;
      String te = check.transferEncoding;
      // an HTTP/2 body needs no length: its stream's end delimits it (RFC 9113 8.1)
      boolean unframed = h2 && cl == null && te == null && !streamEnded();
      RequestMap.Head head = null;
      if (unframed || cl != null || te != null
          || cfg.router != null && cfg.router.needsMediaTypes()) {
        head = RequestMap.scan(req.headers());
        cl = head.contentLength;
        te = head.transferEncoding;
      }
      long length = unframed ? RequestBody.CHUNKED : RequestBody.length(cl, te);
      if (length == RequestBody.REFUSED) {
        refuse(400, te != null ? "Bad Request: unsupported or ambiguous Transfer-Encoding"
            : "Bad Request: invalid Content-Length");
        return;
      }
      int coding = RequestDecoding.NONE;
      if (length != 0 && cfg.decompressRequests) {
        coding = RequestDecoding.of(req.getHeader(HttpHeaders.CONTENT_ENCODING));
        if (coding == RequestDecoding.UNSUPPORTED) {
          refuse(415, "Unsupported Media Type: a request body's Content-Encoding must be "
              + "gzip or deflate");
          return;
        }
        if (coding != RequestDecoding.NONE) {
          // the handler reads the inflated body: its length and coding are no longer these
          req.headers().remove(HttpHeaders.CONTENT_ENCODING).remove(HttpHeaders.CONTENT_LENGTH);
          head = RequestMap.scan(req.headers());
        }
      }
      // (HTTP/2 has no upgrade: there the header makes the request malformed)
      if (length == 0 && check.websocket && !h2) {
        Runnable resume = WebSocketUpgrade.holdInput(req, loop);
        if (resume != null) atEnd(resume);
      }
      this.head = head;
      if (!route(cfg, head, length != 0)) return;
      if (length == 0) {
        dispatch(null);
        return;
      }
      // (HTTP/1.0 has no interim answers: RFC 9110 10.1.1 says to ignore the expectation)
      RequestBody b = new RequestBody(this, req, coding);
      if (b.read(length, async, head.expect != null && req.version() != HttpVersion.HTTP_1_0
          && "100-continue".equalsIgnoreCase(head.expect.trim()), maxBodySize(cfg), cfg)) {
        body = b;
      }
    } catch (RuntimeException e) {
      // a bug of the kernel's, on input it should have refused: the request still gets an
      // answer, and the connection no further requests
      LOG.log(Level.ERROR, "the request " + where() + " failed before its handler ran", e);
      refuse(500, ErrorAnswers.ERROR_500);
    }
  }

  /**
   * Event loop: picks the handler. With a route table, a request no route takes is answered
   * here (404, 405 with Allow, 406, 415, 400 for a bad path parameter) before its body is read.
   *
   * @param h the scanned headers, null unless the routes negotiate media types (see admit)
   * @return false when the request has been answered
   */
  private boolean route(ServerConfig cfg, RequestMap.Head h, boolean hasBody) {
    if (cfg.router == null) {
      handler = cfg.handler;
      async = cfg.async;
      return true;
    }
    Router.Match m = cfg.router.match(req.method().name(), path,
        h == null ? null : h.contentType, h == null ? null : h.accept, loop.pathMemo);
    if (m.status == 0) {
      handler = m.route.handler();
      async = m.route.mode() == Route.Mode.NON_BLOCKING;
      route = m.route;
      pathParams = m.pathParams;
      return true;
    }
    if (m.status == 404 && cfg.notFound != null) {
      handler = cfg.notFound;
      return true;
    }
    refuse(m.status, m.message, m.allow, hasBody);
    return false;
  }

  /**
   * After the head check of an HTTP/2 request without a Host line: its Host from its
   * {@code :authority}, as a gateway to HTTP/1.1 would give it (RFC 9113 8.3.1), since Ring
   * handlers and middleware read the host from {@code :headers}. (A Host sent beside an
   * {@code :authority} Vert.x has checked names the same host and port.)
   *
   * @return null, or the reason for a 400 when the authority is not a valid Host value
   */
  private String hostFromAuthority(HeadCheck check) {
    HostAndPort a = req.authority();
    if (a == null) return null;
    ConnectionGuard.State c = connection;
    String host = c != null && c.h2 != null ? c.h2.hostText(a) : a.toString();
    if (!check.validHost(host)) return "Bad Request: invalid :authority";
    // (no Host line to replace)
    req.headers().add(HttpHeaders.HOST, host);
    return null;
  }

  /**
   * Whether the client has sent all of an HTTP/2 request: Vert.x runs the request handler
   * before it marks a request that came in one HEADERS frame ended.
   */
  private boolean streamEnded() {
    ConnectionGuard.State c = connection;
    return c != null && c.h2 != null ? c.h2.remoteEnded(req) : req.isEnded();
  }

  /** The scanned headers, or null when the kernel needed none ({@link #head}). */
  final RequestMap.Head head() {
    return head;
  }

  /** The request's path, as Vert.x's {@code path()} gives it. */
  final String path() {
    return path;
  }

  /** The request's query string, or null without one. */
  final String query() {
    return query;
  }

  /** The handler this request runs. */
  final IFn handler() {
    return handler;
  }

  /** The matched route's path parameters, or null. */
  final IPersistentMap pathParams() {
    return pathParams;
  }

  /** The matched route, or null without a route table (or for the not-found handler). */
  final Route route() {
    return route;
  }

  @Override
  final boolean async() {
    return async;
  }

  /** The largest request body allowed: the matched route's, else the server's. */
  final long maxBodySize(ServerConfig cfg) {
    Route r = route;
    return r != null && r.maxBodySize() >= 0 ? r.maxBodySize() : cfg.maxBodySize;
  }

  @Override
  final boolean compresses() {
    return route == null || route.compresses();
  }

  /** The request's body, or null when it has none (or before admission read its framing). */
  final RequestBody body() {
    return body;
  }
}
