"""Broker configuration with Kafka names: which names a Cluster's `spec.config` accepts and where each goes.

Topic-level names (the broker's own table, `brook.config.TOPIC_CONFIGS`) become broker-wide topic
defaults (`--topic-default name=value`). Broker properties (every name `brook broker --config` takes:
brook.settings.properties) are rendered into the server.properties the brokers start with. Names the
operator sets itself (listeners and security, ids, directories, rack) are refused, and so are Kafka
properties Brook ignores, with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping

import javaproperties

from brook.config import TOPIC_CONFIGS, validate_topic_config
from brook.settings.options import OPTIONS, SECURITY
from brook.settings.properties import KNOWN, check, ignored_reason

# Set by the operator from the Cluster's other fields (ids, rack, storage, spec.listeners, spec.security);
# refused in spec.config.
OPERATOR_OWNED = frozenset(
    {"broker.id", "node.id", "broker.rack", "log.dirs", "log.dir"}
    | {o.kafka for o in OPTIONS if o.kafka and o.panel == SECURITY}
)
PROPERTIES_FILE = "server.properties"


def normalize_value(value: object) -> str | None:
    """Kafka configs are strings; YAML scalars are accepted as their Kafka spelling. None: not a scalar."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    return None


def validate_broker_config(config: Mapping[str, str]) -> list[str]:
    """Error messages for a Cluster's normalized spec.config (empty when every entry is acceptable)."""
    errors: list[str] = []
    for name, value in sorted(config.items()):
        if name in OPERATOR_OWNED:
            errors.append(f"{name} is set by the operator and cannot be configured")
        elif name in TOPIC_CONFIGS:
            if (err := validate_topic_config(name, value)) is not None:
                errors.append(err)
        elif (reason := ignored_reason(name)) is not None:
            errors.append(f"{name} means nothing to Brook: {reason}")
        elif name in KNOWN:
            if (err := check(name, value)) is not None:
                errors.append(f"{name}={value}: {err}")
        else:
            errors.append(f"unknown broker config '{name}'")
    return errors


def topic_defaults(config: Mapping[str, str]) -> dict[str, str]:
    """The topic-level entries of a Cluster's config (broker-wide topic defaults), sorted by name."""
    return {k: config[k] for k in sorted(config) if k in TOPIC_CONFIGS}


def server_properties(config: Mapping[str, str]) -> str:
    """The broker-level entries as the server.properties every broker starts with (`--config`)."""
    broker = {k: v for k, v in config.items() if k not in TOPIC_CONFIGS}
    header = "Rendered by the Brook operator from the Cluster's spec.config (Kafka's names)."
    return javaproperties.dumps(broker, comments=header, timestamp=False, sort_keys=True)


def min_insync_replicas(config: Mapping[str, str]) -> int:
    """The cluster-wide default min.insync.replicas (topic overrides come from the cluster itself)."""
    raw = config.get("min.insync.replicas", TOPIC_CONFIGS["min.insync.replicas"].default)
    try:
        return max(1, int(raw))
    except ValueError:
        return 1
