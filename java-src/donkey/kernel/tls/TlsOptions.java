package donkey.kernel.tls;

import clojure.lang.Keyword;
import donkey.kernel.config.ServerConfig;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.OpenSsl;
import io.netty.handler.ssl.SslProvider;
import io.vertx.core.Vertx;
import io.vertx.core.net.KeyCertOptions;
import io.vertx.core.net.ServerSSLOptions;
import io.vertx.core.net.TrustOptions;
import java.security.GeneralSecurityException;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import javax.net.ssl.TrustManagerFactory;

/**
 * The TLS listener's Vert.x options: the protocols, cipher suites and client authentication
 * of a {@link ServerConfig}, with the key and trust material {@link KeyMaterial} loads, as the
 * {@link ServerSSLOptions} the listener starts with or is updated to (the server's TLS reload).
 *
 * <p>Everything is checked here, before Vert.x sees it: options that leave no protocol or
 * cipher suite enabled, or that contradict each other, are an {@link IllegalArgumentException}
 * naming the option, and so is whatever the TLS engine itself refuses (the context is made
 * once here, rather than failing at the first handshake). Vert.x only gets ready key and trust
 * manager factories; SNI is {@link SniKeyManager}'s, not Vert.x's.
 *
 * <p>Threading: the caller's (start-up or reload), never an event loop: it reads files.
 */
public final class TlsOptions {
  private TlsOptions() {}

  /** The protocols enabled by default: TLS 1.3 and 1.2 only. */
  static final List<String> PROTOCOLS = List.of("TLSv1.3", "TLSv1.2");
  /** What {@code :replace-exclude-protocols? true} starts from (the JDK may disable some). */
  static final List<String> ALL_PROTOCOLS = List.of("TLSv1.3", "TLSv1.2", "TLSv1.1", "TLSv1");

  private static final Keyword NEED = Keyword.intern("need");
  private static final Keyword WANT = Keyword.intern("want");
  private static final Keyword NONE = Keyword.intern("none");
  private static final Keyword AUTO = Keyword.intern("auto");
  private static final Keyword JDK = Keyword.intern("jdk");
  private static final Keyword OPENSSL = Keyword.intern("openssl");

  /** What Vert.x waits for a handshake when the header timeout does not say less, in ms. */
  private static final long HANDSHAKE_TIMEOUT_MS = 10_000;

  /**
   * The TLS listener's engine for {@code :ssl-provider} {@code asked}: {@code :jdk}, or
   * {@code :openssl} when netty-tcnative is on the classpath and loads, which {@code :auto}
   * (or null) takes when it can. It is the listener's for its life: a reload changes the
   * context, not the engine.
   *
   * @throws IllegalArgumentException for another value, or {@code :openssl} without OpenSSL
   */
  public static SslProvider engine(Keyword asked) {
    if (asked == null || asked == AUTO) {
      return OpenSsl.isAvailable() ? SslProvider.OPENSSL : SslProvider.JDK;
    }
    if (asked == JDK) return SslProvider.JDK;
    if (asked != OPENSSL) throw bad(":ssl-provider must be one of :auto, :jdk, :openssl, got " + asked);
    if (!OpenSsl.isAvailable()) {
      Throwable why = OpenSsl.unavailabilityCause();
      throw bad(":ssl-provider :openssl needs OpenSSL, which is not available: put "
          + "io.netty/netty-tcnative-boringssl-static (with the classifier of this platform) on "
          + "the classpath" + (why == null ? "" : " (" + why + ")"), why);
    }
    return SslProvider.OPENSSL;
  }

