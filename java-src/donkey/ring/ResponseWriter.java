package donkey.ring;

import clojure.lang.IFn;
import clojure.lang.IPersistentMap;
import clojure.lang.ISeq;
import donkey.codec.ContentType;
import donkey.codec.Json;
import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.http.MimeMapping;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.channels.FileChannel;
import java.nio.charset.Charset;
import java.nio.file.StandardOpenOption;

/**
 * Writes a Ring response map ({@link ResponseMap}) to a Vert.x response: its status and
 * headers ({@link HeaderLines}, {@link HeaderPlan}), then its body, one way per body kind: a
 * fixed body whole ({@link #writeFixed}), a file with zero-copy ({@link #sendOpened}), a streamed
 * body through a {@link ResponseOutputStream} ({@link #stream}). Framing is the kernel's
 * ({@link Framing}).
 *
 * <p>A String body is encoded with the charset of {@code Content-Type}, UTF-8 when it names
 * none. A map or vector body is written as JSON by {@link Json}: serialized whole on the thread
 * that writes it, always UTF-8 (RFC 8259), with {@code Content-Type: application/json;
 * charset=utf-8} when the handler set no Content-Type.
 *
 * <p>Threading: {@link #writeHead} and {@link #writeFixed} run on whichever single thread owns
 * the response at the time (the event loop, or the worker that ran the handler); {@link
 * #stream} blocks and must run on a worker or virtual thread.
 *
 * <p>Bad input: a status that is not an integer in 200..999, a header name that is not a token
 * or a value with a control character, a body of an unknown type, or a map/vector body that
 * cannot be written as JSON raises {@link IllegalArgumentException} before anything is sent,
 * so the caller can answer 500.
 */
public final class ResponseWriter {
  private static final int READ_CHUNK = 32 * 1024;

  private ResponseWriter() {}

  /**
   * Told, by the thread writing the head, when a handler's headers say {@code Connection:
   * close}: the response is then its connection's last (RFC 9112 9.6). An HTTP/2 response
   * carries no Connection line, and its stream's end ends nothing more.
   */
  public interface LastResponse {
    void closeAfterResponse();
  }

  /**
   * Classes named by the signatures of methods on the response path, resolved through this
   * class's loader when it is initialized: the JIT does not inline a method whose signature
   * names a class its holder's loader has not resolved yet.
   */
  @SuppressWarnings("unused")
  private static final Class<?>[] SIGNATURES = {Class.class, Charset.class, Buffer.class,
      HeaderPlan.class, LastResponse.class};

  /**
   * Sets the status and headers of {@code resp} from the Ring response map, for a body that
   * is not fixed. The {@code Date} and {@code Server} headers are set first, so the handler's
   * own values replace them.
   *
   * @param date the cached HTTP date of the event loop, or null for no Date header
   * @param server the {@code Server} header value, or null for none
   * @param last told when the headers say {@code Connection: close}
   * @throws IllegalArgumentException for a bad status or header, before anything is sent
   */
  public static void writeHead(HttpServerResponse resp, IPersistentMap response,
                               CharSequence date, CharSequence server, LastResponse last) {
    status(resp, ResponseMap.status(response.valAt(ResponseMap.STATUS)));
    Object headers = response.valAt(ResponseMap.HEADERS);
    HeaderPlan head = writeHeaders(resp.headers(), headers,
        headers instanceof IPersistentMap ? HeaderPlan.of((IPersistentMap) headers) : null,
        date, server);
    if (head.closes) last.closeAfterResponse();
  }

  /**
   * Sets the status of {@code resp} unless it already has it: Vert.x's setter takes the
   * connection's lock, its getter does not, and most responses keep the default 200. The
   * thread that owns the response (the event loop when a worker prepared it).
   */
  public static void status(HttpServerResponse resp, int status) {
    if (resp.getStatusCode() != status) resp.setStatusCode(status);
  }

  /** Removes every header of {@code resp}. The thread that owns the response. */
  public static void clearHeaders(HttpServerResponse resp) {
    HeaderPlan.clear(resp.headers());
  }

