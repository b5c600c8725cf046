package donkey.kernel.tls;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.PrivateKey;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Reads PEM files: a certificate chain ({@code :ssl-cert}) and an unencrypted PKCS#8 private
 * key ({@code :ssl-key}); a file that cannot be read or holds no such block is an
 * {@link IllegalArgumentException} naming the option, with a hint for the usual wrong kinds
 * of key file.
 *
 * <p>Threading: the caller's (start-up or reload), never an event loop: it reads files.
 */
final class PemFiles {
  private PemFiles() {}

  private static final Pattern PEM =
      Pattern.compile("-----BEGIN ([A-Z0-9 ]+)-----([^-]*)-----END \\1-----");

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

  private static IllegalArgumentException bad(String msg) {
    return new IllegalArgumentException(msg);
  }

  private static IllegalArgumentException bad(String msg, Throwable cause) {
    return new IllegalArgumentException(msg, cause);
  }
}
