"""Produce: records go to the partition logs as opaque batches (only batch headers are parsed).

Every partition of a request is appended first; acks=all then waits for all of them together, so a
request's latency is its slowest partition's replication, not the sum over its partitions.
"""

from __future__ import annotations

import asyncio

from brook.broker.broker import Broker
from brook.broker.partition import Partition
from brook.protocol.errors import ErrorCode, KafkaError, RecordValidationError
from brook.protocol.frames import RequestHeader
from brook.protocol.produce import PartitionProduceResult, decode_produce_request, encode_produce_response
from brook.protocol.versions import ApiKey

from .authorized import Operation, ResourceType, allowed
from .context import Body
from .throttle import PRODUCE_QUOTA, charge


async def handle_produce(broker: Broker, hdr: RequestHeader) -> Body | None:
    version = hdr.api_version
    req = decode_produce_request(version, hdr.body)
    results: list[tuple[str, list[PartitionProduceResult]]] = []
    commits: list[asyncio.Future[None]] = []
    bad_acks = req.acks not in (0, 1, -1)
    timeout_s = req.timeout_ms / 1000
    # Kafka's checks: WRITE on the transactional id (if any), then WRITE on each topic.
    txn_denied = req.transactional_id is not None and not allowed(
        broker, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id
    )
    for topic in req.topics:
        out: list[PartitionProduceResult] = []
        denied = (
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            if txn_denied
            else ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if not allowed(broker, Operation.WRITE, ResourceType.TOPIC, topic.name)
            else None
        )
        for part in topic.partitions:
            try:
                if denied is not None:
                    raise KafkaError(denied, f"WRITE to topic '{topic.name}' is not authorized")
                if bad_acks:
                    raise KafkaError(
                        ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be 0, 1 or -1, got {req.acks}"
                    )
                if part.records is None:
                    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "records are null")
                p = broker.replicas.partition(topic.name, part.index)
                # The request's frame is its own buffer (see Connection): offsets are set in it.
                r = p.append(part.records, req.acks, in_place=True)
                broker.metrics.on_produce(topic.name, len(part.records), r.last_offset - r.base_offset + 1)
                # acks=all: no task when the append committed at once (a leader without followers).
                wait = req.acks == -1 and not p.committed(r.last_offset, p.leader_epoch)
                out.append(
                    PartitionProduceResult(
                        part.index, 0, r.base_offset, r.log_append_time, r.log_start_offset
                    )
                )
                if wait:
                    # The epoch now: the commit task starts after other tasks, maybe after a move.
                    epoch = p.leader_epoch
                    commit = _committed(broker, p, r.last_offset, epoch, timeout_s, out, len(out) - 1)
                    commits.append(asyncio.ensure_future(commit))
            except KafkaError as e:
                broker.metrics.on_error(ApiKey.PRODUCE, None, e.code)
                record_errors = tuple(e.record_errors) if isinstance(e, RecordValidationError) else ()
                out.append(PartitionProduceResult(part.index, e.code, -1, -1, -1, e.message, record_errors))
        results.append((topic.name, out))
    if commits:
        try:
            await asyncio.gather(*commits)
        finally:  # the connection went away: no waiter outlives the request
            for c in commits:
                c.cancel()
    throttle = charge(broker, hdr, PRODUCE_QUOTA, len(hdr.body))
    if req.acks == 0:
        return None
    return encode_produce_response(version, results, throttle)


async def _committed(
    broker: Broker,
    p: Partition,
    last_offset: int,
    leader_epoch: int,
    timeout_s: float,
    out: list[PartitionProduceResult],
    i: int,
) -> None:
    """Wait for one partition's acks=all commit; a failure replaces that partition's result only."""
    try:
        await p.wait_committed(last_offset, leader_epoch, timeout_s)
    except KafkaError as e:
        broker.metrics.on_error(ApiKey.PRODUCE, None, e.code)
        out[i] = PartitionProduceResult(out[i].index, e.code, -1, -1, -1, e.message)
