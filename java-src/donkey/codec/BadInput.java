package donkey.codec;

/**
 * Input a codec refuses, as the exceptions of every codec describe it, so that middleware
 * turns any of them into an answer in one place ({@code donkey.middleware.errors/refusing}).
 * Implemented by {@link MalformedInputException}, {@link JsonException} and
 * {@link MultipartException}; any thread.
 */
public interface BadInput {
  /** The HTTP status that answers it: 400 for malformed input, 413 for input over a limit. */
  int status();

  /**
   * The body of the plain-text answer: a short reason that is safe to send to the client (it
   * never echoes more than a name or a limit of the input).
   */
  String answer();
}
