package donkey.kernel.tls;

import io.netty.handler.ssl.ApplicationProtocolConfig;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.JdkSslContext;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslProvider;
import io.netty.handler.ssl.SupportedCipherSuiteFilter;
import io.vertx.core.net.JdkSSLEngineOptions;
import io.vertx.core.net.OpenSSLEngineOptions;
import io.vertx.core.net.SSLEngineOptions;
import io.vertx.core.spi.tls.DefaultSslContextFactory;
import io.vertx.core.spi.tls.SslContextFactory;
import java.security.KeyStore;
import java.util.Set;
import javax.net.ssl.KeyManager;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.KeyManagerFactorySpi;
import javax.net.ssl.ManagerFactoryParameters;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import javax.net.ssl.TrustManagerFactory;

/**
 * Makes the server's TLS context: Vert.x's own one on the listener's engine (the JDK's or
 * OpenSSL's), or for an {@code :ssl-context} that context as it is, on the JDK's engine
 * whatever the listener's (an SSLContext is the JDK's engine itself), with the protocols,
 * cipher suites (those it supports) and client authentication of the options, as Jetty applies
 * them to a context it is given. Also the carrier ({@link FixedKeys}) that gets key managers,
 * or an {@code :ssl-context}, through Vert.x's options to it.
 *
 * <p>Threading: one instance per context made, by one thread at a time: the caller's for
 * {@link TlsOptions}'s check, else whichever thread Vert.x builds a listener's context on.
 */
public final class TlsContextFactory implements SslContextFactory {
  /** The JDK's engine, able to serve a given SSLContext too. */
  static final JdkSSLEngineOptions ENGINE = new Engine();
  /**
   * OpenSSL's (BoringSSL's, from netty-tcnative) engine, which serves a given SSLContext on the
   * JDK's. Vert.x checks that OpenSSL is available when a listener is built with it.
   */
  static final OpenSSLEngineOptions OPENSSL_ENGINE = new OpenSslEngine();

  /** The engine of {@code provider}: {@link SslProvider#JDK} or {@link SslProvider#OPENSSL}. */
  public static SSLEngineOptions engine(SslProvider provider) {
    return provider == SslProvider.OPENSSL ? OPENSSL_ENGINE : ENGINE;
  }

  private final SslProvider provider;
  private ClientAuth clientAuth = ClientAuth.NONE;
  private Set<String> protocols;
  private Set<String> cipherSuites;
  private KeyManagerFactory keys;
  private TrustManagerFactory trust;
  private boolean useAlpn;
  private java.util.List<String> applicationProtocols;

  /** A factory of contexts for {@code provider}'s engine, JDK or OPENSSL. */
  TlsContextFactory(SslProvider provider) {
    this.provider = provider;
  }

  @Override
  public SslContextFactory useAlpn(boolean useAlpn) {
    this.useAlpn = useAlpn;
    return this;
  }

  @Override
  public SslContextFactory applicationProtocols(java.util.List<String> applicationProtocols) {
    this.applicationProtocols = applicationProtocols;
    return this;
  }

  @Override
  public SslContextFactory forServer(ClientAuth clientAuth) {
    this.clientAuth = clientAuth;
    return this;
  }

  @Override
  public SslContextFactory enabledProtocols(Set<String> enabledProtocols) {
    this.protocols = enabledProtocols;
    return this;
  }

  @Override
  public SslContextFactory enabledCipherSuites(Set<String> enabledCipherSuites) {
    this.cipherSuites = enabledCipherSuites;
    return this;
  }

  @Override
  public SslContextFactory keyMananagerFactory(KeyManagerFactory kmf) {
    this.keys = kmf;
    return this;
  }

  @Override
  public SslContextFactory trustManagerFactory(TrustManagerFactory tmf) {
    this.trust = tmf;
    return this;
  }

  @Override
  public SslContext create() throws SSLException {
    if (keys instanceof FixedKeys && ((FixedKeys) keys).context != null) {
      return new JdkSslContext(((FixedKeys) keys).context, false, cipherSuites,
          SupportedCipherSuiteFilter.INSTANCE, alpn(), clientAuth,
          protocols == null ? null : protocols.toArray(new String[0]), false);
    }
    // Vert.x's factory: for OpenSSL it converts the JDK suite names, keeps a session cache
    // (as Vert.x's own OpenSSL engine does) and offers ALPN without a fatal alert, which
    // OpenSSL cannot send: a client offering none of the protocols gets no ALPN answer
    return new DefaultSslContextFactory(provider, provider == SslProvider.OPENSSL)
        .forServer(clientAuth)
        .enabledProtocols(protocols)
        .enabledCipherSuites(cipherSuites)
        .keyMananagerFactory(keys)
        .trustManagerFactory(trust)
        .useAlpn(useAlpn)
        .applicationProtocols(applicationProtocols)
        .create();
  }

  /**
   * The ALPN protocols Vert.x asked for (h2 and HTTP/1.x with {@code :h2?}), chosen as Vert.x
   * chooses for its own JDK contexts: a client that offers none of them gets a fatal alert.
   */
  private ApplicationProtocolConfig alpn() {
    if (!useAlpn || applicationProtocols == null || applicationProtocols.isEmpty()) {
      return ApplicationProtocolConfig.DISABLED;
    }
    return new ApplicationProtocolConfig(ApplicationProtocolConfig.Protocol.ALPN,
        ApplicationProtocolConfig.SelectorFailureBehavior.FATAL_ALERT,
        ApplicationProtocolConfig.SelectedListenerFailureBehavior.FATAL_ALERT,
        applicationProtocols);
  }

  /**
   * A key manager factory that hands out the key managers it was made with (Vert.x takes key
   * managers as a factory). For an {@code :ssl-context} it has none and carries the context
   * through Vert.x's options to the factory, in the key manager factory's place: Vert.x
   * builds each TLS context from the key manager factory its options give, so this is how a
   * context given at start or at a reload reaches the listener.
   */
  static final class FixedKeys extends KeyManagerFactory {
    /** The {@code :ssl-context} to serve as it is, or null. */
    final SSLContext context;

    FixedKeys(KeyManager keys, SSLContext context) {
      super(new Fixed(keys == null ? new KeyManager[0] : new KeyManager[] {keys}), null,
          "donkey");
      this.context = context;
    }
  }

  private static final class Fixed extends KeyManagerFactorySpi {
    private final KeyManager[] keys;

    Fixed(KeyManager[] keys) {
      this.keys = keys;
    }

    @Override
    protected void engineInit(KeyStore ks, char[] password) {}

    @Override
    protected void engineInit(ManagerFactoryParameters spec) {}

    @Override
    protected KeyManager[] engineGetKeyManagers() {
      return keys.clone();
    }
  }

  /** The JDK engine, with a context factory that also serves an {@code :ssl-context}. */
  private static final class Engine extends JdkSSLEngineOptions {
    @Override
    public SslContextFactory sslContextFactory() {
      return new TlsContextFactory(SslProvider.JDK);
    }

    @Override
    public JdkSSLEngineOptions copy() {
      return this;
    }
  }

  /** OpenSSL's engine, with the context factory that also serves an {@code :ssl-context}. */
  private static final class OpenSslEngine extends OpenSSLEngineOptions {
    @Override
    public SslContextFactory sslContextFactory() {
      return new TlsContextFactory(SslProvider.OPENSSL);
    }

    @Override
    public OpenSSLEngineOptions copy() {
      return this;
    }
  }
}
