"""DescribeLogDirs: the broker's one log directory, the size and lag of each partition in it, and
its volume's total and usable bytes (KIP-827), as kafka-log-dirs.sh and the AdminClient read them.
Brook has one log directory a broker (`data_dir`); no replica is ever "future" (no
AlterReplicaLogDirs moves)."""

from __future__ import annotations

import shutil
from typing import Any

from brook.broker.broker import Broker
from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import DescribeLogDirsRequest, decode_request
from brook.protocol.versions import ApiKey

from .authorized import Operation, require_cluster
from .context import Body


def _wanted(broker: Broker, req: DescribeLogDirsRequest) -> dict[str, set[int] | None]:
    """topic → partition indexes asked for (None: every local one); null topics: all of them."""
    if req.topics is None:
        return {p.topic: None for p in broker.replicas.partitions()}
    return {t.topic: set(t.partitions) for t in req.topics}


def _describe(broker: Broker, req: DescribeLogDirsRequest) -> dict[str, Any]:
    data_dir = broker.settings.data_dir.resolve()
    result: dict[str, Any] = {"log_dir": str(data_dir), "error_code": 0, "topics": []}
    if broker.replicas.log_dir.offline:
        result["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
        return result
    usage = shutil.disk_usage(data_dir)
    result.update(total_bytes=usage.total, usable_bytes=usage.free)
    wanted = _wanted(broker, req)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for p in sorted(broker.replicas.partitions(), key=lambda p: (p.topic, p.index)):
        indexes = wanted.get(p.topic, set())
        if indexes is not None and p.index not in indexes:
            continue
        by_topic.setdefault(p.topic, []).append(
            {
                "partition_index": p.index,
                "partition_size": p.log.size_bytes,
                # Kafka's offset lag of a current (not future) log: how far its end is below the HW.
                "offset_lag": max(0, p.high_watermark - p.log.log_end_offset),
                "is_future_key": False,
            }
        )
    result["topics"] = [{"name": t, "partitions": ps} for t, ps in by_topic.items()]
    return result


async def handle_describe_log_dirs(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.DESCRIBE_LOG_DIRS, v, hdr.body)
    try:
        require_cluster(broker, Operation.DESCRIBE)
    except KafkaError as e:  # Kafka: the whole answer is the error, no directories
        return messages.encode_response(
            ApiKey.DESCRIBE_LOG_DIRS, v, {"throttle_time_ms": 0, "error_code": e.code, "results": []}
        )
    return messages.encode_response(
        ApiKey.DESCRIBE_LOG_DIRS,
        v,
        {"throttle_time_ms": 0, "error_code": 0, "results": [_describe(broker, req)]},
    )
