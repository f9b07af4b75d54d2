"""Produce: records go to the partition logs as opaque batches (only batch headers are parsed)."""

from __future__ import annotations

from brook.broker.broker import Broker
from brook.protocol.errors import ErrorCode, KafkaError, RecordValidationError
from brook.protocol.frames import RequestHeader
from brook.protocol.produce import PartitionProduceResult, decode_produce_request, encode_produce_response
from brook.protocol.versions import ApiKey

from .context import Body


async def handle_produce(broker: Broker, hdr: RequestHeader) -> Body | None:
    version = hdr.api_version
    req = decode_produce_request(version, hdr.body)
    results: list[tuple[str, list[PartitionProduceResult]]] = []
    bad_acks = req.acks not in (0, 1, -1)
    for topic in req.topics:
        out: list[PartitionProduceResult] = []
        for part in topic.partitions:
            try:
                if bad_acks:
                    raise KafkaError(
                        ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be 0, 1 or -1, got {req.acks}"
                    )
                if part.records is None:
                    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "records are null")
                p = broker.replicas.partition(topic.name, part.index)
                r = p.append(part.records, req.acks)
                broker.metrics.on_produce(topic.name, len(part.records), r.last_offset - r.base_offset + 1)
                if req.acks == -1:
                    await p.wait_committed(r.last_offset, req.timeout_ms / 1000)
                out.append(
                    PartitionProduceResult(
                        part.index, 0, r.base_offset, r.log_append_time, r.log_start_offset
                    )
                )
            except KafkaError as e:
                broker.metrics.on_error(ApiKey.PRODUCE, None, e.code)
                record_errors = tuple(e.record_errors) if isinstance(e, RecordValidationError) else ()
                out.append(PartitionProduceResult(part.index, e.code, -1, -1, -1, e.message, record_errors))
        results.append((topic.name, out))
    if req.acks == 0:
        return None
    return encode_produce_response(version, results)
