package ktrial.worker;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * One worker's clients and calls (docs/drivers.md, "Calls"). A KafkaProducer and a
 * KafkaConsumer (kafka-clients has no client that does both); the consumer is groupless
 * (assign + seek), or in subscribe mode a member of the run's group, read_committed. Every
 * call runs on one thread (the consumer is not
 * thread-safe) and the reader waits for it at most {@code timeout_ms}: a call that blocks
 * longer (commitTransaction, initTransactions and a send waiting for metadata block up to
 * max.block.ms) is answered with a {@code Timeout} error record and left to finish; ktrial
 * retires such a process.
 */
final class Worker {
  private final ExecutorService calls = Executors.newSingleThreadExecutor(r -> {
    Thread t = new Thread(r, "ktrial-calls");
    t.setDaemon(true);
    return t;
  });
  private volatile Thread callThread;
  // How long past timeout_ms a call may take before it is answered anyway: under ktrial's
  // one second of slack (docs/drivers.md), so the answer still arrives in time.
  private static final long GRACE_MS = 700;

  // volatile: crash() (host mode) reads them from another thread
  private volatile KafkaProducer<String, String> producer;
  private volatile KafkaConsumer<String, String> consumer;
  private boolean txn;
  // open's value_bytes: produced values are space-padded to this many bytes (0: as given)
  private int valueBytes;
  // far above any broker's largest message
  static final long MAX_VALUE_BYTES = 64L << 20;

  // deliveries reported since the last flush, and sends not yet reported
  private final Object lock = new Object();
  private List<Object> reported = new ArrayList<>();
  private int outstanding;
  private boolean inSend; // true while send() runs on the call thread