  /**
   * Sets the Date and Server lines and the {@code :headers} value (with its compiled plan, or
   * null) on an empty header map, an HTTP/2 response's without connection-specific fields
   * ({@link HeaderPlan#forHttp2}); returns what the body writer needs of them.
   */
  private static HeaderPlan writeHeaders(MultiMap out, Object headers, HeaderPlan plan,
                                         CharSequence date, CharSequence server) {
    if (plan != null && out.isEmpty()) {
      plan.addLines(out, date, server);
      return plan;
    }
    if (date != null) out.set(io.vertx.core.http.HttpHeaders.DATE, date);
    if (server != null) out.set(io.vertx.core.http.HttpHeaders.SERVER, server);
    if (headers == null) return HeaderPlan.NONE;
    int flags = HeaderLines.apply(out, headers);
    if (HeaderPlan.forHttp2(out)) HeaderPlan.dropConnectionFields(out);
    return HeaderPlan.applied(flags, out.get(io.vertx.core.http.HttpHeaders.CONTENT_TYPE));
  }

  /**
   * Sets the headers of a response whose body is nil, a String, a byte[], or a map or vector
   * (JSON), and returns the body's bytes for {@code end} (null when nothing is sent); the
   * status is the caller's to set. The body is made first (a map or vector serialized), so a
   * body that cannot be written throws with the response untouched. A handler's framing
   * headers are replaced by the kernel's ({@link Framing}): the body's exact length, or for a
   * response that sends no body the length of {@link Framing#setBodyless}, HEAD's being that
   * of the body a GET would get. A constant {@code :headers} map on an HTTP/1.x response gets
   * its whole head as one shared block once its plan has seen the same Date, Server and length
   * twice ({@link HeaderPlan#block}); the lines on the wire are the same either way. Any
   * thread that owns the response; the serialization runs on the calling thread.
   *
   * @param date the cached HTTP date of the event loop, or null for no Date header
   * @param server the {@code Server} header value, or null for none
   * @param framing {@link Framing#of} the response
   * @param last told when the headers say {@code Connection: close}
   * @throws IllegalArgumentException for a bad header, a body that cannot be written as JSON,
   *     or a body of no fixed type
   */
  public static Buffer writeFixed(HttpServerResponse resp, IPersistentMap response,
                                  CharSequence date, CharSequence server, int framing,
                                  LastResponse last) {
    Object headers = response.valAt(ResponseMap.HEADERS);
    HeaderPlan plan = headers instanceof IPersistentMap ? HeaderPlan.of((IPersistentMap) headers)
        : null;
    Object body = response.valAt(ResponseMap.BODY);
    Buffer json = ResponseMap.isJson(body) ? Json.writeBuffer(body) : null;
    MultiMap out = resp.headers();
    if (plan != null && framing == Framing.BODY && !plan.framing && HeaderPlan.takesBlocks(out)) {
      Buffer b = bytes(body, json, plan);
      boolean jsonType = json != null && plan.contentType == null;
      int length = length(b);
      MultiMap lines = plan.block(date, server, length, jsonType);
      if (lines != null) {
        out.setAll(lines);
      } else {
        plan.addHead(out, date, server, length, jsonType);
      }
      if (plan.closes) last.closeAfterResponse();
      return b;
    }
    return writeLines(out, headers, plan, body, json, date, server, framing, last);
  }

  /**
   * {@link #writeFixed} for a response without a shared block: its header lines one by one.
   * Its own method so that writeFixed's common case stays small enough for the JIT to inline
   * into the caller.
   */
  private static Buffer writeLines(MultiMap out, Object headers, HeaderPlan plan, Object body,
                                   Buffer json, CharSequence date, CharSequence server,
                                   int framing, LastResponse last) {
    HeaderPlan head = writeHeaders(out, headers, plan, date, server);
    if (head.closes) last.closeAfterResponse();
    Buffer b = bytes(body, json, head);
    if (json != null && head.contentType == null) {
      out.set(io.vertx.core.http.HttpHeaders.CONTENT_TYPE, HeaderPlan.JSON_TYPE);
    }
    if (framing != Framing.BODY) {
      long declared = head.framing ? Framing.parseLength(
          String.valueOf(out.get(io.vertx.core.http.HttpHeaders.CONTENT_LENGTH))) : -1;
      Framing.setBodyless(out, framing, b == null ? -1 : b.length(), declared);
      return null;
    }
    if (head.framing) {
      out.remove(io.vertx.core.http.HttpHeaders.TRANSFER_ENCODING);
      out.remove(io.vertx.core.http.HttpHeaders.CONTENT_LENGTH);
    }
    // (the framing headers are gone: the handler's were removed above, and nothing else sets
    // them before this point, so add, not set)
    out.add(io.vertx.core.http.HttpHeaders.CONTENT_LENGTH, HeaderPlan.contentLength(length(b)));
    return b;
  }

