package donkey.kernel;

import clojure.lang.AFn;
import clojure.lang.IFn;

/**
 * The {@code respond} (this object) and {@link #raise} given to the
 * {@code :async-timeout-handler} when an async handler times out: the request is already
 * claimed by the timeout, so these write its answer themselves, the first call of either only.
 *
 * <p>Threading: any thread, as an async handler's {@code respond} and {@code raise}.
 */
final class TimeoutAnswer extends AFn {
  private final Exchange exchange;
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

  TimeoutAnswer(Exchange exchange) {
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
      ResponseSender.send(exchange, response);
    } else {
      exchange.late(response, null);
    }
    return null;
  }
}
