package dev.brook.jvmtest;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;

/**
 * Apache Kafka's Java clients, driven by a test over stdin/stdout: one JSON request a line
 * ({"op": ..., "name": ..., ...}), one JSON answer a line ({"ok": result} or {"error": the Java
 * exception's simple class name, "message": ..., "chain": [every cause's class]}). The test writes the
 * scenario in Python and this process makes every call through the real client, so what the broker
 * sees is exactly what a Java application sends.
 */
public final class Driver {
  static final ObjectMapper JSON = new ObjectMapper();

  final Map<String, KafkaProducer<byte[], byte[]>> producers = new HashMap<>();
  final Map<String, KafkaConsumer<byte[], byte[]>> consumers = new HashMap<>();
  final Map<String, Admin> admins = new HashMap<>();
  final Producers producerOps = new Producers(this);
  final Consumers consumerOps = new Consumers(this);
  final Admins adminOps = new Admins(this);

  public static void main(String[] args) throws Exception {
    // Answers go to the real stdout only; anything a library prints goes to stderr (the test's log).
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    System.setOut(System.err);
    Driver d = new Driver();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      if (line.isBlank()) continue;
      ObjectNode answer = JSON.createObjectNode();
      try {
        JsonNode req = JSON.readTree(line);
        if (req.path("op").asText().equals("exit")) break;
        answer.set("ok", JSON.valueToTree(d.dispatch(req)));
      } catch (Throwable t) {
        Throwable e = unwrap(t);
        answer.put("error", e.getClass().getSimpleName());
        answer.put("message", String.valueOf(e.getMessage()));
        var chain = answer.putArray("chain");
        Throwable root = t;
        for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
          chain.add(c.getClass().getSimpleName());
          root = c;
        }
        answer.put("root", root.getClass().getSimpleName() + ": " + root.getMessage());
      }
      out.println(JSON.writeValueAsString(answer));
    }
    d.closeAll();
    out.flush();
    System.exit(0);
  }

  static Throwable unwrap(Throwable t) {
    while ((t instanceof ExecutionException || t instanceof java.lang.reflect.InvocationTargetException
            || t instanceof java.util.concurrent.CompletionException)
        && t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }

  Object dispatch(JsonNode req) throws Exception {
    String op = req.path("op").asText();
    String name = req.path("name").asText();
    // Calls go to the family of the client they name (producers and admins both abort transactions).
    Object r = Producers.UNHANDLED;
    if (op.equals("producer") || producers.containsKey(name)) r = producerOps.handle(op, req);
    else if (op.equals("consumer") || consumers.containsKey(name)) r = consumerOps.handle(op, req);
    else if (op.equals("admin") || admins.containsKey(name)) r = adminOps.handle(op, req);
    if (r != Producers.UNHANDLED) return r;
    if (op.equals("close")) {
      java.time.Duration t = java.time.Duration.ofMillis(req.path("timeout_ms").asLong(10000));
      if (producers.containsKey(name)) producers.remove(name).close(t);
      else if (consumers.containsKey(name)) consumers.remove(name).close(t);
      else if (admins.containsKey(name)) admins.remove(name).close(t);
      else throw new IllegalArgumentException("no client named " + name);
      return null;
    }
    throw new IllegalArgumentException("unknown op " + op);
  }

  void closeAll() {
    java.time.Duration t = java.time.Duration.ofSeconds(5);
    producers.values().forEach(p -> p.close(t));
    consumers.values().forEach(c -> c.close(t));
    admins.values().forEach(a -> a.close(t));
  }

  static java.util.Properties props(JsonNode config) {
    java.util.Properties p = new java.util.Properties();
    config.fields().forEachRemaining(e -> p.put(e.getKey(), e.getValue().asText()));
    return p;
  }

  static <T> T named(Map<String, T> m, JsonNode req) {
    T v = m.get(req.path("name").asText());
    if (v == null) throw new IllegalArgumentException("no client named " + req.path("name").asText());
    return v;
  }
}
