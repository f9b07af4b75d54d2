"""Topic and broker configuration: one table of defaults, named as in Kafka.

Topic configs are kept as strings on the wire and in metadata (as Kafka does) and parsed into a typed
`TopicConfig` where the log and the handlers use them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

ConfigType = Literal["int", "long", "string", "boolean", "list", "double"]

# compression.type values, as Kafka accepts them: `producer` stores batches as sent.
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: str
    doc: str
    valid: tuple[str, ...] = ()  # allowed values for enumerations (empty: any)
    minimum: int | None = None


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
        ConfigDef("min.cleanable.dirty.ratio", "double", "0.5", "dirty ratio that triggers the cleaner"),
        ConfigDef(
            "compression.type",
            "string",
            "producer",
            "producer keeps batches as sent; any other codec recompresses batches that differ on append",
            valid=COMPRESSION_TYPES,
        ),
    )
}


def validate_topic_config(name: str, value: str | None) -> str | None:
    """Return an error message for an invalid (name, value) pair, or None when it is acceptable."""
    d = TOPIC_CONFIGS.get(name)
    if d is None:
        return f"unknown topic config '{name}'"
    if value is None:
        return None
    if d.type in ("int", "long"):
        try:
            n = int(value)
        except ValueError:
            return f"{name} must be an integer, got '{value}'"
        if d.minimum is not None and n < d.minimum:
            return f"{name} must be >= {d.minimum}, got {n}"
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
    def deletes(self) -> bool:
        return "delete" in self.cleanup_policy
