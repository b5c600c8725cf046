package donkey.kernel;

import clojure.lang.Keyword;
import io.netty.handler.ssl.ApplicationProtocolConfig;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.JdkSslContext;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslProvider;
import io.netty.handler.ssl.SupportedCipherSuiteFilter;
import io.vertx.core.Vertx;
import io.vertx.core.net.JdkSSLEngineOptions;
import io.vertx.core.net.KeyCertOptions;
import io.vertx.core.net.ServerSSLOptions;
import io.vertx.core.net.TrustOptions;
import io.vertx.core.spi.tls.DefaultSslContextFactory;
import io.vertx.core.spi.tls.SslContextFactory;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.Key;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.KeyStoreException;
import java.security.Principal;
import java.security.PrivateKey;
import java.security.Signature;
import java.security.UnrecoverableKeyException;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;
import javax.net.ssl.ExtendedSSLSession;
import javax.net.ssl.KeyManager;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.KeyManagerFactorySpi;
import javax.net.ssl.ManagerFactoryParameters;
import javax.net.ssl.SNIHostName;
import javax.net.ssl.SNIServerName;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLSession;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509ExtendedKeyManager;

/**
 * The TLS listener's settings: loads and checks the key material, trust and protocol options
 * of a {@link ServerConfig} into the Vert.x {@link ServerSSLOptions} the listener starts with,
 * or is updated to ({@link Server#reloadTls}).
 *
 * <p>Everything is read and checked here, before Vert.x sees it: a missing file, a wrong
 * password, a key that does not match its certificate or options that leave no protocol or
 * cipher suite enabled are an {@link IllegalArgumentException} naming the option, and Vert.x
 * only gets ready key and trust manager factories.
 *
 * <p>Certificates are chosen by SNI without Vert.x's SNI support: every certificate goes into
 * one key store behind the JDK's PKIX key manager, which serves the certificate whose names
 * match the server name the client asked for, and the first one when none does or the client
 * named none (as Jetty does); {@link SniKeys} makes a name match win over the key type the
 * client prefers. One TLS context thus serves every name, and reloading may go from one
 * certificate to several.
 *
 * <p>Threading: the caller's (start-up or reload), never an event loop: it reads files.
 */
final class Tls {
  private Tls() {}

  /** The protocols enabled by default: TLS 1.3 and 1.2 only. */
  static final List<String> PROTOCOLS = List.of("TLSv1.3", "TLSv1.2");
  /** What {@code :replace-exclude-protocols? true} starts from (the JDK may disable some). */
  static final List<String> ALL_PROTOCOLS = List.of("TLSv1.3", "TLSv1.2", "TLSv1.1", "TLSv1");

  /** The engine of every TLS listener: the JDK's, able to serve a given SSLContext too. */
  static final JdkSSLEngineOptions ENGINE = new Engine();

  private static final Keyword NEED = Keyword.intern("need");
  private static final Keyword WANT = Keyword.intern("want");
  private static final Keyword NONE = Keyword.intern("none");

  /** The password of the in-memory key store; it never leaves this process. */
  private static final char[] MEMORY_PASSWORD = "donkey-in-memory".toCharArray();

  /** What Vert.x waits for a handshake when the header timeout does not say less, in ms. */
  private static final long HANDSHAKE_TIMEOUT_MS = 10_000;

  private static final Pattern PEM =
      Pattern.compile("-----BEGIN ([A-Z0-9 ]+)-----([^-]*)-----END \\1-----");

