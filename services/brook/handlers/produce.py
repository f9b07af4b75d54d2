"""Produce: records go to the partition logs as opaque batches (only batch headers are parsed).

Every partition of a request is appended first; acks=all then waits for all of them together, so a
request's latency is its slowest partition's replication, not the sum over its partitions.
"""

from __future__ import annotations

import asyncio

from brook.broker.broker import Broker
from brook.broker.partition import TIMED_OUT
from brook.broker.txn_verification import produce_error
from brook.protocol.batch import HEADER_SIZE, check_produce_records, parse_header
from brook.protocol.errors import ErrorCode, KafkaError, RecordValidationError
from brook.protocol.frames import RequestHeader
from brook.protocol.produce import (
    PartitionProduceResult,
    ProduceRequest,
    decode_produce_request,
    encode_produce_response,
)
from brook.protocol.versions import ApiKey

from .authorized import Operation, ResourceType, allowed
from .context import APPEND_ORDER, Body
from .throttle import PRODUCE_QUOTA, charge

# acks=all: a partition still to commit, as (its future, its results list, the index there).
Commit = tuple[asyncio.Future[None], list[PartitionProduceResult], int]

# Append errors Kafka's ReplicaManager answers without the log start offset.
_NO_LOG_START = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE,
    ErrorCode.CORRUPT_MESSAGE,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.UNKNOWN_TOPIC_ID,
}


async def handle_produce(broker: Broker, hdr: RequestHeader) -> Body | None:
    version = hdr.api_version
    req = decode_produce_request(version, hdr.body)
    bad_acks = req.acks not in (0, 1, -1)
    timeout_s = req.timeout_ms / 1000
    # Kafka's checks: WRITE on the transactional id (if any), then WRITE on each topic.
    txn_denied = req.transactional_id is not None and not allowed(
        broker, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id
    )
    order = APPEND_ORDER.get()
    before = order.before() if order is not None else None
    turn = order.hold() if order is not None and before is not None else None
    try:
        if before is not None:
            await asyncio.shield(before)  # the request before appends first
        refused: dict[tuple[str, int], ErrorCode] = {}
        guards: dict[tuple[str, int], tuple[int, object]] = {}
        pending = {} if txn_denied or bad_acks else _to_verify(broker, req)
        if pending:
            if turn is None and order is not None:
                turn = order.hold()
            refused, guards = await _verify(broker, req, version, pending)
        results, commits = _append(broker, req, txn_denied, bad_acks, refused, guards)
    finally:
        if turn is not None and not turn.done():
            turn.set_result(None)
    if commits:
        await _all_committed(broker, commits, timeout_s)
    throttle = charge(broker, hdr, PRODUCE_QUOTA, len(hdr.body))
    if req.acks == 0:
        return None
    return encode_produce_response(version, results, throttle)


def _append(
    broker: Broker,
    req: ProduceRequest,
    txn_denied: bool,
    bad_acks: bool,
    refused: dict[tuple[str, int], ErrorCode],
    guards: dict[tuple[str, int], tuple[int, object]],
) -> tuple[list[tuple[str, list[PartitionProduceResult]]], list[Commit]]:
    """Append every partition's batch (no wait): the results, and the acks=all commits to await."""
    results: list[tuple[str, list[PartitionProduceResult]]] = []
    commits: list[Commit] = []
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
            p = None
            try:
                if denied is not None:
                    raise KafkaError(denied, f"WRITE to topic '{topic.name}' is not authorized")
                if bad_acks:
                    raise KafkaError(
                        ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be 0, 1 or -1, got {req.acks}"
                    )
                if part.records is None:
                    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "records are null")
                target = broker.replicas.partition(topic.name, part.index)
                check_produce_records(part.records)  # Kafka's KafkaApis checks: no log start offset
                key = (topic.name, part.index)  # verification errors carry no log start, as Kafka's
                if key in refused:
                    raise KafkaError(refused[key], "the transaction coordinator did not confirm it")
                if key in guards and not target.producers.verified(*guards[key]):
                    raise KafkaError(ErrorCode.INVALID_TXN_STATE, "the transaction ended meanwhile")
                p = target
                # The request's frame is its own buffer (see Connection): offsets are set in it.
                r = p.append(part.records, req.acks, in_place=True)
                broker.metrics.on_produce(topic.name, len(part.records), r.last_offset - r.base_offset + 1)
                # acks=all: a future the high watermark resolves (none when committed at once: a leader
                # without followers), taken now, in the epoch the records were appended in.
                fut = p.commit_future(r.last_offset, p.leader_epoch) if req.acks == -1 else None
                out.append(
                    PartitionProduceResult(
                        part.index, 0, r.base_offset, r.log_append_time, r.log_start_offset
                    )
                )
                if fut is not None:
                    commits.append((fut, out, len(out) - 1))
            except KafkaError as e:
                broker.metrics.on_error(ApiKey.PRODUCE, None, e.code)
                record_errors = tuple(e.record_errors) if isinstance(e, RecordValidationError) else ()
                # Kafka answers the log start offset with the errors of the append itself (sequences,
                # epochs, record validation, too few in-sync replicas), -1 with the others.
                start = p.log.log_start_offset if p is not None and e.code not in _NO_LOG_START else -1
                out.append(
                    PartitionProduceResult(part.index, e.code, -1, -1, start, e.message, record_errors)
                )
        results.append((topic.name, out))
    return results, commits


