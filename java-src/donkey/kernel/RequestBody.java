package donkey.kernel;

import donkey.kernel.config.Durations;
import donkey.kernel.config.ServerConfig;
import donkey.ring.BodyBuffer;
import donkey.ring.BodyInputStream;
import io.vertx.core.http.HttpServerRequest;
import java.io.IOException;

/**
 * The body of one request: its framing checked (RFC 9112 6), then read whole before an async
 * handler runs ({@link BodyBuffer}) or streamed to a sync handler as it arrives
 * ({@link BodyInputStream}), answering what goes wrong on the way: 400 for bad framing or a
 * broken body, 413 past the size limit, 408 for a body that stops arriving. After an early
 * answer the rest of the body is read and dropped, up to a limit, so that the client gets to
 * read the answer.
 *
 * <p>Threading: made and fed on the request's event loop; a streamed body is read on the
 * handler's thread.
 */
final class RequestBody {
  /** Body bytes read and dropped after an early error answer before the connection is closed. */
  static final long DRAIN_LIMIT = 4L * 1024 * 1024;
  /** What {@link #length} gives for a chunked body. */
  static final long CHUNKED = -1;
  /** What {@link #length} gives for framing that is refused (the reason in its message). */
  static final long REFUSED = -2;

  private final Admission exchange;
  private final HttpServerRequest req;
  /** The body's {@link RequestDecoding} coding, undone before the handler reads it. */
  private final int coding;
  /** An async handler's body while it arrives; null once dispatched, refused or failed. */
  private BodyBuffer buffered;
  /** A sync handler's body, or null. */
  private BodyInputStream streamed;
  /** True once the body has been refused or has failed: what still arrives is dropped. */
  private boolean rejected;
  private long received;
  /** When the sweep first saw the body being read (loop-confined), or UNSTAMPED. */
  private long since = ConnectionGuard.UNSTAMPED;

  /**
   * The body of {@code exchange}'s request {@code req}, in the {@link RequestDecoding}
   * {@code coding}, which is undone before the handler reads it; nothing is read before
   * {@link #read}.
   */
  RequestBody(Admission exchange, HttpServerRequest req, int coding) {
    this.exchange = exchange;
    this.req = req;
    this.coding = coding;
  }

  /**
   * The body's length from its framing headers (repeated lines arrive joined with ','):
   * 0 without a body, {@link #CHUNKED}, or {@link #REFUSED} when the framing cannot be trusted:
   * a Transfer-Encoding other than a lone {@code chunked}, one beside Content-Length (how
   * requests get smuggled, RFC 9112 6.1 and 6.3), or a Content-Length that is not a number.
   */
  static long length(String contentLength, String transferEncoding) {
    if (transferEncoding != null) {
      return contentLength == null && "chunked".equalsIgnoreCase(transferEncoding.trim())
          ? CHUNKED : REFUSED;
    }
    if (contentLength == null) return 0;
    try {
      long n = Long.parseLong(contentLength.trim());
      return n < 0 ? REFUSED : n;
    } catch (NumberFormatException e) {
      return REFUSED;
    }
  }

  /**
   * Event loop: reads the body of {@code length} bytes ({@link #CHUNKED}: unknown) for the
   * exchange's handler: whole before an async handler runs, as it arrives for a sync one.
   * Answers 413 at once for a length over the limit.
   *
   * @param expectContinue true when the client waits for {@code 100 Continue}
   * @param maxBody the largest body allowed: the route's {@code :max-body-size}, else the
   *     server's
   * @return false when the body was refused
   */
  boolean read(long length, boolean async, boolean expectContinue, long maxBody,
               ServerConfig cfg) {
    // an async handler's body is held in one array
    long limit = async ? Math.min(maxBody, BodyBuffer.MAX) : maxBody;
    if (length > limit) {
      if (length - limit > DRAIN_LIMIT) {
        exchange.refuse(413, "Payload Too Large");
      } else {
        exchange.answerWith(() -> reject(413, "Payload Too Large"));
      }
      return false;
    }
    if (expectContinue) exchange.response().writeContinue();
    if (async) {
      buffer(length, limit);
    } else {
      stream(cfg, limit);
    }
    return true;
  }

