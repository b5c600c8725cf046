package donkey.kernel;

import clojure.lang.AFn;
import clojure.lang.IFn;
import donkey.kernel.config.ServerConfig;
import donkey.ring.ResponseWriter;
import io.vertx.core.http.HttpServerResponse;
import java.lang.System.Logger.Level;

/**
 * The answer to a request whose handler did not answer in time ({@link #answer}), and the
 * {@code respond} (this object) and {@link #raise} given to the {@code :async-timeout-handler}
 * when an async handler times out: the request is already claimed by the timeout, so these
 * write its answer themselves, the first call of either only.
 *
 * <p>Threading: {@link #answer} on the event loop; {@code respond} and {@code raise} from any
 * thread, as an async handler's.
 */
final class TimeoutAnswer extends AFn {
  private static final System.Logger LOG = System.getLogger("donkey");

  private final Exchange exchange;
  private boolean called;

  final IFn raise = new AFn() {
    @Override
    public Object invoke(Object error) {
      if (once()) {
        ErrorAnswers.fail(exchange, error instanceof Throwable ? (Throwable) error
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

  /**
   * Event loop (the connection sweep), once the timeout has claimed {@code x}: answers 503, or
   * with what the {@code :async-timeout-handler} answers for an async handler. The handler's
   * thread is not interrupted; whatever it answers later is dropped and logged.
   */
  static void answer(Exchange x) {
    ServerConfig cfg = x.loop().config;
    boolean async = x.async();
    IFn onTimeout = async ? cfg.asyncTimeoutHandler : null;
    LOG.log(Level.WARNING, "the handler for {0} did not respond within {1} ms; {2}", x.where(),
        async ? cfg.resolvedAsyncTimeoutMs() : cfg.requestTimeoutMs,
        onTimeout != null ? "calling the :async-timeout-handler" : "answered 503");
    HttpServerResponse resp = x.response();
    if (resp.headWritten()) {
      ErrorAnswers.abort(x);
    } else if (onTimeout != null) {
      TimeoutAnswer answer = new TimeoutAnswer(x);
      try {
        onTimeout.invoke(x.ringRequest(), answer, answer.raise);
      } catch (Throwable t) {
        answer.raise.invoke(t);
      }
    } else if (x.request().isEnded()) {
      ResponseWriter.clearHeaders(resp);
      ErrorAnswers.plain(x, 503, "Service Unavailable: the request timed out");
    } else {
      ErrorAnswers.closeWith(x, 503, "Service Unavailable: the request timed out");
    }
  }
}
