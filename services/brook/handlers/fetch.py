"""Fetch: reads are file ranges of segments; large ones leave as sendfile, small ones as bytes.

Long polling: when less than min.bytes is available the request waits (up to max.wait.ms) for an
append on any partition it asked for, then reads again.

Fetch from follower (KIP-392): consumers sending Fetch v11+ (with their rack) may be served by any
replica, a follower reading up to the high watermark its leader last sent it. With
--replica-selector-class RackAwareReplicaSelector a leader answers a consumer in another rack with the
in-sync follower of the consumer's rack as `preferred_read_replica` (no records, at once).

read_committed (isolation level 1): records up to the last stable offset only, with the aborted
transactions of that range from the log's txn index (no record is read to find them).

Fetch sessions (KIP-227, broker/fetch_sessions.py): an incremental request reads only the session's
dirty partitions, and its long poll is woken by any partition of the session (the session listens to
them all the time), which then joins the answer.
"""

from __future__ import annotations

import asyncio

from brook.broker.broker import Broker
from brook.broker.fetch_sessions import INITIAL_EPOCH, FetchSession
from brook.broker.fetch_waiter import FetchWaiter
from brook.broker.partition import Partition, now_ms
from brook.observability import CONSUMER, FOLLOWER, REQUEST_ROLE
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.fetch import (
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchTopicResult,
    RecordsRef,
    decode_fetch_request,
    encode_fetch_response,
)
from brook.protocol.frames import RequestHeader
from brook.protocol.versions import ApiKey
from brook.replication.replica_selector import preferred_read_replica

from .authorized import Operation, ResourceType, allowed
from .context import CLIENT_HOST, PRINCIPAL, Body, check_epoch, check_leader
from .throttle import FETCH_QUOTA, charge

# Below this a pread into the response is cheaper than a sendfile round of its own.
SENDFILE_MIN_BYTES = 64 * 1024


def _check_replica(p: Partition, current_leader_epoch: int) -> None:
    """A consumer may read from any replica of the partition, in the current leader epoch."""
    if (not p.is_leader and p.node_id not in p.role.replicas) or (p.is_leader and not p.leads_now):
        raise KafkaError(
            ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {p.node_id} is no replica of {p.topic}-{p.index}"
        )
    check_epoch(p, current_leader_epoch)


