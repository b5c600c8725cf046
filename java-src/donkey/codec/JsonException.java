package donkey.codec;

/**
 * Malformed or over-limit JSON input: thrown by the readers of {@link Json}.
 *
 * <p>The message is short and safe to send to a client: what was wrong and where
 * ({@code "... at line 3, column 14"}), never the whole input (a bad token is quoted at most
 * a few dozen characters long). {@link #line()} and {@link #column()} give the position,
 * 1-based, or -1 when it is unknown.
 */
public final class JsonException extends RuntimeException {
  private final int line;
  private final int column;

  /**
   * @param what what was wrong, without the position
   * @param line 1-based line, or -1 when unknown
   * @param column 1-based column, or -1 when unknown
   * @param cause the parser's exception, or null
   */
  public JsonException(String what, int line, int column, Throwable cause) {
    super(line > 0 ? what + " at line " + line + ", column " + column : what, cause);
    this.line = line;
    this.column = column;
  }

  /** The 1-based line of the problem, or -1 when unknown. */
  public int line() {
    return line;
  }

  /** The 1-based column of the problem, or -1 when unknown. */
  public int column() {
    return column;
  }
}
