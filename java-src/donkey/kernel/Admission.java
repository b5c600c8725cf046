package donkey.kernel;

import donkey.kernel.config.ServerConfig;
import donkey.ring.RequestMap;
import donkey.route.Route;
import donkey.route.Router;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpVersion;
import java.lang.System.Logger.Level;

/**
 * A request's way from its head to its handler: the head checked ({@link HeadCheck}), the
 * body's framing read, the handler picked (the server's, or the route table's), the body read
 * ({@link RequestBody}), then {@link Exchange#dispatch}. A request refused on the way is
 * answered here (400, 404, 405 with Allow, 406, 415), before its body is read; one with a body
 * also closes its connection.
 *
 * <p>Threading: the connection's event loop. Stateless: what it finds it gives the
 * {@link Exchange} ({@link Exchange#runs}, {@link Exchange#scanned}, {@link Exchange#reading}).
 */
final class Admission {
  private static final System.Logger LOG = System.getLogger("donkey");

  private Admission() {}

  /**
   * Event loop: checks the head of {@code x} ({@link HeadCheck}), routes, reads the body when
   * there is one, then dispatches.
   *
   * <p>One method, not a chain of small ones, on purpose: at its size C2 will not inline it
   * into the Vert.x and Netty frames that call it, so the request path below it is compiled
   * once, as its own unit, instead of again into each of those frames while the JIT warms up
   * (and recompiled with them when one of them is deoptimized). donkey.jit-shape-test guards it.
   */
  static void start(Exchange x) {
    ServerVerticle loop = x.loop();
    ServerConfig cfg = loop.config;
    // watched by the idle check from here (its body may be read before dispatch); the request
    // timeout only counts from dispatch (dispatchedAt)
    if (x.connection != null) {
      if (x.h2) {
        Http2Streams.started(x);
      } else {
        x.connection.serving(x);
      }
    }
    HeadCheck check = loop.headCheck;
    String bad;
    try {
      bad = check.check(x.request());
      if (bad == null && x.h2 && !check.hasHost()) bad = Http2Streams.hostFromAuthority(x, check);
    } catch (RuntimeException e) {
      LOG.log(Level.ERROR, "the head of " + x.where() + " could not be checked", e);
      bad = "Bad Request: malformed request";
    }
    if (bad != null) {
      x.refuse(check.status, bad);
      return;
    }
    // the client's last request (RFC 9112 9.6): no request read behind it is served, and the
    // connection closes after its answer, which says so
    if (check.close) x.closeAfterResponse();
    try {
      HttpServerRequest req = x.request();
      // A request without framing headers has no body, and needs no other header of the
      // kernel unless the routes negotiate media types: its headers are scanned only if the
      // handler reads :headers (LazyRequestMap). Otherwise the one pass picks up every value
      // needed, with repeated headers joined.
      String cl = check.contentLength;
      String te = check.transferEncoding;
      // an HTTP/2 body needs no length: its stream's end delimits it (RFC 9113 8.1)
      boolean unframed = x.h2 && cl == null && te == null && !Http2Streams.ended(x);
      RequestMap.Head head = null;
      if (unframed || cl != null || te != null
          || cfg.router != null && cfg.router.needsMediaTypes()) {
        head = RequestMap.scan(req.headers());
        x.scanned(head);
        cl = head.contentLength;
        te = head.transferEncoding;
      }
      long length = unframed ? RequestBody.CHUNKED : RequestBody.length(cl, te);
      if (length == RequestBody.REFUSED) {
        x.refuse(400, te != null ? "Bad Request: unsupported or ambiguous Transfer-Encoding"
            : "Bad Request: invalid Content-Length");
        return;
      }
      int coding = RequestDecoding.NONE;
      if (length != 0 && cfg.decompressRequests) {
        coding = RequestDecoding.of(req.getHeader(HttpHeaders.CONTENT_ENCODING));
        if (coding == RequestDecoding.UNSUPPORTED) {
          x.refuse(415, "Unsupported Media Type: a request body's Content-Encoding must be "
              + "gzip or deflate");
          return;
        }
        if (coding != RequestDecoding.NONE) {
          // the handler reads the inflated body: its length and coding are no longer these
          req.headers().remove(HttpHeaders.CONTENT_ENCODING).remove(HttpHeaders.CONTENT_LENGTH);
          head = RequestMap.scan(req.headers());
          x.scanned(head);
        }
      }
      // (HTTP/2 has no upgrade: there the header makes the request malformed)
      if (length == 0 && check.websocket && !x.h2) WebSocketUpgrade.holdInput(x);
      if (!route(x, cfg, head, length != 0)) return;
      if (length == 0) {
        x.dispatch(null);
        return;
      }
      // (HTTP/1.0 has no interim answers: RFC 9110 10.1.1 says to ignore the expectation)
      x.reading(RequestBody.read(x, req, length, x.async(),
          head.expect != null && req.version() != HttpVersion.HTTP_1_0
              && "100-continue".equalsIgnoreCase(head.expect.trim()), coding,
          x.maxBodySize(cfg), cfg));
    } catch (RuntimeException e) {
      // a bug of the kernel's, on input it should have refused: the request still gets an
      // answer, and the connection no further requests
      LOG.log(Level.ERROR, "the request " + x.where() + " failed before its handler ran", e);
      x.refuse(500, ErrorAnswers.ERROR_500);
    }
  }

  /**
   * Event loop: picks the handler of {@code x}. With a route table, a request no route takes is
   * answered here (404, 405 with Allow, 406, 415, 400 for a bad path parameter) before its
   * body is read.
   *
   * @param h the scanned headers, null unless the routes negotiate media types (see start)
   * @return false when the request has been answered
   */
  private static boolean route(Exchange x, ServerConfig cfg, RequestMap.Head h,
                               boolean hasBody) {
    if (cfg.router == null) {
      x.runs(cfg.handler, cfg.async, null, null);
      return true;
    }
    HttpServerRequest req = x.request();
    Router.Match m = cfg.router.match(req.method().name(), req.path(),
        h == null ? null : h.contentType, h == null ? null : h.accept);
    if (m.status == 0) {
      x.runs(m.route.handler(), m.route.mode() == Route.Mode.NON_BLOCKING, m.route,
          m.pathParams);
      return true;
    }
    if (m.status == 404 && cfg.notFound != null) {
      x.runs(cfg.notFound, false, null, null);
      return true;
    }
    x.refuse(m.status, m.message, m.allow, hasBody);
    return false;
  }
}
