package donkey.bench;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.Http2Settings;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.http.HttpVersion;
import io.netty.handler.ssl.OpenSsl;
import io.vertx.core.net.JdkSSLEngineOptions;
import io.vertx.core.net.KeyCertOptions;
import io.vertx.core.net.OpenSSLEngineOptions;
import io.vertx.core.net.PemKeyCertOptions;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.Base64;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;

/**
 * The bench's ceiling: the TechEmpower plaintext and JSON endpoints written directly on
 * Vert.x 5, one event loop, no framework. Same transport and server options as donkey's
 * kernel leaves at their defaults (NIO, TCP_NODELAY), same {@code Date}/{@code Server} headers,
 * JSON serialized with Jackson on every request.
 *
 * <p>Usage: {@code java -cp ... donkey.bench.RawVertx PORT}. System properties add the
 * protocols {@code bench/protocols.sh} measures, with the settings donkey's kernel uses for them:
 * {@code donkey.bench.tlsPort} (a second, TLS listener on that port, with
 * {@code donkey.bench.cert} and {@code donkey.bench.key}, PEM files), {@code donkey.bench.h2}
 * (HTTP/2 on the TLS listener through ALPN, HTTP/1.1 the fallback) and {@code donkey.bench.h2c}
 * (cleartext HTTP/2 on the plain listener). The bench app ({@code app.clj}) reads the same
 * properties. {@code donkey.bench.keyManager} (the bench's {@code raw-vertx-km}) hands the TLS
 * listener a key manager built once from the PEM files ({@link #keyManager}) in place of
 * {@link PemKeyCertOptions}; {@code donkey.bench.tlsEngine=openssl} puts it on OpenSSL's
 * engine (netty-tcnative) in place of the JDK's.
 */
public final class RawVertx {
  private static final DateTimeFormatter DATE_FORMAT =
      DateTimeFormatter.ofPattern("EEE, dd MMM yyyy HH:mm:ss 'GMT'", Locale.US);
  private static final CharSequence SERVER = HttpHeaders.createOptimized("raw-vertx");
  private static final CharSequence TEXT_PLAIN = HttpHeaders.createOptimized("text/plain");
  private static final CharSequence APPLICATION_JSON =
      HttpHeaders.createOptimized("application/json");
  private static final Buffer HELLO = Buffer.buffer("Hello, World!");
  private static final CharSequence HELLO_LENGTH =
      HttpHeaders.createOptimized(Integer.toString(HELLO.length()));
  private static final ObjectMapper MAPPER = new ObjectMapper();

  /**
   * A JSON document of about 100 KB (a thousand records), the same bytes for every server:
   * bench/compression.sh's large body, served by GET /json-100k. Built on first use (its
   * holder class's initialisation), so that the servers that never serve it do not spend their
   * start-up and live heap on it.
   */
  public static final class Json100k {
    public static final byte[] BYTES = json100k();

    private Json100k() {}
  }

  /**
   * bench/files.sh: the directory whose {@code NAME.bin} files GET /files/NAME.bin sends with
   * Vert.x's sendFile; null when the property {@code donkey.bench.files} is not set.
   */
  private static final String FILES = System.getProperty("donkey.bench.files");

