"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs for topics, and a read-only view of the
broker's own configs (BROKER, see brook.settings.described) and logger levels (BROKER_LOGGER)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from brook.broker.broker import Broker
from brook.config import BROKER_TOPIC_SYNONYMS, TOPIC_CONFIGS, validate_topic_config
from brook.protocol import messages
from brook.protocol.config_types import ConfigResource, ConfigSource
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey
from brook.settings.described import broker_configs, logger_levels

from . import dynamic_configs
from .authorized import Operation, ResourceType, require
from .context import Body

_TYPES = {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def config_entries(
    overrides: Mapping[str, str],
    broker_defaults: Mapping[str, str],
    keys: list[str] | None,
    synonyms: bool,
    documentation: bool,
    dynamic_defaults: Sequence[tuple[Mapping[str, str], ConfigSource]] = (),
) -> list[dict[str, Any]]:
    """Effective topic configs with where each value comes from, as DescribeConfigs reports them
    (`dynamic_defaults`: defaults set by dynamic broker configs, with their sources, first wins)."""
    out = []
    for name, d in TOPIC_CONFIGS.items():
        if keys is not None and name not in keys:
            continue
        chain: list[tuple[str, ConfigSource]] = []
        if name in overrides:
            chain.append((overrides[name], ConfigSource.TOPIC_CONFIG))
        chain += [(layer[name], source) for layer, source in dynamic_defaults if name in layer]
        if name in broker_defaults:
            chain.append((broker_defaults[name], ConfigSource.STATIC_BROKER_CONFIG))
        chain.append((d.default, ConfigSource.DEFAULT_CONFIG))
        value, source = chain[0]
        out.append(
            {
                "name": name,
                "value": value,
                "read_only": False,
                "config_source": source,
                "is_default": source == ConfigSource.DEFAULT_CONFIG,
                "is_sensitive": False,
                "synonyms": [{"name": name, "value": v, "source": s} for v, s in chain] if synonyms else [],
                "config_type": _TYPES[d.type],
                "documentation": d.doc if documentation else None,
            }
        )
    return out


def _broker_id(broker: Broker, name: str, empty_ok: bool) -> bool:
    """Whether a BROKER / BROKER_LOGGER resource names this broker (False: the cluster default, "").
    Kafka answers each broker's configs only on that broker (clients send them there)."""
    if name == "" and empty_ok:
        return False
    if name == "":
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    try:
        node = int(name)
    except ValueError:
        msg = f"Broker id must be an integer, but it is: {name}"
        raise KafkaError(ErrorCode.INVALID_REQUEST, msg) from None
    if node != broker.node_id:
        expected = f"{broker.node_id} or empty string" if empty_ok else str(broker.node_id)
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {expected}, but received {name}"
        )
    return True


def _broker_entries(
    broker: Broker, name: str, keys: list[str] | None, synonyms: bool, documentation: bool
) -> list[dict[str, Any]]:
    if not _broker_id(broker, name, empty_ok=True):
        return []  # the <default> resource: only the cluster-wide dynamic configs describe it
    return [
        {
            "name": c.name,
            "value": c.value,
            # As Kafka: the topic defaults' broker names are dynamic (AlterConfigs), the rest static.
            "read_only": c.name not in BROKER_TOPIC_SYNONYMS,
            "config_source": c.source,
            "is_default": c.source == ConfigSource.DEFAULT_CONFIG,
            "is_sensitive": False,
            "synonyms": [{"name": v.name, "value": v.value, "source": v.source} for v in c.synonyms]
            if synonyms
            else [],
            "config_type": c.config_type,
            "documentation": c.doc if documentation else None,
        }
        for c in broker_configs(broker.settings, keys)
    ]


def _logger_entries(broker: Broker, name: str, keys: list[str] | None) -> list[dict[str, Any]]:
    _broker_id(broker, name, empty_ok=False)
    return [
        {
            "name": logger,
            "value": level,
            "read_only": True,  # Brook does not alter logger levels over the protocol
            "config_source": ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
            "is_default": False,
            "is_sensitive": False,
            "synonyms": [],
            "config_type": 0,
            "documentation": None,
        }
        for logger, level in logger_levels().items()
        if keys is None or logger in keys
    ]


