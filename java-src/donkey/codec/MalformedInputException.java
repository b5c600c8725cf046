package donkey.codec;

/**
 * Thrown when a query string or form body cannot be decoded: a {@code %} not followed by two
 * hex digits, percent-encoded bytes (or raw body bytes) that are not valid in the charset, ...
 * or when it is refused: more parameters than allowed, or too many names of one hash (see
 * {@link KeyHashes}).
 *
 * <p>Unchecked, so callers that want Ring's old "drop what does not parse" behaviour can catch
 * it and everyone else gets a clean 400 (or 413) from the params middleware. The message is
 * short, safe to send to a client (it never quotes the input), and names what was wrong and
 * where, e.g. {@code "malformed percent-encoding in query string at index 5"}.
 */
public final class MalformedInputException extends IllegalArgumentException
    implements BadInput {
  private static final long serialVersionUID = 1L;

  private final int index;
  private final int status;

  /**
   * A 400.
   *
   * @param message the whole message, already naming the input and the position
   * @param index the char index (or byte offset, for raw body bytes) of the offending input
   */
  public MalformedInputException(String message, int index) {
    this(message, index, 400);
  }

  /**
   * @param message the whole message, already naming the input and the position
   * @param index the char index (or byte offset) of the offending input, -1 when no one
   *     position is to blame
   * @param status the HTTP status that answers it: 400, or 413 for a body over a limit
   */
  public MalformedInputException(String message, int index, int status) {
    super(message);
    this.index = index;
    this.status = status;
  }

  /**
   * Where the offending input starts: a char index, or a byte offset for raw body bytes; -1
   * when no one position is to blame (too many names of one hash).
   */
  public int index() {
    return index;
  }

  /**
   * The HTTP status that answers this input: 400 (malformed, or refused as a hash-flooding
   * attempt), or 413 for a form body with more parameters than allowed.
   */
  @Override
  public int status() {
    return status;
  }

  /** {@inheritDoc} The message, after the status's reason phrase. */
  @Override
  public String answer() {
    return (status == 413 ? "Payload Too Large: " : "Bad Request: ") + getMessage();
  }
}
