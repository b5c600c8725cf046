package donkey.ring;

import clojure.lang.IFn;
import clojure.lang.ILookup;
import clojure.lang.IPersistentMap;
import clojure.lang.IRecord;
import clojure.lang.IType;
import clojure.lang.IPersistentVector;
import clojure.lang.ISeq;
import clojure.lang.Keyword;
import clojure.lang.Named;
import clojure.lang.RT;
import clojure.lang.Seqable;
import donkey.codec.Json;
import io.vertx.core.MultiMap;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpServerResponse;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.Map;

/**
 * Writes a Ring response map to a Vert.x response: the one place that knows every body type
 * of the Ring SPEC.
 *
 * <p>Body types: nil, String (encoded with the charset of {@code Content-Type}, UTF-8 when it
 * names none), byte[], java.io.File (sent with zero-copy), java.io.InputStream (streamed, then
 * closed), ISeq (each element's {@code str}, flushed after each element), and anything
 * {@code ring.core.protocols/StreamableResponseBody} can write when ring-core is loaded.
 * A Clojure map or vector ({@link IPersistentMap} / {@link IPersistentVector}, never an ISeq,
 * which stays Ring's streamed seq) is written as JSON by {@link Json}: serialized whole on the
 * event loop, always UTF-8 (RFC 8259), with an exact {@code Content-Length} and
 * {@code Content-Type: application/json; charset=utf-8} when the handler set no Content-Type.
 * A record or deftype that satisfies {@code StreamableResponseBody} is streamed by the protocol
 * instead; for core maps and vectors the protocol is not consulted.
 *
 * <p>Threading: {@link #writeHead} and {@link #endFixed} run on the request's event loop;
 * {@link #stream} blocks and must run on a worker or virtual thread.
 *
 * <p>Bad input: a response that is not a map, a status that is not an integer in 100..999, a
 * header value with CR or LF, a body of an unknown type, or a map/vector body that cannot be
 * written as JSON raises {@link IllegalArgumentException} before anything is sent, so the
 * caller can answer 500.
 */
public final class ResponseWriter {
  public static final Keyword STATUS = Keyword.intern("status");
  public static final Keyword HEADERS = Keyword.intern("headers");
  public static final Keyword BODY = Keyword.intern("body");

  /** How a body is sent. */
  public enum Kind {
    /**
     * Known length, in memory: written at once from the event loop (nil, String, byte[], and
     * map or vector bodies, serialized to JSON there).
     */
    FIXED,
    /** A file: sent by Vert.x without blocking. */
    FILE,
    /** Produced by blocking code: streamed from a worker thread with flow control. */
    STREAM,
    /** A {@link StreamingBody}: the head goes out at once, the application sends chunks later. */
    CHANNEL
  }

  private static final int READ_CHUNK = 32 * 1024;
  private static final CharSequence JSON_TYPE = io.vertx.core.http.HttpHeaders.createOptimized(
      Json.CONTENT_TYPE);

  private ResponseWriter() {}

  /**
   * Checks that {@code response} is a Ring response map and returns how its body is sent.
   *
   * @param streamablePred {@code (fn [body])} for StreamableResponseBody, or null
   * @throws IllegalArgumentException when it is not a response or the body type is unknown
   */
  public static Kind classify(Object response, IFn streamablePred) {
    if (!(response instanceof IPersistentMap)) {
      throw new IllegalArgumentException("handler returned "
          + (response == null ? "nil" : "a " + response.getClass().getName())
          + ", not a Ring response map");
    }
    Object body = ((ILookup) response).valAt(BODY);
    if (body == null || body instanceof String || body instanceof byte[]) return Kind.FIXED;
    if (body instanceof File) return Kind.FILE;
    if (body instanceof StreamingBody) return Kind.CHANNEL;
    if (body instanceof InputStream || body instanceof ISeq) return Kind.STREAM;
    if (isJson(body)) {
      // a record or deftype may implement StreamableResponseBody itself, and then that wins;
      // core maps and vectors skip the (slow) protocol check
      if ((body instanceof IRecord || body instanceof IType) && streamablePred != null
          && RT.booleanCast(streamablePred.invoke(body))) {
        return Kind.STREAM;
      }
      return Kind.FIXED;
    }
    if (streamablePred != null && RT.booleanCast(streamablePred.invoke(body))) return Kind.STREAM;
    throw new IllegalArgumentException("unsupported response body type " + body.getClass().getName());
  }

