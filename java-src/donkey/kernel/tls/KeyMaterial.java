package donkey.kernel.tls;

import donkey.kernel.config.ServerConfig;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.Key;
import java.security.KeyStore;
import java.security.KeyStoreException;
import java.security.PrivateKey;
import java.security.Signature;
import java.security.UnrecoverableKeyException;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import javax.net.ssl.KeyManager;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509ExtendedKeyManager;

/**
 * Loads the server's key material and trust material from the options: key stores (a path,
 * PKCS12 or JKS, or a {@link KeyStore}), the {@code :ssl-cert}/{@code :ssl-key} PEM pairs
 * ({@link PemFiles}) and the trust store, each key checked against its certificate. A missing
 * file, a wrong password or a mismatched key is an {@link IllegalArgumentException} naming
 * the option.
 *
 * <p>Every certificate goes into one in-memory key store behind the JDK's PKIX key manager
 * ({@link SniKeyManager}), so one TLS context serves every name and a reload may go from one
 * certificate to several.
 *
 * <p>Threading: the caller's (start-up or reload), never an event loop: it reads files.
 */
final class KeyMaterial {
  private KeyMaterial() {}

  /** The password of the in-memory key store; it never leaves this process. */
  private static final char[] MEMORY_PASSWORD = "donkey-in-memory".toCharArray();

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
        X509Certificate[] chain = PemFiles.readChain(certs.get(i));
        PrivateKey key = PemFiles.readKey(keys.get(i));
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
      // each key decrypted once, here, rather than by the PKIX manager in every handshake
      Map<String, PrivateKey> keys = new HashMap<>();
      Map<String, X509Certificate[]> chains = new HashMap<>();
      for (String a : Collections.list(store.aliases())) {
        leaves.add((X509Certificate) store.getCertificate(a));
        keys.put(a, (PrivateKey) store.getKey(a, MEMORY_PASSWORD));
        Certificate[] chain = store.getCertificateChain(a);
        X509Certificate[] x509 = new X509Certificate[chain.length];
        for (int i = 0; i < chain.length; i++) x509[i] = (X509Certificate) chain[i];
        chains.put(a, x509);
      }
      for (KeyManager km : kmf.getKeyManagers()) {
        if (km instanceof X509ExtendedKeyManager) {
          return new TlsContextFactory.FixedKeys(
              new SniKeyManager((X509ExtendedKeyManager) km, leaves, keys, chains), null);
        }
      }
      throw bad("the JDK's PKIX key manager is not an X509ExtendedKeyManager");
    } catch (GeneralSecurityException e) {
      throw bad("the server's keys: " + e.getMessage(), e);
    }
  }

  /**
   * The certificates client certificates are checked against, behind a PKIX trust manager:
   * those of {@code :truststore}, or without one those of {@code :keystore}, which Jetty's
   * SslContextFactory (ring-jetty's) takes as the trust store when none is given: of
   * {@code :keystore-type}, opened with {@code :trust-password} or else {@code :key-password}.
   * Either is taken as the JDK's trust manager takes a key store: its trusted certificate
   * entries, and the certificate of each key entry (that certificate itself, not its issuer).
   */
  static TrustManagerFactory trustManagers(ServerConfig c) {
    if (c.truststore != null) {
      String where =
          c.truststore instanceof String ? ":truststore " + c.truststore : ":truststore";
      KeyStore ks = c.truststore instanceof KeyStore ? (KeyStore) c.truststore
          : load(":truststore", (String) c.truststore, null, c.trustPassword, ":trust-password");
      return trust(where, ks);
    }
    if (c.keystore == null) throw bad("no :truststore and no :keystore to take as one");
    String where = c.keystore instanceof String ? ":keystore " + c.keystore : ":keystore";
    KeyStore ks;
    if (c.keystore instanceof KeyStore) {
      ks = (KeyStore) c.keystore;
    } else {
      boolean own = c.trustPassword != null;
      try {
        ks = load(":keystore", (String) c.keystore, c.keystoreType,
            own ? c.trustPassword : c.keyPassword, own ? ":trust-password" : ":key-password");
      } catch (IllegalArgumentException e) {
        throw bad(e.getMessage() + " (the trust store, as no :truststore is given)", e);
      }
    }
    return trust(where, ks);
  }

  /**
   * A PKIX trust manager factory over {@code ks}, which must hold a certificate to trust: one
   * with none would refuse every client certificate, which is never what was meant.
   */
  private static TrustManagerFactory trust(String where, KeyStore ks) {
    try {
      boolean any = false;
      for (String a : Collections.list(ks.aliases())) {
        if (ks.isCertificateEntry(a)) {
          any |= ks.getCertificate(a) instanceof X509Certificate;
        } else if (ks.isKeyEntry(a)) {
          // what the JDK's trust manager trusts of a key entry: its own certificate
          Certificate[] chain = ks.getCertificateChain(a);
          any |= chain != null && chain.length > 0 && chain[0] instanceof X509Certificate;
        }
      }
      if (!any) {
        throw bad(where + " holds no certificate to trust: no trusted certificate entry, and no "
            + "key entry with an X.509 certificate");
      }
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

  private static IllegalArgumentException bad(String msg) {
    return new IllegalArgumentException(msg);
  }

  private static IllegalArgumentException bad(String msg, Throwable cause) {
    return new IllegalArgumentException(msg, cause);
  }
}