  // the partitions consumed: set by assign, or by the group's rebalance callbacks (which
  // kafka-clients runs inside poll, on the call thread) in subscribe mode
  private final Set<TopicPartition> assigned = new HashSet<>();
  private final ArrayDeque<ConsumerRecord<String, String>> buffered = new ArrayDeque<>();
  private boolean group; // a group consumer (subscribe mode)
  // assignment changes not yet reported; the next reply carries them as "rebalance"
  private final List<Object> events = new ArrayList<>();
  private final ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> parts) {
      rebalanced("revoked", parts);
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> parts) {
      rebalanced("assigned", parts);
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> parts) {
      rebalanced("lost", parts);
    }
  };

  // kafka-clients' transaction manager, read for what only it knows (fatal/abortable
  // state, the producer id, whether transactions v2 is in use). Null when unreadable.
  private Object txnManager;

  static Map<String, Object> failure(Map<String, Object> err) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("ok", false);
    m.put("error", err);
    return m;
  }

  static Map<String, Object> success() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("ok", true);
    return m;
  }

  /** The error record of a request the worker cannot take (not fatal). */
  static Map<String, Object> badRequest(String message) {
    return error("BadRequest", message, false);
  }

  private static Map<String, Object> error(String name, String message, boolean fatal) {
    Map<String, Object> e = new LinkedHashMap<>();
    e.put("name", name);
    e.put("message", message);
    if (fatal) {
      e.put("fatal", true);
    }
    return e;
  }

  private Map<String, Object> failure(Throwable t) {
    return failure(ErrorRecords.describe(t, false, state()));
  }

  // ------------------------------------------------------------------ dispatch
  /** One request's reply, with the group's assignment changes since the last reply. */
  Map<String, Object> handle(String call, Map<String, Object> r) {
    Map<String, Object> reply = answer(call, r);
    synchronized (events) {
      if (!events.isEmpty()) {
        reply.put("rebalance", new ArrayList<>(events));
        events.clear();
      }
    }
    return reply;
  }

  private Map<String, Object> answer(String call, Map<String, Object> r) {
    long timeoutMs = Math.max(1, num(r.get("timeout_ms"), 10000));
    if (!call.equals("open") && producer == null && consumer == null) {
      return failure(error("NotOpen", "the first call must be open", true));
    }
    Future<Map<String, Object>> f = calls.submit(() -> {
      callThread = Thread.currentThread();
      try {
        return dispatch(call, r, timeoutMs);
      } catch (Exception e) {
        return failure(e);
      }
    });
    try {
      // Calls that wait themselves (fetch, flush) return within timeoutMs; a little more
      // for scheduling. ktrial waits one second beyond timeout_ms.
      return f.get(timeoutMs + GRACE_MS, java.util.concurrent.TimeUnit.MILLISECONDS);
    } catch (java.util.concurrent.TimeoutException e) {
      if (call.equals("fetch")) {
        // poll() overran its own timeout (a starved CPU): answer with no records rather
        // than an error. The poll finishes on the call thread before any later call runs
        // and what it returns is kept for the next fetch, so nothing is lost or reordered.
        Map<String, Object> reply = success();
        reply.put("records", List.of());
        reply.put("errors", List.of());
        reply.put("late", true);
        return reply;
      }
      Map<String, Object> err = error("Timeout",
          call + " did not finish within " + timeoutMs + " ms (still running)", false);
      err.put("retriable", true);
      return failure(err);
    } catch (ExecutionException e) {
      return failure(e.getCause() == null ? e : e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return failure(error("Interrupted", "interrupted", true));
    }
  }

  private Map<String, Object> dispatch(String call, Map<String, Object> r, long timeoutMs) {
    switch (call) {
      case "open":
        return open(r);
      case "produce":
        return produce(r);
      case "flush":
        return flush(timeoutMs);
      case "fetch":
        return fetch((int) num(r.get("max"), 500), timeoutMs);
      case "begin":
        needProducer();
        producer.beginTransaction();
        return withProtocol(success());
      case "send_offsets":
        return sendOffsets(r);
      case "commit":
        needProducer();
        producer.commitTransaction();
        return withProtocol(success());
      case "abort":
        needProducer();
        producer.abortTransaction();
        return success();
      case "subscribe":
        return subscribe(r);
      case "commit_offsets":
        return commitOffsets(r);
      case "assign":
        return assign(r);
      case "seek":
        return seek(r);
      case "position":
        return positions(r, timeoutMs);
      case "close":
        shutdown(timeoutMs);
        return success();
      default:
        return failure(error("BadRequest", "unknown call \"" + call + "\"", false));
    }
  }

  private void needProducer() {
    if (producer == null) {
      throw new IllegalStateException("opened without a producer");
    }
  }

  // ------------------------------------------------------------------ open
  private Map<String, Object> open(Map<String, Object> r) {
    if (producer != null || consumer != null) {
      return failure(error("BadRequest", "already open", false));
    }
    String bootstrap = str(r.get("bootstrap"));
    if (bootstrap.isBlank()) {
      return failure(error("BadSettings", "open: bootstrap is empty", true));
    }
    boolean wantProducer = Boolean.TRUE.equals(r.get("producer"));
    boolean wantConsumer = Boolean.TRUE.equals(r.get("consumer"));
    String clientId = str(r.get("client_id"));
    String txnId = str(r.get("txn_id"));
    String groupId = str(r.get("group"));
    long vb = num(r.get("value_bytes"), 0);
    if (vb < 0 || vb > MAX_VALUE_BYTES) {
      return failure(error("BadSettings",
          "value_bytes must be in [0, " + MAX_VALUE_BYTES + "], got " + vb, true));
    }
    valueBytes = (int) vb;
    Properties pp = new Properties();
    Properties cp = new Properties();
    Object s = r.get("settings");
    if (s != null && !(s instanceof Map)) {
      return failure(error("BadSettings", "settings must be an object", true));
    }
    @SuppressWarnings("unchecked")
    Map<String, Object> settings = s == null ? Map.of() : (Map<String, Object>) s;
    Set<String> pnames = ProducerConfig.configNames();
    Set<String> cnames = ConsumerConfig.configNames();
    Map<String, String> sec = Security.properties(settings);
    pp.putAll(sec);
    cp.putAll(sec);
    for (Map.Entry<String, Object> e : new java.util.TreeMap<>(settings).entrySet()) {
      String k = e.getKey();
      if (Security.KEYS.contains(k)) {
        continue;
      }
      String v = setting(e.getValue());
      boolean used = false;
      if (wantProducer && pnames.contains(k)) {
        pp.put(k, v);
        used = true;
      }
      if (wantConsumer && cnames.contains(k)) {
        cp.put(k, v);
        used = true;
      }
      if (!used) {
        return failure(error("BadSettings", "unknown setting \"" + k + "\": not a kafka-clients "
            + (wantProducer ? "producer" : "") + (wantProducer && wantConsumer ? " or " : "")
            + (wantConsumer ? "consumer" : "") + " configuration", true));
      }
    }
    try {
      if (wantProducer) {
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        if (!txnId.isEmpty()) {
          pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        }
        producer = new KafkaProducer<>(pp);
        txn = !txnId.isEmpty();
        txnManager = readField(producer, "transactionManager");
      }
      if (wantConsumer) {
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId + "-c");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
            StringDeserializer.class.getName());
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (!groupId.isEmpty()) {
          cp.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
          group = true;
        }
        consumer = new KafkaConsumer<>(cp);
      }
    } catch (org.apache.kafka.common.config.ConfigException e) {
      shutdown(0);
      return failure(error("BadSettings", e.getMessage(), true));
    }
    if (producer == null && consumer == null) {
      return failure(error("BadSettings", "open: neither producer nor consumer", true));
    }
    Map<String, Object> reply = success();
    reply.put("client_version", "kafka-clients " + AppInfoParser.getVersion());
    reply.put("value_bytes", valueBytes); // the padding in use: ktrial checks it was understood
    if (txn) {
      // Initialise the producer id now: this fences a predecessor with the same
      // transactional id and settles a transaction it left open.
      producer.initTransactions();
      Object pe = readField(txnManager, "producerIdAndEpoch");
      Object id = readField(pe, "producerId");
      Object epoch = readField(pe, "epoch");
      if (id instanceof Long) {
        reply.put("producer_id", id);
      }
      if (epoch instanceof Short) {
        reply.put("epoch", ((Short) epoch).longValue());
      }
      withProtocol(reply);
    }
    return reply;
  }

  /**
   * A produced record's value: v, space-padded to n bytes when shorter (open's
   * value_bytes; the txn-cost workload's message_bytes). The values ktrial sends are
   * ASCII digits, so characters are bytes under the StringSerializer's UTF-8.
   */
  static String padded(String v, int n) {
    if (v == null || v.length() >= n) {
      return v;
    }
    return v + " ".repeat(n - v.length());
  }

  private static String setting(Object v) {
    if (v instanceof Double && ((Double) v) == Math.rint((Double) v)) {
      return Long.toString(((Double) v).longValue());
    }
    return String.valueOf(v);
  }

  // ------------------------------------------------------------------ producing
  /**
   * Hands each record to send(). A record refused inside send() itself (kafka-clients
   * calls back on this thread before the record reaches the accumulator, or throws)
   * fails the call with its error record, flagged refused: it was never sent, and the
   * records after it are not handed over (docs/drivers.md, "Calls").
   */
  private Map<String, Object> produce(Map<String, Object> r) {
    if (producer == null) {
      Map<String, Object> e = error("NoProducer", "opened without a producer", false);
      e.put("refused", true);
      return failure(e);
    }
    for (Object o : list(r.get("records"))) {
      Map<String, Object> rec = map(o);
      long op = num(rec.get("op"), 0);
      long i = num(rec.get("i"), 0);
      String value = padded((String) rec.get("value"), valueBytes);
      ProducerRecord<String, String> pr = new ProducerRecord<>(str(rec.get("topic")),
          (int) num(rec.get("partition"), 0), null, value);
      synchronized (lock) {
        outstanding++;
      }
      @SuppressWarnings("unchecked")
      Map<String, Object>[] refused = new Map[1];
      inSend = true;
      try {
        producer.send(pr, (md, ex) -> {
          if (ex != null && inSend && Thread.currentThread() == callThread) {
            refused[0] = ErrorRecords.describe(ex, true, state());
            synchronized (lock) {
              outstanding--;
              lock.notifyAll();
            }
            return;
          }
          Map<String, Object> d = new LinkedHashMap<>();
          d.put("op", op);
          d.put("i", i);
          if (ex != null) {
            d.put("error", ErrorRecords.describe(ex, false, state()));
          } else {
            d.put("offset", md.offset());
          }
          synchronized (lock) {
            outstanding--;
            reported.add(d);
            lock.notifyAll();
          }
        });
      } catch (RuntimeException ex) {
        if (refused[0] == null) {
          refused[0] = ErrorRecords.describe(ex, true, state());
          synchronized (lock) {
            outstanding--;
            lock.notifyAll();
          }
        }
      } finally {
        inSend = false;
      }
      if (refused[0] != null) {
        return failure(refused[0]);
      }
    }
    return success();
  }

  private Map<String, Object> flush(long timeoutMs) {
    long end = System.nanoTime() + timeoutMs * 1_000_000L;
    List<Object> got;
    int left;
    synchronized (lock) {
      while (outstanding > 0) {
        long waitMs = (end - System.nanoTime()) / 1_000_000L;
        if (waitMs <= 0) {
          break;
        }
        try {
          lock.wait(waitMs);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          break;
        }
      }
      got = reported;
      reported = new ArrayList<>();
      left = outstanding;
    }
    Map<String, Object> reply = success();
    reply.put("results", got);
    reply.put("unreported", (long) left);
    return reply;
  }

  private Map<String, Object> sendOffsets(Map<String, Object> r) {
    needProducer();
    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
    for (Object o : list(r.get("offsets"))) {
      Map<String, Object> m = map(o);
      offsets.put(new TopicPartition(str(m.get("topic")), (int) num(m.get("partition"), 0)),
          new OffsetAndMetadata(num(m.get("offset"), 0)));
    }
    // A group consumer commits with its own metadata (member id, generation: the broker
    // refuses a zombie of an older generation); a groupless one with the group's id alone
    // (generation -1), as librdkafka and the franz worker send for an assigned consumer.
    ConsumerGroupMetadata meta = group && consumer != null ? consumer.groupMetadata()
        : new ConsumerGroupMetadata(str(r.get("group")));
    producer.sendOffsetsToTransaction(offsets, meta);
    return success();
  }

  // ------------------------------------------------------------------ consuming
  private Map<String, Object> fetch(int max, long timeoutMs) {
    if (consumer == null) {
      return failure(error("NoConsumer", "opened without a consumer", false));
    }
    if (buffered.isEmpty()) {
      for (ConsumerRecord<String, String> rec : consumer.poll(Duration.ofMillis(timeoutMs))) {
        buffered.add(rec);
      }
    }
    List<Object> records = new ArrayList<>();
    while (!buffered.isEmpty() && records.size() < Math.max(1, max)) {
      ConsumerRecord<String, String> rec = buffered.poll();
      if (!assigned.contains(new TopicPartition(rec.topic(), rec.partition()))) {
        continue;
      }
      List<Object> row = new ArrayList<>(4);
      row.add(rec.topic());
      row.add((long) rec.partition());
      row.add(rec.offset());
      row.add(rec.value());
      records.add(row);
    }
    Map<String, Object> reply = success();
    reply.put("records", records);
    reply.put("errors", List.of());
    return reply;
  }

  private Map<TopicPartition, Long> offsets(Map<String, Object> r) {
    Map<TopicPartition, Long> out = new LinkedHashMap<>();
    for (Object o : list(r.get("offsets"))) {
      Map<String, Object> m = map(o);
      out.put(new TopicPartition(str(m.get("topic")), (int) num(m.get("partition"), 0)),
          num(m.get("offset"), -1));
    }
    return out;
  }

  // ------------------------------------------------------------------ subscribe mode
  /** Consume these topics as a member of the group, which assigns the partitions. */
  private Map<String, Object> subscribe(Map<String, Object> r) {
    if (consumer == null || !group) {
      Map<String, Object> e = error("NotGroupConsumer",
          "subscribe needs a consumer opened with a group", false);
      e.put("refused", true);
      return failure(e);
    }
    List<String> topics = new ArrayList<>();
    for (Object t : list(r.get("topics"))) {
      topics.add(str(t));
    }
    consumer.subscribe(topics, listener); // the rebalance happens in the next polls
    return success();
  }

  /** Commit consumer offsets for the group outside any transaction, asynchronously. */
  private Map<String, Object> commitOffsets(Map<String, Object> r) {
    if (consumer == null || !group) {
      Map<String, Object> e = error("NotGroupConsumer", "commit_offsets needs a group consumer",
          false);
      e.put("refused", true);
      return failure(e);
    }
    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
    for (Map.Entry<TopicPartition, Long> e : offsets(r).entrySet()) {
      offsets.put(e.getKey(), new OffsetAndMetadata(e.getValue()));
    }
    consumer.commitAsync(offsets, (o, e) -> { }); // best effort: its outcome is not needed
    return success();
  }

  /** A rebalance callback (inside poll, on the call thread): note it, keep the view. */
  private void rebalanced(String kind, Collection<TopicPartition> parts) {
    if (parts.isEmpty()) {
      return; // kafka-clients calls back with nothing at many rebalances
    }
    List<Object> ps = new ArrayList<>();
    for (TopicPartition tp : parts) {
      if (kind.equals("assigned")) {
        assigned.add(tp);
      } else {
        assigned.remove(tp);
      }
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("topic", tp.topic());
      m.put("partition", (long) tp.partition());
      ps.add(m);
    }
    // records kept from an earlier poll of a partition that moved are not ours to return
    buffered.removeIf(rec -> parts.contains(new TopicPartition(rec.topic(), rec.partition())));
    Map<String, Object> ev = new LinkedHashMap<>();
    ev.put("type", kind);
    ev.put("partitions", ps);
    synchronized (events) {
      events.add(ev);
    }
  }

  /** Consume exactly these partitions, each from its offset. */
  private Map<String, Object> assign(Map<String, Object> r) {
    if (consumer == null) {
      return failure(error("NoConsumer", "opened without a consumer", false));
    }
    if (group) {
      Map<String, Object> e = error("GroupConsumer",
          "assign: this consumer subscribed (its group assigns)", false);
      e.put("refused", true);
      return failure(e);
    }
    Map<TopicPartition, Long> want = offsets(r);
    consumer.assign(want.keySet());
    assigned.clear();
    assigned.addAll(want.keySet());
    buffered.clear(); // every partition is re-positioned or dropped
    for (Map.Entry<TopicPartition, Long> e : want.entrySet()) {
      consumer.seek(e.getKey(), e.getValue());
    }
    return success();
  }

  private Map<String, Object> seek(Map<String, Object> r) {
    Map<TopicPartition, Long> want = offsets(r);
    for (TopicPartition tp : want.keySet()) {
      if (!assigned.contains(tp)) {
        return failure(error("NotAssigned", "seek " + tp + ": not assigned", false));
      }
    }
    for (Map.Entry<TopicPartition, Long> e : want.entrySet()) {
      consumer.seek(e.getKey(), e.getValue());
    }
    buffered.removeIf(rec -> want.containsKey(new TopicPartition(rec.topic(), rec.partition())));
    return success();
  }

  /**
   * The next offset per partition: the first record still buffered here, else the
   * consumer's position (past the records it returned and the transaction markers and
   * aborted records it skipped); -1 when unknown.
   */
  private Map<String, Object> positions(Map<String, Object> r, long timeoutMs) {
    Map<TopicPartition, Long> firstBuffered = new HashMap<>();
    for (ConsumerRecord<String, String> rec : buffered) {
      firstBuffered.putIfAbsent(new TopicPartition(rec.topic(), rec.partition()), rec.offset());
    }
    List<Object> out = new ArrayList<>();
    for (TopicPartition tp : offsets(r).keySet()) {
      long pos = -1;
      if (firstBuffered.containsKey(tp)) {
        pos = firstBuffered.get(tp);
      } else if (consumer != null && assigned.contains(tp)) {
        try {
          pos = consumer.position(tp, Duration.ofMillis(Math.min(timeoutMs, 2000)));
        } catch (RuntimeException e) {
          pos = -1;
        }
      }
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("topic", tp.topic());
      m.put("partition", (long) tp.partition());
      m.put("offset", pos);
      out.add(m);
    }
    Map<String, Object> reply = success();
    reply.put("positions", out);
    return reply;
  }

  // ------------------------------------------------------------------ the end
  void shutdown(long timeoutMs) {
    Duration d = Duration.ofMillis(Math.max(0, timeoutMs));
    try {
      if (consumer != null) {
        // a member leaves its group on close, so its partitions move at once
        consumer.close(group ? Duration.ofMillis(Math.min(timeoutMs, 2000)) : Duration.ZERO);
      }
    } catch (RuntimeException e) {
      // closing is best effort
    }
    try {
      if (producer != null) {
        producer.close(d); // flushes within the timeout
      }
    } catch (RuntimeException e) {
      // closing is best effort
    }
    consumer = null;
    producer = null;
  }

  /**
   * End this process's clients at once, as a killed process would (host mode's
   * {@code crash}; a process of its own gets SIGKILL instead): the producer is closed with
   * no time left, so it sends nothing more (no EndTxn, unsent batches dropped); the
   * consumer is woken from a poll and closed on its call thread (it is not thread-safe)
   * without leaving its group, so the group notices it only at the session timeout. A call
   * still running is left to fail; nothing it returns is answered.
   */
  void crash() {
    KafkaProducer<String, String> p = producer;
    KafkaConsumer<String, String> c = consumer;
    if (p != null) {
      try {
        p.close(Duration.ZERO);
      } catch (RuntimeException e) {
        // closing is best effort
      }
    }
    if (c != null) {
      c.wakeup();
      try {
        calls.submit(() -> {
          try {
            c.close(CloseOptions.groupMembershipOperation(
                CloseOptions.GroupMembershipOperation.REMAIN_IN_GROUP).withTimeout(Duration.ZERO));
          } catch (RuntimeException e) {
            // closing is best effort
          }
        });
      } catch (java.util.concurrent.RejectedExecutionException e) {
        // already shut down
      }
    }
    calls.shutdown();
  }

  // ------------------------------------------------------------------ the client's state
  /** Whether transactions v2 (KIP-890) is in use, as kafka-clients decided it. */
  private Map<String, Object> withProtocol(Map<String, Object> reply) {
    Object v2 = call(txnManager, "isTransactionV2Enabled");
    if (v2 instanceof Boolean) {
      reply.put("txn_protocol", ((Boolean) v2) ? "v2" : "v1");
    }
    return reply;
  }

  private ErrorRecords.State state() {
    if (txnManager == null) {
      return ErrorRecords.State.NONE;
    }
    return new ErrorRecords.State(Boolean.TRUE.equals(call(txnManager, "hasFatalError")),
        Boolean.TRUE.equals(call(txnManager, "hasAbortableError")));
  }

  private static Object readField(Object o, String name) {
    if (o == null) {
      return null;
    }
    for (Class<?> c = o.getClass(); c != null; c = c.getSuperclass()) {
      try {
        Field f = c.getDeclaredField(name);
        f.setAccessible(true);
        return f.get(o);
      } catch (NoSuchFieldException e) {
        continue;
      } catch (ReflectiveOperationException | RuntimeException e) {
        return null;
      }
    }
    return null;
  }

  private static Object call(Object o, String name) {
    if (o == null) {
      return null;
    }
    try {
      Method m = o.getClass().getDeclaredMethod(name);
      m.setAccessible(true);
      return m.invoke(o);
    } catch (ReflectiveOperationException | RuntimeException e) {
      return null;
    }
  }

  // ------------------------------------------------------------------ JSON helpers
  private static long num(Object v, long dflt) {
    if (v instanceof Number) {
      return ((Number) v).longValue();
    }
    return dflt;
  }

  private static String str(Object v) {
    return v == null ? "" : v.toString();
  }

  @SuppressWarnings("unchecked")
  private static List<Object> list(Object v) {
    return v instanceof List ? (List<Object>) v : List.of();
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> map(Object v) {
    return v instanceof Map ? (Map<String, Object>) v : Map.of();
  }
}