  private static byte[] json100k() {
    java.util.List<Map<String, Object>> items = new java.util.ArrayList<>();
    for (int i = 0; i < 1000; i++) {
      // sorted keys: Map.of's iteration order changes from one JVM to the next
      items.add(new java.util.TreeMap<>(Map.of("id", i, "name", "item " + i,
          "price", (i * 37 % 1000) / 10.0, "tags", java.util.List.of("tag" + i % 7, "tag" + i % 11),
          "note", "the " + i + "th record of the large body")));
    }
    try {
      return MAPPER.writeValueAsBytes(Map.of("items", items));
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Refreshed once a second by an event-loop timer; read only on the same event loop. */
  private CharSequence date = now();

  private RawVertx() {}

  private static CharSequence now() {
    return HttpHeaders.createOptimized(DATE_FORMAT.format(ZonedDateTime.now(ZoneOffset.UTC)));
  }

  private void handle(HttpServerRequest req) {
    serve(req, req.response(), date);
  }

  /**
   * The whole handler: GET /plaintext, GET /json, GET /json-100k and GET /files/NAME.bin, 405 for other methods, 404 elsewhere.
   * Public so that the JMH benchmarks ({@code bench/jmh}) measure this code, not a copy.
   * Event loop.
   */
  public static void serve(HttpServerRequest req, HttpServerResponse resp, CharSequence date) {
    String path = req.path();
    if (req.method() != HttpMethod.GET) {
      resp.setStatusCode(405).end();
    } else if ("/plaintext".equals(path)) {
      plaintext(resp, date);
    } else if ("/json".equals(path)) {
      try {
        json(resp, date);
      } catch (JsonProcessingException e) {
        resp.setStatusCode(500).end();
      }
    } else if (FILES != null && path.startsWith("/files/")
        && path.substring(7).matches("[a-z0-9]+\\.bin")) {
      resp.headers().add(HttpHeaders.SERVER, SERVER).add(HttpHeaders.DATE, date);
      resp.sendFile(FILES + "/" + path.substring(7));
    } else if ("/json-100k".equals(path)) {
      json(resp, date, Json100k.BYTES);
    } else {
      resp.setStatusCode(404).end();
    }
  }

  /** The plaintext response: four header lines and a constant body. */
  public static void plaintext(HttpServerResponse resp, CharSequence date) {
    resp.headers()
        .add(HttpHeaders.CONTENT_TYPE, TEXT_PLAIN)
        .add(HttpHeaders.CONTENT_LENGTH, HELLO_LENGTH)
        .add(HttpHeaders.SERVER, SERVER)
        .add(HttpHeaders.DATE, date);
    resp.end(HELLO);
  }

  /**
   * The JSON response: a new map serialized by Jackson per call; throws, having written
   * nothing, if Jackson fails.
   */
  public static void json(HttpServerResponse resp, CharSequence date)
      throws JsonProcessingException {
    json(resp, date, MAPPER.writeValueAsBytes(Map.of("message", "Hello, World!")));
  }

  /** A JSON response of {@code json}'s bytes: four header lines and the body. */
  private static void json(HttpServerResponse resp, CharSequence date, byte[] json) {
    resp.headers()
        .add(HttpHeaders.CONTENT_TYPE, APPLICATION_JSON)
        .add(HttpHeaders.CONTENT_LENGTH, Integer.toString(json.length))
        .add(HttpHeaders.SERVER, SERVER)
        .add(HttpHeaders.DATE, date);
    resp.end(Buffer.buffer(json));
  }

  /**
   * The TLS listener's options, as donkey's kernel makes them (donkey.kernel.tls.TlsOptions): the
   * JDK's engine or, with {@code openssl}, OpenSSL's with its session cache; TLS 1.3 and 1.2,
   * the JDK's default cipher suites that have forward secrecy and authenticated encryption, in
   * the JDK's order (on OpenSSL, those it has); ALPN only when HTTP/2 is on.
   */
  static HttpServerOptions tls(HttpServerOptions o, int tlsPort, KeyCertOptions keys,
                               boolean h2, boolean openssl) throws GeneralSecurityException {
    if (openssl && !OpenSsl.isAvailable()) {
      throw new IllegalStateException("OpenSSL asked for and not available",
          OpenSsl.unavailabilityCause());
    }
    o.setPort(tlsPort).setSsl(true)
        .setSslEngineOptions(openssl ? new OpenSSLEngineOptions() : new JdkSSLEngineOptions())
        .setKeyCertOptions(keys)
        .setEnabledSecureTransportProtocols(new LinkedHashSet<>(List.of("TLSv1.3", "TLSv1.2")))
        .setSni(false)
        .setUseAlpn(h2);
    if (h2) {
      o.setAlpnVersions(List.of(HttpVersion.HTTP_2, HttpVersion.HTTP_1_1, HttpVersion.HTTP_1_0));
    }
    SSLContext jdk = SSLContext.getInstance("TLS");
    jdk.init(null, null, null);
    for (String suite : jdk.getDefaultSSLParameters().getCipherSuites()) {
      if (strong(suite) && (!openssl || OpenSsl.availableJavaCipherSuites().contains(suite))) {
        o.addEnabledCipherSuite(suite);
      }
    }
    return o;
  }

  /** The key and certificate chain as the documented Vert.x options: the PEM file paths. */
  static KeyCertOptions pem(String cert, String key) {
    return new PemKeyCertOptions().setCertPath(cert).setKeyPath(key);
  }

  private static final Pattern PEM_BLOCK =
      Pattern.compile("-----BEGIN ([A-Z0-9 ]+)-----([^-]*)-----END \\1-----");

  /**
   * The same key and chain as a key manager made here, once, and given to Vert.x as it is
   * ({@link KeyCertOptions#wrap(KeyManagerFactory)}): the PEM files parsed by the JDK, put in
   * an in-memory key store, and read out of it by the JDK's SunX509 key manager factory, which
   * copies each key out of its store when it is initialised rather than at each handshake.
   * The key is the unencrypted PKCS#8 RSA key that openssl writes for the bench. (Not
   * {@code wrap(X509KeyManager)}: Vert.x's wrapper for a bare key manager logs through SLF4J,
   * which the bench's classpath does not have.)
   */
  static KeyCertOptions keyManager(String cert, String key)
      throws IOException, GeneralSecurityException {
    Certificate[] chain = CertificateFactory.getInstance("X.509")
        .generateCertificates(new ByteArrayInputStream(Files.readAllBytes(Path.of(cert))))
        .toArray(new Certificate[0]);
    Matcher m = PEM_BLOCK.matcher(Files.readString(Path.of(key), StandardCharsets.US_ASCII));
    byte[] der = null;
    while (m.find()) {
      if ("PRIVATE KEY".equals(m.group(1))) {
        der = Base64.getMimeDecoder().decode(m.group(2));
        break;
      }
    }
    if (der == null || chain.length == 0) {
      throw new IllegalArgumentException("no PKCS#8 key in " + key + " or no certificate in " + cert);
    }
    PrivateKey pk = KeyFactory.getInstance("RSA").generatePrivate(new PKCS8EncodedKeySpec(der));
    char[] pw = "raw-vertx".toCharArray();
    KeyStore store = KeyStore.getInstance("PKCS12");
    store.load(null, null);
    store.setKeyEntry("server", pk, pw, chain);
    KeyManagerFactory kmf = KeyManagerFactory.getInstance("SunX509");
    kmf.init(store, pw);
    return KeyCertOptions.wrap(kmf);
  }

  /** donkey.kernel.tls.TlsOptions#strong: every TLS 1.3 suite; ECDHE/DHE with GCM or ChaCha20. */
  private static boolean strong(String suite) {
    if (suite.startsWith("TLS_AES_") || suite.startsWith("TLS_CHACHA20_")) return true;
    boolean ephemeral = suite.startsWith("TLS_ECDHE_") || suite.startsWith("TLS_DHE_RSA_");
    boolean aead = suite.contains("_GCM_") || suite.contains("_CHACHA20_POLY1305_");
    return ephemeral && aead;
  }

  /**
   * The plain listener's options; with HTTP/2, donkey's defaults for it (ServerConfig,
   * Http2Limits): 128 streams, 16 KiB frames, the protocol's 64 KiB stream window and 4 KiB
   * HPACK table, a 1 MiB connection window, no push, the head limits as the header list size.
   * h2c off unless asked for, as in donkey.
   */
  private static HttpServerOptions plain(int port) {
    // donkey.bench.compression (bench/compression.sh): Vert.x's gzip and deflate at level 6,
    // every body compressed (no size threshold), the encoders donkey configures
    return new HttpServerOptions().setPort(port).setHost("127.0.0.1").setTcpNoDelay(true)
        .setCompressionSupported(Boolean.getBoolean("donkey.bench.compression"))
        .setCompressors(java.util.List.of(
            io.netty.handler.codec.compression.StandardCompressionOptions.gzip(6, 15, 8),
            io.netty.handler.codec.compression.StandardCompressionOptions.deflate(6, 15, 8)))
        .setMaxInitialLineLength(8192)
        .setMaxHeaderSize(16384)
        .setHttp2ClearTextEnabled(Boolean.getBoolean("donkey.bench.h2c"))
        .setInitialSettings(new Http2Settings()
            .setMaxConcurrentStreams(128)
            .setMaxFrameSize(16384)
            .setInitialWindowSize(65535)
            .setMaxHeaderListSize(16384)
            .setHeaderTableSize(Http2Settings.DEFAULT_HEADER_TABLE_SIZE)
            .setPushEnabled(false))
        .setHttp2ConnectionWindowSize(1024 * 1024);
  }

  public static void main(String[] args) throws Exception {
    int port = args.length > 0 ? Integer.parseInt(args[0]) : 8080;
    int tlsPort = Integer.getInteger("donkey.bench.tlsPort", -1);
    Vertx vertx = Vertx.vertx(new VertxOptions().setEventLoopPoolSize(1));
    RawVertx app = new RawVertx();
    // The server is created from main, so Vert.x gives it an event-loop context; the timer is
    // scheduled on that same context so `date` is only ever touched by the one loop.
    vertx.runOnContext(v -> vertx.setPeriodic(1000, id -> app.date = now()));
    vertx.createHttpServer(plain(port))
        .requestHandler(app::handle)
        .listen()
        .await();
    String extra = "";
    if (tlsPort >= 0) {
      boolean h2 = Boolean.getBoolean("donkey.bench.h2");
      boolean km = Boolean.getBoolean("donkey.bench.keyManager");
      boolean openssl = "openssl".equals(System.getProperty("donkey.bench.tlsEngine", "jdk"));
      String cert = System.getProperty("donkey.bench.cert");
      String key = System.getProperty("donkey.bench.key");
      HttpServerOptions o = tls(plain(port), tlsPort, km ? keyManager(cert, key) : pem(cert, key),
          h2, openssl);
      vertx.createHttpServer(o).requestHandler(app::handle).listen().await();
      extra = " and TLS " + tlsPort + (h2 ? " (h2, http/1.1)" : " (http/1.1)")
          + (openssl ? " on OpenSSL" : " on the JDK's engine")
          + (km ? ", key manager built once" : ", PemKeyCertOptions");
    }
    System.out.println("raw-vertx listening on 127.0.0.1:" + port
        + (Boolean.getBoolean("donkey.bench.h2c") ? " (h2c)" : "") + extra);
  }
}