def _to_verify(broker: Broker, req: ProduceRequest) -> dict[tuple[str, int], tuple[int, int, object]]:
    """KIP-890 (brook.broker.txn_verification): the partitions whose batch would open the producer's
    transaction here, each with (producer id, epoch, the guard its append must still find)."""
    pending: dict[tuple[str, int], tuple[int, int, object]] = {}
    if not req.transactional_id:
        return pending
    for topic in req.topics:
        for part in topic.partitions:
            p = broker.replicas.local_partition(topic.name, part.index)
            if p is None or not p.is_leader or part.records is None or len(part.records) < HEADER_SIZE:
                continue  # refused by the append's own checks
            h = parse_header(part.records)
            if h.is_transactional and p.producers.needs_verification(h.producer_id, h.producer_epoch):
                guard = p.producers.start_verification(h.producer_id)
                pending[(topic.name, part.index)] = (h.producer_id, h.producer_epoch, guard)
    return pending


async def _verify(
    broker: Broker,
    req: ProduceRequest,
    version: int,
    pending: dict[tuple[str, int], tuple[int, int, object]],
) -> tuple[dict[tuple[str, int], ErrorCode], dict[tuple[str, int], tuple[int, object]]]:
    """The coordinator confirms the pending partitions: the refused ones with their Produce error, and
    the confirmed ones with their guard (producer id, guard)."""
    assert req.transactional_id is not None
    pid, epoch, _ = next(iter(pending.values()))  # a transactional id has one producer
    answers = await broker.txn_verifier.verify(req.transactional_id, pid, epoch, list(pending))
    refused = {k: produce_error(c, version) for k, c in answers.items() if c != ErrorCode.NONE}
    guards = {k: (p, g) for k, (p, _, g) in pending.items() if k not in refused}
    return refused, guards


async def _all_committed(
    broker: Broker,
    commits: list[Commit],
    timeout_s: float,
) -> None:
    """Wait for every partition's acks=all commit together, one timer for the request and no task per
    partition; a failure or the timeout replaces that partition's result only."""
    try:
        await asyncio.wait([f for f, _, _ in commits], timeout=timeout_s)
    except BaseException:  # the connection went away: no waiter outlives the request
        for fut, _, _ in commits:
            _ = fut.exception() if fut.done() and not fut.cancelled() else fut.cancel()
        raise
    for fut, out, i in commits:
        if not fut.done():
            fut.cancel()
            error: BaseException | None = KafkaError(ErrorCode.REQUEST_TIMED_OUT, TIMED_OUT)
        else:
            error = fut.exception()
        if isinstance(error, KafkaError):
            broker.metrics.on_error(ApiKey.PRODUCE, None, error.code)
            out[i] = PartitionProduceResult(out[i].index, error.code, -1, -1, -1, error.message)
        elif error is not None:
            raise error