  /**
   * The TLS options {@code c} asks for, loaded and checked, with a handshake timeout of
   * {@code handshakeMs} (0: Vert.x's 10 s).
   *
   * @throws IllegalArgumentException naming the option at fault
   */
  static ServerSSLOptions options(ServerConfig c, long handshakeMs) {
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
      keys = new FixedKeys(null, c.sslContext);
    } else {
      keys = keyManagers(c);
      if (c.truststore != null) {
        trust = trustManagers(c);
      } else if (auth != ClientAuth.NONE) {
        throw bad(":client-auth " + c.clientAuth + " needs a :truststore: the CAs whose client "
            + "certificates are accepted");
      }
    }
    List<String> suites = cipherSuites(c);
    for (String s : suites) o.addEnabledCipherSuite(s);
    o.setKeyCertOptions(new Keys(keys));
    if (trust != null) o.setTrustOptions(TrustOptions.wrap(trust));
    // make the context once now, so that what only the TLS engine can refuse fails here
    // rather than at the first handshake
    Factory f = new Factory();
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
   */
  static List<String> cipherSuites(ServerConfig c) {
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
    return out;
  }

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
   * A checksum of the contents of the TLS files {@code c} names (a key store or trust store
   * given as a path, the PEM files), with a mark for each that cannot be read; 0 when it names
   * none.
   */
  static long fingerprint(ServerConfig c) {
    List<String> files = new ArrayList<>();
    if (c.keystore instanceof String) files.add((String) c.keystore);
    if (c.truststore instanceof String) files.add((String) c.truststore);
    for (Object v : new Object[] {c.sslCert, c.sslKey}) {
      if (v instanceof String) files.add((String) v);
      if (v instanceof List) {
        for (Object p : (List<?>) v) files.add(String.valueOf(p));
      }
    }
    if (files.isEmpty()) return 0;
    java.util.zip.CRC32 crc = new java.util.zip.CRC32();
    for (String f : files) {
      try {
        crc.update(Files.readAllBytes(Path.of(f)));
      } catch (IOException | RuntimeException e) {
        crc.update(-1);
      }
      crc.update(0);
    }
    return crc.getValue() | 1L << 32;
  }

  // ---- key material -----------------------------------------------------------------------

