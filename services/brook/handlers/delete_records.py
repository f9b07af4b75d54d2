"""DeleteRecords: move partitions' log start offsets forward (records below become unreadable and their
segments go), then wait, up to the request's timeout, until the in-sync followers have followed."""

from __future__ import annotations

import asyncio
from typing import Any

from brook.broker.broker import Broker
from brook.broker.partition import Partition
from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey

from .authorized import Operation, ResourceType, require
from .context import Body


def _start(broker: Broker, topic: str, index: int, offset: int) -> tuple[Partition, int]:
    require(broker, Operation.DELETE, ResourceType.TOPIC, topic)
    meta = broker.replicas.topic(topic)
    if meta is None or not 0 <= index < meta.partitions:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{index} does not exist")
    if meta.is_internal:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"records of internal topic {topic} are kept")
    p = broker.replicas.partition(topic, index)
    return p, p.delete_records(offset)


async def _low_watermark(p: Partition, offset: int, timeout_s: float) -> dict[str, Any]:
    try:
        return {"low_watermark": await p.wait_low_watermark(offset, timeout_s), "error_code": 0}
    except KafkaError as e:
        return {"low_watermark": -1, "error_code": e.code}


async def handle_delete_records(broker: Broker, hdr: RequestHeader) -> Body | None:
    version = hdr.api_version
    req = decode_request(ApiKey.DELETE_RECORDS, version, hdr.body)
    timeout_s = max(req.timeout_ms, 0) / 1000
    results: dict[tuple[str, int], dict[str, Any]] = {}
    waits: dict[tuple[str, int], asyncio.Task[dict[str, Any]]] = {}
    for t in req.topics:
        for part in t.partitions:
            key = (t.name, part.partition_index)
            try:
                p, offset = _start(broker, t.name, part.partition_index, part.offset)
            except KafkaError as e:
                results[key] = {"low_watermark": -1, "error_code": e.code}
                continue
            waits[key] = asyncio.create_task(_low_watermark(p, offset, timeout_s))
    for key, task in waits.items():
        results[key] = await task
    return messages.encode_response(
        ApiKey.DELETE_RECORDS,
        version,
        {
            "throttle_time_ms": 0,
            "topics": [
                {
                    "name": t.name,
                    "partitions": [
                        {"partition_index": q.partition_index, **results[(t.name, q.partition_index)]}
                        for q in t.partitions
                    ],
                }
                for t in req.topics
            ],
        },
    )
