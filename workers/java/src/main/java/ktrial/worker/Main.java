package ktrial.worker;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * ktrial's Java driver worker: one logical process's Kafka client (Apache kafka-clients),
 * driven over JSON lines (docs/drivers.md). One request per line on stdin, exactly one
 * reply per line on stdout, in order; with {@code --host}, several logical processes in
 * this JVM over one channel ({@link Host}). The worker only talks to Kafka: recording, timing,
 * retirement and the rewind rules stay on ktrial's side. Logs go to stderr.
 */
public final class Main {
  private Main() {}

  /**
   * The class-data-sharing training run (scripts/setup.sh): open a producer and a
   * consumer against an address nobody listens on, close them, and write the error table,
   * so that the JVM's archive holds the classes every worker loads at start.
   */
  private static void train(OutputStream channel) throws IOException {
    Worker w = new Worker();
    Map<String, Object> open = new LinkedHashMap<>();
    open.put("bootstrap", "127.0.0.1:1");
    open.put("client_id", "train");
    open.put("txn_id", "");
    open.put("producer", true);
    open.put("consumer", true);
    open.put("settings", Map.of("acks", "all", "isolation.level", "read_committed"));
    open.put("timeout_ms", 10000L);
    Json.write(w.handle("open", open));
    Json.parse("{\"id\":1,\"records\":[[\"t\",0,1,\"v\"]],\"x\":-1.5,\"y\":null}");
    w.handle("close", Map.of("timeout_ms", 0L));
    ClassifyTable.print(OutputStream.nullOutputStream());
    System.exit(0);
  }

  public static void main(String[] args) throws IOException {
    String level = System.getenv("KTRIAL_JAVA_LOG"); // trace, debug, info, warn, error
    System.setProperty("org.slf4j.simpleLogger.defaultLogLevel",
        level == null || level.isEmpty() ? "error" : level);
    System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
    // stdout is the channel: nothing but replies may reach it.
    OutputStream channel = new FileOutputStream(FileDescriptor.out);
    System.setOut(new PrintStream(new FileOutputStream(FileDescriptor.err), true));
    if (args.length > 0 && args[0].equals("--classify-table")) {
      ClassifyTable.print(channel);
      return;
    }
    if (args.length > 0 && args[0].equals("--train")) {
      train(channel);
      return;
    }
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 20);
    if (args.length > 0 && args[0].equals("--host")) {
      new Host(channel).serve(in);
      return;
    }
    Worker w = new Worker();
    while (true) {
      String line = in.readLine();
      if (line == null) {
        w.shutdown(0);
        System.exit(0);
      }
      if (line.isBlank()) {
        continue;
      }
      Object id = null;
      Map<String, Object> reply;
      String call = "";
      try {
        Map<String, Object> r = Json.request(line);
        id = r.get("id");
        call = String.valueOf(r.get("call"));
        reply = w.handle(call, r);
      } catch (IllegalArgumentException e) {
        reply = Worker.failure(Worker.badRequest("not a JSON request: " + e.getMessage()));
      }
      reply.put("id", id);
      channel.write((Json.write(reply) + "\n").getBytes(StandardCharsets.UTF_8));
      channel.flush();
      if (call.equals("close")) {
        System.exit(0);
      }
    }
  }
}
