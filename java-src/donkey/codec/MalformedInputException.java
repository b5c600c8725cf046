package donkey.codec;

/**
 * Thrown when a query string or form body cannot be decoded: a {@code %} not followed by two
 * hex digits, percent-encoded bytes (or raw body bytes) that are not valid in the charset, ...
 *
 * <p>Unchecked, so callers that want Ring's old "drop what does not parse" behaviour can catch
 * it and everyone else gets a clean 400 from the params middleware. The message is short, safe
 * to send to a client (it never quotes the input), and names what was wrong and where, e.g.
 * {@code "malformed percent-encoding in query string at index 5"}.
 */
public final class MalformedInputException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;

  private final int index;

  /**
   * @param message the whole message, already naming the input and the position
   * @param index the char index (or byte offset, for raw body bytes) of the offending input
   */
  public MalformedInputException(String message, int index) {
    super(message);
    this.index = index;
  }

  /** Where the offending input starts: a char index, or a byte offset for raw body bytes. */
  public int index() {
    return index;
  }
}