  /**
   * The server's keys, from {@code :keystore} (every key entry, by alias in alphabetical order)
   * or from the {@code :ssl-cert}/{@code :ssl-key} pairs (in the order given), each checked
   * against its certificate, in one in-memory key store behind a PKIX key manager (which
   * chooses by SNI; the first is served when no name matches).
   */
  static KeyManagerFactory keyManagers(ServerConfig c) {
    KeyStore store = memoryStore();
    if (c.keystore != null) {
      if (c.sslCert != null || c.sslKey != null) {
        throw bad(":keystore and :ssl-cert/:ssl-key both give the server's key; give one");
      }
      String where = c.keystore instanceof String ? ":keystore " + c.keystore : ":keystore";
      KeyStore ks = c.keystore instanceof KeyStore ? (KeyStore) c.keystore
          : load(":keystore", (String) c.keystore, c.keystoreType, c.keyPassword,
              ":key-password");
      char[] pw = c.keyPassword == null ? new char[0] : c.keyPassword.toCharArray();
      try {
        List<String> aliases = new ArrayList<>();
        for (String a : Collections.list(ks.aliases())) {
          if (ks.isKeyEntry(a)) aliases.add(a);
        }
        Collections.sort(aliases);
        if (aliases.isEmpty()) throw bad(where + " holds no private key");
        for (String a : aliases) {
          Key k;
          try {
            k = ks.getKey(a, pw);
          } catch (UnrecoverableKeyException e) {
            throw bad(":key-password does not unlock the key \"" + a + "\" of " + where, e);
          }
          Certificate[] chain = ks.getCertificateChain(a);
          if (!(k instanceof PrivateKey) || chain == null || chain.length == 0
              || !(chain[0] instanceof X509Certificate)) {
            throw bad(where + ": the entry \"" + a + "\" is not a private key with an X.509 "
                + "certificate chain");
          }
          matches(where + ": the key \"" + a + "\"", (PrivateKey) k, (X509Certificate) chain[0]);
          store.setKeyEntry(a, k, MEMORY_PASSWORD, chain);
        }
      } catch (GeneralSecurityException e) {
        throw bad(where + ": " + e.getMessage(), e);
      }
    } else if (c.sslCert != null || c.sslKey != null) {
      if (c.sslCert == null) throw bad(":ssl-key needs :ssl-cert, its certificate chain");
      if (c.sslKey == null) throw bad(":ssl-cert needs :ssl-key, its private key");
      List<String> certs = paths(":ssl-cert", c.sslCert);
      List<String> keys = paths(":ssl-key", c.sslKey);
      if (certs.size() != keys.size()) {
        throw bad(":ssl-cert and :ssl-key must name as many files, one key per chain: "
            + certs.size() + " and " + keys.size());
      }
      for (int i = 0; i < certs.size(); i++) {
        X509Certificate[] chain = readChain(certs.get(i));
        PrivateKey key = readKey(keys.get(i));
        matches(":ssl-key " + keys.get(i) + " for :ssl-cert " + certs.get(i), key, chain[0]);
        try {
          // aliases that keep the given order, which the key store keeps
          store.setKeyEntry(String.format(Locale.ROOT, "pem-%04d", i), key, MEMORY_PASSWORD,
              chain);
        } catch (KeyStoreException e) {
          throw bad(":ssl-key " + keys.get(i) + ": " + e.getMessage(), e);
        }
      }
    } else {
      throw bad(":ssl? needs the server's key: a :keystore, :ssl-cert and :ssl-key, or an "
          + ":ssl-context");
    }
    try {
      KeyManagerFactory kmf = KeyManagerFactory.getInstance("PKIX");
      kmf.init(store, MEMORY_PASSWORD);
      List<X509Certificate> leaves = new ArrayList<>();
      for (String a : Collections.list(store.aliases())) {
        leaves.add((X509Certificate) store.getCertificate(a));
      }
      for (KeyManager km : kmf.getKeyManagers()) {
        if (km instanceof X509ExtendedKeyManager) {
          return new FixedKeys(new SniKeys((X509ExtendedKeyManager) km, leaves), null);
        }
      }
      throw bad("the JDK's PKIX key manager is not an X509ExtendedKeyManager");
    } catch (GeneralSecurityException e) {
      throw bad("the server's keys: " + e.getMessage(), e);
    }
  }

  /**
   * The PKIX key manager, with the server name first: the JDK asks for a certificate one key
   * type at a time, in the client's order of preference (EC before RSA, say), and its PKIX
   * manager then serves a certificate of that type even when its names do not match the
   * server name asked for. This one declines such a certificate when one of another type does
   * match, so that the handshake asks for that type next. Any thread (a handshake's).
   */
  static final class SniKeys extends X509ExtendedKeyManager {
    private final X509ExtendedKeyManager pkix;
    private final List<X509Certificate> leaves;

    SniKeys(X509ExtendedKeyManager pkix, List<X509Certificate> leaves) {
      this.pkix = pkix;
      this.leaves = leaves;
    }

    @Override
    public String chooseEngineServerAlias(String keyType, Principal[] issuers, SSLEngine engine) {
      String alias = pkix.chooseEngineServerAlias(keyType, issuers, engine);
      if (alias == null || leaves.size() < 2) return alias;
      String name = serverName(engine.getHandshakeSession());
      if (name == null) return alias;
      X509Certificate[] chain = pkix.getCertificateChain(alias);
      if (chain == null || chain.length == 0 || names(chain[0], name)) return alias;
      for (X509Certificate leaf : leaves) {
        if (names(leaf, name)) return null;
      }
      return alias;
    }

    @Override
    public String chooseServerAlias(String keyType, Principal[] issuers, Socket socket) {
      return pkix.chooseServerAlias(keyType, issuers, socket);
    }

    @Override
    public String[] getServerAliases(String keyType, Principal[] issuers) {
      return pkix.getServerAliases(keyType, issuers);
    }

    @Override
    public String[] getClientAliases(String keyType, Principal[] issuers) {
      return pkix.getClientAliases(keyType, issuers);
    }

