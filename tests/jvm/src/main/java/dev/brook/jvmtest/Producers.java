package dev.brook.jvmtest;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** The producer's calls: send (waited for, or in a background thread), flush, transactions. */
final class Producers {
  static final Object UNHANDLED = new Object();
  private final Driver d;
  private final Map<String, Background> background = new HashMap<>();

  Producers(Driver d) {
    this.d = d;
  }

  Object handle(String op, JsonNode req) throws Exception {
    switch (op) {
      case "producer": {
        var p = new KafkaProducer<>(Driver.props(req.path("config")), new ByteArraySerializer(),
            new ByteArraySerializer());
        d.producers.put(req.path("name").asText(), p);
        return null;
      }
      case "send":
        return send(Driver.named(d.producers, req), req);
      case "send_background": {
        Background b = new Background(Driver.named(d.producers, req), req);
        background.put(req.path("name").asText(), b);
        b.thread.start();
        return null;
      }
      case "background_result": {
        Background b = background.remove(req.path("name").asText());
        b.thread.join(req.path("timeout_ms").asLong(120000));
        if (b.thread.isAlive()) throw new IllegalStateException("background sends still running");
        Map<String, Object> r = new LinkedHashMap<>();
        synchronized (b) {
          r.put("acked", b.acked);
          r.put("errors", b.errors);
        }
        return r;
      }
      case "flush":
        Driver.named(d.producers, req).flush();
        return null;
      case "init_transactions":
        Driver.named(d.producers, req).initTransactions();
        return null;
      case "begin_transaction":
        Driver.named(d.producers, req).beginTransaction();
        return null;
      case "commit_transaction":
        Driver.named(d.producers, req).commitTransaction();
        return null;
      case "abort_transaction":
        Driver.named(d.producers, req).abortTransaction();
        return null;
      case "send_offsets_to_transaction": {
        var consumer = d.consumers.get(req.path("consumer").asText());
        Driver.named(d.producers, req).sendOffsetsToTransaction(offsets(req.path("offsets")),
            consumer.groupMetadata());
        return null;
      }
      case "partitions_for":
        return Json.of(Driver.named(d.producers, req).partitionsFor(req.path("topic").asText()));
      default:
        return UNHANDLED;
    }
  }

  static ProducerRecord<byte[], byte[]> record(String topic, JsonNode r) {
    Integer partition = r.hasNonNull("partition") ? r.get("partition").asInt() : null;
    Long ts = r.hasNonNull("timestamp") ? r.get("timestamp").asLong() : null;
    byte[] key = r.hasNonNull("key") ? bytes(r.get("key").asText()) : null;
    byte[] value;
    if (r.hasNonNull("value_size")) {  // a large value without sending it through JSON
      value = new byte[r.get("value_size").asInt()];
      java.util.Arrays.fill(value, (byte) 'v');
    } else {
      value = r.hasNonNull("value") ? bytes(r.get("value").asText()) : null;
    }
    RecordHeaders headers = new RecordHeaders();
    r.path("headers").fields().forEachRemaining(h -> headers.add(h.getKey(),
        h.getValue().isNull() ? null : bytes(h.getValue().asText())));
    return new ProducerRecord<>(topic, partition, ts, key, value, headers);
  }

  /** Sends every record in `records` and waits for each; one result per record, in order. */
  private List<Object> send(KafkaProducer<byte[], byte[]> p, JsonNode req) {
    String topic = req.path("topic").asText();
    List<Future<RecordMetadata>> futures = new ArrayList<>();
    List<Object> results = new ArrayList<>();
    for (JsonNode r : req.path("records")) {
      try {
        futures.add(p.send(record(topic, r)));
      } catch (Exception e) {  // a synchronous refusal (serializer, size, closed producer)
        futures.add(java.util.concurrent.CompletableFuture.failedFuture(e));
      }
    }
    for (Future<RecordMetadata> f : futures) {
      try {
        RecordMetadata m = f.get(req.path("timeout_ms").asLong(60000), java.util.concurrent.TimeUnit.MILLISECONDS);
        results.add(Map.of("partition", m.partition(), "offset", m.offset(), "timestamp", m.timestamp()));
      } catch (Exception e) {
        Throwable t = Driver.unwrap(e);
        results.add(Map.of("error", t.getClass().getSimpleName(), "message", String.valueOf(t.getMessage())));
      }
    }
    return results;
  }

  static Map<TopicPartition, OffsetAndMetadata> offsets(JsonNode byTopic) {
    Map<TopicPartition, OffsetAndMetadata> m = new HashMap<>();
    byTopic.fields().forEachRemaining(t -> t.getValue().fields().forEachRemaining(p -> m.put(
        new TopicPartition(t.getKey(), Integer.parseInt(p.getKey())),
        new OffsetAndMetadata(p.getValue().asLong()))));
    return m;
  }

  static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  /**
   * `count` records with values "prefix-0" .. in a thread of their own, at most `rate` a second, so a
   * test can kill brokers while a real producer is sending; every acknowledgement and error is kept.
   */
  static final class Background {
    final List<Object> acked = new ArrayList<>();
    final List<Object> errors = new ArrayList<>();
    final Thread thread;

    Background(KafkaProducer<byte[], byte[]> p, JsonNode req) {
      String topic = req.path("topic").asText();
      String prefix = req.path("prefix").asText("v");
      int count = req.path("count").asInt();
      int rate = req.path("rate").asInt(0);
      thread = new Thread(() -> {
        long start = System.nanoTime();
        for (int i = 0; i < count; i++) {
          if (rate > 0) {
            long due = start + (long) (i * 1e9 / rate);
            long wait = due - System.nanoTime();
            if (wait > 0) {
              try {
                Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
              } catch (InterruptedException e) {
                return;
              }
            }
          }
          String value = prefix + "-" + i;
          ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, null, bytes(value), bytes(value));
          try {
            p.send(r, (m, e) -> {
              synchronized (this) {
                if (e != null) errors.add(Map.of("value", value, "error", e.getClass().getSimpleName()));
                else acked.add(Map.of("value", value, "partition", m.partition(), "offset", m.offset()));
              }
            });
          } catch (Exception e) {
            synchronized (this) {
              errors.add(Map.of("value", value, "error", e.getClass().getSimpleName()));
            }
          }
        }
        p.flush();
      }, "background-sends");
      thread.setDaemon(true);
    }
  }
}