  /**
   * The TLS options {@code c} asks for, loaded and checked for the engine
   * {@code :ssl-provider} {@code asked} gives (see {@link #engine}; at a reload, the start's),
   * with a handshake timeout of {@code handshakeMs} (0: Vert.x's 10 s).
   *
   * @throws IllegalArgumentException naming the option at fault
   */
  public static ServerSSLOptions from(ServerConfig c, Keyword asked, long handshakeMs) {
    SslProvider engine = engine(asked);
    if (c.sslContext != null) {
      if (asked == OPENSSL) {
        throw bad(":ssl-provider :openssl and :ssl-context: an SSLContext is the JDK's engine; "
            + "give :keystore or :ssl-cert/:ssl-key for OpenSSL, or :ssl-provider :auto");
      }
      engine = SslProvider.JDK;
    }
    ClientAuth auth = clientAuth(c.clientAuth);
    ServerSSLOptions o = new ServerSSLOptions()
        .setClientAuth(auth == ClientAuth.REQUIRE ? io.vertx.core.http.ClientAuth.REQUIRED
            : auth == ClientAuth.OPTIONAL ? io.vertx.core.http.ClientAuth.REQUEST
            : io.vertx.core.http.ClientAuth.NONE)
        // SNI is the key manager's (see the class comment)
        .setSni(false)
        .setUseAlpn(false)
        .setSslHandshakeTimeout(handshakeMs > 0 ? handshakeMs : HANDSHAKE_TIMEOUT_MS)
        .setSslHandshakeTimeoutUnit(TimeUnit.MILLISECONDS);
    o.setEnabledSecureTransportProtocols(new LinkedHashSet<>(protocols(c)));
    KeyManagerFactory keys;
    TrustManagerFactory trust = null;
    if (c.sslContext != null) {
      if (c.keystore != null || c.sslCert != null || c.sslKey != null) {
        throw bad(":ssl-context and " + (c.keystore != null ? ":keystore" : ":ssl-cert/:ssl-key")
            + " both give the server's key; give one");
      }
      if (c.truststore != null) {
        throw bad(":truststore is not used with :ssl-context, whose own trust managers check "
            + "client certificates; give one");
      }
      keys = new TlsContextFactory.FixedKeys(null, c.sslContext);
    } else {
      keys = KeyMaterial.keyManagers(c);
      if (c.truststore != null) {
        trust = KeyMaterial.trustManagers(c);
      } else if (auth != ClientAuth.NONE) {
        // Jetty's fallback, the key store as the trust store, has no safe PEM counterpart:
        // trusting the server's own certificate admits only holders of the server's key, and
        // trusting its chain's CA admits whoever else that CA certified
        if (c.keystore == null) {
          throw bad(":client-auth " + c.clientAuth + " with :ssl-cert/:ssl-key needs a "
              + ":truststore, the CAs whose client certificates are accepted: PEM files are no "
              + "trust store to fall back on, as a :keystore is (the CA of :ssl-cert's chain may "
              + "certify anyone; give it as the :truststore if it is your clients' CA)");
        }
        trust = KeyMaterial.trustManagers(c);
      }
    }
    List<String> suites = cipherSuites(c, engine);
    for (String s : suites) o.addEnabledCipherSuite(s);
    o.setKeyCertOptions(new Keys(keys));
    if (trust != null) o.setTrustOptions(TrustOptions.wrap(trust));
    // make the context once now, so that what only the TLS engine can refuse fails here
    // rather than at the first handshake
    TlsContextFactory f = new TlsContextFactory(engine);
    f.forServer(auth);
    f.enabledProtocols(o.getEnabledSecureTransportProtocols());
    f.enabledCipherSuites(o.getEnabledCipherSuites());
    f.keyMananagerFactory(keys);
    f.trustManagerFactory(trust);
    try {
      f.create();
    } catch (SSLException | RuntimeException e) {
      throw bad("the TLS options do not make a usable TLS context: " + e.getMessage(), e);
    }
    return o;
  }

  private static IllegalArgumentException bad(String msg) {
    return new IllegalArgumentException(msg);
  }

  private static IllegalArgumentException bad(String msg, Throwable cause) {
    return new IllegalArgumentException(msg, cause);
  }

  private static ClientAuth clientAuth(Keyword k) {
    if (k == null || k == NONE) return ClientAuth.NONE;
    if (k == NEED) return ClientAuth.REQUIRE;
    if (k == WANT) return ClientAuth.OPTIONAL;
    throw bad(":client-auth must be one of :need, :want, :none, got " + k);
  }

  // ---- protocols and cipher suites --------------------------------------------------------

  /** The enabled protocols: TLS 1.3 and 1.2 (or all four) less {@code :exclude-protocols}. */
  static List<String> protocols(ServerConfig c) {
    List<String> out = new ArrayList<>(c.replaceExcludeProtocols ? ALL_PROTOCOLS : PROTOCOLS);
    if (c.excludeProtocols != null) {
      for (Object p : c.excludeProtocols) out.remove(String.valueOf(p));
    }
    if (out.isEmpty()) throw bad(":exclude-protocols leaves no protocol enabled");
    return out;
  }

