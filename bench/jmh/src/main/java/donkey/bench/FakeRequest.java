package donkey.bench;

import io.netty.handler.codec.DecoderResult;
import io.vertx.core.Future;
import io.vertx.core.Handler;
import io.vertx.core.MultiMap;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.Cookie;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpFrame;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServerFileUpload;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.http.ServerWebSocket;
import io.vertx.core.http.StreamPriority;
import io.vertx.core.net.HostAndPort;
import io.vertx.core.net.NetSocket;
import io.vertx.core.net.SocketAddress;
import java.util.Set;

/**
 * Bench-only {@link HttpServerRequest} with no socket behind it: a GET of
 * {@code /plaintext?a=1&b=2} (or of another path, see {@link #FakeRequest(MultiMap,
 * HttpServerResponse, String)}) over HTTP/1.1 from 127.0.0.1 with eight typical browser/wrk
 * headers. Only what a Ring request map reads is implemented; the rest throws.
 *
 * <p>The headers are a real Vert.x {@link MultiMap} ({@link HttpHeaders#headers()}, the same
 * {@code HeadersMultiMap} class Vert.x 5 decodes HTTP/1.x headers into).
 */
public final class FakeRequest implements HttpServerRequest {
  private final MultiMap headers;
  /** What {@link #response} returns, or null (then it throws). */
  private final HttpServerResponse response;
  private final String uri;
  private final String path;
  private final String query;
  private final HostAndPort authority = HostAndPort.create("localhost", 8080);
  private final SocketAddress local = SocketAddress.inetSocketAddress(8080, "127.0.0.1");
  private final SocketAddress remote = SocketAddress.inetSocketAddress(8080, "127.0.0.1");

  public FakeRequest() {
    this(browserHeaders());
  }

  public FakeRequest(MultiMap headers) {
    this(headers, null);
  }

  /** A request whose {@link #response} is {@code response} (for the kernel's Exchange). */
  public FakeRequest(MultiMap headers, HttpServerResponse response) {
    this(headers, response, "/plaintext?a=1&b=2", "/plaintext");
  }

  /** A GET of {@code path} (no query string) whose {@link #response} is {@code response}. */
  public FakeRequest(MultiMap headers, HttpServerResponse response, String path) {
    this(headers, response, path, path);
  }

  private FakeRequest(MultiMap headers, HttpServerResponse response, String uri, String path) {
    this.headers = headers;
    this.response = response;
    this.uri = uri;
    this.path = path;
    int q = uri.indexOf('?');
    this.query = q < 0 ? null : uri.substring(q + 1);
  }

  /** What wrk sends: a Host header and nothing else. */
  public static MultiMap wrkHeaders() {
    MultiMap h = HttpHeaders.headers();
    h.add("Host", "127.0.0.1:18480");
    return h;
  }

  /**
   * What TechEmpower's plaintext run sends: Host, its Accept line and Connection: keep-alive,
   * in that order.
   */
  public static MultiMap techEmpowerHeaders() {
    MultiMap h = HttpHeaders.headers();
    h.add("Host", "127.0.0.1:18480");
    h.add("Accept",
        "text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7");
    h.add("Connection", "keep-alive");
    return h;
  }

  /** Eight headers in the order and case a browser or wrk sends them. */
  public static MultiMap browserHeaders() {
    MultiMap h = HttpHeaders.headers();
    h.add("Host", "localhost:8080");
    h.add("User-Agent",
        "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0");
    h.add("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8");
    h.add("Accept-Encoding", "gzip, deflate, br, zstd");
    h.add("Accept-Language", "en-US,en;q=0.5");
    h.add("Connection", "keep-alive");
    h.add("Cookie", "session=7f3a9c2e1b; theme=dark");
    h.add("Cache-Control", "max-age=0");
    return h;
  }

  // ---- what RequestMap.build reads ------------------------------------------------------

  @Override public HttpMethod method() { return HttpMethod.GET; }
  @Override public String uri() { return uri; }
  @Override public String path() { return path; }
  @Override public String query() { return query; }
  @Override public HttpVersion version() { return HttpVersion.HTTP_1_1; }
  @Override public String scheme() { return "http"; }
  @Override public boolean isSSL() { return false; }
  @Override public HostAndPort authority() { return authority; }
  @Override public HostAndPort authority(boolean real) { return authority; }
  @Override public SocketAddress localAddress() { return local; }
  @Override public SocketAddress remoteAddress() { return remote; }
  @Override public MultiMap headers() { return headers; }

  @Override
  public HttpServerResponse response() {
    if (response == null) throw no();
    return response;
  }

  // ---- not needed by the benchmark -------------------------------------------------------

  private static UnsupportedOperationException no() {
    return new UnsupportedOperationException("FakeRequest");
  }

  @Override public HttpServerRequest exceptionHandler(Handler<Throwable> handler) { throw no(); }
  @Override public HttpServerRequest handler(Handler<Buffer> handler) { throw no(); }
  @Override public HttpServerRequest pause() { throw no(); }
  @Override public HttpServerRequest resume() { throw no(); }
  @Override public HttpServerRequest fetch(long amount) { throw no(); }
  @Override public HttpServerRequest endHandler(Handler<Void> endHandler) { throw no(); }
  @Override public long bytesRead() { throw no(); }
  @Override public HttpServerRequest setParamsCharset(String charset) { throw no(); }
  @Override public String getParamsCharset() { throw no(); }
  @Override public MultiMap params(boolean semicolonIsNormalChar) { throw no(); }
  @Override public String absoluteURI() { throw no(); }
  @Override public Future<Buffer> body() { throw no(); }
  @Override public Future<Void> end() { throw no(); }
  @Override public Future<NetSocket> toNetSocket() { throw no(); }
  @Override public HttpServerRequest setExpectMultipart(boolean expect) { throw no(); }
  @Override public boolean isExpectMultipart() { throw no(); }
  @Override public HttpServerRequest uploadHandler(Handler<HttpServerFileUpload> h) { throw no(); }
  @Override public MultiMap formAttributes() { throw no(); }
  @Override public String getFormAttribute(String attributeName) { throw no(); }
  @Override public Future<ServerWebSocket> toWebSocket() { throw no(); }
  @Override public boolean isEnded() { throw no(); }
  @Override public HttpServerRequest customFrameHandler(Handler<HttpFrame> handler) { throw no(); }
  @Override public HttpConnection connection() { throw no(); }
  @Override public HttpServerRequest streamPriorityHandler(Handler<StreamPriority> h) { throw no(); }
  @Override public DecoderResult decoderResult() { throw no(); }
  @Override public Cookie getCookie(String name) { throw no(); }
  @Override public Cookie getCookie(String name, String domain, String path) { throw no(); }
  @Override public Set<Cookie> cookies(String name) { throw no(); }
  @Override public Set<Cookie> cookies() { throw no(); }
}
