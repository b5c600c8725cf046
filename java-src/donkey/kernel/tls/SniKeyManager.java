package donkey.kernel.tls;

import java.net.Socket;
import java.security.Principal;
import java.security.PrivateKey;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import javax.net.ssl.ExtendedSSLSession;
import javax.net.ssl.SNIHostName;
import javax.net.ssl.SNIServerName;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLSession;
import javax.net.ssl.X509ExtendedKeyManager;

/**
 * The server's key manager: the JDK's PKIX one over every certificate, which serves the one
 * whose names match the server name the client asked for by SNI, and the first one when none
 * does or the client named none (as Jetty does); with the server name first. The JDK asks for
 * a certificate one key type at a time, in the client's order of preference (EC before RSA,
 * say), and its PKIX manager then serves a certificate of that type even when its names do
 * not match the server name asked for. This one declines such a certificate when one of
 * another type does match, so that the handshake asks for that type next.
 *
 * <p>The keys and chains it serves were read from the key store once, at start-up or reload:
 * the PKIX manager reads an entry from its key store on every call, and for the in-memory
 * PKCS12 store that decrypts the key (PBKDF2) once per handshake, on the event loop.
 *
 * <p>Threading: any thread (a handshake's); it holds nothing mutable.
 */
final class SniKeyManager extends X509ExtendedKeyManager {
  private final X509ExtendedKeyManager pkix;
  private final List<X509Certificate> leaves;
  /** Each key store alias's key and chain, read once. */
  private final Map<String, PrivateKey> keys;
  private final Map<String, X509Certificate[]> chains;

  SniKeyManager(X509ExtendedKeyManager pkix, List<X509Certificate> leaves,
                Map<String, PrivateKey> keys, Map<String, X509Certificate[]> chains) {
    this.pkix = pkix;
    this.leaves = leaves;
    this.keys = keys;
    this.chains = chains;
  }

  /**
   * The key store alias behind an alias of the PKIX manager, which names an entry
   * {@code <serial>.<store>.<alias>}; null when it names none this manager read.
   */
  private String entry(String alias) {
    if (alias == null) return null;
    if (keys.containsKey(alias)) return alias;
    int a = alias.indexOf('.');
    int b = a < 0 ? -1 : alias.indexOf('.', a + 1);
    String e = b < 0 ? null : alias.substring(b + 1);
    return e != null && keys.containsKey(e) ? e : null;
  }

  @Override
  public String chooseEngineServerAlias(String keyType, Principal[] issuers, SSLEngine engine) {
    String alias = pkix.chooseEngineServerAlias(keyType, issuers, engine);
    if (alias == null || leaves.size() < 2) return alias;
    String name = serverName(engine.getHandshakeSession());
    if (name == null) return alias;
    X509Certificate[] chain = getCertificateChain(alias);
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
    String e = entry(alias);
    return e != null ? chains.get(e).clone() : pkix.getCertificateChain(alias);
  }

  @Override
  public PrivateKey getPrivateKey(String alias) {
    String e = entry(alias);
    return e != null ? keys.get(e) : pkix.getPrivateKey(alias);
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
}
