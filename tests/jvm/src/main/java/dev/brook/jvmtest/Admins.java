package dev.brook.jvmtest;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

/**
 * The AdminClient's calls. Results whose parts can fail one by one (per topic, per partition, per
 * group) come back as a map of part → result or {"error": class}, as the Java API reports them.
 */
final class Admins {
  private final Driver d;

  Admins(Driver d) {
    this.d = d;
  }

  Object handle(String op, JsonNode req) throws Exception {
    if (op.equals("admin")) {
      d.admins.put(req.path("name").asText(), Admin.create(Driver.props(req.path("config"))));
      return null;
    }
    Admin a = d.admins.get(req.path("name").asText());
    if (a == null) return Producers.UNHANDLED;
    switch (op) {
      case "create_topics": {
        List<NewTopic> topics = new ArrayList<>();
        for (JsonNode t : req.path("topics")) {
          NewTopic nt;
          if (t.has("assignments")) {
            Map<Integer, List<Integer>> asg = new HashMap<>();
            t.get("assignments").fields().forEachRemaining(e -> asg.put(Integer.parseInt(e.getKey()), ints(e.getValue())));
            nt = new NewTopic(t.path("name").asText(), asg);
          } else {
            nt = new NewTopic(t.path("name").asText(),
                t.has("partitions") ? Optional.of(t.get("partitions").asInt()) : Optional.empty(),
                t.has("replication_factor") ? Optional.of((short) t.get("replication_factor").asInt()) : Optional.empty());
          }
          Map<String, String> configs = new HashMap<>();
          t.path("configs").fields().forEachRemaining(e -> configs.put(e.getKey(), e.getValue().asText()));
          topics.add(nt.configs(configs));
        }
        var r = a.createTopics(topics, new CreateTopicsOptions().validateOnly(req.path("validate_only").asBoolean(false)));
        return each(r.values());
      }
      case "list_topics":
        return new ArrayList<>(a.listTopics(new ListTopicsOptions().listInternal(req.path("internal").asBoolean(false)))
            .names().get());
      case "describe_topics":
        return each(a.describeTopics(strings(req.path("topics")), new DescribeTopicsOptions()
            .includeAuthorizedOperations(req.path("authorized_operations").asBoolean(false))).topicNameValues());
      case "delete_topics":
        return each(a.deleteTopics(strings(req.path("topics"))).topicNameValues());
      case "create_partitions": {
        Map<String, NewPartitions> m = new HashMap<>();
        req.path("totals").fields().forEachRemaining(e -> m.put(e.getKey(), NewPartitions.increaseTo(e.getValue().asInt())));
        return each(a.createPartitions(m).values());
      }
      case "describe_configs": {
        List<ConfigResource> rs = new ArrayList<>();
        for (JsonNode r : req.path("resources")) rs.add(resource(r));
        Map<String, Object> out = new LinkedHashMap<>();
        a.describeConfigs(rs, new DescribeConfigsOptions().includeSynonyms(req.path("synonyms").asBoolean(false)))
            .values().forEach((res, f) -> out.put(res.type() + ":" + res.name(), configs(f)));
        return out;
      }
      case "incremental_alter_configs": {
        List<AlterConfigOp> ops = new ArrayList<>();
        for (JsonNode o : req.path("ops")) {
          ops.add(new AlterConfigOp(new ConfigEntry(o.get(0).asText(), o.get(1).isNull() ? null : o.get(1).asText()),
              AlterConfigOp.OpType.valueOf(o.get(2).asText())));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        a.incrementalAlterConfigs(Map.of(resource(req.path("resource")), ops),
                new AlterConfigsOptions().validateOnly(req.path("validate_only").asBoolean(false)))
            .values().forEach((res, f) -> out.put(res.type() + ":" + res.name(), outcome(f)));
        return out;
      }
      case "create_acls": {
        List<AclBinding> acls = new ArrayList<>();
        for (JsonNode x : req.path("acls")) acls.add(acl(x));
        Map<String, Object> out = new LinkedHashMap<>();
        a.createAcls(acls).values().forEach((b, f) -> out.put(b.toString(), outcome(f)));
        return out;
      }
      case "describe_acls":
        return Json.of(a.describeAcls(aclFilter(req.path("filter"))).values().get());
      case "delete_acls": {
        List<AclBindingFilter> fs = new ArrayList<>();
        for (JsonNode x : req.path("filters")) fs.add(aclFilter(x));
        return Json.of(a.deleteAcls(fs).all().get());
      }
      case "alter_scram": {
        List<UserScramCredentialAlteration> alts = new ArrayList<>();
        for (JsonNode u : req.path("upserts")) {
          alts.add(new UserScramCredentialUpsertion(u.get(0).asText(), new ScramCredentialInfo(
              ScramMechanism.fromMechanismName(u.get(1).asText()), u.get(3).asInt(4096)), u.get(2).asText()));
        }
        for (JsonNode u : req.path("deletions")) {
          alts.add(new UserScramCredentialDeletion(u.get(0).asText(), ScramMechanism.fromMechanismName(u.get(1).asText())));
        }
        return each(a.alterUserScramCredentials(alts).values());
      }
      case "describe_scram": {
        if (!req.has("users")) return Json.of(a.describeUserScramCredentials().all().get());
        // Per user, as the Java API reports them: all() leaves out users without credentials.
        var r = a.describeUserScramCredentials(strings(req.path("users")));
        Map<String, Object> out = new LinkedHashMap<>();
        for (String u : strings(req.path("users"))) out.put(u, outcome(r.description(u)));
        return out;
      }
      case "alter_client_quotas": {
        List<ClientQuotaAlteration> alts = new ArrayList<>();
        for (JsonNode e : req.path("entries")) {
          Map<String, String> entity = new HashMap<>();
          e.path("entity").fields().forEachRemaining(x -> entity.put(x.getKey(), x.getValue().asText()));
          List<ClientQuotaAlteration.Op> ops = new ArrayList<>();
          e.path("ops").fields().forEachRemaining(x -> ops.add(new ClientQuotaAlteration.Op(x.getKey(),
              x.getValue().isNull() ? null : x.getValue().asDouble())));
          alts.add(new ClientQuotaAlteration(new ClientQuotaEntity(entity), ops));
        }
        a.alterClientQuotas(alts).all().get();
        return null;
      }
      case "describe_client_quotas": {
        Map<String, Object> out = new LinkedHashMap<>();
        a.describeClientQuotas(ClientQuotaFilter.all()).entities().get()
            .forEach((e, q) -> out.put(new java.util.TreeMap<>(e.entries()).toString(), q));
        return out;
      }
      case "alter_reassignments": {
        Map<TopicPartition, Optional<NewPartitionReassignment>> m = new HashMap<>();
        req.path("reassignments").fields().forEachRemaining(e -> m.put(tp(e.getKey()),
            e.getValue().isNull() ? Optional.empty() : Optional.of(new NewPartitionReassignment(ints(e.getValue())))));
        return each(a.alterPartitionReassignments(m).values());
      }
      case "list_reassignments":
        return Json.of(a.listPartitionReassignments().reassignments().get());
      case "elect_leaders": {
        Map<String, Object> out = new LinkedHashMap<>();
        a.electLeaders(ElectionType.valueOf(req.path("type").asText("PREFERRED")),
                new HashSet<>(Consumers.partitions(req.path("partitions")))).partitions().get()
            .forEach((p, err) -> out.put(p.toString(), err.map(t -> (Object) t.getClass().getSimpleName()).orElse(null)));
        return out;
      }
      case "delete_records": {
        Map<TopicPartition, RecordsToDelete> m = new HashMap<>();
        Producers.offsets(req.path("offsets")).forEach((p, o) -> m.put(p, RecordsToDelete.beforeOffset(o.offset())));
        return each(a.deleteRecords(m).lowWatermarks());
      }
      case "list_offsets": {
        Map<TopicPartition, OffsetSpec> m = new HashMap<>();
        for (TopicPartition p : Consumers.partitions(req.path("partitions"))) m.put(p, spec(req.path("spec").asText()));
        var opts = new ListOffsetsOptions(IsolationLevel.valueOf(req.path("isolation").asText("READ_UNCOMMITTED")));
        return each(a.listOffsets(m, opts).all().get().entrySet().stream().collect(
            java.util.stream.Collectors.toMap(Map.Entry::getKey, e -> KafkaFuture.completedFuture(e.getValue()))));
      }
      case "list_groups":
        return Json.of(a.listGroups().all().get());
      case "describe_groups":
        return each(a.describeConsumerGroups(strings(req.path("groups")), new DescribeConsumerGroupsOptions()
            .includeAuthorizedOperations(req.path("authorized_operations").asBoolean(false))).describedGroups());
      case "delete_groups":
        return each(a.deleteConsumerGroups(strings(req.path("groups"))).deletedGroups());
      case "list_group_offsets": {
        Map<String, Object> out = new LinkedHashMap<>();
        a.listConsumerGroupOffsets(req.path("group").asText()).partitionsToOffsetAndMetadata().get()
            .forEach((p, o) -> out.put(p.toString(), o == null ? null : o.offset()));
        return out;
      }
      case "alter_group_offsets": {
        Map<TopicPartition, OffsetAndMetadata> m = Producers.offsets(req.path("offsets"));
        var r = a.alterConsumerGroupOffsets(req.path("group").asText(), m);
        Map<String, Object> out = new LinkedHashMap<>();
        for (TopicPartition p : m.keySet()) out.put(p.toString(), outcome(r.partitionResult(p)));
        return out;
      }
      case "delete_group_offsets": {
        Set<TopicPartition> ps = new HashSet<>(Consumers.partitions(req.path("partitions")));
        var r = a.deleteConsumerGroupOffsets(req.path("group").asText(), ps);
        Map<String, Object> out = new LinkedHashMap<>();
        for (TopicPartition p : ps) out.put(p.toString(), outcome(r.partitionResult(p)));
        return out;
      }
      case "remove_members": {
        List<MemberToRemove> ms = new ArrayList<>();
        req.path("instance_ids").forEach(i -> ms.add(new MemberToRemove(i.asText())));
        var opts = ms.isEmpty() ? new RemoveMembersFromConsumerGroupOptions() : new RemoveMembersFromConsumerGroupOptions(ms);
        a.removeMembersFromConsumerGroup(req.path("group").asText(), opts).all().get();
        return null;
      }
      case "describe_producers":
        return Json.of(a.describeProducers(Consumers.partitions(req.path("partitions"))).all().get());
      case "list_transactions":
        return Json.of(a.listTransactions().all().get());
      case "describe_transactions":
        return each(a.describeTransactions(strings(req.path("ids"))).all().get().entrySet().stream().collect(java.util.stream.Collectors.toMap(Map.Entry::getKey, e -> KafkaFuture.completedFuture(e.getValue()))));
      case "abort_transaction":
        a.abortTransaction(new AbortTransactionSpec(Consumers.tp(req.path("partition")),
            req.path("producer_id").asLong(), (short) req.path("producer_epoch").asInt(),
            req.path("coordinator_epoch").asInt())).all().get();
        return null;
      case "describe_cluster": {
        var r = a.describeCluster(new DescribeClusterOptions().includeAuthorizedOperations(true));
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("cluster_id", r.clusterId().get());
        out.put("controller", Json.of(r.controller().get()));
        out.put("nodes", Json.of(r.nodes().get()));
        out.put("authorized_operations", Json.of(r.authorizedOperations().get()));
        return out;
      }
      case "describe_log_dirs":
        return Json.of(a.describeLogDirs(ints(req.path("brokers"))).allDescriptions().get());
      case "describe_features":
        return Json.of(a.describeFeatures().featureMetadata().get());
      default:
        return Producers.UNHANDLED;
    }
  }

  private static <K, V> Map<String, Object> each(Map<K, KafkaFuture<V>> futures) {
    Map<String, Object> out = new java.util.TreeMap<>();
    futures.forEach((k, f) -> out.put(String.valueOf(k), outcome(f)));
    return out;
  }

  /** A part's result: its value as JSON ("ok" for a Void), or {"error": class, "message": ...}. */
  private static Object outcome(KafkaFuture<?> f) {
    try {
      Object v = f.get();
      return v == null ? "ok" : Json.of(v);
    } catch (Exception e) {
      Throwable t = Driver.unwrap(e);
      return Map.of("error", t.getClass().getSimpleName(), "message", String.valueOf(t.getMessage()));
    }
  }

  private static Object configs(KafkaFuture<Config> f) {
    try {
      Map<String, Object> out = new java.util.TreeMap<>();
      for (ConfigEntry e : f.get().entries()) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("value", e.value());
        m.put("source", e.source().name());
        m.put("read_only", e.isReadOnly());
        m.put("sensitive", e.isSensitive());
        m.put("default", e.isDefault());
        m.put("synonyms", e.synonyms().stream().map(s -> s.name() + "=" + s.value() + "@" + s.source()).toList());
        out.put(e.name(), m);
      }
      return out;
    } catch (Exception e) {
      Throwable t = Driver.unwrap(e);
      return Map.of("error", t.getClass().getSimpleName(), "message", String.valueOf(t.getMessage()));
    }
  }

