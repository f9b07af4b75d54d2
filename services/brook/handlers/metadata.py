"""Metadata and DescribeCluster: brokers, controller, topics and their partitions' leaders."""

from __future__ import annotations

from typing import Any

from brook.broker.broker import Broker
from brook.broker.topics import TopicMeta, topic_name_error
from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey

from .authorized import (
    CLUSTER_NAME,
    Operation,
    ResourceType,
    allowed,
    authorized_operations,
    may_create_topic,
)
from .context import LISTENER_NAME, Body, as_uuid, uuid_bytes


def _topic_entry(broker: Broker, meta: TopicMeta, with_ops: object) -> dict[str, Any]:
    ops = authorized_operations(broker, ResourceType.TOPIC, meta.name, with_ops)
    parts = []
    for i in range(meta.partitions):
        leader, epoch, replicas, isr = broker.partition_state(meta.name, i)
        parts.append(
            {
                "error_code": 0 if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                "partition_index": i,
                "leader_id": leader,
                "leader_epoch": epoch,
                "replica_nodes": replicas,
                "isr_nodes": isr,
                "offline_replicas": [],
            }
        )
    return {
        "error_code": 0,
        "name": meta.name,
        "topic_id": as_uuid(meta.topic_id),
        "is_internal": meta.is_internal,
        "partitions": parts,
        "authorized_operations": ops,
    }


def _error_entry(name: str | None, code: ErrorCode, topic_id: bytes = bytes(16)) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "topic_id": as_uuid(topic_id),
        "is_internal": False,
        "partitions": [],
    }


async def handle_metadata(broker: Broker, hdr: RequestHeader) -> Body | None:
    version = hdr.api_version
    req = decode_request(ApiKey.METADATA, version, hdr.body)
    allow_create = bool(req.allow_auto_topic_creation) and broker.settings.auto_create_topics
    ops = req.include_topic_authorized_operations
    topics: list[dict[str, Any]] = []
    if req.topics is None or (version == 0 and not req.topics):
        # All topics: those the principal may describe (the others are not listed at all).
        topics = [
            _topic_entry(broker, m, ops)
            for m in broker.replicas.topics().values()
            if allowed(broker, Operation.DESCRIBE, ResourceType.TOPIC, m.name)
        ]
    else:
        for t in req.topics:
            name = t.name
            if name is None:  # by topic id (v10+); an id not to be described is as good as unknown
                meta = broker.replicas.topic_by_id(uuid_bytes(t.topic_id))
                topics.append(
                    _topic_entry(broker, meta, ops)
                    if meta and allowed(broker, Operation.DESCRIBE, ResourceType.TOPIC, meta.name)
                    else _error_entry(None, ErrorCode.UNKNOWN_TOPIC_ID, uuid_bytes(t.topic_id))
                )
                continue
            if not allowed(broker, Operation.DESCRIBE, ResourceType.TOPIC, name):
                topics.append(_error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            meta = broker.replicas.topic(name)
            if meta is None:
                if topic_name_error(name) is not None:
                    topics.append(_error_entry(name, ErrorCode.INVALID_TOPIC_EXCEPTION))
                    continue
                if not allow_create:
                    topics.append(_error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                if not may_create_topic(broker, name):
                    topics.append(_error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                    continue
                try:
                    meta = await broker.create_topic(name)
                except KafkaError as e:
                    topics.append(_error_entry(name, e.code))
                    continue
            topics.append(_topic_entry(broker, meta, ops))
    return messages.encode_response(
        ApiKey.METADATA,
        version,
        {
            "throttle_time_ms": 0,
            "brokers": [
                {"node_id": n, "host": h, "port": p, "rack": r}
                for n, h, p, r in broker.brokers(LISTENER_NAME.get())
            ],
            "cluster_id": broker.cluster_id,
            "controller_id": broker.controller_id,
            "topics": topics,
            "error_code": 0,
            "authorized_operations": authorized_operations(
                broker,
                ResourceType.CLUSTER,
                CLUSTER_NAME,
                req.include_cluster_authorized_operations,
            ),
        },
    )


async def handle_describe_cluster(broker: Broker, hdr: RequestHeader) -> Body | None:
    req = decode_request(ApiKey.DESCRIBE_CLUSTER, hdr.api_version, hdr.body)
    return messages.encode_response(
        ApiKey.DESCRIBE_CLUSTER,
        hdr.api_version,
        {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": None,
            "endpoint_type": 1,
            "cluster_id": broker.cluster_id,
            "controller_id": broker.controller_id,
            "brokers": [
                {"broker_id": n, "host": h, "port": p, "rack": r, "is_fenced": False}
                for n, h, p, r in broker.brokers(LISTENER_NAME.get())
            ],
            "authorized_operations": authorized_operations(
                broker, ResourceType.CLUSTER, CLUSTER_NAME, req.include_cluster_authorized_operations
            ),
        },
    )