  /**
   * Sets the status and headers of {@code resp} from the Ring response map. The {@code Date}
   * and {@code Server} headers are set first, so the handler's own values replace them.
   *
   * @param date the cached HTTP date of the event loop
   * @param server the {@code Server} header value, or null for none
   * @return true when the handler set {@code Content-Length} or {@code Transfer-Encoding}
   */
  public static boolean writeHead(HttpServerResponse resp, IPersistentMap response,
                                  CharSequence date, CharSequence server) {
    resp.setStatusCode(status(response.valAt(STATUS)));
    MultiMap out = resp.headers();
    out.set(io.vertx.core.http.HttpHeaders.DATE, date);
    if (server != null) out.set(io.vertx.core.http.HttpHeaders.SERVER, server);
    Object headers = response.valAt(HEADERS);
    if (headers == null) return false;
    boolean framing = false;
    if (!(headers instanceof Map)) {
      throw new IllegalArgumentException(":headers must be a map, got " + headers.getClass().getName());
    }
    for (Object o : ((Map<?, ?>) headers).entrySet()) {
      Map.Entry<?, ?> e = (Map.Entry<?, ?>) o;
      String name = headerName(e.getKey());
      framing |= isFraming(name);
      Object v = e.getValue();
      if (v instanceof String) {
        out.set(name, checkValue(name, (String) v));
      } else if (v instanceof Iterable || v instanceof ISeq || v instanceof Seqable) {
        out.remove(name);
        for (ISeq s = RT.seq(v); s != null; s = s.next()) {
          out.add(name, checkValue(name, String.valueOf(s.first())));
        }
      } else if (v != null) {
        out.set(name, checkValue(name, v.toString()));
      }
    }
    return framing;
  }

  /** True for Content-Length and Transfer-Encoding, which the writer owns for fixed bodies. */
  private static boolean isFraming(String name) {
    return name.length() == 14 && name.equalsIgnoreCase("content-length")
        || name.length() == 17 && name.equalsIgnoreCase("transfer-encoding");
  }

  /** True for a body written as JSON: a Clojure map or vector that is not a seq. */
  static boolean isJson(Object body) {
    return (body instanceof IPersistentMap || body instanceof IPersistentVector)
        && !(body instanceof ISeq);
  }

  /**
   * Ends the response with a nil, String, byte[], or map or vector (JSON) body. The length is
   * always computed here: a {@code Content-Length} or {@code Transfer-Encoding} the handler set
   * is replaced. A map or vector is serialized before anything else is done, so a body that
   * cannot be written throws with the response untouched. Event loop only.
   *
   * @param handlerFraming what {@link #writeHead} returned: whether there is a handler-set
   *     framing header to replace
   * @throws IllegalArgumentException when a map or vector body cannot be written as JSON, or
   *     the body is of no FIXED type
   */
  public static void endFixed(HttpServerResponse resp, Object body, boolean handlerFraming) {
    Buffer json = isJson(body) ? Json.writeBuffer(body) : null;
    MultiMap h = resp.headers();
    if (handlerFraming) {
      h.remove(io.vertx.core.http.HttpHeaders.TRANSFER_ENCODING);
      h.remove(io.vertx.core.http.HttpHeaders.CONTENT_LENGTH);
    }
    if (body == null) {
      resp.end();
    } else if (body instanceof String) {
      Charset cs = charset(h.get(io.vertx.core.http.HttpHeaders.CONTENT_TYPE));
      if (cs == StandardCharsets.UTF_8) {
        resp.end((String) body);
      } else {
        resp.end(Buffer.buffer(((String) body).getBytes(cs)));
      }
    } else if (body instanceof byte[]) {
      resp.end(Buffer.buffer((byte[]) body));
    } else if (json != null) {
      if (!h.contains(io.vertx.core.http.HttpHeaders.CONTENT_TYPE)) {
        h.set(io.vertx.core.http.HttpHeaders.CONTENT_TYPE, JSON_TYPE);
      }
      resp.end(json);
    } else {
      throw new IllegalArgumentException("not a fixed response body: " + body.getClass().getName());
    }
  }

