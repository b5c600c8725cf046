package donkey.codec;

import java.io.ByteArrayOutputStream;
import java.nio.charset.Charset;
import java.nio.charset.UnsupportedCharsetException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The part headers {@link Multipart} needs: Content-Disposition (its {@code form-data} type,
 * {@code name}, {@code filename} and RFC 8187 {@code filename*}) and Content-Type (the part's
 * media type as sent, and its charset), parsed by {@link ContentType}.
 *
 * <p>Filenames: a backslash in a quoted value escapes only {@code "} and {@code \}; any other
 * is kept, so a Windows path sent as a filename by an old browser survives. Percent-encoding is
 * not undone (browsers send {@code "} in a filename as {@code %22}): the filename is handed on
 * as sent.
 *
 * <p>Bad input, a {@link MultipartException} with status 400: a header line without a colon,
 * a part without a Content-Disposition, one that is not {@code form-data}, one without
 * {@code name}, a malformed Content-Disposition parameter (a part that might be a file is not
 * guessed at), a malformed {@code filename*}, and a charset this JVM does not have. A part
 * Content-Type whose parameters are malformed only loses them (see {@link ContentType}).
 *
 * <p>Threading: stateless; all methods are static and thread-safe.
 */
final class MultipartHeaders {
  private MultipartHeaders() {}

  /** What {@link Multipart} needs to know of a part's headers. */
  static final class Part {
    final String name;
    /** Null for a plain field; a file part otherwise (even when empty). */
    final String filename;
    /** The Content-Type header value, trimmed; null when absent. */
    final String contentType;
    /** The charset of a field's Content-Type; null when none is given. */
    final Charset charset;

    Part(String name, String filename, String contentType, Charset charset) {
      this.name = name;
      this.filename = filename;
      this.contentType = contentType;
      this.charset = charset;
    }
  }

  /** The part described by {@code lines}, the header lines of one part. */
  static Part part(List<String> lines) {
    String disposition = null;
    String contentType = null;
    for (String line : lines) {
      int colon = line.indexOf(':');
      if (colon < 0) throw MultipartException.malformed("part header without a colon");
      String name = line.substring(0, colon).trim();
      if (name.isEmpty()) throw MultipartException.malformed("part header without a name");
      // (ASCII case only: String's own ignore-case comparison folds other letters into ASCII)
      if (disposition == null && name.length() == 19
          && HttpTokens.matches(name, 0, "content-disposition")) {
        disposition = line.substring(colon + 1).trim();
      } else if (contentType == null && name.length() == 12
          && HttpTokens.matches(name, 0, "content-type")) {
        contentType = line.substring(colon + 1).trim();
      }
    }
    if (disposition == null) throw MultipartException.malformed("part without Content-Disposition");
    int type = HttpTokens.tokenEnd(disposition, 0);
    int after = HttpTokens.skipOws(disposition, type);
    if (type != 9 || !HttpTokens.matches(disposition, 0, "form-data")
        || (after < disposition.length() && disposition.charAt(after) != ';')) {
      throw MultipartException.malformed("part Content-Disposition is not form-data");
    }
    Map<String, String> params = new HashMap<>(4);
    String bad = ContentType.params(disposition, type, params);
    if (bad != null) throw MultipartException.malformed(bad + " in Content-Disposition");
    String name = params.get("name");
    if (name == null) throw MultipartException.malformed("part Content-Disposition without a name");
    String filename = params.get("filename");
    String extended = params.get("filename*");
    if (extended != null) filename = extValue(extended);
    Charset charset = null;
    if (filename == null && contentType != null) {
      try {
        charset = ContentType.charset(contentType);
      } catch (UnsupportedCharsetException e) {
        throw unsupported(e.getCharsetName());
      }
    }
    return new Part(name, filename, contentType, charset);
  }
  /** Decodes an RFC 8187 ext-value, {@code charset'language'percent-encoded}. */
  static String extValue(String s) {
    int q1 = s.indexOf('\'');
    int q2 = q1 < 0 ? -1 : s.indexOf('\'', q1 + 1);
    if (q1 <= 0 || q2 < 0) throw MultipartException.malformed("malformed filename* parameter");
    Charset cs = charset(s.substring(0, q1));
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(s.length());
    for (int i = q2 + 1; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '%') {
        int hi = i + 2 < s.length() ? Character.digit(s.charAt(i + 1), 16) : -1;
        int lo = hi < 0 ? -1 : Character.digit(s.charAt(i + 2), 16);
        if (lo < 0) throw MultipartException.malformed("malformed filename* parameter");
        bytes.write(hi << 4 | lo);
        i += 2;
      } else if (c < 0x80) {
        bytes.write(c);
      } else {
        throw MultipartException.malformed("malformed filename* parameter");
      }
    }
    return new String(bytes.toByteArray(), cs);
  }

  /** The charset called {@code name}; a 400 when Java does not know it. */
  static Charset charset(String name) {
    try {
      return ContentType.forName(name);
    } catch (UnsupportedCharsetException e) {
      throw unsupported(name);
    }
  }

  static MultipartException unsupported(String name) {
    return new MultipartException(MultipartException.BAD_REQUEST,
                                  "unsupported charset in multipart body: " + clip(name.trim()));
  }

  /** {@code s}, cut to a length fit for an error message. */
  static String clip(String s) {
    return s.length() <= 40 ? s : s.substring(0, 40) + "...";
  }
}