    @Override
    public String chooseClientAlias(String[] keyType, Principal[] issuers, Socket socket) {
      return pkix.chooseClientAlias(keyType, issuers, socket);
    }

    @Override
    public X509Certificate[] getCertificateChain(String alias) {
      return pkix.getCertificateChain(alias);
    }

    @Override
    public PrivateKey getPrivateKey(String alias) {
      return pkix.getPrivateKey(alias);
    }
  }

  /** The host name the client asked for by SNI, or null. */
  private static String serverName(SSLSession handshake) {
    if (!(handshake instanceof ExtendedSSLSession)) return null;
    for (SNIServerName n : ((ExtendedSSLSession) handshake).getRequestedServerNames()) {
      if (n instanceof SNIHostName) return ((SNIHostName) n).getAsciiName();
    }
    return null;
  }

  /**
   * Whether {@code cert} names the host {@code name}: one of its DNS subject alternative names
   * is it, or is a wildcard ({@code *.example.com}) for its first label; without DNS names, its
   * subject's common name.
   */
  static boolean names(X509Certificate cert, String name) {
    List<String> dns = new ArrayList<>();
    try {
      java.util.Collection<List<?>> sans = cert.getSubjectAlternativeNames();
      if (sans != null) {
        for (List<?> san : sans) {
          if (san.size() == 2 && Integer.valueOf(2).equals(san.get(0))) {
            dns.add(String.valueOf(san.get(1)));
          }
        }
      }
      if (dns.isEmpty()) {
        for (javax.naming.ldap.Rdn rdn : new javax.naming.ldap.LdapName(
            cert.getSubjectX500Principal().getName()).getRdns()) {
          if (rdn.getType().equalsIgnoreCase("CN")) dns.add(String.valueOf(rdn.getValue()));
        }
      }
    } catch (java.security.cert.CertificateParsingException
        | javax.naming.InvalidNameException e) {
      return false;
    }
    for (String d : dns) {
      if (d.equalsIgnoreCase(name)) return true;
      if (d.startsWith("*.")) {
        int dot = name.indexOf('.');
        if (dot > 0 && name.substring(dot + 1).equalsIgnoreCase(d.substring(2))) return true;
      }
    }
    return false;
  }

  /** The CAs of {@code :truststore}, behind a PKIX trust manager. */
  static TrustManagerFactory trustManagers(ServerConfig c) {
    String where = c.truststore instanceof String ? ":truststore " + c.truststore : ":truststore";
    KeyStore ks = c.truststore instanceof KeyStore ? (KeyStore) c.truststore
        : load(":truststore", (String) c.truststore, null, c.trustPassword, ":trust-password");
    try {
      boolean any = false;
      for (String a : Collections.list(ks.aliases())) {
        if (ks.isCertificateEntry(a)) any = true;
      }
      if (!any) throw bad(where + " holds no trusted certificate");
      TrustManagerFactory tmf = TrustManagerFactory.getInstance("PKIX");
      tmf.init(ks);
      return tmf;
    } catch (GeneralSecurityException e) {
      throw bad(where + ": " + e.getMessage(), e);
    }
  }

  /** An empty key store in memory. */
  private static KeyStore memoryStore() {
    try {
      KeyStore ks = KeyStore.getInstance("PKCS12");
      ks.load(null, null);
      return ks;
    } catch (GeneralSecurityException | IOException e) {
      throw new IllegalStateException("no PKCS12 key store in this JVM", e);
    }
  }

