"""ShareFetch (78) and ShareAcknowledge (79): a share group's records handed out by the partition leader.

Per partition of the member's share session, the read starts at the share-partition's first AVAILABLE
record (a redelivery) or its end, reads whole batches up to the high watermark (read_committed: the
last stable offset), and acquires by their headers alone: no record is decoded. The batches go out as
read; the acquired ranges tell the client which of their records are its own. Control batches, and
under read_committed aborted transactions' batches, are archived, never acquired.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from brook.broker.broker import Broker
from brook.broker.fetch_waiter import FetchWaiter
from brook.broker.partition import Partition
from brook.protocol import messages
from brook.protocol.batch import HEADER_SIZE, parse_header
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import ShareFetchRequest, decode_request
from brook.protocol.versions import ApiKey
from brook.share.coordinator import FINAL_EPOCH, INITIAL_EPOCH, ShareSession
from brook.share.partition import Acquired, FetchedBatch, SharePartition, ShareSettings
from brook.share.state_records import ShareKey

from .authorized import Operation, ResourceType, allowed
from .context import CONNECTION, Body, check_leader, uuid_bytes

__all__ = ["handle_share_acknowledge", "handle_share_fetch"]

_PARTITION_MAX_BYTES = 1024 * 1024  # one partition's read per request (max.partition.fetch.bytes)
_RECORD_LIMIT = 1  # ShareAcquireMode (v2): 0 batch-optimized, 1 strict record limit

_Tp = tuple[bytes, int]


def _initial_offset(p: Partition) -> Callable[[ShareSettings], int]:
    """share.auto.offset.reset: where a share-partition of `p` with no stored state starts."""

    def initial(s: ShareSettings) -> int:
        return p.log.log_start_offset if s.auto_offset_reset == "earliest" else p.consumer_high_watermark

    return initial


def _leader_of(broker: Broker, name: str, index: int) -> dict[str, int]:
    try:
        st = broker.partition_state(name, index)
        return {"leader_id": st.leader, "leader_epoch": st.leader_epoch}
    except KafkaError:
        return {"leader_id": -1, "leader_epoch": -1}


class _Target:
    """One partition of a request: where it lives here, or why not."""

    def __init__(self, broker: Broker, group: str, tp: _Tp) -> None:
        self.tp = tp
        self.key = ShareKey(group, tp[0], tp[1])
        self.partition: Partition | None = None
        self.error = ErrorCode.NONE
        self.message: str | None = None
        meta = broker.replicas.topic_by_id(tp[0])
        self.name = meta.name if meta is not None else ""
        if meta is None:
            self.error = ErrorCode.UNKNOWN_TOPIC_ID
        elif not allowed(broker, Operation.READ, ResourceType.TOPIC, meta.name):
            self.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        else:
            try:
                p = broker.replicas.partition(meta.name, tp[1])
                check_leader(p)
                self.partition = p
            except KafkaError as e:
                self.error, self.message = e.code, e.message

    def entry(self, broker: Broker) -> dict[str, Any]:
        return {
            "partition_index": self.tp[1],
            "error_code": self.error,
            "error_message": self.message,
            "current_leader": _leader_of(broker, self.name, self.tp[1]) if self.name else {},
        }


async def _acknowledge(
    broker: Broker, t: _Target, member: str, batches: Sequence[Any]
) -> tuple[ErrorCode, str | None]:
    if t.partition is None:
        return t.error, t.message
    sp = broker.share.partitions.get(t.key)
    if sp is None or sp.leader_epoch != t.partition.leader_epoch:
        return ErrorCode.INVALID_RECORD_STATE, "no records of this partition are acquired"
    settings = broker.share.settings_of(t.key.group_id)
    try:
        sp.acknowledge(
            member,
            [(b.first_offset, b.last_offset, b.acknowledge_types) for b in batches],
            broker.share.now_ms(),
            settings,
        )
    except KafkaError as e:
        return e.code, e.message
    return ErrorCode.NONE, None


def _read(
    p: Partition, sp: SharePartition, settings: ShareSettings, budget: int
) -> tuple[bytes, list[FetchedBatch]] | None:
    """Whole batches from where the share-partition's next acquire starts, with their headers."""
    sp.advance_to_log_start(p.log.log_start_offset)
    upper = p.last_stable_offset if settings.read_committed else p.consumer_high_watermark
    offset = sp.fetch_offset()
    if offset >= upper or (offset == sp.end_offset and sp.in_flight >= settings.max_record_locks):
        return None
    s = p.log.read(offset, budget, max_offset=upper, min_one=True)
    if s is None:
        return None
    data = p.log.read_bytes(s)
    aborted = p.log.aborted_transactions(offset, upper) if settings.read_committed else []
    batches: list[FetchedBatch] = []
    pos, n = 0, len(data)
    while pos + HEADER_SIZE <= n:
        h = parse_header(data, pos)
        if pos + h.size > n:
            break  # a read may end mid-batch
        deliverable = not h.is_control and not (
            h.is_transactional
            and any(
                a.producer_id == h.producer_id and a.first_offset <= h.base_offset <= a.last_offset
                for a in aborted
            )
        )
        batches.append(FetchedBatch(h.base_offset, h.last_offset, deliverable))
        pos += h.size
    return data[:pos], batches