  /**
   * The enabled cipher suites, in the JDK's order of preference: those the JDK enables by
   * default that have forward secrecy and authenticated encryption (every TLS 1.3 suite;
   * ECDHE or DHE with AES-GCM or ChaCha20-Poly1305 for TLS 1.2), or with
   * {@code :replace-exclude-ciphers? true} all the JDK enables; less those an
   * {@code :exclude-ciphers} entry names or matches as a regular expression. The JDK's defaults
   * have no NULL, anonymous, export, RC4 or 3DES suite in the first place; the filter also
   * drops static-RSA key exchange (no forward secrecy) and CBC (padding-oracle history).
   *
   * <p>On OpenSSL, those of them BoringSSL has (it lacks finite-field DHE, and CBC with SHA-2
   * MACs). BoringSSL enables every TLS 1.3 suite whatever it is told, so excluding one while
   * TLS 1.3 is on is refused rather than ignored.
   */
  static List<String> cipherSuites(ServerConfig c, SslProvider engine) {
    String[] jdk = c.sslContext != null
        ? c.sslContext.getDefaultSSLParameters().getCipherSuites() : Jdk.SUITES;
    List<Pattern> excluded = new ArrayList<>();
    if (c.excludeCiphers != null) {
      for (Object x : c.excludeCiphers) {
        try {
          excluded.add(Pattern.compile(String.valueOf(x)));
        } catch (PatternSyntaxException e) {
          excluded.add(Pattern.compile(Pattern.quote(String.valueOf(x))));
        }
      }
    }
    List<String> out = new ArrayList<>();
    for (String s : jdk) {
      if (!c.replaceExcludeCiphers && !strong(s)) continue;
      boolean drop = false;
      for (Pattern p : excluded) {
        if (p.pattern().equals(s) || p.matcher(s).matches()) {
          drop = true;
          break;
        }
      }
      if (!drop) out.add(s);
    }
    if (out.isEmpty()) throw bad(":exclude-ciphers leaves no cipher suite enabled");
    if (engine != SslProvider.OPENSSL) return out;
    if (protocols(c).contains("TLSv1.3")) {
      for (String s : OPENSSL_TLS13) {
        if (!out.contains(s)) {
          throw bad(":exclude-ciphers " + s + ": the OpenSSL engine (BoringSSL) enables every "
              + "TLS 1.3 suite and cannot exclude one; use :ssl-provider :jdk, or exclude "
              + "TLSv1.3 too");
        }
      }
    }
    out.retainAll(OpenSsl.availableJavaCipherSuites());
    if (out.isEmpty()) {
      throw bad(":exclude-ciphers leaves no cipher suite the OpenSSL engine has; use "
          + ":ssl-provider :jdk");
    }
    return out;
  }

  /** The TLS 1.3 suites BoringSSL always enables. */
  private static final List<String> OPENSSL_TLS13 =
      List.of("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256");

  /** Forward secrecy and authenticated encryption (see {@link #cipherSuites}). */
  static boolean strong(String suite) {
    if (suite.startsWith("TLS_AES_") || suite.startsWith("TLS_CHACHA20_")) return true;
    boolean ephemeral = suite.startsWith("TLS_ECDHE_") || suite.startsWith("TLS_DHE_RSA_");
    boolean aead = suite.contains("_GCM_") || suite.contains("_CHACHA20_POLY1305_");
    return ephemeral && aead;
  }

  /** The JDK's default-enabled suites, read once. */
  private static final class Jdk {
    static final String[] SUITES;

    static {
      try {
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(null, null, null);
        SUITES = ctx.getDefaultSSLParameters().getCipherSuites();
      } catch (GeneralSecurityException e) {
        throw new ExceptionInInitializerError(e);
      }
    }
  }

  /**
   * The key managers, handed to Vert.x as they are: no file for Vert.x to read, and no name
   * mapping (SNI is the key manager's).
   */
  private static final class Keys implements KeyCertOptions {
    private final KeyManagerFactory factory;

    Keys(KeyManagerFactory factory) {
      this.factory = factory;
    }

    @Override
    public KeyCertOptions copy() {
      return this;
    }

    @Override
    public KeyManagerFactory getKeyManagerFactory(Vertx vertx) {
      return factory;
    }

    @Override
    public Function<String, KeyManagerFactory> keyManagerFactoryMapper(Vertx vertx) {
      return name -> null;
    }
  }
}
