package donkey.codec;

/**
 * Malformed, over-limit or refused JSON input: thrown by the readers of {@link Json}.
 *
 * <p>The message is short and safe to send to a client: what was wrong and where
 * ({@code "... at line 3, column 14"}), never the whole input (a bad token is quoted at most
 * a few dozen characters long) and never the parser's internals. {@link #line()} and
 * {@link #column()} give the position, 1-based, or -1 when it is unknown; {@link #status()}
 * the HTTP status that answers it.
 */
public final class JsonException extends RuntimeException implements BadInput {
  private final int line;
  private final int column;
  private final int status;

  /**
   * A 400.
   *
   * @param what what was wrong, without the position
   * @param line 1-based line, or -1 when unknown
   * @param column 1-based column, or -1 when unknown
   * @param cause the parser's exception, or null
   */
  public JsonException(String what, int line, int column, Throwable cause) {
    this(what, line, column, cause, 400);
  }

  /**
   * @param what what was wrong, without the position
   * @param line 1-based line, or -1 when unknown
   * @param column 1-based column, or -1 when unknown
   * @param cause the parser's exception, or null
   * @param status the HTTP status that answers it: 400, or 413 for an object over its key limit
   */
  public JsonException(String what, int line, int column, Throwable cause, int status) {
    super(line > 0 ? what + " at line " + line + ", column " + column : what, cause);
    this.line = line;
    this.column = column;
    this.status = status;
  }

  /** The 1-based line of the problem, or -1 when unknown. */
  public int line() {
    return line;
  }

  /** The 1-based column of the problem, or -1 when unknown. */
  public int column() {
    return column;
  }

  /**
   * The HTTP status that answers this input: 400 for malformed JSON, input over the parser's
   * limits, or too many keys of one hash; 413 for an object with more keys than allowed.
   */
  @Override
  public int status() {
    return status;
  }

  /** {@inheritDoc} The message, after the status's reason phrase. */
  @Override
  public String answer() {
    return (status == 413 ? "Payload Too Large: " : "Bad Request: malformed JSON: ")
        + getMessage();
  }
}