  /**
   * Ends {@code resp} with what {@link #writeFixed} made (null: no body, which over HTTP/2
   * ends the stream with its HEADERS frame). The kernel's own hot paths make these two calls
   * themselves rather than through here: Vert.x's write path below {@code end} is about
   * fifteen calls deep, and a helper frame above it costs the deepest frames of that path
   * their inlining ({@code MaxInlineLevel}).
   */
  public static void end(HttpServerResponse resp, Buffer body) {
    if (body == null) {
      resp.end();
    } else {
      resp.end(body);
    }
  }

  /**
   * The bytes of a fixed body: null for nil, a String encoded with the plan's charset, a
   * byte[] wrapped, or {@code json} (the body already serialized).
   *
   * @throws IllegalArgumentException for a body of no fixed type
   */
  private static Buffer bytes(Object body, Buffer json, HeaderPlan head) {
    if (body == null) return null;
    if (body instanceof String) return encode((String) body, head.charset());
    if (body instanceof byte[]) return Buffer.buffer((byte[]) body);
    if (json != null) return json;
    throw new IllegalArgumentException("not a fixed response body: " + body.getClass().getName());
  }

  private static int length(Buffer b) {
    return b == null ? 0 : b.length();
  }

  /**
   * Recently sent String bodies of up to {@link #CACHED_BODY_CHARS} chars with their bytes, so
   * a constant body (a literal in the handler) is encoded once. Vert.x sends a slice of a
   * Buffer, never the Buffer itself, so one Buffer can be sent any number of times.
   */
  private static final SeenTwiceCache BODIES = new SeenTwiceCache(256);

  private static final class Encoded {
    final Charset charset;
    final Buffer bytes;

    Encoded(Charset charset, Buffer bytes) {
      this.charset = charset;
      this.bytes = bytes;
    }
  }

  /** Longer String bodies are encoded per response: the cache must not pin big bodies. */
  private static final int CACHED_BODY_CHARS = 4096;

  /** {@code s} encoded with {@code cs}; any thread. */
  static Buffer encode(String s, Charset cs) {
    if (s.length() > CACHED_BODY_CHARS) return Buffer.buffer(s.getBytes(cs));
    Object seen = BODIES.get(s);
    if (seen instanceof Encoded && ((Encoded) seen).charset == cs) return ((Encoded) seen).bytes;
    Buffer b = Buffer.buffer(s.getBytes(cs));
    if (seen != null) BODIES.put(s, new Encoded(cs, b)); // seen before: a constant
    return b;
  }

  /**
   * Any thread: opens a file body for {@link #sendOpened}, or returns null when the response
   * carries no body (a 204, 205 or 304 is ended without reading the file; HEAD opens it for
   * its length). The open is the readability check: it fails before anything is sent, and
   * Vert.x then looks nothing up by name.
   *
   * @throws IllegalArgumentException for a missing or unreadable file, or a directory
   */
  public static FileChannel openFile(File f, int framing) {
    // (a CheckedFile was found a regular file by its maker just now)
    if (!(f instanceof CheckedFile) && !f.isFile()) {
      throw new IllegalArgumentException("response body file is not a readable file: " + f);
    }
    if (framing != Framing.BODY && framing != Framing.HEAD) return null;
    try {
      return FileChannel.open(f.toPath(), StandardOpenOption.READ);
    } catch (IOException | RuntimeException e) {
      throw new IllegalArgumentException("response body file is not a readable file: " + f, e);
    }
  }