  /**
   * Event loop: a handler on the event loop cannot wait for its body, so the body is read whole
   * (up to {@code limit}) before the handler runs, into memory that grows with the bytes that
   * arrive. A body that stops arriving for {@code :body-timeout} gets 408
   * ({@link ConnectionGuard#sweep} calls {@link #timedOut}), one that grows past the limit 413.
   */
  private void buffer(long declared, long limit) {
    BodyBuffer b = new BodyBuffer(declared, limit);
    buffered = b;
    req.exceptionHandler(t -> {
      // a broken body (bad chunk framing) or a vanished client: nothing to dispatch
      rejected = true;
      buffered = null;
      exchange.bodyBroke();
    });
    req.handler(chunk -> {
      if (rejected) return;
      if (!b.append(chunk)) {
        buffered = null;
        rejected = true;
        exchange.answerWith(() -> reject(413, "Payload Too Large"));
      }
    });
    req.endHandler(v -> {
      if (rejected || exchange.answered()) return;
      buffered = null;
      java.io.InputStream body = b.stream();
      if (coding != RequestDecoding.NONE) {
        body = RequestDecoding.inflateAll(body, coding, limit, this::inflatedTooLarge,
            this::notInflatable);
        if (body == null) return;
      }
      exchange.dispatch(body);
    });
  }

  /**
   * Event loop: a blocking handler runs at once and reads its body as it arrives, with flow
   * control. A body that grows past {@code :max-body-size} is answered 413 (the handler's reads
   * fail); what the handler leaves unread is discarded once the response has been sent
   * ({@link #discardRest}).
   */
  private void stream(ServerConfig cfg, long maxBody) {
    BodyInputStream in = new BodyInputStream(req, exchange.loop().eventLoop,
        Durations.nanos(cfg.bodyTimeoutMs), () -> {
          // claimed here, on the reading thread, before its read fails: the handler's own
          // answer to that failure comes later and is dropped
          exchange.refuse(408, "Request Timeout: the request body stopped arriving");
        });
    streamed = in;
    exchange.watchEnd();
    req.exceptionHandler(t -> {
      // A broken body (bad chunk framing) or a vanished client ends the request. The answer is
      // claimed before the handler's reads fail, so whatever the handler answers to that
      // failure is dropped instead of racing the connection's close.
      exchange.bodyBroke();
      in.fail(new IOException("the request body could not be read: "
          + (t.getMessage() != null ? t.getMessage() : t.getClass().getSimpleName()), t));
    });
    req.handler(chunk -> {
      received += chunk.length();
      if (received > maxBody) {
        if (!rejected) {
          rejected = true;
          // claimed before the handler's reads fail, as above
          if (!exchange.answerWith(() -> reject(413, "Payload Too Large"))) {
            exchange.closeConnection();
          }
          in.fail(new IOException("the request body is larger than :max-body-size ("
              + maxBody + " bytes)"));
        }
        return;
      }
      in.offer(chunk);
    });
    req.endHandler(v -> in.end());
    exchange.dispatch(coding == RequestDecoding.NONE ? in : RequestDecoding.inflating(in, coding,
        maxBody, this::inflatedTooLarge, this::notInflatable));
  }

  /**
   * Any thread: the inflated body grew past the limit. Answered 413 and the connection
   * closed: the rest of a body whose inflating has stopped is not worth reading.
   */
  private void inflatedTooLarge() {
    exchange.refuse(413, "Payload Too Large");
  }

  /** Any thread: the body is not valid in its Content-Encoding. 400, and the connection closed. */
  private void notInflatable() {
    exchange.refuse(400, "Bad Request: the request body is not valid in its Content-Encoding");
  }

  /**
   * Event loop: answers {@code status} at once, then reads and drops the rest of the request
   * body, so the client (which may still be sending) gets to read the answer: closing a socket
   * with unread input would reset the connection and lose it. Past {@link #DRAIN_LIMIT} dropped
   * bytes the connection is closed after all.
   */
  private void reject(int status, String message) {
    rejected = true;
    if (exchange.h2) {
      // the stream alone is reset after the answer: nothing to drain
      exchange.closeWith(status, message);
      return;
    }
    long[] dropped = {0};
    req.handler(chunk -> {
      dropped[0] += chunk.length();
      if (dropped[0] > DRAIN_LIMIT) req.connection().close();
    });
    exchange.keepConnection(status, message);
  }

  /** True while the body is read before the (async) handler runs: not dispatched yet. */
  boolean awaited() {
    return buffered != null;
  }

  /** Event loop (the sweep): when the body began to be read, stamped {@code now} at first. */
  long since(long now) {
    if (since == ConnectionGuard.UNSTAMPED) since = now;
    return since;
  }

  /**
   * Event loop (the connection sweep): the body read before an async handler stopped arriving
   * for {@code :body-timeout}, or has not arrived whole within the async handler's timeout;
   * answers 408 and closes the connection.
   */
  void timedOut() {
    if (!exchange.refuse(408, "Request Timeout: the request body stopped arriving")) return;
    rejected = true;
    buffered = null;
  }

  /**
   * Any thread: the response has been sent; what a sync handler did not read is dropped as it
   * arrives, so the connection can go on to its next request.
   */
  void discardRest() {
    BodyInputStream in = streamed;
    if (in != null) in.discardRest();
  }
}