  private static OffsetSpec spec(String s) {
    return switch (s) {
      case "earliest" -> OffsetSpec.earliest();
      case "latest" -> OffsetSpec.latest();
      case "max_timestamp" -> OffsetSpec.maxTimestamp();
      case "earliest_local" -> OffsetSpec.earliestLocal();
      default -> OffsetSpec.forTimestamp(Long.parseLong(s));
    };
  }

  private static ConfigResource resource(JsonNode r) {
    return new ConfigResource(ConfigResource.Type.valueOf(r.get(0).asText()), r.get(1).asText());
  }

  private static AclBinding acl(JsonNode x) {
    return new AclBinding(
        new ResourcePattern(ResourceType.valueOf(x.path("resource_type").asText()), x.path("resource_name").asText(),
            PatternType.valueOf(x.path("pattern_type").asText("LITERAL"))),
        new AccessControlEntry(x.path("principal").asText(), x.path("host").asText("*"),
            AclOperation.valueOf(x.path("operation").asText()), AclPermissionType.valueOf(x.path("permission").asText("ALLOW"))));
  }

  private static AclBindingFilter aclFilter(JsonNode x) {
    return new AclBindingFilter(
        new ResourcePatternFilter(ResourceType.valueOf(x.path("resource_type").asText("ANY")),
            x.hasNonNull("resource_name") ? x.get("resource_name").asText() : null,
            PatternType.valueOf(x.path("pattern_type").asText("ANY"))),
        new AccessControlEntryFilter(x.hasNonNull("principal") ? x.get("principal").asText() : null,
            x.hasNonNull("host") ? x.get("host").asText() : null,
            AclOperation.valueOf(x.path("operation").asText("ANY")), AclPermissionType.valueOf(x.path("permission").asText("ANY"))));
  }

  private static TopicPartition tp(String s) {
    int i = s.lastIndexOf('-');
    return new TopicPartition(s.substring(0, i), Integer.parseInt(s.substring(i + 1)));
  }

  static List<Integer> ints(JsonNode a) {
    List<Integer> r = new ArrayList<>();
    a.forEach(x -> r.add(x.asInt()));
    return r;
  }

  static List<String> strings(JsonNode a) {
    List<String> r = new ArrayList<>();
    a.forEach(x -> r.add(x.asText()));
    return r;
  }
}
