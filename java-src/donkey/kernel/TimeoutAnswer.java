package donkey.kernel;

import clojure.lang.AFn;
import clojure.lang.IFn;

/**
 * The {@code respond} (this object) and {@link #raise} given to the
 * {@code :async-timeout-handler} when an async handler times out
 * ({@link ErrorAnswers#answerTimeout}): the request is already claimed by the timeout, so
 * these write its answer themselves, the first call of either only.
 *
 * <p>Threading: {@code respond} and {@code raise} from any thread, as an async handler's.
 */
final class TimeoutAnswer extends AFn {
  private final ErrorAnswers exchange;
  private boolean called;

  final IFn raise = new AFn() {
    @Override
    public Object invoke(Object error) {
      if (once()) {
        exchange.fail(error instanceof Throwable ? (Throwable) error
            : new IllegalArgumentException("raise called with " + error));
      } else {
        exchange.late(null, error instanceof Throwable ? (Throwable) error : null);
      }
      return null;
    }
  };

  TimeoutAnswer(ErrorAnswers exchange) {
    this.exchange = exchange;
  }

  private synchronized boolean once() {
    if (called) return false;
    called = true;
    return true;
  }

  @Override
  public Object invoke(Object response) {
    if (once()) {
      exchange.send(response);
    } else {
      exchange.late(response, null);
    }
    return null;
  }
}
