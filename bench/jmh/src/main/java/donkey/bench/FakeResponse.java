package donkey.bench;

import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerResponse;

/**
 * A response without a connection, for measuring what donkey does to write one: the status,
 * the header lines (into a real Vert.x HTTP/1.x header map, as the server's) and the body
 * bytes handed over. Everything a server response does after that (encoding the head, the
 * socket) is Vert.x's and the same for raw Vert.x. Methods donkey does not call on this path
 * throw. Generated from the Vert.x 5.1 interface; single-threaded.
 */
@SuppressWarnings({"deprecation", "unchecked", "rawtypes"})
public final class FakeResponse implements HttpServerResponse {
  private static final Future<Void> DONE = Future.succeededFuture();
  /** A new map per response, as a server response has (see {@link #clear}). */
  private MultiMap headers = HttpHeaders.headers();
  private int status = 200;
  private boolean ended;
  /** Body bytes handed over by every end call so far. */
  public long sent;

  /** Ready for the next response (a server makes a new one per request). */
  public FakeResponse clear() {
    // a new map, not clear(): donkey's writer shares read-only header blocks into the map,
    // and Vert.x 5.1's clear() of a map sharing a block brings the block back on the next add
    headers = HttpHeaders.headers();
    status = 200;
    ended = false;
    return this;
  }

  @Override
  public io.vertx.core.http.HttpServerResponse exceptionHandler(io.vertx.core.Handler<java.lang.Throwable> a0) {
    return this;
  }

  @Override
  public io.vertx.core.http.HttpServerResponse setWriteQueueMaxSize(int a0) {
    return this;
  }

  @Override
  public io.vertx.core.http.HttpServerResponse drainHandler(io.vertx.core.Handler<java.lang.Void> a0) {
    return this;
  }

  @Override
  public int getStatusCode() {
    return status;
  }

  @Override
  public io.vertx.core.http.HttpServerResponse setStatusCode(int a0) {
    status = a0; return this;
  }

  @Override
  public java.lang.String getStatusMessage() {
    throw new UnsupportedOperationException("getStatusMessage");
  }

  @Override
  public io.vertx.core.http.HttpServerResponse setStatusMessage(java.lang.String a0) {
    return this;
  }

  @Override
  public io.vertx.core.http.HttpServerResponse setChunked(boolean a0) {
    return this;
  }

  @Override
  public boolean isChunked() {
    return false;
  }

  @Override
  public io.vertx.core.MultiMap headers() {
    return headers;
  }

  @Override
  public io.vertx.core.http.HttpServerResponse putHeader(java.lang.String a0, java.lang.String a1) {
    return this;
  }

  @Override
  public io.vertx.core.http.HttpServerResponse putHeader(java.lang.CharSequence a0, java.lang.CharSequence a1) {
    return this;
  }

  @Override
  public io.vertx.core.http.HttpServerResponse putHeader(java.lang.String a0, java.lang.Iterable<java.lang.String> a1) {
    return this;
  }

  @Override
  public io.vertx.core.http.HttpServerResponse putHeader(java.lang.CharSequence a0, java.lang.Iterable<java.lang.CharSequence> a1) {
    return this;
  }

  @Override
  public io.vertx.core.MultiMap trailers() {
    throw new UnsupportedOperationException("trailers");
  }

  @Override
  public io.vertx.core.http.HttpServerResponse putTrailer(java.lang.String a0, java.lang.String a1) {
    return this;
  }

  @Override
  public io.vertx.core.http.HttpServerResponse putTrailer(java.lang.CharSequence a0, java.lang.CharSequence a1) {
    return this;
  }

  @Override
  public io.vertx.core.http.HttpServerResponse putTrailer(java.lang.String a0, java.lang.Iterable<java.lang.String> a1) {
    return this;
  }

  @Override
  public io.vertx.core.http.HttpServerResponse putTrailer(java.lang.CharSequence a0, java.lang.Iterable<java.lang.CharSequence> a1) {
    return this;
  }

  @Override
  public io.vertx.core.http.HttpServerResponse closeHandler(io.vertx.core.Handler<java.lang.Void> a0) {
    return this;
  }

  @Override
  public io.vertx.core.http.HttpServerResponse endHandler(io.vertx.core.Handler<java.lang.Void> a0) {
    return this;
  }

  @Override
  public io.vertx.core.Future<java.lang.Void> writeHead() {
    throw new UnsupportedOperationException("writeHead");
  }

