"""Fetch sessions work per change (broker/fetch_sessions.py, handlers/fetch.py): a follower's idle
session fetch reads no partition, a partition that changes is answered, an idle caught-up follower
stays in the ISR on its session's clock, a follower that stops fetching leaves it after the lag time,
and the follower's fetcher sends only the positions that moved. A real single-node broker's Fetch
handler and partitions, the follower's own encoder and decoder, and a fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from brook.broker.broker import Broker
from brook.broker.partition import Partition, PartitionRole
from brook.broker.topics import TopicMeta, new_topic_id
from brook.handlers.context import Body
from brook.handlers.fetch import handle_fetch
from brook.protocol.frames import RequestHeader
from brook.protocol.replica_fetch import (
    ReplicaFetchPartition,
    ReplicaFetchResult,
    decode_replica_fetch_response,
    encode_replica_fetch,
)
from brook.protocol.versions import ApiKey
from brook.replication.follower import LeaderFetcher, Throttle
from brook.settings.broker import BrokerSettings
from tests.support.records import batch
from tests.unit.broker.conftest import Clock

LAG_MS = 2000
FOLLOWER = 1


@pytest.fixture
def broker(tmp_path: Path, clock: Clock) -> Iterator[Broker]:
    b = Broker(BrokerSettings(node_id=0, data_dir=tmp_path / "data"))
    b.replicas.apply_topic(TopicMeta("t", new_topic_id(), 3))
    for p in partitions(b):
        p.become_leader(PartitionRole(0, 1, [0, FOLLOWER], [0, FOLLOWER]))
    yield b
    for p in partitions(b):
        p.close()


class Walks:
    """Counts the follower fetches recorded per partition (the leader's per-partition work)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count: dict[int, int] = {}
        original = Partition.record_follower_fetch

        def counting(p: Partition, *args: object, **kwargs: object) -> None:
            self.count[p.index] = self.count.get(p.index, 0) + 1
            original(p, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(Partition, "record_follower_fetch", counting)

    def take(self) -> dict[int, int]:
        out, self.count = self.count, {}
        return out


def partitions(b: Broker) -> list[Partition]:
    return sorted(b.replicas.partitions(), key=lambda p: p.index)


def fetch(
    b: Broker,
    positions: dict[int, int],
    session: tuple[int, int],
    forgotten: list[int] | None = None,
    max_wait_ms: int = 0,
) -> tuple[int, list[ReplicaFetchResult]]:
    """One fetch of the follower: (session id, results)."""
    parts = [ReplicaFetchPartition("t", i, offset, 1, 0, 1 << 20) for i, offset in positions.items()]
    gone = [("t", i) for i in forgotten or []]
    body = encode_replica_fetch(FOLLOWER, max_wait_ms, 1, 1 << 26, parts, session[0], session[1], gone)
    hdr = RequestHeader(ApiKey.FETCH, 11, 1, "test", memoryview(body))
    error, sid, results = decoded(asyncio.run(handle_fetch(b, hdr)))
    assert error == 0
    return sid, results


def decoded(out: Body | None) -> tuple[int, int, list[ReplicaFetchResult]]:
    assert out is not None
    chunks = [out] if isinstance(out, bytes) else out
    assert all(isinstance(c, bytes) for c in chunks)  # small records: no sendfile range
    raw = b"".join(c for c in chunks if isinstance(c, bytes))
    return decode_replica_fetch_response(memoryview(raw))


def open_session(b: Broker) -> int:
    """A new session at the log ends, caught up; its id."""
    ends = {p.index: p.log.log_end_offset for p in partitions(b)}
    sid, results = fetch(b, ends, (0, 0))
    assert sid != 0 and sorted(r.partition for r in results) == [0, 1, 2]
    return sid


def test_an_idle_session_fetch_touches_no_partition_and_a_change_is_answered(
    broker: Broker, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    walks = Walks(monkeypatch)
    sid = open_session(broker)
    assert walks.take() == {0: 1, 1: 1, 2: 1}
    for epoch in (1, 2, 3):
        clock.advance(500)
        assert fetch(broker, {}, (sid, epoch)) == (sid, [])
    assert walks.take() == {}  # nothing changed: no partition was looked at
    # New records on partition 1: only it is read and answered, with them.
    p1 = partitions(broker)[1]
    p1.append(memoryview(batch([b"a", b"b"])))
    _, results = fetch(broker, {}, (sid, 4))
    assert [(r.partition, len(r.records) > 0) for r in results] == [(1, True)]
    assert walks.take() == {1: 1}
    # The follower has them: its new position moves the high watermark, answered at once.
    _, results = fetch(broker, {1: 2}, (sid, 5))
    assert walks.take() == {1: 1}
    assert [(r.partition, r.high_watermark, len(r.records)) for r in results] == [(1, 2, 0)]
    assert fetch(broker, {}, (sid, 6)) == (sid, [])  # settled again
    assert fetch(broker, {}, (sid, 7)) == (sid, [])
    assert walks.take() == {}
    # A log start change (DeleteRecords) is answered too.
    p1.delete_records(1)
    _, results = fetch(broker, {}, (sid, 8))
    assert [(r.partition, r.log_start_offset) for r in results] == [(1, 1)]


def test_a_change_during_the_long_poll_wakes_and_joins_the_answer(broker: Broker, clock: Clock) -> None:
    sid = open_session(broker)
    p2 = partitions(broker)[2]

    async def scenario() -> list[ReplicaFetchResult]:
        body = encode_replica_fetch(FOLLOWER, 30_000, 1, 1 << 26, [], sid, 1, [])
        hdr = RequestHeader(ApiKey.FETCH, 11, 2, "t", memoryview(body))
        task = asyncio.ensure_future(handle_fetch(broker, hdr))
        await asyncio.sleep(0.05)
        assert not task.done()  # long-polling: nothing new
        p2.append(memoryview(batch([b"x"])))
        return decoded(await asyncio.wait_for(task, 10))[2]

    results = asyncio.run(scenario())
    assert [(r.partition, len(r.records) > 0) for r in results] == [(2, True)]


def test_an_idle_caught_up_follower_stays_in_the_isr_and_one_that_stops_is_dropped(
    broker: Broker, clock: Clock
) -> None:
    sid = open_session(broker)
    ps = partitions(broker)
    due = broker.replicas.isr_due
    assert all(p.isr_settled(LAG_MS) for p in ps)
    due.clear()  # what the ISR loop does with settled partitions
    for epoch in range(1, 13):  # 6 s of idle fetches, three lag times
        clock.advance(500)
        fetch(broker, {}, (sid, epoch))
        assert [p.isr_change(LAG_MS) for p in ps] == [None, None, None]
        assert broker.fetch_sessions.stale_partitions(clock(), LAG_MS) == []
    assert not due  # nothing for the ISR loop to look at
    # The follower stops fetching: after the lag time its session's partitions are due, and it leaves.
    clock.advance(LAG_MS)
    assert broker.fetch_sessions.stale_partitions(clock(), LAG_MS) == []
    assert [p.isr_change(LAG_MS) for p in ps] == [None, None, None]
    clock.advance(1)
    assert sorted(p.index for p in broker.fetch_sessions.stale_partitions(clock(), LAG_MS)) == [0, 1, 2]
    assert broker.fetch_sessions.stale_partitions(clock(), LAG_MS) == []  # once per stop
    assert [p.isr_change(LAG_MS) for p in ps] == [[0], [0], [0]]
    assert not any(p.isr_settled(LAG_MS) for p in ps)


def test_a_follower_behind_is_not_caught_up_by_its_session_clock(broker: Broker, clock: Clock) -> None:
    """Kafka's rule on every fetch of the session: at the log end, or at the previous fetch's log end."""
    sid = open_session(broker)
    p0 = partitions(broker)[0]
    p0.append(memoryview(batch([b"a"])))
    clock.advance(500)
    fetch(broker, {}, (sid, 1))  # returns the record; the follower does not take it
    caught_up = p0.followers[FOLLOWER].caught_up_ms
    for epoch in range(2, 8):
        clock.advance(500)
        fetch(broker, {}, (sid, epoch))
    assert p0.followers[FOLLOWER].caught_up_ms == caught_up  # still behind: no credit
    assert p0.isr_change(LAG_MS) == [0]
    assert not p0.isr_settled(LAG_MS)
    assert partitions(broker)[1].isr_change(LAG_MS) is None


def test_forgetting_a_partition_stops_counting_the_session_for_it(broker: Broker, clock: Clock) -> None:
    sid = open_session(broker)
    p0 = partitions(broker)[0]
    fetch(broker, {}, (sid, 1), forgotten=[0])
    for epoch in range(2, 8):
        clock.advance(500)
        fetch(broker, {}, (sid, epoch))
    assert p0.isr_change(LAG_MS) == [0]
    assert partitions(broker)[1].isr_change(LAG_MS) is None


def test_a_new_leader_epoch_is_answered_and_walked_again(broker: Broker, clock: Clock) -> None:
    sid = open_session(broker)
    p0 = partitions(broker)[0]
    p0.become_leader(PartitionRole(0, 2, [0, FOLLOWER], [0, FOLLOWER]))
    # The session still holds epoch 1 for it: the leader answers the fence, and keeps answering it.
    for epoch in (1, 2):
        _, results = fetch(broker, {}, (sid, epoch))
        assert [(r.partition, r.error_code) for r in results] == [(0, 74)]  # FENCED_LEADER_EPOCH


def fetcher_for(ps: list[Partition]) -> LeaderFetcher:
    f = LeaderFetcher(FOLLOWER, 0, "127.0.0.1", 1, lambda p: False, Throttle(0))
    for p in ps:
        f.add(p)
    f._needs_truncation.clear()  # as after OffsetForLeaderEpoch
    return f


def test_the_fetcher_sends_only_positions_that_moved(tmp_path: Path) -> None:
    from brook.config import TopicConfig
    from brook.log import PartitionLog

    ps = [
        Partition("t", i, PartitionLog.open(tmp_path / f"t-{i}", TopicConfig()), FOLLOWER, leads=False)
        for i in range(3)
    ]
    for p in ps:
        p.become_follower(PartitionRole(0, 1, [0, FOLLOWER], [0, FOLLOWER]))
    f = fetcher_for(ps)
    changed, forgotten = f._changes()
    assert sorted(changed) == [("t", 0), ("t", 1), ("t", 2)] and forgotten == []  # a new session
    f._session_opened(7, changed, forgotten)
    assert f._changes() == ({}, [])  # idle
    # Records appended, and a new leader epoch: each partition is sent again, once.
    ps[1].append_replicated(memoryview(batch([b"a"])))
    ps[2].become_follower(PartitionRole(0, 2, [0, FOLLOWER], [0, FOLLOWER]))
    changed, forgotten = f._changes()
    assert changed == {("t", 1): (1, 1, 0), ("t", 2): (0, 2, 0)} and forgotten == []
    f._session_opened(7, changed, forgotten)
    assert f._changes() == ({}, [])
    # A high watermark from the leader moves no position; removing a partition forgets it.
    ps[1].set_follower_high_watermark(1)
    f.remove(ps[0])
    assert f._changes() == ({}, [("t", 0)])
    for p in ps:
        p.close()
