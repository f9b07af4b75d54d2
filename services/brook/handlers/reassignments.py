"""AlterPartitionReassignments and ListPartitionReassignments (the controller carries them out; a single
broker has nowhere to move partitions: INVALID_REQUEST, and it lists none)."""

from __future__ import annotations

from typing import Any

from brook.broker.broker import Broker
from brook.protocol import messages
from brook.protocol.errors import KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey

from .authorized import CLUSTER_DENIED, Operation, allowed_cluster
from .context import Body


async def handle_alter_partition_reassignments(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, v, hdr.body)
    if not allowed_cluster(broker, Operation.ALTER):
        return messages.encode_response(ApiKey.ALTER_PARTITION_REASSIGNMENTS, v, CLUSTER_DENIED)
    responses: list[dict[str, Any]] = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            entry: dict[str, Any] = {
                "partition_index": p.partition_index,
                "error_code": 0,
                "error_message": None,
            }
            try:
                target = None if p.replicas is None else list(p.replicas)
                await broker.metadata.reassign(t.name, p.partition_index, target)
            except KafkaError as e:
                entry.update(error_code=e.code, error_message=e.message)
            parts.append(entry)
        responses.append({"name": t.name, "partitions": parts})
    return messages.encode_response(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        v,
        {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": responses},
    )


async def handle_list_partition_reassignments(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.LIST_PARTITION_REASSIGNMENTS, v, hdr.body)
    if not allowed_cluster(broker, Operation.DESCRIBE):
        return messages.encode_response(ApiKey.LIST_PARTITION_REASSIGNMENTS, v, CLUSTER_DENIED)
    wanted = None if req.topics is None else {(t.name, i) for t in req.topics for i in t.partition_indexes}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), r in sorted(broker.metadata.reassignments.items()):  # none on a single node
        if wanted is not None and (topic, index) not in wanted:
            continue
        _, _, replicas, isr = broker.partition_state(topic, index)
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": index,
                "replicas": replicas,
                "adding_replicas": [b for b in r.target if b not in replicas or b not in isr],  # catching up
                "removing_replicas": [b for b in replicas if b not in r.target],
            }
        )
    return messages.encode_response(
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        v,
        {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        },
    )