def _trim(data: bytes, batches: list[FetchedBatch], acquired: list[Acquired]) -> bytes:
    """The batches up to the last one holding an acquired record."""
    last = acquired[-1].last_offset
    pos = 0
    for b in batches:
        pos += parse_header(data, pos).size
        if b.last_offset >= last:
            break
    return data[:pos]


async def _fetch_partition(
    broker: Broker, t: _Target, member: str, budget: int, max_records: int, strict: bool
) -> tuple[bytes, list[Acquired]] | None:
    p = t.partition
    assert p is not None
    settings = broker.share.settings_of(t.key.group_id)
    sp = await broker.share.partition(t.key, _initial_offset(p), p.leader_epoch)
    read = _read(p, sp, settings, budget)
    if read is None:
        return None
    data, batches = read
    acquired = sp.acquire(member, batches, broker.share.now_ms(), settings, max_records, strict)
    if not acquired:
        return None
    return _trim(data, batches, acquired), acquired


def _session_targets(broker: Broker, session: ShareSession) -> list[_Target]:
    return [_Target(broker, session.group_id, tp) for tp in session.partitions]


async def handle_share_fetch(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.SHARE_FETCH, v, hdr.body)
    group, member = req.group_id or "", req.member_id or ""
    settings = broker.share.settings_of(group)

    def top(code: ErrorCode, message: str | None = None) -> bytes:
        return messages.encode_response(ApiKey.SHARE_FETCH, v, {"error_code": code, "error_message": message})

    if not allowed(broker, Operation.READ, ResourceType.GROUP, group):
        return top(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not group or not member:
        return top(ErrorCode.INVALID_REQUEST, "GroupId and MemberId are required.")
    epoch = req.share_session_epoch
    acks = {
        (uuid_bytes(ft.topic_id), fp.partition_index): fp.acknowledgement_batches
        for ft in req.topics
        for fp in ft.partitions
        if fp.acknowledgement_batches
    }
    if epoch == INITIAL_EPOCH and acks:
        return top(ErrorCode.INVALID_REQUEST, "Acknowledge data present on initial ShareFetch request.")
    try:
        session = broker.share.session(group, member, epoch, CONNECTION.get())
    except KafkaError as e:
        return top(e.code, e.message)
    for forgotten in req.forgotten_topics_data:
        for index in forgotten.partitions:
            session.partitions.pop((uuid_bytes(forgotten.topic_id), index), None)
    if epoch != FINAL_EPOCH:
        for ft in req.topics:
            for fp in ft.partitions:
                session.partitions[(uuid_bytes(ft.topic_id), fp.partition_index)] = None

    entries: dict[_Tp, dict[str, Any]] = {}
    changed: set[ShareKey] = set()
    for tp, batches in acks.items():
        t = _Target(broker, group, tp)
        code, message = await _acknowledge(broker, t, member, batches)
        entry = entries[tp] = t.entry(broker)
        entry.update(acknowledge_error_code=code, acknowledge_error_message=message)
        if t.partition is not None and code == ErrorCode.NONE:
            changed.add(t.key)
    if changed:
        broker.share.wake()  # released records may go to another member's waiting fetch
    if epoch == FINAL_EPOCH:
        changed.update(broker.share.close_session(session))
    elif not req.is_renew_ack:
        await _fetch(broker, req, v, session, entries, changed)
    await broker.share.persist(changed)
    topics: dict[bytes, list[dict[str, Any]]] = {}
    for (topic_id, _), entry in entries.items():
        topics.setdefault(topic_id, []).append(entry)
    return messages.encode_response(
        ApiKey.SHARE_FETCH,
        v,
        {
            "acquisition_lock_timeout_ms": settings.lock_duration_ms,
            "responses": [{"topic_id": tid, "partitions": ps} for tid, ps in topics.items()],
        },
    )


async def _fetch(
    broker: Broker,
    req: ShareFetchRequest,
    v: int,
    session: ShareSession,
    entries: dict[_Tp, dict[str, Any]],
    changed: set[ShareKey],
) -> None:
    """Acquire from the session's partitions; when nothing can be, wait (up to MaxWaitMs) for records
    to arrive or come back."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(req.max_wait_ms, 0) / 1000
    max_records = req.max_records if v >= 1 and req.max_records > 0 else 500
    strict = v >= 2 and req.share_acquire_mode == _RECORD_LIMIT
    waiter: FetchWaiter[object] = FetchWaiter(follower=False)
    watched: list[Partition] = []
    broker.share.listen(waiter)
    try:
        while True:
            got = False
            remaining = req.max_bytes  # 0: nothing is read (Kafka returns no records then)
            for t in _session_targets(broker, session):
                if t.partition is None:
                    entries.setdefault(t.tp, t.entry(broker))
                    continue
                if max_records <= 0 or remaining <= 0:
                    break
                if got and t.key not in broker.share.partitions:
                    # As Kafka, whose share-partitions are initialized apart from the fetch: an answer
                    # with records does not wait for one not loaded yet; it loads for the next fetch.
                    broker.share.preload(t.key, _initial_offset(t.partition), t.partition.leader_epoch)
                    continue
                try:
                    out = await _fetch_partition(
                        broker,
                        t,
                        session.member_id,
                        min(remaining, _PARTITION_MAX_BYTES),
                        max_records,
                        strict,
                    )
                except KafkaError as e:
                    t.error, t.message = e.code, e.message
                    entries.setdefault(t.tp, t.entry(broker))
                    continue
                if out is None:
                    if t.partition not in watched:
                        t.partition.add_waiter(waiter)
                        watched.append(t.partition)
                    continue
                data, acquired = out
                got = True
                changed.add(t.key)
                remaining -= len(data)
                max_records -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
                entry = entries.setdefault(t.tp, t.entry(broker))
                entry["records"] = data
                entry["acquired_records"] = [
                    {
                        "first_offset": a.first_offset,
                        "last_offset": a.last_offset,
                        "delivery_count": a.delivery_count,
                    }
                    for a in acquired
                ]
            timeout = deadline - loop.time()
            if got or timeout <= 0 or entries:
                return
            await waiter.wait(timeout)
    finally:
        broker.share.unlisten(waiter)
        for p in watched:
            p.remove_waiter(waiter)


async def handle_share_acknowledge(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.SHARE_ACKNOWLEDGE, v, hdr.body)
    group, member = req.group_id or "", req.member_id or ""
    settings = broker.share.settings_of(group)

    def top(code: ErrorCode, message: str | None = None) -> bytes:
        return messages.encode_response(
            ApiKey.SHARE_ACKNOWLEDGE, v, {"error_code": code, "error_message": message}
        )

    if not allowed(broker, Operation.READ, ResourceType.GROUP, group):
        return top(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not group or not member:
        return top(ErrorCode.INVALID_REQUEST, "GroupId and MemberId are required.")
    epoch = req.share_session_epoch
    if epoch == INITIAL_EPOCH:
        return top(ErrorCode.INVALID_SHARE_SESSION_EPOCH, "A ShareAcknowledge cannot open a share session.")
    try:
        session = broker.share.session(group, member, epoch, CONNECTION.get())
    except KafkaError as e:
        return top(e.code, e.message)
    changed: set[ShareKey] = set()
    topics: dict[bytes, list[dict[str, Any]]] = {}
    for ft in req.topics:
        tid = uuid_bytes(ft.topic_id)
        for fp in ft.partitions:
            t = _Target(broker, group, (tid, fp.partition_index))
            code, message = await _acknowledge(broker, t, member, fp.acknowledgement_batches)
            if t.partition is not None and code == ErrorCode.NONE:
                changed.add(t.key)
            entry = t.entry(broker)
            entry.update(error_code=code, error_message=message)
            topics.setdefault(tid, []).append(entry)
    if changed:
        broker.share.wake()
    if epoch == FINAL_EPOCH:
        changed.update(broker.share.close_session(session))
    await broker.share.persist(changed)
    return messages.encode_response(
        ApiKey.SHARE_ACKNOWLEDGE,
        v,
        {
            "acquisition_lock_timeout_ms": settings.lock_duration_ms,
            "responses": [{"topic_id": tid, "partitions": ps} for tid, ps in topics.items()],
        },
    )
