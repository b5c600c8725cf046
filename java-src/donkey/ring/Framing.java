package donkey.ring;

import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpHeaders;
import java.util.List;

/**
 * How a response is framed: whether it carries a body and which {@code Content-Length} it may
 * have, from its status and the request's method (RFC 9110 6.4.1 and 8.6, RFC 9112 6.3), and
 * what the handler's own framing headers may contribute. The kernel owns framing: a handler's
 * {@code Transfer-Encoding} is never sent (the kernel chunks what it streams), and a handler's
 * {@code Content-Length} is either replaced by the body's real length, enforced on a streamed
 * body, or kept where no body is sent and it is the length a GET would get.
 *
 * <p>Threading: stateless.
 */
public final class Framing {
  /** A body is sent; its length is the body's (or, for a streamed body, the declared one). */
  public static final int BODY = 0;
  /** A HEAD request's answer: no body; the Content-Length a GET would get, when known. */
  public static final int HEAD = 1;
  /** 304: no body; a valid Content-Length the handler set (the 200's length) is kept. */
  public static final int NOT_MODIFIED = 2;
  /** 204: no body and no Content-Length. */
  public static final int NO_CONTENT = 3;
  /** 205: no body, and {@code Content-Length: 0}. */
  public static final int RESET_CONTENT = 4;

  private Framing() {}

  /**
   * The framing of a response with {@code status} to a request that was ({@code head}) or was
   * not a HEAD. The status has been checked already (no 1xx reaches here).
   */
  public static int of(int status, boolean head) {
    if (status == 204) return NO_CONTENT;
    if (status == 304) return NOT_MODIFIED;
    if (status == 205) return RESET_CONTENT;
    return head ? HEAD : BODY;
  }

  /**
   * The {@code Content-Length} the handler set on {@code headers}: -1 when none.
   *
   * @throws IllegalArgumentException when it is not one decimal number (several lines, a
   *     list, a sign, or anything but digits), before anything is sent
   */
  public static long declared(MultiMap headers) {
    List<String> all = headers.getAll(HttpHeaders.CONTENT_LENGTH);
    if (all.isEmpty()) return -1;
    if (all.size() > 1) {
      throw new IllegalArgumentException("the response has " + all.size()
          + " Content-Length headers");
    }
    long n = parseLength(all.get(0));
    if (n < 0) throw new IllegalArgumentException("invalid response Content-Length");
    return n;
  }

  /** The value of a Content-Length (1 to 18 ASCII digits), or -1 when it is not one. */
  static long parseLength(String v) {
    int n = v.length();
    if (n == 0 || n > 18) return -1;
    long x = 0;
    for (int i = 0; i < n; i++) {
      char c = v.charAt(i);
      if (c < '0' || c > '9') return -1;
      x = x * 10 + (c - '0');
    }
    return x;
  }

  /**
   * Sets the framing headers of a response that sends no body ({@code framing} is not
   * {@link #BODY}): none for 204; {@code 0} for 205; for HEAD {@code length} when it is known
   * (&gt;= 0), else the handler's valid {@code declared} one; for 304 the handler's valid one.
   * Any Transfer-Encoding goes.
   */
  public static void setBodyless(MultiMap headers, int framing, long length, long declared) {
    headers.remove(HttpHeaders.TRANSFER_ENCODING);
    headers.remove(HttpHeaders.CONTENT_LENGTH);
    long n = framing == RESET_CONTENT ? 0
        : framing == HEAD ? (length >= 0 ? length : declared)
        : framing == NOT_MODIFIED ? declared : -1;
    if (n >= 0) headers.set(HttpHeaders.CONTENT_LENGTH, Long.toString(n));
  }
}
