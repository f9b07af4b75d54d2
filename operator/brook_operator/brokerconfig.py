"""Broker configuration with Kafka names: which names a Cluster's `spec.config` accepts and where each goes.

Topic-level names (the broker's own table, `brook.config.TOPIC_CONFIGS`) become broker-wide topic
defaults (`--topic-default name=value`). Broker settings map to the broker's `BROOK_*` environment
variables. Names the operator sets itself (listeners, ids, directories, rack) are refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from brook.config import TOPIC_CONFIGS, validate_topic_config


@dataclass(frozen=True, slots=True)
class BrokerSetting:
    name: str  # Kafka name
    env: str  # the broker's environment variable
    type: Literal["int", "long", "boolean"]
    minimum: int | None = None


BROKER_SETTINGS: dict[str, BrokerSetting] = {
    s.name: s
    for s in (
        BrokerSetting("auto.create.topics.enable", "BROOK_AUTO_CREATE_TOPICS", "boolean"),
        BrokerSetting("num.partitions", "BROOK_NUM_PARTITIONS", "int", 1),
        BrokerSetting("default.replication.factor", "BROOK_DEFAULT_REPLICATION_FACTOR", "int", 1),
        BrokerSetting("socket.request.max.bytes", "BROOK_MAX_REQUEST_BYTES", "int", 1),
        BrokerSetting("log.retention.check.interval.ms", "BROOK_RETENTION_CHECK_INTERVAL_MS", "long", 1),
        BrokerSetting("log.flush.scheduler.interval.ms", "BROOK_FLUSH_CHECK_INTERVAL_MS", "long", 1),
        BrokerSetting("leader.replication.throttled.rate", "BROOK_REPLICATION_THROTTLED_RATE", "long", 0),
        BrokerSetting("replica.lag.time.max.ms", "BROOK_REPLICA_LAG_TIME_MAX_MS", "long", 1),
        BrokerSetting("offsets.topic.replication.factor", "BROOK_OFFSETS_TOPIC_REPLICATION_FACTOR", "int", 1),
        BrokerSetting("offsets.topic.num.partitions", "BROOK_OFFSETS_TOPIC_PARTITIONS", "int", 1),
        BrokerSetting("offsets.retention.minutes", "BROOK_OFFSETS_RETENTION_MINUTES", "int", 1),
        BrokerSetting("group.initial.rebalance.delay.ms", "BROOK_GROUP_INITIAL_REBALANCE_DELAY_MS", "int", 0),
    )
}

# Set by the operator from the Cluster's other fields; refused in spec.config.
OPERATOR_OWNED = frozenset(
    {
        "broker.id",
        "node.id",
        "broker.rack",
        "listeners",
        "advertised.listeners",
        "log.dirs",
        "log.dir",
        "etcd.endpoints",
    }
)


def normalize_value(value: object) -> str | None:
    """Kafka configs are strings; YAML scalars are accepted as their Kafka spelling. None: not a scalar."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    return None


def _validate_setting(s: BrokerSetting, value: str) -> str | None:
    if s.type == "boolean":
        if value.lower() not in ("true", "false"):
            return f"{s.name} must be true or false, got '{value}'"
        return None
    try:
        n = int(value)
    except ValueError:
        return f"{s.name} must be an integer, got '{value}'"
    if s.minimum is not None and n < s.minimum:
        return f"{s.name} must be >= {s.minimum}, got {n}"
    return None


def validate_broker_config(config: Mapping[str, str]) -> list[str]:
    """Error messages for a Cluster's normalized spec.config (empty when every entry is acceptable)."""
    errors: list[str] = []
    for name, value in sorted(config.items()):
        if name in OPERATOR_OWNED:
            errors.append(f"{name} is set by the operator and cannot be configured")
        elif name in BROKER_SETTINGS:
            if (err := _validate_setting(BROKER_SETTINGS[name], value)) is not None:
                errors.append(err)
        elif name in TOPIC_CONFIGS:
            if (err := validate_topic_config(name, value)) is not None:
                errors.append(err)
        else:
            errors.append(f"unknown broker config '{name}'")
    return errors


def topic_defaults(config: Mapping[str, str]) -> dict[str, str]:
    """The topic-level entries of a Cluster's config (broker-wide topic defaults), sorted by name."""
    return {k: config[k] for k in sorted(config) if k in TOPIC_CONFIGS}


def broker_env(config: Mapping[str, str]) -> dict[str, str]:
    """The broker-setting entries as BROOK_* environment variables, sorted by variable name."""
    env = {BROKER_SETTINGS[k].env: config[k] for k in config if k in BROKER_SETTINGS}
    for k, s in BROKER_SETTINGS.items():
        if s.type == "boolean" and s.env in env:
            env[s.env] = config[k].lower()
    return dict(sorted(env.items()))


def min_insync_replicas(config: Mapping[str, str]) -> int:
    """The cluster-wide default min.insync.replicas (topic overrides come from the cluster itself)."""
    raw = config.get("min.insync.replicas", TOPIC_CONFIGS["min.insync.replicas"].default)
    try:
        return max(1, int(raw))
    except ValueError:
        return 1
