package donkey.codec;

import java.io.ByteArrayOutputStream;
import java.nio.charset.Charset;
import java.nio.charset.IllegalCharsetNameException;
import java.nio.charset.UnsupportedCharsetException;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Header values of multipart requests and parts: media types, parameter lists
 * ({@code type; name=value; name="quoted value"}) and the part headers {@link Multipart} needs
 * (Content-Disposition and Content-Type).
 *
 * <p>Parameters: names are case-insensitive (returned lower-case); a value is a token (up to the
 * next {@code ;}, trimmed) or a quoted string. Inside a quoted string a backslash escapes only
 * {@code "} and {@code \}; any other backslash is kept, so a Windows path sent as a filename
 * by an old browser survives. Percent-encoding is not undone (browsers send {@code "} in a
 * filename as {@code %22}; the filename is handed on exactly as sent). The first occurrence of a
 * repeated parameter wins; a parameter without {@code =} is ignored.
 *
 * <p>Threading: stateless; all methods are static and thread-safe.
 *
 * <p>Bad input: an unterminated quoted string, a part without a Content-Disposition, one that is
 * not {@code form-data}, one without {@code name}, a header line without a colon, a malformed
 * {@code filename*} and an unknown charset are a {@link MultipartException} with status 400.
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
      if (disposition == null && name.equalsIgnoreCase("content-disposition")) {
        disposition = line.substring(colon + 1).trim();
      } else if (contentType == null && name.equalsIgnoreCase("content-type")) {
        contentType = line.substring(colon + 1).trim();
      }
    }
    if (disposition == null) throw MultipartException.malformed("part without Content-Disposition");
    if (!"form-data".equals(mediaType(disposition))) {
      throw MultipartException.malformed("part Content-Disposition is not form-data");
    }
    Map<String, String> params = params(disposition, "Content-Disposition");
    String name = params.get("name");
    if (name == null) throw MultipartException.malformed("part Content-Disposition without a name");
    String filename = params.get("filename");
    String extended = params.get("filename*");
    if (extended != null) filename = extValue(extended);
    Charset charset = null;
    if (filename == null && contentType != null) {
      String cs = params(contentType, "part Content-Type").get("charset");
      if (cs != null) charset = charset(cs);
    }
    return new Part(name, filename, contentType, charset);
  }

  /** The media type of a header value: before any {@code ;}, trimmed, lower-case. */
  static String mediaType(String value) {
    int semi = value.indexOf(';');
    return (semi < 0 ? value : value.substring(0, semi)).trim().toLowerCase(Locale.ROOT);
  }

  /**
   * The parameters after the media type of {@code value}.
   *
   * @param header the header's name, for the error message
   */
  static Map<String, String> params(String value, String header) {
    HashMap<String, String> out = new HashMap<>(4);
    int n = value.length();
    int i = value.indexOf(';');
    if (i < 0) return out;
    i++;
    while (i < n) {
      char c = value.charAt(i);
      if (c == ' ' || c == '\t' || c == ';') {
        i++;
        continue;
      }
      int nameStart = i;
      while (i < n && value.charAt(i) != '=' && value.charAt(i) != ';') i++;
      if (i >= n || value.charAt(i) == ';') continue; // a parameter without a value
      String name = value.substring(nameStart, i).trim().toLowerCase(Locale.ROOT);
      i++;
      while (i < n && (value.charAt(i) == ' ' || value.charAt(i) == '\t')) i++;
      String v;
      if (i < n && value.charAt(i) == '"') {
        StringBuilder sb = new StringBuilder();
        int j = i + 1;
        while (true) {
          if (j >= n) throw MultipartException.malformed("unterminated quoted string in " + header);
          char q = value.charAt(j);
          if (q == '"') break;
          if (q == '\\' && j + 1 < n && (value.charAt(j + 1) == '"' || value.charAt(j + 1) == '\\')) {
            sb.append(value.charAt(j + 1));
            j += 2;
          } else {
            sb.append(q);
            j++;
          }
        }
        v = sb.toString();
        i = j + 1;
        while (i < n && value.charAt(i) != ';') i++; // anything after the closing quote
      } else {
        int start = i;
        while (i < n && value.charAt(i) != ';') i++;
        v = value.substring(start, i).trim();
      }
      if (!name.isEmpty()) out.putIfAbsent(name, v);
    }
    return out;
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
      return Charset.forName(name.trim());
    } catch (IllegalCharsetNameException | UnsupportedCharsetException e) {
      throw new MultipartException(MultipartException.BAD_REQUEST,
                                   "unsupported charset in multipart body: " + clip(name));
    }
  }

  /** {@code s}, cut to a length fit for an error message. */
  static String clip(String s) {
    return s.length() <= 40 ? s : s.substring(0, 40) + "...";
  }
}
