package donkey.ring;

import donkey.codec.HttpTokens;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * RFC 7239's {@code Forwarded} header as its elements, each a list of {name, value} pairs
 * (names in lower case, quoted values unquoted), nearest hop last. Stateless; any thread.
 */
final class ForwardedHeader {
  private ForwardedHeader() {}

  /**
   * The elements of every {@code lines} (one header's field lines, a list across them), or
   * null when one breaks the grammar: {@code Forwarded = 1#forwarded-element},
   * {@code forwarded-element = [pair] *(";" [pair])}, {@code pair = token "=" (token /
   * quoted-string)}.
   */
  static List<List<String[]>> parse(List<String> lines) {
    List<List<String[]>> elements = new ArrayList<>();
    for (String v : lines) {
      int i = 0;
      int n = v.length();
      List<String[]> element = new ArrayList<>();
      while (true) {
        i = HttpTokens.skipOws(v, i);
        if (i < n && v.charAt(i) != ',' && v.charAt(i) != ';') {
          int nameEnd = HttpTokens.tokenEnd(v, i);
          if (nameEnd == i || nameEnd >= n || v.charAt(nameEnd) != '=') return null;
          String name = v.substring(i, nameEnd).toLowerCase(Locale.ROOT);
          i = nameEnd + 1;
          String value;
          if (i < n && v.charAt(i) == '"') {
            StringBuilder sb = new StringBuilder();
            i++;
            boolean closed = false;
            while (i < n) {
              char c = v.charAt(i++);
              if (c == '"') {
                closed = true;
                break;
              }
              if (c == '\\') {
                if (i == n) return null;
                c = v.charAt(i++);
              }
              if (c < 0x20 && c != '\t' || c == 0x7f) return null;
              sb.append(c);
            }
            if (!closed) return null;
            value = sb.toString();
          } else {
            int end = HttpTokens.tokenEnd(v, i);
            if (end == i) return null;
            value = v.substring(i, end);
            i = end;
          }
          element.add(new String[] {name, value});
          i = HttpTokens.skipOws(v, i);
        }
        if (i >= n) {
          elements.add(element);
          break;
        }
        char c = v.charAt(i++);
        if (c == ',') {
          elements.add(element);
          element = new ArrayList<>();
        } else if (c != ';') {
          return null;
        }
      }
    }
    // (empty elements, "a, , b", are list syntax, not hops)
    elements.removeIf(List::isEmpty);
    return elements;
  }
}
