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
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass, field

from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.fetch import (
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchTopic,
    FetchTopicResult,
)

SESSIONLESS, INITIAL_EPOCH, FINAL_EPOCH = 0, 0, -1
CACHE_SLOTS = 1000

# A partition of a session: by topic name (v7-12) or id (13+), and index.
Key = tuple[str | bytes, int]


@dataclass(slots=True)
class _Partition:
    fetch: FetchPartition
    sent: tuple[int, int, int] | None = None  # (high watermark, last stable, log start) last answered


@dataclass(slots=True)
class FetchSession:
    session_id: int
    next_epoch: int = 1
    by_id: bool = False  # v13+: partitions keyed by topic id
    partitions: dict[Key, _Partition] = field(default_factory=dict)

    def request(self) -> list[FetchTopic]:
        """Every partition of the session, as a full request would list them (in the session's order)."""
        topics: dict[str | bytes, FetchTopic] = {}
        for (topic, _), part in self.partitions.items():
            t = topics.get(topic)
            if t is None:
                t = topics[topic] = (
                    FetchTopic(None, topic, []) if isinstance(topic, bytes) else FetchTopic(topic, None, [])
                )
            t.partitions.append(part.fetch)
        return list(topics.values())

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

    def __len__(self) -> int:
        return len(self._sessions)

    def begin(self, req: FetchRequest, version: int) -> FetchSession | None:
        """The session this request belongs to (None: sessionless), with the request's changes applied
        and `req.topics` replaced by the session's whole partition set for an incremental fetch.
        Raises KafkaError (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH) as Kafka answers."""
        if version < 7:
            return None
        sid, epoch = req.session_id, req.session_epoch
        if sid != SESSIONLESS and epoch == FINAL_EPOCH:
            self._sessions.pop(sid, None)
            return None
        if sid == SESSIONLESS:
            if epoch != INITIAL_EPOCH:
                return None
            session = self._new(version >= 13)
            if session is not None:
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
        req.topics = session.request()
        return session

    def _new(self, by_id: bool) -> FetchSession | None:
        if self.slots <= 0:
            return None
        while len(self._sessions) >= self.slots:
            self._sessions.popitem(last=False)  # the least recently used
        sid = random.randint(1, 2**31 - 1)
        while sid in self._sessions:
            sid = random.randint(1, 2**31 - 1)
        session = self._sessions[sid] = FetchSession(sid, by_id=by_id)
        return session

    def _update(self, session: FetchSession, req: FetchRequest) -> None:
        for t in req.topics:
            topic = _key(t, session.by_id)
            for fp in t.partitions:
                part = session.partitions.get((topic, fp.partition))
                if part is None:
                    session.partitions[(topic, fp.partition)] = _Partition(fp)
                else:
                    part.fetch = fp
        for f in req.forgotten:
            topic = (f.topic_id or b"") if session.by_id else (f.name or "")
            for index in f.partitions:
                session.partitions.pop((topic, index), None)