  /** Sends a file body with zero-copy; a missing or unreadable file raises before sending. */
  public static void sendFile(HttpServerResponse resp, File f) {
    if (!f.isFile() || !f.canRead()) {
      throw new IllegalArgumentException("response body file is not a readable file: " + f);
    }
    resp.headers().remove(io.vertx.core.http.HttpHeaders.TRANSFER_ENCODING);
    resp.headers().remove(io.vertx.core.http.HttpHeaders.CONTENT_LENGTH);
    resp.sendFile(f.getPath());
  }

  /**
   * Streams an InputStream, ISeq or StreamableResponseBody body, blocking while the client
   * does not read. The head must already be set with {@link #writeHead}. An InputStream body
   * is closed afterwards in every case.
   *
   * <p>Worker or virtual thread only.
   *
   * @param os the stream over {@code resp}; after a throw, {@link ResponseOutputStream#committed()}
   *     tells whether anything was sent
   * @throws Exception whatever the body or the connection threw
   */
  public static void stream(HttpServerResponse resp, IPersistentMap response,
                            ResponseOutputStream os, IFn streamableWriter) throws Exception {
    Object body = response.valAt(BODY);
    boolean head = os.head();
    if (body instanceof InputStream) {
      try (InputStream in = (InputStream) body) {
        if (!head) {
          byte[] chunk = new byte[READ_CHUNK];
          for (int n; (n = in.read(chunk)) >= 0; ) {
            if (n > 0) os.write(chunk, 0, n);
          }
        }
      }
      os.close();
    } else if (body instanceof ISeq) {
      if (!head) {
        Charset cs = charset(resp.headers().get(io.vertx.core.http.HttpHeaders.CONTENT_TYPE));
        for (ISeq s = (ISeq) body; s != null; s = s.next()) {
          Object x = s.first();
          if (x != null) os.write(x.toString().getBytes(cs));
          os.flush();
        }
      }
      os.close();
    } else {
      streamableWriter.invoke(body, response, os);
      os.close();
    }
  }

  /** Closes an InputStream body that will not be sent (an error answered instead). */
  public static void discard(Object response) {
    if (response instanceof ILookup) {
      Object body = ((ILookup) response).valAt(BODY);
      if (body instanceof InputStream) {
        try {
          ((InputStream) body).close();
        } catch (IOException ignored) {
          // nothing more to do with a body nobody will read
        }
      }
    }
  }

  static int status(Object s) {
    if (s == null) return 200;
    if (s instanceof Long || s instanceof Integer || s instanceof Short) {
      long v = ((Number) s).longValue();
      if (v >= 100 && v <= 999) return (int) v;
    }
    throw new IllegalArgumentException("invalid :status " + s);
  }

  private static String headerName(Object k) {
    String name = k instanceof Named ? ((Named) k).getName() : String.valueOf(k);
    if (name.isEmpty()) throw new IllegalArgumentException("empty response header name");
    for (int i = 0; i < name.length(); i++) {
      char c = name.charAt(i);
      if (c <= ' ' || c >= 127 || c == ':') {
        throw new IllegalArgumentException("invalid response header name " + quote(name));
      }
    }
    return name;
  }

  private static String checkValue(String name, String v) {
    for (int i = 0; i < v.length(); i++) {
      char c = v.charAt(i);
      if (c == '\r' || c == '\n' || c == 0) {
        throw new IllegalArgumentException("response header " + name
            + " has a CR, LF or NUL in its value (header injection refused)");
      }
    }
    return v;
  }

  private static String quote(String s) {
    return '"' + (s.length() > 64 ? s.substring(0, 64) + "..." : s) + '"';
  }

  /** The charset named by a Content-Type value, UTF-8 when none or unknown. */
  static Charset charset(String contentType) {
    if (contentType == null) return StandardCharsets.UTF_8;
    int i = contentType.toLowerCase(Locale.ROOT).indexOf("charset=");
    if (i < 0) return StandardCharsets.UTF_8;
    int start = i + 8;
    int end = contentType.indexOf(';', start);
    String name = (end < 0 ? contentType.substring(start) : contentType.substring(start, end)).trim();
    if (name.length() >= 2 && name.charAt(0) == '"' && name.charAt(name.length() - 1) == '"') {
      name = name.substring(1, name.length() - 1);
    }
    try {
      return Charset.forName(name);
    } catch (RuntimeException e) {
      return StandardCharsets.UTF_8;
    }
  }
}
