package donkey.ring;

import clojure.lang.IFn;
import clojure.lang.ILookup;
import clojure.lang.IPersistentMap;
import clojure.lang.IPersistentVector;
import clojure.lang.IRecord;
import clojure.lang.ISeq;
import clojure.lang.IType;
import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;
import clojure.lang.PersistentHashMap;
import clojure.lang.PersistentVector;
import clojure.lang.RT;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;

/**
 * The Ring response map as the kernel reads it: its keys, its {@code :status}, and how its
 * {@code :body} is sent ({@link Kind}).
 *
 * <p>Body types: nil, String, byte[] and a Clojure map or vector (a JSON body; never an ISeq,
 * which stays Ring's streamed seq) are {@link Kind#FIXED}; a java.io.File is {@link Kind#FILE};
 * java.io.InputStream, ISeq and anything {@code ring.core.protocols/StreamableResponseBody}
 * writes when ring-core is loaded are {@link Kind#STREAM}; a {@link StreamingBody} is
 * {@link Kind#CHANNEL}; no body with a {@code :ring.websocket/listener} is
 * {@link Kind#WEBSOCKET}. A record or deftype that satisfies {@code StreamableResponseBody} is
 * streamed by the protocol; for core maps and vectors the protocol is not consulted.
 *
 * <p>Threading: stateless.
 */
public final class ResponseMap {
  public static final Keyword STATUS = Keyword.intern("status");
  public static final Keyword HEADERS = Keyword.intern("headers");
  public static final Keyword BODY = Keyword.intern("body");
  /** Ring 1.11's key for a WebSocket listener, which makes a response a handshake's answer. */
  public static final Keyword LISTENER = Keyword.intern("ring.websocket", "listener");

  /** How a body is sent. */
  public enum Kind {
    /**
     * Known length, in memory: written at once from the thread that has it (nil, String,
     * byte[], and map or vector bodies, serialized to JSON there).
     */
    FIXED,
    /** A file: sent by Vert.x without blocking. */
    FILE,
    /** Produced by blocking code: streamed from a worker thread with flow control. */
    STREAM,
    /** A {@link StreamingBody}: the head goes out at once, the application sends chunks later. */
    CHANNEL,
    /**
     * No body and a {@code :ring.websocket/listener}: a WebSocket handshake's answer (Ring
     * 1.11), or a 400 when the request was no upgrade.
     */
    WEBSOCKET
  }

  private ResponseMap() {}

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
    // read through the interface just tested: a second interface would make the map class's
    // one-entry cache of its last passing interface test alternate (JDK-8180450, before JDK 23)
    Object body = ((IPersistentMap) response).valAt(BODY);
    if (body == null) {
      // the one look for a listener, on bodiless answers only: a String or byte[] answer,
      // the common one, pays nothing for WebSockets
      return ((IPersistentMap) response).valAt(LISTENER) == null ? Kind.FIXED : Kind.WEBSOCKET;
    }
    if (body instanceof String || body instanceof byte[]) return Kind.FIXED;
    if (isCoreJson(body.getClass())) return Kind.FIXED;
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
   * True for the core map and vector classes, which are JSON bodies: an exact class test
   * first, so the common bodies skip the interface tests of {@link #isJson} (before JDK 23 a
   * failing interface test scans every interface a Clojure collection implements).
   */
  private static boolean isCoreJson(Class<?> c) {
    return c == PersistentArrayMap.class || c == PersistentHashMap.class
        || c == PersistentVector.class;
  }

  /**
   * True for a body written as JSON: a Clojure map or vector that is not a seq. String and
   * byte[] are told apart by their exact class first, for the same reason as
   * {@link #isCoreJson}.
   */
  static boolean isJson(Object body) {
    if (body == null || body instanceof String || body instanceof byte[]) return false;
    if (isCoreJson(body.getClass())) return true;
    return (body instanceof IPersistentMap || body instanceof IPersistentVector)
        && !(body instanceof ISeq);
  }

  /**
   * The HTTP status of a response's {@code :status} value: 200 for nil. A 1xx status is
   * refused: it is an interim answer, after which HTTP/1.1 expects the final one on the same
   * connection (100 would make the next request's answer this one's; 101 would claim a
   * protocol switch that never happens).
   *
   * @throws IllegalArgumentException when it is not an integer in 200..999
   */
  public static int status(Object s) {
    if (s == null) return 200;
    if (s instanceof Long || s instanceof Integer || s instanceof Short) {
      long v = ((Number) s).longValue();
      if (v >= 200 && v <= 999) return (int) v;
      if (v >= 100 && v < 200) {
        throw new IllegalArgumentException("a response cannot have the interim :status " + v);
      }
    }
    throw new IllegalArgumentException("invalid :status " + s);
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
}
