"""Topic, broker and group configuration: tables of defaults, named as in Kafka.

Topic configs are kept as strings on the wire and in metadata (as Kafka does) and parsed into a typed
`TopicConfig` where the log and the handlers use them. Dynamic broker configs (AlterConfigs on a BROKER
resource) under a topic default's broker name (BROKER_TOPIC_SYNONYMS) change that default; group configs
(a GROUP resource, KIP-848) are validated and kept.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

ConfigType = Literal["int", "long", "string", "boolean", "list", "double"]

# compression.type values, as Kafka accepts them: `producer` stores batches as sent.
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
ICEBERG_VALUE_MODES = ("raw", "json", "schema")
ICEBERG_PARTITION_SPECS = ("hour", "day", "month", "year", "none")


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: str
    doc: str
    valid: tuple[str, ...] = ()  # allowed values for enumerations (empty: any)
    minimum: int | None = None
    maximum: int | None = None


# Topic-level configs (Kafka names). A broker's default for each is the value here unless overridden
# by the broker's own config (`log.retention.ms` style names are not used: one name per setting).
TOPIC_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in (
        ConfigDef("cleanup.policy", "list", "delete", "delete, compact, or both (comma-separated)"),
        ConfigDef(
            "retention.ms",
            "long",
            str(7 * 24 * 3600 * 1000),
            "age after which segments are deleted; -1 keeps forever",
            minimum=-1,
        ),
        ConfigDef(
            "retention.bytes",
            "long",
            "-1",
            "partition size above which the oldest segments are deleted; -1: no limit",
            minimum=-1,
        ),
        ConfigDef(
            "segment.bytes",
            "int",
            str(1024 * 1024 * 1024),
            "segment size at which a new segment is rolled",
            minimum=14,
        ),
        ConfigDef(
            "segment.ms",
            "long",
            str(7 * 24 * 3600 * 1000),
            "segment age at which a new segment is rolled",
            minimum=1,
        ),
        ConfigDef(
            "segment.index.bytes",
            "int",
            str(10 * 1024 * 1024),
            "maximum size of a segment's offset index",
            minimum=4,
        ),
        ConfigDef(
            "index.interval.bytes", "int", "4096", "bytes between two sparse offset-index entries", minimum=0
        ),
        ConfigDef("flush.messages", "long", str(2**63 - 1), "fsync after this many records", minimum=1),
        ConfigDef(
            "flush.ms",
            "long",
            str(2**63 - 1),
            "fsync when the oldest unflushed record is this old",
            minimum=0,
        ),
        ConfigDef(
            "max.message.bytes", "int", str(1024 * 1024 + 12), "largest record batch accepted", minimum=0
        ),
        ConfigDef(
            "message.timestamp.type",
            "string",
            "CreateTime",
            "CreateTime or LogAppendTime",
            valid=("CreateTime", "LogAppendTime"),
        ),
        ConfigDef(
            "min.insync.replicas", "int", "1", "acks=all fails below this many in-sync replicas", minimum=1
        ),
        ConfigDef("unclean.leader.election.enable", "boolean", "false", "elect a leader outside the ISR"),
        ConfigDef(
            "delete.retention.ms",
            "long",
            str(24 * 3600 * 1000),
            "how long tombstones survive compaction",
            minimum=0,
        ),
        ConfigDef(
            "min.compaction.lag.ms", "long", "0", "records younger than this are not compacted", minimum=0
        ),
        ConfigDef(
            "max.compaction.lag.ms",
            "long",
            str(2**63 - 1),
            "longest a record stays uncompacted: rolls the active segment, cleans whatever the dirty ratio",
            minimum=1,
        ),
        ConfigDef("min.cleanable.dirty.ratio", "double", "0.5", "dirty ratio that triggers the cleaner"),
        ConfigDef(
            "segment.jitter.ms",
            "long",
            "0",
            "up to this much is taken at random from segment.ms per segment (spreads the partitions' rolls)",
            minimum=0,
        ),
        ConfigDef(
            "file.delete.delay.ms",
            "long",
            "60000",
            "Kafka waits this long before deleting a removed segment's files so reads in flight finish; "
            "Brook's reads hold the file open, so it deletes at once (accepted for compatibility)",
            minimum=0,
        ),
        ConfigDef(
            "message.timestamp.before.max.ms",
            "long",
            str(2**63 - 1),
            "CreateTime batches with a timestamp older than this are refused (INVALID_TIMESTAMP)",
            minimum=0,
        ),
        ConfigDef(
            "message.timestamp.after.max.ms",
            "long",
            str(2**63 - 1),
            "CreateTime batches with a timestamp this far in the future are refused (INVALID_TIMESTAMP)",
            minimum=0,
        ),
        ConfigDef(
            "compression.type",
            "string",
            "producer",
            "producer keeps batches as sent; any other codec recompresses batches that differ on append",
            valid=COMPRESSION_TYPES,
        ),
        # Brook's own: the topic as an Apache Iceberg table (brook.iceberg, docs/iceberg.md).
        ConfigDef(
            "brook.iceberg.enabled",
            "boolean",
            "false",
            "the partition leaders append the topic's committed records to an Iceberg table",
        ),
        ConfigDef("brook.iceberg.namespace", "string", "brook", "the Iceberg namespace of the table"),
        ConfigDef(
            "brook.iceberg.table",
            "string",
            "",
            "the Iceberg table's name; empty: the topic's name with '.' as '_'",
        ),
        ConfigDef(
            "brook.iceberg.commit.interval.ms",
            "long",
            "60000",
            "how often each partition's new committed records become an Iceberg snapshot",
            minimum=100,
        ),
        ConfigDef(
            "brook.iceberg.value.mode",
            "string",
            "raw",
            "raw: the value as bytes; json: a JSON object's fields as typed columns; schema: decoded "
            "with the schema registry's schema for the id in each value",
            valid=ICEBERG_VALUE_MODES,
        ),
        ConfigDef(
            "brook.iceberg.maintenance.interval.ms",
            "long",
            str(3600 * 1000),
            "how often a writer rewrites the table's small data files and expires its old snapshots",
            minimum=1000,
        ),
        ConfigDef(
            "brook.iceberg.snapshot.max.age.ms",
            "long",
            str(24 * 3600 * 1000),
            "snapshots older than this are expired (the current one stays): the time travel window",
            minimum=0,
        ),
        ConfigDef(
            "brook.iceberg.partition.spec",
            "string",
            "day",
            "how the table is partitioned: by hour, day, month or year of the record timestamp, or none",
            valid=ICEBERG_PARTITION_SPECS,
        ),
    )
}


# Broker config names of the topic configs' broker-wide defaults (Kafka's synonyms).
BROKER_TOPIC_SYNONYMS: dict[str, str] = {
    "log.cleanup.policy": "cleanup.policy",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "compression.type": "compression.type",
}

# Broker configs Brook reads at start-up only: they cannot be altered dynamically. Other names are kept
# as dynamic broker configs, as Kafka keeps those of features it does not use (SASL/Kerberos, thread
# pools) and custom ones; Brook describes them and they change nothing.
STATIC_BROKER_CONFIGS = frozenset(
    {
        "broker.id",
        "node.id",
        "broker.rack",
        "listeners",
        "advertised.listeners",
        "log.dir",
        "log.dirs",
        "num.partitions",
        "default.replication.factor",
        "auto.create.topics.enable",
        "socket.request.max.bytes",
        "log.retention.check.interval.ms",
        "log.flush.scheduler.interval.ms",
        "log.cleaner.backoff.ms",
        "replica.lag.time.max.ms",
        "leader.replication.throttled.rate",
        "offsets.topic.num.partitions",
        "offsets.topic.replication.factor",
        "offsets.retention.minutes",
        "offsets.retention.check.interval.ms",
        "group.min.session.timeout.ms",
        "group.max.session.timeout.ms",
        "group.initial.rebalance.delay.ms",
    }
)

# Group configs (Kafka 4.x, KIP-848/932): they tune consumer- and share-protocol groups. Bounds: the
# broker's group.* min/max, except share.record.lock.duration.ms, whose floor is 1 s (librdkafka's share
# tests set 3 s).
GROUP_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in (
        ConfigDef(
            "consumer.session.timeout.ms",
            "int",
            "45000",
            "session timeout of consumer-protocol group members",
            minimum=45000,
            maximum=60000,
        ),
        ConfigDef(
            "consumer.heartbeat.interval.ms",
            "int",
            "5000",
            "heartbeat interval of consumer-protocol group members",
            minimum=5000,
            maximum=15000,
        ),
        ConfigDef(
            "share.session.timeout.ms",
            "int",
            "45000",
            "session timeout of share group members",
            minimum=45000,
            maximum=60000,
        ),
        ConfigDef(
            "share.heartbeat.interval.ms",
            "int",
            "5000",
            "heartbeat interval of share group members",
            minimum=5000,
            maximum=15000,
        ),
        ConfigDef(
            "share.record.lock.duration.ms",
            "int",
            "30000",
            "how long a share group's consumer holds a record",
            minimum=1000,
            maximum=3600000,
        ),
        ConfigDef(
            "share.delivery.count.limit",
            "int",
            "5",
            "deliveries of a record to a share group before it is archived",
            minimum=2,
            maximum=10,
        ),
        ConfigDef(
            "share.partition.max.record.locks",
            "int",
            "2000",
            "records in flight per share-partition",
            minimum=100,
            maximum=10000,
        ),
        ConfigDef(
            "share.auto.offset.reset",
            "string",
            "latest",
            "where a share group starts on a partition it has no state for",
            valid=("latest", "earliest"),
        ),
        ConfigDef(
            "share.isolation.level",
            "string",
            "read_uncommitted",
            "read_committed: share group members get committed transactional records only",
            valid=("read_uncommitted", "read_committed"),
        ),
    )
}


def validate_topic_config(name: str, value: str | None) -> str | None:
    """Return an error message for an invalid (name, value) pair, or None when it is acceptable."""
    d = TOPIC_CONFIGS.get(name)
    if d is None:
        return f"unknown topic config '{name}'"
    return _validate(d, value)


def validate_broker_config(name: str, value: str | None) -> str | None:
    """Why a dynamic broker config (name, value) is refused, or None (see STATIC_BROKER_CONFIGS)."""
    if name in STATIC_BROKER_CONFIGS:
        return f"cannot update {name} dynamically"
    if not name:
        return "a config name is empty"
    topic_name = BROKER_TOPIC_SYNONYMS.get(name)
    if topic_name is None or value is None:
        return None
    err = _validate(TOPIC_CONFIGS[topic_name], value)
    return None if err is None else err.replace(topic_name, name)


def validate_group_configs(configs: Mapping[str, str]) -> str | None:
    """Why a group's config overrides are refused, or None."""
    for name, value in configs.items():
        d = GROUP_CONFIGS.get(name)
        if d is None:
            return f"unknown group config '{name}'"
        if (err := _validate(d, value)) is not None:
            return err
    for kind in ("consumer", "share"):
        values = {
            k: int(configs.get(f"{kind}.{k}.ms", GROUP_CONFIGS[f"{kind}.{k}.ms"].default))
            for k in ("session.timeout", "heartbeat.interval")
        }
        if values["heartbeat.interval"] >= values["session.timeout"]:
            return f"{kind}.heartbeat.interval.ms must be less than {kind}.session.timeout.ms"
    return None


