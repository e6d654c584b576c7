package ktrial.worker;

import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.ClusterAuthorizationException;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.InvalidTxnStateException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.TransactionAbortableException;
import org.apache.kafka.common.errors.TransactionalIdAuthorizationException;
import org.apache.kafka.common.errors.UnknownServerException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.protocol.Errors;

/**
 * kafka-clients exceptions as the error records ktrial classifies (docs/drivers.md,
 * "Error record"). Pure: the producer's own state (fatal / abortable, which only the
 * client knows) comes in as {@link State}.
 *
 * <ul>
 *   <li>{@code name}: the Kafka protocol's error name when the exception stands for one
 *       ({@link Errors#forException}); a {@link TimeoutException} is the client's own
 *       {@code Timeout} (Java raises it for a delivery, max.block.ms or request timeout
 *       alike); any other exception is named by its class ({@code IllegalStateException},
 *       {@code KafkaException}, {@code TransactionAbortedException} ...).
 *   <li>{@code retriable}: a {@link RetriableException} in the cause chain.
 *   <li>{@code fatal}: the producer's transaction manager is in its fatal state, or the
 *       chain holds an exception after which kafka-clients refuses every further call
 *       (fenced, transactional-id or cluster authorization, authentication, unsupported
 *       version, invalid txn state).
 *   <li>{@code txn_requires_abort}: the transaction manager holds an abortable error, or
 *       the chain has a {@link TransactionAbortableException}.
 *   <li>{@code refused}: the send failed inside {@code send()} itself (kafka-clients hands
 *       such errors to the callback on the calling thread, before the record reaches the
 *       accumulator), or the client refused a call in the wrong state
 *       ({@link IllegalStateException}): nothing was sent.
 * </ul>
 */
final class ErrorRecords {
  private ErrorRecords() {}

  /** What the producer's transaction manager says of itself, when it can be read. */
  static final class State {
    final boolean fatal;
    final boolean abortable;

    State(boolean fatal, boolean abortable) {
      this.fatal = fatal;
      this.abortable = abortable;
    }

    static final State NONE = new State(false, false);
  }

  static boolean has(Throwable t, Class<?> c) {
    for (Throwable x = t; x != null; x = x.getCause()) {
      if (c.isInstance(x)) {
        return true;
      }
      if (x.getCause() == x) {
        break;
      }
    }
    return false;
  }

  /** The first exception of the chain that stands for a protocol error, or null. */
  static ApiException api(Throwable t) {
    for (Throwable x = t; x != null; x = x.getCause()) {
      if (x instanceof ApiException) {
        return (ApiException) x;
      }
      if (x.getCause() == x) {
        break;
      }
    }
    return null;
  }

  static Map<String, Object> describe(Throwable t, boolean inSend, State state) {
    Map<String, Object> r = new LinkedHashMap<>();
    ApiException api = api(t);
    String name;
    Short code = null;
    if (has(t, TimeoutException.class)) {
      name = "Timeout";
    } else if (api != null) {
      Errors e = Errors.forException(api);
      if (e != Errors.UNKNOWN_SERVER_ERROR || api instanceof UnknownServerException) {
        name = e.name();
        code = e.code();
      } else {
        name = api.getClass().getSimpleName();
      }
    } else {
      name = t.getClass().getSimpleName();
    }
    r.put("name", name);
    if (code != null) {
      r.put("code", (long) code);
    }
    String msg = t.getMessage();
    if (t.getCause() != null && t.getCause() != t && t.getCause().getMessage() != null) {
      msg = (msg == null ? "" : msg + ": ") + t.getCause().getMessage();
    }
    r.put("message", msg == null ? t.getClass().getName() : msg);
    boolean fatal = state.fatal
        || has(t, ProducerFencedException.class)
        || has(t, TransactionalIdAuthorizationException.class)
        || has(t, ClusterAuthorizationException.class)
        || has(t, AuthenticationException.class)
        || has(t, UnsupportedVersionException.class)
        || has(t, InvalidTxnStateException.class);
    if (has(t, RetriableException.class) && !fatal) {
      r.put("retriable", true);
    }
    if (fatal) {
      r.put("fatal", true);
    }
    if (!fatal && (state.abortable || has(t, TransactionAbortableException.class))) {
      r.put("txn_requires_abort", true);
    }
    if (inSend || t instanceof IllegalStateException) {
      r.put("refused", true);
    }
    if (t instanceof InterruptException || (t instanceof KafkaException && api == null
        && t.getCause() instanceof InterruptedException)) {
      r.put("retriable", true);
    }
    return r;
  }
}