class _Read:
    """One Fetch request's reads: a first pass over every partition asked for, then, while it long-polls,
    re-reads of only the partitions that changed (the others keep their first answer)."""

    def __init__(
        self, broker: Broker, req: FetchRequest, version: int, session: FetchSession | None = None
    ) -> None:
        self.broker = broker
        self.req = req
        self.session = session
        self.by_id = version >= 13
        self.remaining = req.max_bytes if req.max_bytes > 0 else 2**31 - 1
        self.follower = req.replica_id >= 0
        self.committed = not self.follower and req.isolation_level == 1
        self.any_replica = not self.follower and version >= 11  # the client's rack is sent (KIP-392)
        self.select = (
            self.any_replica and bool(req.rack_id) and broker.settings.replica_selector_class is not None
        )
        self.racks = {n: rack for n, _, _, rack in broker.brokers()} if self.select else {}
        self.redirected = False
        self.total = 0
        self.topics: list[FetchTopicResult] = []
        # watched partition -> (its topic's results, its index there, what was asked for it)
        self.watched: dict[Partition, tuple[list[FetchPartitionResult], int, FetchPartition]] = {}
        self._results: dict[str, list[FetchPartitionResult]] = {}  # by topic name
        # Followers need CLUSTER_ACTION on the cluster, consumers READ on each topic (checked before the
        # topic's existence, so that a denied principal learns nothing about it).
        self.cluster_ok = not self.follower or allowed(broker, Operation.CLUSTER_ACTION, ResourceType.CLUSTER)
        # A follower's own session counts its fetches for the partitions it does not walk.
        self.clock = (
            session.clock
            if session is not None and self.follower and session.replica_id == req.replica_id
            else None
        )
        self._first_pass(version)

    def _first_pass(self, version: int) -> None:
        broker, req, follower, session = self.broker, self.req, self.follower, self.session
        cluster_ok = self.cluster_ok
        for ft in req.topics:
            if version >= 13:
                meta = broker.replicas.topic_by_id(ft.topic_id or b"")
                name = meta.name if meta else ""
                missing = ErrorCode.UNKNOWN_TOPIC_ID
            else:
                name = ft.name or ""
                meta = broker.replicas.topic(name)
                missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            parts: list[FetchPartitionResult] = []
            if name and name not in self._results:
                self._results[name] = parts
            key_topic: str | bytes = (ft.topic_id or b"") if self.by_id else (ft.name or "")
            denied = not cluster_ok or (
                not follower and not allowed(broker, Operation.READ, ResourceType.TOPIC, name or "")
            )
            for fp in ft.partitions:
                key = (key_topic, fp.partition)
                if denied:
                    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    parts.append(FetchPartitionResult(fp.partition, code, -1, -1, -1, None))
                    if session is not None:
                        session.read(key, None, True)
                    continue
                if meta is None:
                    parts.append(FetchPartitionResult(fp.partition, missing, -1, -1, -1, None))
                    if session is not None:
                        session.read(key, None, True)
                    continue
                p = None
                try:
                    p = broker.replicas.partition(name, fp.partition)
                    if self.any_replica:
                        _check_replica(p, fp.current_leader_epoch)
                    else:
                        check_leader(p, fp.current_leader_epoch)
                    if follower:
                        p.record_follower_fetch(
                            req.replica_id, fp.fetch_offset, fp.log_start_offset, self.clock
                        )
                    if self.select:
                        preferred = preferred_read_replica(p, req.rack_id, fp.fetch_offset, self.racks)
                        if preferred is not None:
                            hw = p.consumer_high_watermark
                            start = p.log.log_start_offset
                            lso = p.last_stable_offset
                            parts.append(
                                FetchPartitionResult(
                                    fp.partition, 0, hw, lso, start, None, preferred, aborted=None
                                )
                            )
                            self.redirected = True
                            continue
                    result, again = self._read_partition(p, fp)
                    self.watched[p] = (parts, len(parts), fp)
                    parts.append(result)
                    if session is not None:
                        session.read(key, p, again)
                except KafkaError as e:
                    # Kafka's answers: null aborted transactions for what its read refused, an empty
                    # list for a partition it does not know.
                    unknown = e.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    parts.append(
                        FetchPartitionResult(
                            fp.partition, e.code, -1, -1, -1, None, aborted=[] if unknown else None
                        )
                    )
                    if session is not None:
                        session.read(key, None, True)
                    if p is not None and self.clock is not None:
                        p.detach_clock(req.replica_id, self.clock)  # not fetched (Kafka: no update)
            self.topics.append(
                FetchTopicResult(name, meta.topic_id if meta else (ft.topic_id or bytes(16)), parts)
            )

    def _read_partition(self, p: Partition, fp: FetchPartition) -> tuple[FetchPartitionResult, bool]:
        """The partition's answer, and whether a read at the same position could answer more (records
        up to the read's end not all read)."""
        follower = self.follower
        hw = p.high_watermark if follower else p.consumer_high_watermark
        lso = hw if follower else p.last_stable_offset
        # Followers read up to the log end; consumers up to the high watermark (read_committed: the last
        # stable offset). Nothing new there, the usual case of a long poll: no read at all.
        upper = p.log.log_end_offset if follower else (lso if self.committed else hw)
        start = p.log.log_start_offset
        limit = min(fp.partition_max_bytes, self.remaining)
        records: bytes | RecordsRef | None = None
        # read_uncommitted: null, read_committed: the list (Kafka's answers; errors elsewhere: empty)
        aborted: list[tuple[int, int]] | None = [] if self.committed else None
        at_end = start <= fp.fetch_offset == upper
        if (limit > 0 or self.total == 0) and not at_end:
            s = p.log.read(
                fp.fetch_offset,
                max(limit, 0),
                max_offset=None if follower else upper,
                min_one=self.total == 0,
            )
            if s is not None:
                records = s if s.size >= SENDFILE_MIN_BYTES else p.log.read_bytes(s)
                self.total += s.size
                self.remaining -= s.size
                if self.committed:
                    aborted = [
                        (a.producer_id, a.first_offset)
                        for a in p.log.aborted_transactions(fp.fetch_offset, lso)
                    ]
        return FetchPartitionResult(fp.partition, 0, hw, lso, start, records, aborted=aborted), not at_end

    def reread(self, changed: set[Partition]) -> None:
        """Read again the watched partitions that changed (those no longer served answer their error),
        and the session's partitions not read yet, which join the answer."""
        session = self.session
        for p in changed:
            slot = self.watched.get(p)
            key = session.key_of(p) if session is not None else None
            if slot is None:
                if session is None or key is None:
                    continue
                fp = session.fetch_of(key)
                parts = self._results.get(p.topic)
                if parts is None:
                    meta = self.broker.replicas.topic(p.topic)
                    parts = self._results[p.topic] = []
                    self.topics.append(FetchTopicResult(p.topic, meta.topic_id if meta else bytes(16), parts))
                slot = self.watched[p] = (parts, len(parts), fp)
                parts.append(FetchPartitionResult(fp.partition, 0, -1, -1, -1, None))
            parts, i, fp = slot
            old = parts[i].records
            if old is not None:  # read again from the same offset: its bytes are counted anew
                n = len(old) if isinstance(old, bytes | bytearray | memoryview) else old.size
                self.total -= n
                self.remaining += n
            try:
                if self.any_replica:
                    _check_replica(p, fp.current_leader_epoch)
                else:
                    check_leader(p, fp.current_leader_epoch)
                self.broker.replicas.partition(p.topic, p.index)  # still hosted here, log online
                parts[i], again = self._read_partition(p, fp)
                if session is not None and key is not None:
                    session.read(key, p, again)
            except KafkaError as e:
                parts[i] = FetchPartitionResult(fp.partition, e.code, -1, -1, -1, None)
                del self.watched[p]
                if session is not None and key is not None:
                    session.read(key, None, True)

    @property
    def wakeable(self) -> bool:
        """Some partition can still bring something: one read here, or any the session has read."""
        return bool(self.watched) or (self.session is not None and bool(self.session.bound))

    @property
    def enough(self) -> bool:
        return self.req.min_bytes <= 0 or (self.total > 0 and self.total >= self.req.min_bytes)


