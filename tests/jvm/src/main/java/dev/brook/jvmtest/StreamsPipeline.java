package dev.brook.jvmtest;

import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;

/**
 * One Kafka Streams instance of the pipeline tests/java/test_streams.py runs against Brook:
 *
 * <pre>
 *   events (key: event id, value: "user,page,id")
 *     -> selectKey(user)                       repartition topic
 *     -> groupByKey, 10 s windows, count       state store + changelog -> counts ("user@start" -> n)
 *     -> join users table (user -> region)     state store             -> enriched ("user,page,id,region")
 * </pre>
 *
 * Arguments: any number of name=value Streams configs (bootstrap.servers, application.id, state.dir,
 * processing.guarantee, ...). Prints "STATE <new state>" on each transition, one line, to stdout; a
 * SIGTERM closes it cleanly.
 */
public final class StreamsPipeline {
  public static void main(String[] args) throws Exception {
    Properties props = new Properties();
    props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
    props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
    for (String a : args) {
      int eq = a.indexOf('=');
      props.put(a.substring(0, eq), a.substring(eq + 1));
    }
    KafkaStreams streams = new KafkaStreams(topology().build(props), props);
    CountDownLatch done = new CountDownLatch(1);
    streams.setStateListener(
        (now, before) -> {
          System.out.println("STATE " + now);
          System.out.flush();
          if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) done.countDown();
        });
    Runtime.getRuntime()
        .addShutdownHook(new Thread(() -> streams.close(Duration.ofSeconds(20)), "streams-close"));
    streams.start();
    done.await();
  }

  static StreamsBuilder topology() {
    StreamsBuilder b = new StreamsBuilder();
    KStream<String, String> byUser =
        b.stream("events", Consumed.with(Serdes.String(), Serdes.String()))
            .selectKey((id, v) -> v.split(",", 2)[0]);
    // A large grace: records reach the repartition topic's partitions out of timestamp order.
    byUser
        .groupByKey()
        .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofDays(1)))
        .count(Materialized.as("counts-store"))
        .toStream()
        .map((w, n) -> KeyValue.pair(w.key() + "@" + w.window().start(), Long.toString(n)))
        .to("counts", Produced.with(Serdes.String(), Serdes.String()));
    KTable<String, String> users =
        b.table("users", Consumed.with(Serdes.String(), Serdes.String()), Materialized.as("users-store"));
    byUser
        .join(users, (event, region) -> event + "," + region)
        .to("enriched", Produced.with(Serdes.String(), Serdes.String()));
    return b;
  }
}