  /**
   * The key store file at {@code path}, of {@code type} or, when null, PKCS12 for a .p12 or
   * .pfx file and JKS otherwise (the JDK's JKS reads PKCS12 files too).
   */
  static KeyStore load(String option, String path, String type, String password,
                       String passwordOption) {
    String lower = path.toLowerCase(Locale.ROOT);
    String t = type != null ? type
        : lower.endsWith(".p12") || lower.endsWith(".pfx") ? "PKCS12" : "JKS";
    KeyStore ks;
    try {
      ks = KeyStore.getInstance(t);
    } catch (KeyStoreException e) {
      throw bad((type != null ? ":keystore-type " : option + " " + path + ": type ") + t
          + " is not a key store type this JVM knows", e);
    }
    try (InputStream in = Files.newInputStream(Path.of(path))) {
      ks.load(in, password == null ? null : password.toCharArray());
      return ks;
    } catch (NoSuchFileException e) {
      throw bad(option + " " + path + ": no such file", e);
    } catch (IOException e) {
      if (e.getCause() instanceof UnrecoverableKeyException
          || String.valueOf(e.getMessage()).toLowerCase(Locale.ROOT).contains("password")) {
        throw bad(passwordOption + " does not open " + option + " " + path, e);
      }
      throw bad(option + " " + path + ": cannot read it as a " + t + " key store: "
          + e.getMessage(), e);
    } catch (GeneralSecurityException | RuntimeException e) {
      throw bad(option + " " + path + ": cannot read it as a " + t + " key store: "
          + e.getMessage(), e);
    }
  }

  /** {@code v}, a path or a list of paths, as a non-empty list. */
  private static List<String> paths(String option, Object v) {
    List<String> out = new ArrayList<>();
    if (v instanceof String) {
      out.add((String) v);
    } else if (v instanceof List) {
      for (Object p : (List<?>) v) {
        if (!(p instanceof String)) throw bad(option + " must be a path or a list of paths");
        out.add((String) p);
      }
    }
    if (out.isEmpty()) throw bad(option + " must be a path or a non-empty list of paths");
    return out;
  }

  /** The PEM blocks of {@code type} in the file at {@code path}, decoded. */
  private static List<byte[]> pem(String option, String path, String type, List<String> seen) {
    String text;
    try {
      text = Files.readString(Path.of(path), StandardCharsets.ISO_8859_1);
    } catch (NoSuchFileException e) {
      throw bad(option + " " + path + ": no such file", e);
    } catch (IOException e) {
      throw bad(option + " " + path + ": cannot read it: " + e.getMessage(), e);
    }
    List<byte[]> out = new ArrayList<>();
    Matcher m = PEM.matcher(text);
    while (m.find()) {
      seen.add(m.group(1));
      if (!m.group(1).equals(type)) continue;
      try {
        out.add(Base64.getMimeDecoder().decode(m.group(2)));
      } catch (IllegalArgumentException e) {
        throw bad(option + " " + path + ": a " + type + " block is not valid base64", e);
      }
    }
    return out;
  }

  /** The certificate chain of a PEM file, the server's certificate first. */
  static X509Certificate[] readChain(String path) {
    List<String> seen = new ArrayList<>();
    List<byte[]> blocks = pem(":ssl-cert", path, "CERTIFICATE", seen);
    if (blocks.isEmpty()) {
      throw bad(":ssl-cert " + path + " holds no -----BEGIN CERTIFICATE----- block");
    }
    List<X509Certificate> chain = new ArrayList<>();
    try {
      CertificateFactory cf = CertificateFactory.getInstance("X.509");
      for (byte[] der : blocks) {
        chain.add((X509Certificate) cf.generateCertificate(new ByteArrayInputStream(der)));
      }
    } catch (GeneralSecurityException e) {
      throw bad(":ssl-cert " + path + ": not an X.509 certificate: " + e.getMessage(), e);
    }
    return chain.toArray(new X509Certificate[0]);
  }

