package donkey.files;

import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

/**
 * The {@code Content-Type} of a file by its extension: a table of the common web formats, which
 * a handler's options extend or override. Text formats are given {@code charset=utf-8}. A file
 * with no known extension is {@code application/octet-stream}, which browsers download rather
 * than render. Immutable once built; any thread.
 */
public final class MediaTypes {
  private static final String OCTETS = "application/octet-stream";
  private static final Map<String, String> DEFAULTS = defaults();

  private final Map<String, String> types;

  private MediaTypes(Map<String, String> types) {
    this.types = types;
  }

  /**
   * The default table with {@code extra} (extension without the dot, any case, to media type)
   * laid over it.
   *
   * @throws IllegalArgumentException for an empty extension or a value with no {@code /}
   */
  public static MediaTypes with(Map<String, String> extra) {
    Map<String, String> m = new HashMap<>(DEFAULTS);
    if (extra != null) {
      for (Map.Entry<String, String> e : extra.entrySet()) {
        String ext = e.getKey() == null ? "" : e.getKey().toLowerCase(Locale.ROOT);
        if (ext.startsWith(".")) ext = ext.substring(1);
        String type = e.getValue();
        if (ext.isEmpty() || type == null || type.indexOf('/') <= 0) {
          throw new IllegalArgumentException(":mime-types: " + e.getKey() + " -> " + type
              + " is not an extension and a media type");
        }
        m.put(ext, type);
      }
    }
    return new MediaTypes(m);
  }

  /** The Content-Type of a file named {@code name}. */
  public String of(String name) {
    int dot = name.lastIndexOf('.');
    if (dot < 0 || dot == name.length() - 1) return OCTETS;
    String t = types.get(name.substring(dot + 1).toLowerCase(Locale.ROOT));
    return t != null ? t : OCTETS;
  }

  private static Map<String, String> defaults() {
    Map<String, String> m = new HashMap<>();
    String utf8 = "; charset=utf-8";
    String[][] table = {
        {"html", "text/html" + utf8}, {"htm", "text/html" + utf8},
        {"css", "text/css" + utf8}, {"js", "text/javascript" + utf8},
        {"mjs", "text/javascript" + utf8}, {"txt", "text/plain" + utf8},
        {"csv", "text/csv" + utf8}, {"md", "text/markdown" + utf8},
        {"xml", "application/xml" + utf8}, {"json", "application/json" + utf8},
        {"map", "application/json" + utf8}, {"webmanifest", "application/manifest+json" + utf8},
        {"svg", "image/svg+xml" + utf8}, {"ics", "text/calendar" + utf8},
        {"png", "image/png"}, {"jpg", "image/jpeg"}, {"jpeg", "image/jpeg"},
        {"gif", "image/gif"}, {"webp", "image/webp"}, {"avif", "image/avif"},
        {"ico", "image/x-icon"}, {"bmp", "image/bmp"}, {"tif", "image/tiff"},
        {"tiff", "image/tiff"},
        {"woff", "font/woff"}, {"woff2", "font/woff2"}, {"ttf", "font/ttf"},
        {"otf", "font/otf"}, {"eot", "application/vnd.ms-fontobject"},
        {"mp3", "audio/mpeg"}, {"ogg", "audio/ogg"}, {"wav", "audio/wav"},
        {"flac", "audio/flac"}, {"m4a", "audio/mp4"}, {"aac", "audio/aac"},
        {"mp4", "video/mp4"}, {"webm", "video/webm"}, {"ogv", "video/ogg"},
        {"mov", "video/quicktime"},
        {"pdf", "application/pdf"}, {"zip", "application/zip"},
        {"gz", "application/gzip"}, {"tar", "application/x-tar"},
        {"br", "application/x-brotli"}, {"wasm", "application/wasm"},
        {"bin", OCTETS}, {"jar", "application/java-archive"},
    };
    for (String[] row : table) m.put(row[0], row[1]);
    return m;
  }
}
