"""CreateTopics, DeleteTopics, CreatePartitions."""

from __future__ import annotations

from typing import Any

from brook.broker.broker import Broker
from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey

from .authorized import Operation, ResourceType, allowed, may_create_topic, require
from .configs import config_entries
from .context import ZERO_UUID, Body, as_uuid, uuid_bytes
from .dynamic_configs import dynamic_topic_defaults


async def handle_create_topics(broker: Broker, hdr: RequestHeader) -> Body | None:
    version = hdr.api_version
    req = decode_request(ApiKey.CREATE_TOPICS, version, hdr.body)
    results: list[dict[str, Any]] = []
    # A name given twice is refused once, and neither copy created (Kafka's ControllerApis).
    names = [t.name for t in req.topics]
    duplicates = {n for n in names if names.count(n) > 1}
    for name in sorted(duplicates):
        results.append(
            _duplicate(name) | {"topic_id": ZERO_UUID, "num_partitions": -1, "replication_factor": -1}
        )
    for t in req.topics:
        if t.name in duplicates:
            continue
        configs = {c.name: c.value for c in t.configs}
        entry: dict[str, Any] = {
            "name": t.name,
            "topic_id": ZERO_UUID,
            "num_partitions": -1,
            "replication_factor": -1,
        }
        try:
            if not may_create_topic(broker, t.name):
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"CREATE of topic '{t.name}' denied")
            n, rf = t.num_partitions, t.replication_factor
            assignment = _manual_assignment(t) if t.assignments else None
            if req.validate_only:
                meta = await broker.create_topic(t.name, n, rf, configs, True, assignment)
                entry.update(
                    error_code=0,
                    error_message=None,
                    num_partitions=meta.partitions,
                    replication_factor=meta.replication_factor,
                )
            else:
                meta = await broker.create_topic(t.name, n, rf, configs, False, assignment)
                entry.update(
                    error_code=0,
                    error_message=None,
                    topic_id=as_uuid(meta.topic_id),
                    num_partitions=meta.partitions,
                    replication_factor=meta.replication_factor,
                    configs=[
                        {
                            k: v
                            for k, v in c.items()
                            if k in ("name", "value", "read_only", "config_source", "is_sensitive")
                        }
                        for c in config_entries(
                            meta.configs,
                            broker.settings.topic_defaults,
                            None,
                            False,
                            False,
                            dynamic_topic_defaults(broker),
                        )
                    ],
                )
        except KafkaError as e:
            entry.update(error_code=e.code, error_message=e.message)
        results.append(entry)
    return messages.encode_response(ApiKey.CREATE_TOPICS, version, {"throttle_time_ms": 0, "topics": results})


def _duplicate(name: str) -> dict[str, Any]:
    return {"name": name, "error_code": ErrorCode.INVALID_REQUEST, "error_message": "Duplicate topic name."}


def _manual_assignment(t: Any) -> list[list[int]]:
    """CreateTopics' replicas per partition, which come instead of the counts (Kafka's rules)."""
    if t.num_partitions != -1 or t.replication_factor != -1:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            "with a manual partition assignment, num_partitions and replication_factor must be -1",
        )
    by_index = {a.partition_index: list(a.broker_ids) for a in t.assignments}
    if sorted(by_index) != list(range(len(t.assignments))):
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "the manual assignment's partitions must be numbered 0, 1, 2, ... each once",
        )
    return [by_index[i] for i in range(len(by_index))]


async def handle_delete_topics(broker: Broker, hdr: RequestHeader) -> Body | None:
    version = hdr.api_version
    req = decode_request(ApiKey.DELETE_TOPICS, version, hdr.body)
    targets: list[tuple[str | None, bytes]] = []
    if version >= 6:
        targets = [(t.name, uuid_bytes(t.topic_id)) for t in req.topics]
    else:
        targets = [(name, bytes(16)) for name in req.topic_names]
    results: list[dict[str, Any]] = []
    # Names or ids given twice are refused once each and nothing of them deleted (Kafka's ControllerApis).
    seen = [n if n is not None else tid for n, tid in targets]
    duplicates = {k for k in seen if seen.count(k) > 1}
    for key in duplicates:
        if isinstance(key, str):
            results.append(_duplicate(key) | {"topic_id": ZERO_UUID})
        else:
            results.append({"name": None, "topic_id": as_uuid(key), "error_code": ErrorCode.INVALID_REQUEST,
                            "error_message": "Duplicate topic id."})  # fmt: skip
    for name, tid in targets:
        if (name if name is not None else tid) in duplicates:
            continue
        try:
            if name is None:
                meta = broker.replicas.topic_by_id(tid)
                if meta is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic with id {as_uuid(tid)}")
                name = meta.name
            if not allowed(broker, Operation.DELETE, ResourceType.TOPIC, name):
                # Kafka hides a topic asked for by id from whoever may not describe it.
                by_id = tid != bytes(16) and not allowed(broker, Operation.DESCRIBE, ResourceType.TOPIC, name)
                if by_id:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic with id {as_uuid(tid)}")
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"DELETE of topic '{name}' denied")
            meta = await broker.delete_topic(name)
            results.append(
                {"name": name, "topic_id": as_uuid(meta.topic_id), "error_code": 0, "error_message": None}
            )
        except KafkaError as e:
            results.append(
                {"name": name, "topic_id": as_uuid(tid), "error_code": e.code, "error_message": e.message}
            )
    return messages.encode_response(
        ApiKey.DELETE_TOPICS, version, {"throttle_time_ms": 0, "responses": results}
    )


async def handle_create_partitions(broker: Broker, hdr: RequestHeader) -> Body | None:
    version = hdr.api_version
    req = decode_request(ApiKey.CREATE_PARTITIONS, version, hdr.body)
    names = [t.name for t in req.topics]
    duplicates = {n for n in names if names.count(n) > 1}
    results: list[dict[str, Any]] = [_duplicate(n) for n in sorted(duplicates)]
    for t in req.topics:
        if t.name in duplicates:
            continue
        try:
            require(broker, Operation.ALTER, ResourceType.TOPIC, t.name)
            assignment = [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None
            await broker.add_partitions(t.name, t.count, bool(req.validate_only), assignment)
            results.append({"name": t.name, "error_code": 0, "error_message": None})
        except KafkaError as e:
            results.append({"name": t.name, "error_code": e.code, "error_message": e.message})
    return messages.encode_response(
        ApiKey.CREATE_PARTITIONS, version, {"throttle_time_ms": 0, "results": results}
    )
