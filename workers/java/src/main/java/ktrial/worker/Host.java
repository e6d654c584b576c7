package ktrial.worker;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * Host mode ({@code --host}, docs/drivers.md "Several processes in one JVM"): one JVM
 * serves several logical processes over one channel. Every request names its process
 * ({@code proc}); each process has its own {@link Worker} (its own producer and consumer)
 * and its own thread, so one process's calls run in order while another's run beside
 * them, and replies come back in completion order, each carrying its {@code id} and
 * {@code proc}. {@code crash} ends a process at once, without a goodbye: its producer is
 * closed with no time to send anything more (no EndTxn, unsent batches dropped) and its
 * consumer stays in its group until the session timeout, as a killed process would.
 */
final class Host {
  private final OutputStream channel;
  private final Map<String, Proc> procs = new ConcurrentHashMap<>();

  /** One hosted process: its clients and the thread its calls are answered on. */
  private static final class Proc {
    final Worker worker = new Worker();
    final ExecutorService front;

    Proc(String name) {
      front = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "ktrial-proc-" + name);
        t.setDaemon(true);
        return t;
      });
    }
  }

  Host(OutputStream channel) {
    this.channel = channel;
  }

  /** Serve requests until stdin ends, then end every process and exit. */
  void serve(BufferedReader in) throws IOException {
    while (true) {
      String line = in.readLine();
      if (line == null) {
        for (Proc p : procs.values()) {
          p.worker.crash();
        }
        System.exit(0);
      }
      if (!line.isBlank()) {
        take(line);
      }
    }
  }

  private void take(String line) {
    Map<String, Object> r;
    try {
      r = Json.request(line);
    } catch (IllegalArgumentException e) {
      reply(Worker.failure(Worker.badRequest("not a JSON request: " + e.getMessage())), null, null);
      return;
    }
    Object id = r.get("id");
    Object procField = r.get("proc");
    String call = String.valueOf(r.get("call"));
    if (procField == null) {
      reply(Worker.failure(Worker.badRequest("host mode: the request has no \"proc\"")), id, null);
      return;
    }
    String name = String.valueOf(procField);
    if (call.equals("crash")) {
      // answered by nobody: the process is gone; a reply it still had is dropped
      Proc p = procs.remove(name);
      if (p != null) {
        Thread t = new Thread(() -> end(p), "ktrial-crash-" + name);
        t.setDaemon(true);
        t.start();
      }
      return;
    }
    Proc p = procs.get(name);
    if (call.equals("open")) {
      if (p != null) {
        Map<String, Object> err = Worker.badRequest("process " + name + " is already open");
        reply(Worker.failure(err), id, procField);
        return;
      }
      p = new Proc(name);
      procs.put(name, p);
    } else if (p == null) {
      Map<String, Object> err = Worker.badRequest("process " + name + " is not open");
      err.put("name", "NotOpen");
      err.put("fatal", true);
      reply(Worker.failure(err), id, procField);
      return;
    }
    Proc proc = p;
    proc.front.submit(() -> {
      Map<String, Object> answer;
      try {
        answer = proc.worker.handle(call, r);
      } catch (RuntimeException e) {
        answer = Worker.failure(Worker.badRequest(call + ": " + e));
      }
      if (procs.get(name) != proc) {
        return; // crashed meanwhile: a dead process says nothing
      }
      if (call.equals("close") || (call.equals("open") && !Boolean.TRUE.equals(answer.get("ok")))) {
        procs.remove(name, proc);
        proc.front.shutdown();
      }
      reply(answer, id, procField);
    });
  }

  private static void end(Proc p) {
    p.worker.crash();
    p.front.shutdownNow();
  }

  private void reply(Map<String, Object> reply, Object id, Object proc) {
    reply.put("id", id);
    reply.put("proc", proc);
    byte[] line = (Json.write(reply) + "\n").getBytes(StandardCharsets.UTF_8);
    synchronized (channel) {
      try {
        channel.write(line);
        channel.flush();
      } catch (IOException e) {
        System.exit(1); // ktrial is gone
      }
    }
  }
}
