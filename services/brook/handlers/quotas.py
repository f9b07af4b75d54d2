"""DescribeClientQuotas and AlterClientQuotas (KIP-546): quota entities (user, client-id, ip; a null
name is the <default> entity) and their configs, kept as dynamic configs of kind "quota" (etcd or
meta.json) and enforced by every broker (brook.security.quotas)."""

from __future__ import annotations

from typing import Any

from brook.broker.broker import Broker
from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey
from brook.security.quotas import ENTITY_TYPES, Entity, check_entity, entity_key, parse_entity_key

from .authorized import Operation, allowed_cluster
from .context import Body

EXACT, DEFAULT_MATCH, SPECIFIED = 0, 1, 2
_LONG_KEYS = frozenset({"producer_byte_rate", "consumer_byte_rate", "connection_creation_rate"})


def _stored(broker: Broker) -> dict[Entity, dict[str, str]]:
    out: dict[Entity, dict[str, str]] = {}
    for (kind, name), values in broker.all_entity_configs().items():
        if kind == "quota":
            try:
                out[parse_entity_key(name)] = dict(values)
            except ValueError:
                continue
    return out


def _entity_doc(entity: Entity) -> list[dict[str, Any]]:
    return [{"entity_type": t, "entity_name": n} for t, n in entity]


def _matches(entity: Entity, components: list[Any], strict: bool) -> bool:
    names = dict(entity)
    for c in components:
        if c.entity_type not in names:
            return False
        name = names[c.entity_type]
        if c.match_type == EXACT and name != c.match:
            return False
        if c.match_type == DEFAULT_MATCH and name is not None:
            return False
        if c.match_type == SPECIFIED and name is None:
            return False
    return not strict or len(names) == len(components)


async def handle_describe_client_quotas(broker: Broker, hdr: RequestHeader) -> Body | None:
    req = decode_request(ApiKey.DESCRIBE_CLIENT_QUOTAS, hdr.api_version, hdr.body)
    body: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": []}
    types = [c.entity_type for c in req.components]
    # Kafka's checks in its order; a refusal answers null entries.
    refusal: tuple[ErrorCode, str] | None = None
    if not allowed_cluster(broker, Operation.DESCRIBE_CONFIGS):
        refusal = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "DESCRIBE_CONFIGS denied"
    elif any(t not in ENTITY_TYPES for t in types):
        refusal = ErrorCode.UNSUPPORTED_VERSION, f"custom entity types are not supported: {types}"
    elif len(set(types)) != len(types):
        refusal = ErrorCode.INVALID_REQUEST, f"an entity type appears twice in the filter: {types}"
    elif any(c.match_type not in (EXACT, DEFAULT_MATCH, SPECIFIED) for c in req.components):
        refusal = ErrorCode.INVALID_REQUEST, "unknown match type"
    elif any((c.match_type == EXACT) != (c.match is not None) for c in req.components):
        refusal = ErrorCode.INVALID_REQUEST, "a match string is given with EXACT, and only with EXACT"
    if refusal is not None:
        body.update(error_code=refusal[0], error_message=refusal[1], entries=None)
    else:
        body["entries"] = [
            {
                "entity": _entity_doc(entity),
                "values": [{"key": k, "value": float(v)} for k, v in sorted(values.items())],
            }
            for entity, values in sorted(_stored(broker).items(), key=lambda e: entity_key(e[0]))
            if values and _matches(entity, req.components, bool(req.strict))
        ]
    return messages.encode_response(ApiKey.DESCRIBE_CLIENT_QUOTAS, hdr.api_version, body)


def _changed(current: dict[str, str], ops: list[Any]) -> dict[str, str]:
    new = dict(current)
    keys = [o.key for o in ops]
    if len(set(keys)) != len(keys):
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"a quota key is altered twice: {keys}")
    for o in ops:
        if o.remove:
            new.pop(o.key, None)
            continue
        value = float(o.value)
        if value < 0:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"{o.key} must not be negative, got {value}")
        if o.key in _LONG_KEYS and not value.is_integer():
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"{o.key} must be a whole number, got {value}")
        new[o.key] = str(int(value)) if o.key in _LONG_KEYS else repr(value)
    return new


async def handle_alter_client_quotas(broker: Broker, hdr: RequestHeader) -> Body | None:
    req = decode_request(ApiKey.ALTER_CLIENT_QUOTAS, hdr.api_version, hdr.body)
    may = allowed_cluster(broker, Operation.ALTER_CONFIGS)
    stored = _stored(broker)
    results: list[dict[str, Any]] = []
    for e in req.entries:
        raw = [(d.entity_type, d.entity_name) for d in e.entity]
        entry: dict[str, Any] = {"error_code": 0, "error_message": None, "entity": _entity_doc(tuple(raw))}
        try:
            if not may:
                raise KafkaError(
                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "ALTER_CONFIGS on the cluster denied"
                )
            entity: Entity = tuple(
                sorted(raw, key=lambda c: ENTITY_TYPES.index(c[0]) if c[0] in ENTITY_TYPES else 9)
            )
            if (why := check_entity(entity, {o.key for o in e.ops})) is not None:
                raise KafkaError(ErrorCode.INVALID_REQUEST, why)
            new = _changed(stored.get(entity, {}), list(e.ops))
            if not req.validate_only:
                await broker.set_entity_configs("quota", entity_key(entity), new)
                stored[entity] = new
        except KafkaError as err:
            entry.update(error_code=err.code, error_message=err.message)
        results.append(entry)
    return messages.encode_response(
        ApiKey.ALTER_CLIENT_QUOTAS, hdr.api_version, {"throttle_time_ms": 0, "entries": results}
    )
