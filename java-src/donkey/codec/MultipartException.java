package donkey.codec;

/**
 * A multipart body the kernel refuses, with the HTTP status to answer it with: 400 for a
 * malformed or truncated body, 413 for a body, part or part count over a limit.
 *
 * <p>The message is short, names what was wrong and is safe to send to the client as a
 * {@code text/plain} body: it quotes at most a field name and a configured limit, never body
 * bytes beyond that.
 *
 * <p>Thrown on bad client input, so it is cheap: no stack trace is captured and it cannot carry
 * suppressed exceptions. By the time it reaches the caller of {@link Multipart}, every temp file
 * the parse had written is deleted.
 */
public final class MultipartException extends RuntimeException implements BadInput {
  private static final long serialVersionUID = 1L;

  /** 400 Bad Request. */
  public static final int BAD_REQUEST = 400;
  /** 413 Content Too Large. */
  public static final int TOO_LARGE = 413;

  private final int status;

  /**
   * @param status the HTTP status the request should be answered with
   * @param message a short, client-safe description
   */
  public MultipartException(int status, String message) {
    super(message, null, false, false);
    this.status = status;
  }

  /** The HTTP status to answer with: {@link #BAD_REQUEST} or {@link #TOO_LARGE}. */
  @Override
  public int status() {
    return status;
  }

  /** {@inheritDoc} The message as it is. */
  @Override
  public String answer() {
    return getMessage();
  }

  static MultipartException malformed(String what) {
    return new MultipartException(BAD_REQUEST, "malformed multipart body: " + what);
  }

  static MultipartException tooLarge(String what) {
    return new MultipartException(TOO_LARGE, what);
  }
}
