package ktrial.worker;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.ConcurrentTransactionsException;
import org.apache.kafka.common.errors.CoordinatorNotAvailableException;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.InvalidTxnStateException;
import org.apache.kafka.common.errors.NotEnoughReplicasException;
import org.apache.kafka.common.errors.NotLeaderOrFollowerException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.errors.TransactionAbortableException;
import org.apache.kafka.common.errors.TransactionAbortedException;
import org.apache.kafka.common.errors.TransactionalIdAuthorizationException;
import org.apache.kafka.common.errors.UnknownProducerIdException;

/**
 * `ktrial-java --classify-table`: the error record of each kafka-clients exception a
 * run meets, one JSON line per case ({"case", "record"}). ktrial's unit tests run it and
 * put each record through the shared rules (tests/workloads/worker/test_client_tables.py),
 * so the Java mapping is tested on the client's real exception classes.
 */
final class ClassifyTable {
  private ClassifyTable() {}

  private static final ErrorRecords.State NONE = ErrorRecords.State.NONE;

  static void print(OutputStream out) throws IOException {
    Map<String, Map<String, Object>> t = new LinkedHashMap<>();
    t.put("not_leader", ErrorRecords.describe(
        new NotLeaderOrFollowerException("not the leader"), false, NONE));
    t.put("not_enough_replicas", ErrorRecords.describe(
        new NotEnoughReplicasException("isr too small"), false, NONE));
    t.put("delivery_timeout", ErrorRecords.describe(
        new TimeoutException("Expiring 1 record(s): 10000 ms has passed"), false, NONE));
    t.put("metadata_timeout_in_send", ErrorRecords.describe(
        new TimeoutException("Topic t not present in metadata after 10000 ms."), true, NONE));
    t.put("fenced", ErrorRecords.describe(
        new ProducerFencedException("fenced"), false, new ErrorRecords.State(true, false)));
    t.put("epoch", ErrorRecords.describe(
        new InvalidProducerEpochException("epoch"), false, NONE));
    t.put("out_of_order", ErrorRecords.describe(
        new OutOfOrderSequenceException("sequence"), false, NONE));
    t.put("unknown_producer", ErrorRecords.describe(
        new UnknownProducerIdException("pid"), false, NONE));
    t.put("invalid_txn_state", ErrorRecords.describe(
        new InvalidTxnStateException("state"), false, NONE));
    t.put("concurrent_transactions", ErrorRecords.describe(
        new ConcurrentTransactionsException("busy"), false, NONE));
    t.put("too_large", ErrorRecords.describe(
        new RecordTooLargeException("too large"), true, NONE));
    t.put("topic_authorization", ErrorRecords.describe(
        new TopicAuthorizationException("denied"), false, NONE));
    t.put("txn_id_authorization", ErrorRecords.describe(
        new TransactionalIdAuthorizationException("denied"), false, NONE));
    t.put("abortable", ErrorRecords.describe(
        new TransactionAbortableException("abort it"), false, NONE));
    t.put("abortable_state", ErrorRecords.describe(
        new KafkaException("Cannot execute transactional method because we are in an error"
            + " state", new NotLeaderOrFollowerException("x")), false,
        new ErrorRecords.State(false, true)));
    t.put("fatal_state", ErrorRecords.describe(
        new KafkaException("Cannot execute transactional method because we are in an error"
            + " state"), false, new ErrorRecords.State(true, false)));
    t.put("txn_aborted", ErrorRecords.describe(
        new TransactionAbortedException("aborted before sent"), false, NONE));
    t.put("coordinator", ErrorRecords.describe(
        new CoordinatorNotAvailableException("loading"), false, NONE));
    t.put("commit_timeout", ErrorRecords.describe(
        new TimeoutException("Timeout expired after 10000ms while awaiting EndTxn(true)"),
        false, NONE));
    t.put("wrong_state", ErrorRecords.describe(
        new IllegalStateException("Cannot call send in state READY"), false, NONE));
    t.put("interrupted", ErrorRecords.describe(
        new InterruptException("interrupted"), false, NONE));
    StringBuilder b = new StringBuilder();
    for (Map.Entry<String, Map<String, Object>> e : t.entrySet()) {
      Map<String, Object> line = new LinkedHashMap<>();
      line.put("case", e.getKey());
      line.put("record", e.getValue());
      b.append(Json.write(line)).append('\n');
    }
    out.write(b.toString().getBytes(StandardCharsets.UTF_8));
    out.flush();
  }
}