def _require(broker: Broker, op: Operation, config_type: int, name: str) -> None:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on what a config resource is: a topic, a group, or the cluster
    (a broker's or its loggers' configs)."""
    if config_type == ConfigResource.TOPIC:
        require(broker, op, ResourceType.TOPIC, name)
    elif config_type == ConfigResource.GROUP:
        require(broker, op, ResourceType.GROUP, name)
    elif config_type in (ConfigResource.BROKER, ConfigResource.BROKER_LOGGER):
        require(broker, op, ResourceType.CLUSTER)


async def handle_describe_configs(broker: Broker, hdr: RequestHeader) -> Body | None:
    version = hdr.api_version
    req = decode_request(ApiKey.DESCRIBE_CONFIGS, version, hdr.body)
    results: list[dict[str, Any]] = []
    for r in req.resources:
        keys = list(r.configuration_keys) if r.configuration_keys else None  # null or empty: all
        entry: dict[str, Any] = {
            "resource_type": r.resource_type,
            "resource_name": r.resource_name,
            "configs": [],
        }
        try:
            _require(broker, Operation.DESCRIBE_CONFIGS, r.resource_type, r.resource_name)
        except KafkaError as e:
            entry.update(error_code=e.code, error_message=e.message)
            results.append(entry)
            continue
        if r.resource_type == ConfigResource.TOPIC:
            meta = broker.replicas.topic(r.resource_name)
            if meta is None:
                entry.update(
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=f"topic '{r.resource_name}' does not exist",
                )
            else:
                entry.update(
                    error_code=0,
                    error_message=None,
                    configs=config_entries(
                        meta.configs,
                        broker.settings.topic_defaults,
                        keys,
                        bool(req.include_synonyms),
                        bool(req.include_documentation),
                        dynamic_configs.dynamic_topic_defaults(broker),
                    ),
                )
        elif r.resource_type in (ConfigResource.BROKER, ConfigResource.BROKER_LOGGER):
            try:
                if r.resource_type == ConfigResource.BROKER:
                    synonyms = bool(req.include_synonyms)
                    documentation = bool(req.include_documentation)
                    static = _broker_entries(broker, r.resource_name, keys, synonyms, documentation)
                    configs = dynamic_configs.with_dynamic_broker_configs(
                        broker, r.resource_name, static, keys, synonyms
                    )
                else:
                    configs = _logger_entries(broker, r.resource_name, keys)
                entry.update(error_code=0, error_message=None, configs=configs)
            except KafkaError as e:
                entry.update(error_code=e.code, error_message=e.message)
        elif r.resource_type == ConfigResource.GROUP:
            synonyms = bool(req.include_synonyms)
            configs = dynamic_configs.group_entries(broker, r.resource_name, keys, synonyms)
            entry.update(error_code=0, error_message=None, configs=configs)
        else:
            entry.update(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message=f"resource type {r.resource_type} is not supported",
            )
        results.append(entry)
    return messages.encode_response(
        ApiKey.DESCRIBE_CONFIGS, version, {"throttle_time_ms": 0, "results": results}
    )


async def _alter(
    broker: Broker, resource_type: int, name: str, new: dict[str, str], validate_only: bool
) -> None:
    if resource_type != ConfigResource.TOPIC:
        return await dynamic_configs.alter(broker, resource_type, name, new, validate_only)
    if broker.replicas.topic(name) is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{name}' does not exist")
    for k, v in new.items():
        if (err := validate_topic_config(k, v)) is not None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, err)
    if not validate_only:
        await broker.set_topic_configs(name, new)


class _Resource(Protocol):
    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...


_R = TypeVar("_R", bound=_Resource)


class _AlterRequest(Protocol[_R]):
    """AlterConfigs and IncrementalAlterConfigs, as far as applying them goes."""

    @property
    def resources(self) -> list[_R]: ...
    @property
    def validate_only(self) -> bool: ...


async def _alter_each(
    broker: Broker, req: _AlterRequest[_R], new_configs: Callable[[_R], dict[str, str]]
) -> list[dict[str, Any]]:
    """Apply `new_configs(resource)` to each resource; one result (error or not) per resource."""
    results: list[dict[str, Any]] = []
    for r in req.resources:
        result = {
            "error_code": 0,
            "error_message": None,
            "resource_type": r.resource_type,
            "resource_name": r.resource_name,
        }
        try:
            _require(broker, Operation.ALTER_CONFIGS, r.resource_type, r.resource_name)
            await _alter(broker, r.resource_type, r.resource_name, new_configs(r), bool(req.validate_only))
        except KafkaError as e:
            result.update(error_code=e.code, error_message=e.message)
        results.append(result)
    return results


def _incremental(broker: Broker, r: Any) -> dict[str, str]:
    current = dynamic_configs.current(broker, r.resource_type, r.resource_name)
    for c in r.configs:
        d, unset = dynamic_configs.definition(broker, r.resource_type, c.name)
        if c.config_operation == SET:
            current[c.name] = c.value
        elif c.config_operation == DELETE:
            current.pop(c.name, None)
        elif c.config_operation in (APPEND, SUBTRACT) and d is not None and d.type == "list":
            items = [x for x in current.get(c.name, unset).split(",") if x]
            delta = [x for x in (c.value or "").split(",") if x]
            if c.config_operation == APPEND:
                items += [x for x in delta if x not in items]
            else:
                items = [x for x in items if x not in delta]
            current[c.name] = ",".join(items)
        else:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG, f"operation {c.config_operation} is not valid for {c.name}"
            )
    return current


async def handle_incremental_alter_configs(broker: Broker, hdr: RequestHeader) -> Body | None:
    req = decode_request(ApiKey.INCREMENTAL_ALTER_CONFIGS, hdr.api_version, hdr.body)
    results = await _alter_each(broker, req, lambda r: _incremental(broker, r))
    return messages.encode_response(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, hdr.api_version, {"throttle_time_ms": 0, "responses": results}
    )


async def handle_alter_configs(broker: Broker, hdr: RequestHeader) -> Body | None:
    req = decode_request(ApiKey.ALTER_CONFIGS, hdr.api_version, hdr.body)
    # AlterConfigs replaces the whole set of overrides.
    results = await _alter_each(
        broker, req, lambda r: {c.name: c.value for c in r.configs if c.value is not None}
    )
    return messages.encode_response(
        ApiKey.ALTER_CONFIGS, hdr.api_version, {"throttle_time_ms": 0, "responses": results}
    )