  @Override
  public io.vertx.core.Future<java.lang.Void> write(java.lang.String a0, java.lang.String a1) {
    throw new UnsupportedOperationException("write");
  }

  @Override
  public io.vertx.core.Future<java.lang.Void> write(java.lang.String a0) {
    throw new UnsupportedOperationException("write");
  }

  @Override
  public io.vertx.core.Future<java.lang.Void> writeContinue() {
    throw new UnsupportedOperationException("writeContinue");
  }

  @Override
  public io.vertx.core.Future<java.lang.Void> writeEarlyHints(io.vertx.core.MultiMap a0) {
    throw new UnsupportedOperationException("writeEarlyHints");
  }

  @Override
  public io.vertx.core.Future<java.lang.Void> end(java.lang.String a0) {
    return end(Buffer.buffer(a0));
  }

  @Override
  public io.vertx.core.Future<java.lang.Void> end(java.lang.String a0, java.lang.String a1) {
    throw new UnsupportedOperationException("end");
  }

  @Override
  public io.vertx.core.Future<java.lang.Void> end(io.vertx.core.buffer.Buffer a0) {
    sent += a0.length(); ended = true; return DONE;
  }

  @Override
  public io.vertx.core.Future<java.lang.Void> end() {
    ended = true; return DONE;
  }

  @Override
  public io.vertx.core.Future<java.lang.Void> sendFile(java.lang.String a0, long a1, long a2) {
    throw new UnsupportedOperationException("sendFile");
  }

  @Override
  public io.vertx.core.Future<java.lang.Void> sendFile(java.nio.channels.FileChannel a0, long a1, long a2) {
    throw new UnsupportedOperationException("sendFile");
  }

  @Override
  public io.vertx.core.Future<java.lang.Void> sendFile(java.io.RandomAccessFile a0, long a1, long a2) {
    throw new UnsupportedOperationException("sendFile");
  }

  @Override
  public boolean ended() {
    return ended;
  }

  @Override
  public boolean closed() {
    return false;
  }

  @Override
  public boolean headWritten() {
    return false;
  }

  @Override
  public io.vertx.core.http.HttpServerResponse headersEndHandler(io.vertx.core.Handler<java.lang.Void> a0) {
    return this;
  }

  @Override
  public io.vertx.core.http.HttpServerResponse bodyEndHandler(io.vertx.core.Handler<java.lang.Void> a0) {
    return this;
  }

  @Override
  public long bytesWritten() {
    return 0;
  }

  @Override
  public long streamId() {
    return 0;
  }

  @Override
  public io.vertx.core.Future<io.vertx.core.http.HttpServerResponse> push(io.vertx.core.http.HttpMethod a0, io.vertx.core.net.HostAndPort a1, java.lang.String a2, io.vertx.core.MultiMap a3) {
    throw new UnsupportedOperationException("push");
  }

  @Override
  public io.vertx.core.Future<java.lang.Void> reset(long a0) {
    throw new UnsupportedOperationException("reset");
  }

  @Override
  public io.vertx.core.Future<java.lang.Boolean> cancel() {
    throw new UnsupportedOperationException("cancel");
  }

  @Override
  public io.vertx.core.Future<java.lang.Void> writeCustomFrame(int a0, int a1, io.vertx.core.buffer.Buffer a2) {
    throw new UnsupportedOperationException("writeCustomFrame");
  }

  @Override
  public io.vertx.core.http.HttpServerResponse addCookie(io.vertx.core.http.Cookie a0) {
    return this;
  }

  @Override
  public io.vertx.core.http.Cookie removeCookie(java.lang.String a0, boolean a1) {
    throw new UnsupportedOperationException("removeCookie");
  }

  @Override
  public java.util.Set<io.vertx.core.http.Cookie> removeCookies(java.lang.String a0, boolean a1) {
    throw new UnsupportedOperationException("removeCookies");
  }

  @Override
  public io.vertx.core.http.Cookie removeCookie(java.lang.String a0, java.lang.String a1, java.lang.String a2, boolean a3) {
    throw new UnsupportedOperationException("removeCookie");
  }

  @Override
  public io.vertx.core.Future<java.lang.Void> writeAltSvc(java.lang.String a0) {
    throw new UnsupportedOperationException("writeAltSvc");
  }

  @Override
  public io.vertx.core.Future<java.lang.Void> write(io.vertx.core.buffer.Buffer a0) {
    throw new UnsupportedOperationException("write");
  }

  @Override
  public boolean writeQueueFull() {
    return false;
  }
}