  /** The unencrypted PKCS#8 private key of a PEM file. */
  static PrivateKey readKey(String path) {
    List<String> seen = new ArrayList<>();
    List<byte[]> blocks = pem(":ssl-key", path, "PRIVATE KEY", seen);
    if (blocks.isEmpty()) {
      String hint = seen.contains("RSA PRIVATE KEY") || seen.contains("EC PRIVATE KEY")
          ? " (it has a PKCS#1 or SEC 1 key: convert it with "
              + "`openssl pkcs8 -topk8 -nocrypt -in key.pem -out key-pkcs8.pem`)"
          : seen.contains("ENCRYPTED PRIVATE KEY") ? " (it has an encrypted key; donkey reads "
              + "unencrypted PKCS#8 keys: protect the file instead)" : "";
      throw bad(":ssl-key " + path + " holds no -----BEGIN PRIVATE KEY----- block" + hint);
    }
    PKCS8EncodedKeySpec spec = new PKCS8EncodedKeySpec(blocks.get(0));
    for (String alg : new String[] {"RSA", "EC", "Ed25519", "Ed448", "RSASSA-PSS", "DSA"}) {
      try {
        return KeyFactory.getInstance(alg).generatePrivate(spec);
      } catch (GeneralSecurityException e) {
        // not this algorithm; try the next
      }
    }
    throw bad(":ssl-key " + path + ": not a PKCS#8 RSA, EC, EdDSA or DSA private key");
  }

  /**
   * Fails, as {@code what} does not match its certificate, unless {@code key} signs what the
   * certificate's public key verifies. (Keys of other algorithms are left to the handshake.)
   */
  static void matches(String what, PrivateKey key, X509Certificate cert) {
    String alg;
    switch (key.getAlgorithm()) {
      case "RSA": alg = "SHA256withRSA"; break;
      case "EC": alg = "SHA256withECDSA"; break;
      case "DSA": alg = "SHA256withDSA"; break;
      case "Ed25519": case "Ed448": case "EdDSA": alg = key.getAlgorithm(); break;
      default: return;
    }
    byte[] probe = "donkey: does this key match its certificate?".getBytes(StandardCharsets.UTF_8);
    boolean ok;
    try {
      Signature s = Signature.getInstance(alg);
      s.initSign(key);
      s.update(probe);
      byte[] sig = s.sign();
      Signature v = Signature.getInstance(alg);
      v.initVerify(cert.getPublicKey());
      v.update(probe);
      ok = v.verify(sig);
    } catch (GeneralSecurityException e) {
      ok = false;
    }
    if (!ok) {
      throw bad(what + " does not match its certificate (" + cert.getSubjectX500Principal()
          + ")");
    }
  }

  // ---- Vert.x plumbing --------------------------------------------------------------------

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

  /**
   * A key manager factory that hands out the key managers it was made with (Vert.x takes key
   * managers as a factory). For an {@code :ssl-context} it has none and carries the context
   * through Vert.x's options to {@link Factory}, in the key manager factory's place: Vert.x
   * builds each TLS context from the key manager factory its options give, so this is how a
   * context given at start or at a reload reaches the listener.
   */
  private static final class FixedKeys extends KeyManagerFactory {
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
      return new Factory();
    }

    @Override
    public JdkSSLEngineOptions copy() {
      return this;
    }
  }

  /**
   * Makes the server's TLS context: Vert.x's own JDK one, or for an {@code :ssl-context} that
   * context as it is, with the protocols, cipher suites (those it supports) and client
   * authentication of the options, as Jetty applies them to a context it is given.
   */
  private static final class Factory implements SslContextFactory {
    private ClientAuth clientAuth = ClientAuth.NONE;
    private Set<String> protocols;
    private Set<String> cipherSuites;
    private KeyManagerFactory keys;
    private TrustManagerFactory trust;

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
            SupportedCipherSuiteFilter.INSTANCE, ApplicationProtocolConfig.DISABLED, clientAuth,
            protocols == null ? null : protocols.toArray(new String[0]), false);
      }
      return new DefaultSslContextFactory(SslProvider.JDK, false)
          .forServer(clientAuth)
          .enabledProtocols(protocols)
          .enabledCipherSuites(cipherSuites)
          .keyMananagerFactory(keys)
          .trustManagerFactory(trust)
          .create();
    }
  }
}
