package dev.brook.jvmtest;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/** The consumer's calls; a rebalance listener keeps its callbacks for the test to read. */
final class Consumers {
  private final Driver d;
  private final Map<String, List<Object>> events = new HashMap<>();

  Consumers(Driver d) {
    this.d = d;
  }

  Object handle(String op, JsonNode req) throws Exception {
    String name = req.path("name").asText();
    switch (op) {
      case "consumer":
        d.consumers.put(name, new KafkaConsumer<>(Driver.props(req.path("config")),
            new ByteArrayDeserializer(), new ByteArrayDeserializer()));
        events.put(name, new ArrayList<>());
        return null;
      case "subscribe": {
        List<String> topics = new ArrayList<>();
        req.path("topics").forEach(t -> topics.add(t.asText()));
        Driver.named(d.consumers, req).subscribe(topics, listener(name));
        return null;
      }
      case "assign":
        Driver.named(d.consumers, req).assign(partitions(req.path("partitions")));
        return null;
      case "unsubscribe":
        Driver.named(d.consumers, req).unsubscribe();
        return null;
      case "poll":
        return poll(Driver.named(d.consumers, req), req);
      case "events": {
        List<Object> e = events.get(name);
        List<Object> copy = new ArrayList<>(e);
        e.clear();
        return copy;
      }
      case "assignment":
        return names(Driver.named(d.consumers, req).assignment());
      case "seek":
        Driver.named(d.consumers, req).seek(tp(req.path("partition")), req.path("offset").asLong());
        return null;
      case "seek_to_beginning":
        Driver.named(d.consumers, req).seekToBeginning(partitions(req.path("partitions")));
        return null;
      case "seek_to_end":
        Driver.named(d.consumers, req).seekToEnd(partitions(req.path("partitions")));
        return null;
      case "position":
        return Driver.named(d.consumers, req).position(tp(req.path("partition")), Duration.ofSeconds(30));
      case "pause":
        Driver.named(d.consumers, req).pause(partitions(req.path("partitions")));
        return null;
      case "resume":
        Driver.named(d.consumers, req).resume(partitions(req.path("partitions")));
        return null;
      case "paused":
        return names(Driver.named(d.consumers, req).paused());
      case "commit_sync":
        if (req.has("offsets")) Driver.named(d.consumers, req).commitSync(Producers.offsets(req.path("offsets")));
        else Driver.named(d.consumers, req).commitSync();
        return null;
      case "commit_async": {
        // Waits for the callback (polling drives it), so the test sees what the callback was given.
        var c = Driver.named(d.consumers, req);
        var done = new java.util.concurrent.CompletableFuture<Object>();
        c.commitAsync((offsets, e) -> {
          if (e != null) done.completeExceptionally(e);
          else done.complete(Json.of(offsets));
        });
        long deadline = System.currentTimeMillis() + 30000;
        while (!done.isDone() && System.currentTimeMillis() < deadline) c.poll(Duration.ofMillis(50));
        return done.get(1, java.util.concurrent.TimeUnit.SECONDS);
      }
      case "committed": {
        Map<TopicPartition, OffsetAndMetadata> m = Driver.named(d.consumers, req)
            .committed(new java.util.HashSet<>(partitions(req.path("partitions"))), Duration.ofSeconds(30));
        Map<String, Object> r = new LinkedHashMap<>();
        m.forEach((k, v) -> r.put(k.toString(), v == null ? null : v.offset()));
        return r;
      }
      case "offsets_for_times": {
        Map<TopicPartition, Long> q = new HashMap<>();
        for (JsonNode p : req.path("partitions")) q.put(tp(p), req.path("timestamp").asLong());
        Map<String, Object> r = new LinkedHashMap<>();
        Driver.named(d.consumers, req).offsetsForTimes(q, Duration.ofSeconds(30)).forEach((k, v) ->
            r.put(k.toString(), v == null ? null : Map.of("offset", v.offset(), "timestamp", v.timestamp())));
        return r;
      }
      case "end_offsets":
        return byName(Driver.named(d.consumers, req).endOffsets(partitions(req.path("partitions")),
            Duration.ofSeconds(30)));
      case "beginning_offsets":
        return byName(Driver.named(d.consumers, req).beginningOffsets(partitions(req.path("partitions")),
            Duration.ofSeconds(30)));
      case "current_lag": {
        var lag = Driver.named(d.consumers, req).currentLag(tp(req.path("partition")));
        return lag.isPresent() ? lag.getAsLong() : null;
      }
      case "group_metadata":
        return Json.of(Driver.named(d.consumers, req).groupMetadata());
      default:
        return Producers.UNHANDLED;
    }
  }

  private ConsumerRebalanceListener listener(String name) {
    List<Object> log = events.get(name);
    return new ConsumerRebalanceListener() {
      @Override
      public void onPartitionsRevoked(Collection<TopicPartition> ps) {
        log.add(Map.of("event", "revoked", "partitions", names(ps)));
      }

      @Override
      public void onPartitionsAssigned(Collection<TopicPartition> ps) {
        log.add(Map.of("event", "assigned", "partitions", names(ps)));
      }

      @Override
      public void onPartitionsLost(Collection<TopicPartition> ps) {
        log.add(Map.of("event", "lost", "partitions", names(ps)));
      }
    };
  }

  /** Polls until `count` records arrived or `timeout_ms` passed (at least one poll either way). */
  private List<Object> poll(KafkaConsumer<byte[], byte[]> c, JsonNode req) {
    int want = req.path("count").asInt(1);
    long deadline = System.currentTimeMillis() + req.path("timeout_ms").asLong(10000);
    List<Object> out = new ArrayList<>();
    do {
      for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("topic", r.topic());
        m.put("partition", r.partition());
        m.put("offset", r.offset());
        m.put("timestamp", r.timestamp());
        m.put("key", r.key() == null ? null : new String(r.key(), StandardCharsets.UTF_8));
        m.put("value", r.value() == null ? null : new String(r.value(), StandardCharsets.UTF_8));
        m.put("value_size", r.value() == null ? -1 : r.value().length);
        Map<String, Object> h = new LinkedHashMap<>();
        for (Header x : r.headers()) h.put(x.key(), x.value() == null ? null : new String(x.value(), StandardCharsets.UTF_8));
        m.put("headers", h);
        m.put("leader_epoch", r.leaderEpoch().orElse(-1));
        out.add(m);
      }
    } while (out.size() < want && System.currentTimeMillis() < deadline);
    return out;
  }

  static TopicPartition tp(JsonNode p) {
    return new TopicPartition(p.get(0).asText(), p.get(1).asInt());
  }

  static List<TopicPartition> partitions(JsonNode ps) {
    List<TopicPartition> r = new ArrayList<>();
    ps.forEach(p -> r.add(tp(p)));
    return r;
  }

  static List<String> names(Collection<TopicPartition> ps) {
    return ps.stream().map(TopicPartition::toString).sorted().toList();
  }

  static Map<String, Long> byName(Map<TopicPartition, Long> m) {
    Map<String, Long> r = new LinkedHashMap<>();
    m.forEach((k, v) -> r.put(k.toString(), v));
    return r;
  }
}
