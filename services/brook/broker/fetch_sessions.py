"""Incremental fetch sessions (KIP-227): a client that asks for one (session id 0, epoch 0) gets a
session id; its later requests (that id, the next epoch) list only partitions whose fetch position
changed and those it forgets, and the responses hold only partitions with records, an error or a
changed high watermark, last stable offset or log start. The broker keeps each session's partitions,
positions and what it last answered for them.

    session 0, epoch -1   sessionless full fetch (Brook's followers, librdkafka)
    session 0, epoch 0    a new full session (its id in the response; 0 when the cache is full of
                          sessions used more recently)
    session S, epoch -1   close S, then a sessionless full fetch
    session S, epoch N>0  incremental: FETCH_SESSION_ID_NOT_FOUND for an unknown S,
                          INVALID_FETCH_SESSION_EPOCH unless N is the epoch S expects next

The cache is bounded (Kafka's max.incremental.fetch.session.cache.slots, 1000): the least recently
used session goes first. Pure bookkeeping: no I/O.

Per change, not per partition: Kafka reads every session partition on every fetch and answers those
that changed. Here a session listens to the partitions it has read (Partition.add_waiter) and keeps
`dirty` the keys that may answer differently from last time: positions the client moved, partitions
that changed (records, high watermark, last stable offset, log start, role, log), and those whose
answer would not be the same again (errors, records still to read below the read's end). An
incremental request stands for its dirty keys only; an idle one touches no partition. All keys are
walked again when the `stamp` the handler gives changes (topics or partitions hosted here, ACLs, the
principal, and once a minute as a safety net). A follower's session has a `clock` that ticks on each
of its fetches: it counts as a fetch of every partition not walked (replication/follower_progress.py).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.fetch import (
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchTopic,
    FetchTopicResult,
)
from brook.replication.follower_progress import FetchClock

if TYPE_CHECKING:
    from .fetch_waiter import FetchWaiter
    from .partition import Partition

SESSIONLESS, INITIAL_EPOCH, FINAL_EPOCH = 0, 0, -1
CACHE_SLOTS = 1000

# A partition of a session: by topic name (v7-12) or id (13+), and index.
Key = tuple[str | bytes, int]


@dataclass(slots=True)
class _Partition:
    fetch: FetchPartition
    seq: int  # the session's order
    sent: tuple[int, int, int] | None = None  # (high watermark, last stable, log start) last answered
    bound: Partition | None = None  # the partition last read for it, which tells the session its changes


@dataclass(slots=True, eq=False)
class FetchSession:
    session_id: int
    next_epoch: int = 1
    by_id: bool = False  # v13+: partitions keyed by topic id
    replica_id: int = -1  # a follower's session (>= 0) has a clock
    partitions: dict[Key, _Partition] = field(default_factory=dict)
    dirty: set[Key] = field(default_factory=set)  # to read on the next fetch
    bound: dict[Partition, Key] = field(default_factory=dict)
    clock: FetchClock | None = None
    stamp: object = None  # what the last full walk was made under
    waiters: set[FetchWaiter[Partition]] = field(default_factory=set)  # the long polls under way
    _seq: int = 0

    def wake(self, p: Partition, data: bool) -> None:
        """A partition read for this session changed (Partition.wake_fetchers)."""
        key = self.bound.get(p)
        if key is not None:
            self.dirty.add(key)
            for w in self.waiters:
                w.wake(p, data)

    def read(self, key: Key, p: Partition | None, again: bool) -> None:
        """`key` was read from `p` (None: answered an error); `again`: a read at the same position
        would not answer the same (an error, records below the read's end), so it stays dirty."""
        part = self.partitions.get(key)
        if part is None:
            return
        if p is not None and part.bound is not p:
            self._unbind(part)
            part.bound = p
            self.bound[p] = key
            p.add_waiter(self)
        if p is None:  # read again on every fetch, answered in full once the error is gone (as Kafka)
            self._unbind(part)
            part.sent = None
        if again or p is None:
            self.dirty.add(key)
        else:
            self.dirty.discard(key)

    def key_of(self, p: Partition) -> Key | None:
        return self.bound.get(p)

    def fetch_of(self, key: Key) -> FetchPartition:
        return self.partitions[key].fetch

    def request(self, keys: set[Key] | None = None) -> list[FetchTopic]:
        """The session's partitions in `keys` (all when None), as a full request would list them (in the
        session's order)."""
        parts = self.partitions
        chosen = parts.items() if keys is None else sorted(
            ((k, parts[k]) for k in keys if k in parts), key=lambda kp: kp[1].seq
        )  # fmt: skip
        topics: dict[str | bytes, FetchTopic] = {}
        for (topic, _), part in chosen:
            t = topics.get(topic)
            if t is None:
                t = topics[topic] = (
                    FetchTopic(None, topic, []) if isinstance(topic, bytes) else FetchTopic(topic, None, [])
                )
            t.partitions.append(part.fetch)
        return list(topics.values())

    def close(self) -> None:
        """Stop listening to the partitions (and counting the follower's fetches for them)."""
        for part in self.partitions.values():
            self._unbind(part)

    def _unbind(self, part: _Partition) -> None:
        p = part.bound
        if p is None:
            return
        part.bound = None
        self.bound.pop(p, None)
        p.remove_waiter(self)
        if self.clock is not None:
            p.detach_clock(self.replica_id, self.clock)

    def _add(self, key: Key, fp: FetchPartition) -> None:
        part = self.partitions.get(key)
        if part is None:
            self.partitions[key] = _Partition(fp, self._seq)
            self._seq += 1
        else:
            part.fetch = fp
        self.dirty.add(key)

    def _forget(self, key: Key) -> None:
        part = self.partitions.pop(key, None)
        if part is not None:
            self._unbind(part)
        self.dirty.discard(key)

    def answer(self, topics: list[FetchTopicResult], full: bool) -> list[FetchTopicResult]:
        """Record what goes out; an incremental answer keeps only what changed for the client."""
        out: list[FetchTopicResult] = []
        for t in topics:
            key_topic: str | bytes = t.topic_id if self.by_id else t.name
            kept: list[FetchPartitionResult] = []
            for r in t.partitions:
                part = self.partitions.get((key_topic, r.partition))
                now = (r.high_watermark, r.last_stable_offset, r.log_start_offset)
                changed = part is None or part.sent != now
                if part is not None and r.error_code == 0:
                    part.sent = now
                if full or r.error_code or r.records is not None or changed or r.preferred_read_replica >= 0:
                    kept.append(r)
            if kept:
                out.append(FetchTopicResult(t.name, t.topic_id, kept))
        return out


def _key(topic: FetchTopic, by_id: bool) -> str | bytes:
    return (topic.topic_id or b"") if by_id else (topic.name or "")


class FetchSessionCache:
    def __init__(self, slots: int = CACHE_SLOTS) -> None:
        self.slots = slots
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._followers: dict[int, FetchSession] = {}  # the sessions of replicas (with a clock)

    def __len__(self) -> int:
        return len(self._sessions)

    def stale_partitions(self, now_ms: float, lag_max_ms: int) -> list[Partition]:
        """The partitions of followers' sessions that stopped fetching for more than the lag time, each
        session's once until it fetches again (the ISR loop looks at them from then on)."""
        out: list[Partition] = []
        for s in self._followers.values():
            c = s.clock
            if c is not None and not c.stale and now_ms - c.fetch_ms > lag_max_ms:
                c.stale = True
                out += s.bound
        return out

    def begin(self, req: FetchRequest, version: int, stamp: object = None) -> FetchSession | None:
        """The session this request belongs to (None: sessionless), with the request's changes applied
        and, for an incremental fetch, `req.topics` replaced by the session's partitions to read: the
        dirty ones, or all of them when `stamp` differs from the last full walk's.
        Raises KafkaError (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH) as Kafka answers."""
        if version < 7:
            return None
        sid, epoch = req.session_id, req.session_epoch
        if sid != SESSIONLESS and epoch == FINAL_EPOCH:
            self._drop(sid)
            return None
        if sid == SESSIONLESS:
            if epoch != INITIAL_EPOCH:
                return None
            session = self._new(version >= 13, req.replica_id)
            if session is not None:
                session.stamp = stamp
                self._update(session, req)
            return session
        session = self._sessions.get(sid)
        if session is None:
            raise KafkaError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, f"no fetch session {sid}")
        if epoch != session.next_epoch:
            raise KafkaError(
                ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                f"session {sid} expects epoch {session.next_epoch}, not {epoch}",
            )
        self._sessions.move_to_end(sid)
        session.next_epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        self._update(session, req)
        if session.stamp != stamp or req.replica_id != session.replica_id:
            session.stamp = stamp
            req.topics = session.request()
        else:
            req.topics = session.request(session.dirty)
        return session

    def _new(self, by_id: bool, replica_id: int) -> FetchSession | None:
        if self.slots <= 0:
            return None
        while len(self._sessions) >= self.slots:
            # The least recently used consumer's session goes; followers' sessions are privileged (as in
            # Kafka's cache): a thousand consumers must not push replication back to full fetches.
            victim = next((sid for sid, s in self._sessions.items() if s.replica_id < 0), None)
            if victim is None:
                if replica_id < 0:
                    return None  # every slot holds a follower's session: this consumer goes sessionless
                victim = next(iter(self._sessions))
            self._drop(victim)
        sid = random.randint(1, 2**31 - 1)
        while sid in self._sessions:
            sid = random.randint(1, 2**31 - 1)
        session = self._sessions[sid] = FetchSession(sid, by_id=by_id, replica_id=replica_id)
        if replica_id >= 0:
            session.clock = FetchClock()
            self._followers[sid] = session
        return session

    def _drop(self, sid: int) -> None:
        session = self._sessions.pop(sid, None)
        self._followers.pop(sid, None)
        if session is not None:
            session.close()

    def _update(self, session: FetchSession, req: FetchRequest) -> None:
        for t in req.topics:
            topic = _key(t, session.by_id)
            for fp in t.partitions:
                session._add((topic, fp.partition), fp)
        for f in req.forgotten:
            topic = (f.topic_id or b"") if session.by_id else (f.name or "")
            for index in f.partitions:
                session._forget((topic, index))