_TYPE_MAX = {"int": 2**31 - 1, "long": 2**63 - 1}
# Iceberg identifiers Brook creates: one level, usable unquoted in Spark SQL (the table may be empty).
_ICEBERG_NAME = re.compile(r"[A-Za-z0-9_-]+")
_ICEBERG_NAMES = {"brook.iceberg.namespace": None, "brook.iceberg.table": ""}  # name: the one other value


def valid_range(d: ConfigDef) -> str:
    """The values a config takes, as its error messages say them."""
    if d.type in ("int", "long"):
        low, high = d.minimum, d.maximum if d.maximum is not None else _TYPE_MAX[d.type]
        return f"an integer from {low} to {high}" if low is not None else f"an integer up to {high}"
    if d.valid:
        return "one of " + ", ".join(d.valid)
    return {"double": "a number", "boolean": "true or false"}.get(d.type, "a string")


def _validate(d: ConfigDef, value: str | None) -> str | None:
    name = d.name
    if value is None:
        return None
    if d.type in ("int", "long"):
        try:
            n = int(value)
        except ValueError:
            return f"{name} must be {valid_range(d)}, got '{value}'"
        high = d.maximum if d.maximum is not None else _TYPE_MAX[d.type]
        if (d.minimum is not None and n < d.minimum) or n > high:
            return f"{name} must be {valid_range(d)}, got {n}"
    elif d.type == "double":
        try:
            float(value)
        except ValueError:
            return f"{name} must be a number, got '{value}'"
    elif d.type == "boolean":
        if value.lower() not in ("true", "false"):
            return f"{name} must be true or false, got '{value}'"
    elif d.type == "list" and name == "cleanup.policy":
        parts = {p.strip() for p in value.split(",") if p.strip()}
        if not parts or not parts <= {"delete", "compact"}:
            return f"cleanup.policy must be delete, compact or 'compact,delete', got '{value}'"
    elif name in _ICEBERG_NAMES and not (_ICEBERG_NAME.fullmatch(value) or value == _ICEBERG_NAMES[name]):
        return f"{name} must be letters, digits, '_' or '-', got '{value}'"
    if d.valid and value not in d.valid:
        return f"{name} must be one of {', '.join(d.valid)}, got '{value}'"
    return None


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """Typed view of a topic's effective configuration (defaults merged with overrides)."""

    cleanup_policy: frozenset[str] = frozenset({"delete"})
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    flush_messages: int = 2**63 - 1
    flush_ms: int = 2**63 - 1
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: str = "CreateTime"
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    min_cleanable_dirty_ratio: float = 0.5
    compression_type: str = "producer"
    max_compaction_lag_ms: int = 2**63 - 1
    segment_jitter_ms: int = 0
    file_delete_delay_ms: int = 60000
    message_timestamp_before_max_ms: int = 2**63 - 1
    message_timestamp_after_max_ms: int = 2**63 - 1
    brook_iceberg_enabled: bool = False
    brook_iceberg_namespace: str = "brook"
    brook_iceberg_table: str = ""
    brook_iceberg_commit_interval_ms: int = 60000
    brook_iceberg_value_mode: str = "raw"
    brook_iceberg_partition_spec: str = "day"
    brook_iceberg_maintenance_interval_ms: int = 3600 * 1000
    brook_iceberg_snapshot_max_age_ms: int = 24 * 3600 * 1000

    @classmethod
    def from_strings(
        cls, overrides: Mapping[str, str], defaults: Mapping[str, str] | None = None
    ) -> TopicConfig:
        """Build from Kafka-named string configs; `defaults` are broker-level defaults for unset keys."""
        merged = {name: d.default for name, d in TOPIC_CONFIGS.items()}
        if defaults:
            merged.update(defaults)
        merged.update(overrides)
        kwargs: dict[str, object] = {}
        for f in dataclasses.fields(cls):
            raw = merged[f.name.replace("_", ".")]
            if f.name == "cleanup_policy":
                kwargs[f.name] = frozenset(p.strip() for p in raw.split(",") if p.strip())
            elif f.type == "int":
                kwargs[f.name] = int(raw)
            elif f.type == "bool":
                kwargs[f.name] = raw.lower() == "true"
            elif f.type == "float":
                kwargs[f.name] = float(raw)
            else:
                kwargs[f.name] = raw
        return cls(**kwargs)  # type: ignore[arg-type]

    @property
    def compacted(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """Age at which the active segment rolls: segment.ms, or max.compaction.lag.ms if shorter on a
        compacted topic (the cleaner never cleans the active segment), as Kafka's LogConfig."""
        return min(self.segment_ms, self.max_compaction_lag_ms) if self.compacted else self.segment_ms

    def iceberg_table(self, topic: str) -> str:
        """The topic's Iceberg table name (brook.iceberg.table, else the topic's name)."""
        return self.brook_iceberg_table or topic.replace(".", "_")

    @property
    def deletes(self) -> bool:
        return "delete" in self.cleanup_policy


def topic_defaults_of(*broker_configs: Mapping[str, str]) -> dict[str, str]:
    """The topic config defaults that dynamic broker configs set (a later mapping wins)."""
    out: dict[str, str] = {}
    for configs in broker_configs:
        out.update({BROKER_TOPIC_SYNONYMS[k]: v for k, v in configs.items() if k in BROKER_TOPIC_SYNONYMS})
    return out
