"""Config resources other than topics, for DescribeConfigs, AlterConfigs and IncrementalAlterConfigs:
dynamic broker configs (a broker id, or "" for every broker) and group configs (KIP-848).

Dynamic broker configs live in the cluster's metadata; those named after a topic default (log.retention.ms,
compression.type, ...: brook.config.BROKER_TOPIC_SYNONYMS) change it on the brokers they apply to, the
rest are kept and described (see brook.config.STATIC_BROKER_CONFIGS). Invalid broker configs are
INVALID_REQUEST and invalid group configs INVALID_CONFIG, as Kafka answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from brook.broker.broker import Broker
from brook.config import (
    BROKER_TOPIC_SYNONYMS,
    GROUP_CONFIGS,
    TOPIC_CONFIGS,
    ConfigDef,
    validate_broker_config,
    validate_group_configs,
)
from brook.protocol.config_types import ConfigResource, ConfigSource
from brook.protocol.errors import ErrorCode, KafkaError

_TYPES = {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}
_KINDS: dict[int, str] = {ConfigResource.BROKER: "broker", ConfigResource.GROUP: "group"}


def check_broker_name(name: str) -> None:
    if name and not (name.isdigit() and name.isascii()):
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"broker resource name must be an id or empty, got '{name}'"
        )


def current(broker: Broker, resource_type: int, name: str) -> dict[str, str]:
    """The resource's config overrides as they are stored (a topic's, or an entity's dynamic ones)."""
    if resource_type == ConfigResource.TOPIC:
        meta = broker.replicas.topic(name)
        return dict(meta.configs) if meta else {}
    kind = _KINDS.get(resource_type)
    if kind is None:
        return {}
    if resource_type == ConfigResource.BROKER:
        check_broker_name(name)
    return broker.entity_configs(kind, name)


def definition(broker: Broker, resource_type: int, name: str) -> tuple[ConfigDef | None, str]:
    """(the config's definition, its value when not set) for APPEND and SUBTRACT on list configs."""
    if resource_type == ConfigResource.TOPIC:
        d = TOPIC_CONFIGS.get(name)
        return d, d.default if d else ""
    if resource_type == ConfigResource.GROUP:
        d = GROUP_CONFIGS.get(name)
        return d, d.default if d else ""
    topic_name = BROKER_TOPIC_SYNONYMS.get(name)
    if resource_type != ConfigResource.BROKER or topic_name is None:
        return None, ""
    d = TOPIC_CONFIGS[topic_name]
    return d, broker.settings.topic_defaults.get(topic_name, d.default)


async def alter(
    broker: Broker, resource_type: int, name: str, new: dict[str, str], validate_only: bool
) -> None:
    """Replace a BROKER or GROUP resource's dynamic configs with `new` (validated first)."""
    if resource_type == ConfigResource.BROKER:
        check_broker_name(name)
        for k, v in new.items():
            if (err := validate_broker_config(k, v)) is not None:
                raise KafkaError(ErrorCode.INVALID_REQUEST, err)
    elif resource_type == ConfigResource.GROUP:
        if not name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "a group resource needs a group id")
        if (err := validate_group_configs(new)) is not None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, err)
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"resource type {resource_type} has no alterable configs")
    if not validate_only:
        await broker.set_entity_configs(_KINDS[resource_type], name, new)


def _entry(
    name: str,
    value: str,
    source: ConfigSource,
    d: ConfigDef | None,
    synonyms: list[tuple[str, str, ConfigSource]] | None,
) -> dict[str, Any]:
    return {
        "name": name,
        "value": value,
        "read_only": False,
        "config_source": source,
        "is_default": source == ConfigSource.DEFAULT_CONFIG,
        "is_sensitive": False,
        "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in synonyms or []],
        "config_type": _TYPES[d.type] if d else 2,
        "documentation": None,
    }


def with_dynamic_broker_configs(
    broker: Broker, name: str, static: list[dict[str, Any]], keys: list[str] | None, synonyms: bool
) -> list[dict[str, Any]]:
    """DescribeConfigs(BROKER): the dynamic configs over `static` entries (for "", the cluster-wide
    dynamic configs alone, as Kafka describes its <default> resource)."""
    check_broker_name(name)
    everyone = broker.entity_configs("broker", "")
    mine = broker.entity_configs("broker", name) if name else {}
    dynamic: dict[str, dict[str, Any]] = {}
    for k in sorted(everyone.keys() | mine.keys()):
        if keys is not None and k not in keys:
            continue
        layers = [(k, mine[k], ConfigSource.DYNAMIC_BROKER_CONFIG)] if k in mine else []
        layers += [(k, everyone[k], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)] if k in everyone else []
        d = TOPIC_CONFIGS.get(BROKER_TOPIC_SYNONYMS.get(k, ""))
        dynamic[k] = _entry(k, layers[0][1], layers[0][2], d, layers if synonyms else None)
    if not name:
        return list(dynamic.values())
    out = []
    for e in static:
        over = dynamic.pop(e["name"], None)
        if over is not None:  # Kafka's chain goes on below the dynamic values: static, then default
            over["synonyms"] += e["synonyms"]
        out.append(over or e)
    return out + list(dynamic.values())


def dynamic_topic_defaults(broker: Broker) -> list[tuple[dict[str, str], ConfigSource]]:
    """This broker's dynamic topic defaults by source, its own first, keyed by topic config name."""
    return [
        ({BROKER_TOPIC_SYNONYMS[k]: v for k, v in configs.items() if k in BROKER_TOPIC_SYNONYMS}, source)
        for configs, source in (
            (broker.entity_configs("broker", str(broker.node_id)), ConfigSource.DYNAMIC_BROKER_CONFIG),
            (broker.entity_configs("broker", ""), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        )
    ]


def group_entries(broker: Broker, group: str, keys: list[str] | None, synonyms: bool) -> list[dict[str, Any]]:
    """DescribeConfigs(GROUP): every group config, overridden or default (a group need not exist)."""
    overrides: Mapping[str, str] = broker.entity_configs("group", group)
    out = []
    for k, d in GROUP_CONFIGS.items():
        if keys is not None and k not in keys:
            continue
        layers = [(k, overrides[k], ConfigSource.GROUP_CONFIG)] if k in overrides else []
        layers.append((k, d.default, ConfigSource.DEFAULT_CONFIG))
        out.append(_entry(k, layers[0][1], layers[0][2], d, layers if synonyms else None))
    return out
