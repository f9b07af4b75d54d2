package dev.brook.jvmtest;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.common.KafkaFuture;

/**
 * Kafka's result types as JSON: their accessors are `name()`, `partitions()`, ... (not getters), so
 * every public no-argument method of a Kafka class is read, recursively. Maps keep string keys (a
 * TopicPartition key becomes "topic-partition"); a future is waited for (an admin result's parts).
 */
final class Json {
  private static final Set<String> SKIP = Set.of("hashCode", "toString", "getClass", "notify",
      "notifyAll", "wait", "all", "values", "clone", "iterator", "spliterator", "stream", "builder",
      "toBuilder", "duplicate", "copy", "asJava", "asScala");

  private Json() {}

  static Object of(Object o) {
    return of(o, 0);
  }

  private static Object of(Object o, int depth) {
    if (o == null || o instanceof String || o instanceof Number || o instanceof Boolean) return o;
    if (depth > 10) return String.valueOf(o);
    if (o instanceof Enum<?> e) return e.name();
    if (o instanceof Character c) return c.toString();
    if (o instanceof byte[] b) return new String(b, StandardCharsets.UTF_8);
    if (o instanceof Optional<?> opt) return opt.map(v -> of(v, depth + 1)).orElse(null);
    if (o instanceof OptionalInt oi) return oi.isPresent() ? oi.getAsInt() : null;
    if (o instanceof OptionalLong ol) return ol.isPresent() ? ol.getAsLong() : null;
    if (o instanceof KafkaFuture<?> f) {
      try {
        return of(f.get(), depth + 1);
      } catch (Exception e) {
        Throwable t = Driver.unwrap(e);
        return Map.of("error", t.getClass().getSimpleName(), "message", String.valueOf(t.getMessage()));
      }
    }
    if (o instanceof Map<?, ?> m) {
      Map<String, Object> r = new TreeMap<>();
      m.forEach((k, v) -> r.put(String.valueOf(k instanceof Enum<?> e ? e.name() : k), of(v, depth + 1)));
      return r;
    }
    if (o instanceof Collection<?> c) {
      List<Object> r = new ArrayList<>();
      c.forEach(v -> r.add(of(v, depth + 1)));
      return r;
    }
    if (o.getClass().isArray()) {
      List<Object> r = new ArrayList<>();
      for (int i = 0; i < java.lang.reflect.Array.getLength(o); i++) {
        r.add(of(java.lang.reflect.Array.get(o, i), depth + 1));
      }
      return r;
    }
    String pkg = o.getClass().getPackageName();
    if (!pkg.startsWith("org.apache.kafka")) return String.valueOf(o);
    if (o instanceof org.apache.kafka.common.Uuid) return o.toString();
    Map<String, Object> r = new LinkedHashMap<>();
    for (Method m : o.getClass().getMethods()) {
      if (m.getParameterCount() != 0 || Modifier.isStatic(m.getModifiers()) || SKIP.contains(m.getName())
          || m.getReturnType() == void.class || m.getDeclaringClass() == Object.class) {
        continue;
      }
      try {
        m.setAccessible(true);
        r.put(m.getName(), of(m.invoke(o), depth + 1));
      } catch (Exception e) {
        r.put(m.getName(), "<" + Driver.unwrap(e).getClass().getSimpleName() + ">");
      }
    }
    return new TreeMap<>(r);
  }
}