  /**
   * The thread that owns the response: sends {@code ch}, {@code f} opened by
   * {@link #openFile} (null: no body), with zero-copy, and closes it once the send is over,
   * however it ends; a HEAD request gets the file's length and no body. A body without a
   * Content-Type gets the one its name's extension maps to, as Vert.x would give it.
   *
   * @throws IllegalArgumentException when the file cannot be read (ch closed, nothing sent)
   */
  public static void sendOpened(HttpServerResponse resp, File f, FileChannel ch, int framing) {
    MultiMap h = resp.headers();
    if (ch == null) {
      long declared = Framing.parseLength(
          String.valueOf(h.get(io.vertx.core.http.HttpHeaders.CONTENT_LENGTH)));
      Framing.setBodyless(h, framing, f.length(), declared);
      resp.end();
      return;
    }
    h.remove(io.vertx.core.http.HttpHeaders.TRANSFER_ENCODING);
    h.remove(io.vertx.core.http.HttpHeaders.CONTENT_LENGTH);
    if (!h.contains(io.vertx.core.http.HttpHeaders.CONTENT_TYPE)) {
      String type = MimeMapping.mimeTypeForFilename(f.getName());
      h.set(io.vertx.core.http.HttpHeaders.CONTENT_TYPE,
          type != null ? type : "application/octet-stream");
    }
    Future<Void> sent;
    try {
      if (framing == Framing.HEAD) {
        // the length a GET would get, and no body (Vert.x keeps a HEAD answer's length)
        h.set(io.vertx.core.http.HttpHeaders.CONTENT_LENGTH, Long.toString(ch.size()));
        closeQuietly(ch);
        resp.end();
        return;
      }
      if (resp.streamId() > 0) {
        // HTTP/2 reads a channel it is given in chunks after its future has completed: it
        // opens the file again itself, the open here having checked it
        closeQuietly(ch);
        resp.sendFile(f.getPath());
        return;
      }
      // (Vert.x takes the file's size itself, capped by the length given)
      sent = resp.sendFile(ch, 0, Long.MAX_VALUE);
    } catch (IOException e) {
      closeQuietly(ch);
      throw new IllegalArgumentException("response body file cannot be read: " + f, e);
    } catch (RuntimeException e) {
      closeQuietly(ch);
      throw e;
    }
    sent.onComplete(done -> closeQuietly(ch));
  }

  /** Closes a channel {@link #openFile} opened, when it is not sent after all. */
  public static void closeQuietly(FileChannel ch) {
    if (ch == null) return;
    try {
      ch.close();
    } catch (IOException ignored) {
      // nothing was written through it
    }
  }

  /**
   * Streams an InputStream, ISeq or StreamableResponseBody body, blocking while the client
   * does not read. The head must already be set with {@link #writeHead}. An InputStream body
   * is closed afterwards in every case; nothing is read from it, and an ISeq is not realized,
   * when the response has no body ({@link ResponseOutputStream#discards}).
   *
   * <p>Worker or virtual thread only.
   *
   * @param os the stream over {@code resp}; after a throw, {@link ResponseOutputStream#committed()}
   *     tells whether anything was sent
   * @param bodyCloses true when a StreamableResponseBody ends the response by closing the
   *     stream, which it may hand to another thread (Ring's contract for async handlers);
   *     false to close it when {@code write-body-to-stream} returns (sync handlers)
   * @throws Exception whatever the body or the connection threw
   */
  public static void stream(HttpServerResponse resp, IPersistentMap response,
                            ResponseOutputStream os, IFn streamableWriter, boolean bodyCloses)
      throws Exception {
    Object body = response.valAt(ResponseMap.BODY);
    boolean none = os.discards();
    if (body instanceof InputStream) {
      try (InputStream in = (InputStream) body) {
        if (!none) {
          byte[] chunk = new byte[READ_CHUNK];
          for (int n; (n = in.read(chunk)) >= 0; ) {
            if (n > 0) os.write(chunk, 0, n);
          }
        }
      }
      os.close();
    } else if (body instanceof ISeq) {
      if (!none) {
        Charset cs = ContentType.responseCharset(resp.headers().get(io.vertx.core.http.HttpHeaders.CONTENT_TYPE));
        for (ISeq s = (ISeq) body; s != null; s = s.next()) {
          Object x = s.first();
          if (x != null) os.write(x.toString().getBytes(cs));
          os.flush();
        }
      }
      os.close();
    } else {
      streamableWriter.invoke(body, response, os);
      if (!bodyCloses) os.close();
    }
  }
}