_SAFETY_WALK_S = 60  # a session reads all its partitions at least this often


def _walk_stamp(broker: Broker, req: FetchRequest, version: int, now_s: float) -> object:
    """What a session's reads depend on beyond its partitions' own changes: the topics and partitions
    hosted here, the ACLs and the principal. A session walks all its partitions again when it changes
    (and, when replicas are chosen by rack, every time: that choice follows the other brokers)."""
    if req.replica_id < 0 and version >= 11 and req.rack_id and broker.settings.replica_selector_class:
        return object()
    return (
        broker.replicas.generation,
        broker.authorizer.generation,
        PRINCIPAL.get(),
        CLIENT_HOST.get(),
        int(now_s // _SAFETY_WALK_S),
    )


async def handle_fetch(broker: Broker, hdr: RequestHeader) -> Body | None:
    version = hdr.api_version
    req = decode_fetch_request(version, hdr.body)
    role = FOLLOWER if req.replica_id >= 0 else CONSUMER
    REQUEST_ROLE.set(role)
    loop = asyncio.get_running_loop()
    try:  # KIP-227: an incremental request stands for its session's changed partitions
        session = broker.fetch_sessions.begin(req, version, _walk_stamp(broker, req, version, loop.time()))
    except KafkaError as e:
        broker.metrics.on_error(ApiKey.FETCH, role, e.code)
        return encode_fetch_response(version, [], 0, error_code=e.code)
    full = session is None or req.session_epoch == INITIAL_EPOCH
    deadline = loop.time() + req.max_wait_ms / 1000
    read = _Read(broker, req, version, session)
    if read.clock is not None and read.cluster_ok:
        read.clock.tick(now_ms())  # after the walk: it read the previous tick
    if not (read.enough or read.redirected or req.max_wait_ms <= 0 or not read.wakeable):
        # Long poll: wait for appends to the watched partitions (a session's: all it has read), reading
        # again only those that changed.
        waiter: FetchWaiter[Partition] = FetchWaiter(follower=role is FOLLOWER)
        watched = [] if session is not None else list(read.watched)
        if session is not None:
            session.waiters.add(waiter)
        for p in watched:
            p.add_waiter(waiter)
        try:
            while not read.enough and read.wakeable:
                timeout = deadline - loop.time()
                if timeout <= 0:
                    break
                read.reread(await waiter.wait(timeout))
        finally:
            if session is not None:
                session.waiters.discard(waiter)
            for p in watched:
                p.remove_waiter(waiter)
    topics = read.topics if session is None else session.answer(read.topics, full)
    metrics = broker.metrics
    total_out = 0
    for t in topics:
        n = 0
        for part in t.partitions:
            if part.error_code:
                metrics.on_error(ApiKey.FETCH, role, part.error_code)
            if part.records is not None:
                r = part.records
                n += len(r) if isinstance(r, bytes | bytearray | memoryview) else r.size
        if n:
            metrics.on_fetch_out(t.name, n, follower=role is FOLLOWER)
        total_out += n
    # Consumers' bytes count against consumer_byte_rate (replication is not a client's).
    throttle = charge(broker, hdr, FETCH_QUOTA, total_out) if role is CONSUMER else 0
    return encode_fetch_response(version, topics, throttle, session_id=session.session_id if session else 0)
