import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.Http2Settings;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.JdkSSLEngineOptions;
import io.vertx.core.net.PemKeyCertOptions;
import java.util.LinkedHashSet;
import java.util.List;

/**
 * The comparator of conformance/h2spec.sh: the same answers as h2_server.clj (a short text,
 * or the request's body back) on Vert.x used directly, h2c on one listener and h2 over TLS on
 * another, so that a case donkey fails can be told apart from one Vert.x and Netty fail
 * themselves. TLS as donkey's kernel sets it up: the JDK's engine, TLS 1.3 and 1.2, ALPN
 * offering h2 then http/1.1; HTTP/2 settings as donkey's defaults. Run from source, no build step:
 * {@code java -cp CLASSPATH conformance/RawH2Server.java CERT.pem KEY.pem}.
 */
public final class RawH2Server {
  private RawH2Server() {}

  private static void handle(HttpServerRequest req) {
    req.body().onComplete(ar -> {
      Buffer body = ar.succeeded() ? ar.result() : null;
      if (ar.failed()) {
        if (!req.response().ended() && !req.response().closed()) {
          req.response().setStatusCode(400).end();
        }
      } else if (body != null && body.length() > 0) {
        req.response().putHeader("content-type", "application/octet-stream").end(body);
      } else {
        req.response().putHeader("content-type", "text/plain")
            .end("Hello, World! This is raw Vert.x over HTTP/2.\n");
      }
    });
  }

  public static void main(String[] args) {
    Vertx vertx = Vertx.vertx();
    // donkey's HTTP/2 defaults (ServerConfig, Http2Limits)
    HttpServerOptions plain = new HttpServerOptions().setHost("127.0.0.1").setPort(0)
        .setMaxInitialLineLength(8192)
        .setMaxHeaderSize(16384)
        .setHttp2ClearTextEnabled(true)
        .setInitialSettings(new Http2Settings()
            .setMaxConcurrentStreams(128)
            .setMaxFrameSize(16384)
            .setInitialWindowSize(65535)
            .setMaxHeaderListSize(16384)
            .setHeaderTableSize(Http2Settings.DEFAULT_HEADER_TABLE_SIZE)
            .setPushEnabled(false))
        .setHttp2ConnectionWindowSize(1024 * 1024);
    HttpServerOptions tls = new HttpServerOptions(plain).setHttp2ClearTextEnabled(false)
        .setSsl(true)
        .setSslEngineOptions(new JdkSSLEngineOptions())
        .setKeyCertOptions(new PemKeyCertOptions().setCertPath(args[0]).setKeyPath(args[1]))
        .setEnabledSecureTransportProtocols(new LinkedHashSet<>(List.of("TLSv1.3", "TLSv1.2")))
        .setUseAlpn(true)
        .setAlpnVersions(List.of(HttpVersion.HTTP_2, HttpVersion.HTTP_1_1, HttpVersion.HTTP_1_0));
    int h2c = vertx.createHttpServer(plain).requestHandler(RawH2Server::handle).listen().await()
        .actualPort();
    int h2 = vertx.createHttpServer(tls).requestHandler(RawH2Server::handle).listen().await()
        .actualPort();
    // h2spec.sh waits for this line before it starts h2spec
    System.out.println("h2 server (raw-vertx) listening on h2c port " + h2c + " and h2 port " + h2);
  }
}
