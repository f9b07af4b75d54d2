"""The leader's replication decisions in broker/partition.py, on a real log with a fake clock: the high
watermark (smallest log end in the ISR), ISR shrink after replica.lag.time.max.ms, ISR expansion of
caught-up followers (never of a dead one), acks=all completion and min.insync.replicas."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from brook.broker.partition import Partition, PartitionRole
from brook.config import TopicConfig
from brook.log import PartitionLog
from brook.protocol.errors import ErrorCode, KafkaError
from tests.support.records import batch
from tests.unit.broker.conftest import Clock

LAG_MS = 2000


def new_partition(tmp_path: Path, min_insync: int = 2) -> Partition:
    config = TopicConfig.from_strings({"min.insync.replicas": str(min_insync)})
    log = PartitionLog.open(tmp_path / "t-0", config)
    return Partition("t", 0, log, node_id=0, leads=False)


def lead(p: Partition, epoch: int = 1, isr: list[int] | None = None) -> None:
    p.become_leader(PartitionRole(0, epoch, [0, 1, 2], isr if isr is not None else [0, 1, 2]))


def append(p: Partition, n: int, acks: int = 1) -> int:
    """Append `n` one-record batches; returns the log end offset."""
    for i in range(n):
        p.append(memoryview(batch([f"v{i}".encode()])), acks=acks)
    return p.log.log_end_offset


def test_high_watermark_is_the_smallest_log_end_in_the_isr(tmp_path: Path, clock: Clock) -> None:
    p = new_partition(tmp_path)
    lead(p)
    assert append(p, 10) == 10
    assert p.high_watermark == 0  # no follower has fetched anything yet
    p.record_follower_fetch(1, 6)
    assert p.high_watermark == 0  # follower 2 has nothing
    p.record_follower_fetch(2, 4)
    assert p.high_watermark == 4
    p.record_follower_fetch(2, 10)
    assert p.high_watermark == 6
    p.record_follower_fetch(1, 10)
    assert p.high_watermark == 10
    # A replica outside the ISR does not hold the high watermark back.
    lead(p, isr=[0, 1])
    append(p, 5)
    p.record_follower_fetch(1, 15)
    assert p.high_watermark == 15
    # Unknown replica ids (not in the assignment) are ignored.
    p.record_follower_fetch(7, 0)
    assert p.high_watermark == 15


def test_high_watermark_never_moves_back(tmp_path: Path, clock: Clock) -> None:
    p = new_partition(tmp_path)
    lead(p)
    append(p, 5)
    p.record_follower_fetch(1, 5)
    p.record_follower_fetch(2, 5)
    assert p.high_watermark == 5
    p.record_follower_fetch(2, 3)  # an old fetch arriving late
    assert p.high_watermark == 5


def test_follower_mirrors_the_leaders_high_watermark_within_its_log(tmp_path: Path, clock: Clock) -> None:
    leader = new_partition(tmp_path / "leader")
    lead(leader)
    append(leader, 4)
    data = leader.log.read(0, 1 << 20)
    assert data is not None
    follower = new_partition(tmp_path / "follower")
    follower.become_follower(PartitionRole(0, 1, [0, 1, 2], [0, 1, 2]))
    follower.append_replicated(memoryview(data.read()))
    follower.set_follower_high_watermark(3)
    assert follower.high_watermark == 3
    follower.set_follower_high_watermark(100)  # the leader has more than this follower fetched
    assert follower.high_watermark == 4


def test_isr_shrinks_after_the_lag_time_without_catching_up(tmp_path: Path, clock: Clock) -> None:
    p = new_partition(tmp_path)
    lead(p)
    append(p, 3)
    clock.advance(500)
    p.record_follower_fetch(1, 3)  # caught up
    # Followers get a full lag window from the leadership start.
    clock.advance(LAG_MS - 500)
    assert p.isr_change(LAG_MS) is None
    clock.advance(1)
    assert p.isr_change(LAG_MS) == [0, 1]  # 2 never fetched
    # Follower 1 stays while it keeps catching up...
    for _ in range(5):
        clock.advance(LAG_MS // 2)
        p.record_follower_fetch(1, p.log.log_end_offset)
    assert p.isr_change(LAG_MS) == [0, 1]
    # ...and leaves once it fetches without reaching the log end for longer than the lag time.
    append(p, 2)
    stuck = p.log.log_end_offset - 1
    for _ in range(3):
        clock.advance(LAG_MS // 2)
        p.record_follower_fetch(1, stuck)
        p.record_follower_fetch(2, stuck)
    assert p.isr_change(LAG_MS) == [0]


def test_a_follower_behind_a_busy_leader_is_in_sync_when_it_reaches_the_previous_log_end(
    tmp_path: Path, clock: Clock
) -> None:
    """Kafka's rule: a fetch reaching the leader's log end as of the previous fetch counts as caught up
    at that previous fetch, so a follower of a leader that appends all the time is not dropped."""
    p = new_partition(tmp_path)
    lead(p)
    append(p, 1)
    for _ in range(10):
        previous_end = p.log.log_end_offset
        append(p, 1)  # the leader is always one batch ahead when the next fetch comes
        clock.advance(LAG_MS // 2)
        p.record_follower_fetch(1, previous_end)
        p.record_follower_fetch(2, previous_end)
    assert p.log.log_end_offset > p.followers[1].log_end_offset
    assert p.isr_change(LAG_MS) is None


def test_isr_expands_when_an_out_of_sync_follower_catches_up(tmp_path: Path, clock: Clock) -> None:
    p = new_partition(tmp_path)
    lead(p, isr=[0, 1])
    append(p, 8)
    p.record_follower_fetch(1, 8)
    assert p.high_watermark == 8
    clock.advance(10)
    p.record_follower_fetch(2, 5)  # alive, still below the high watermark
    assert p.isr_change(LAG_MS) is None
    clock.advance(10)
    p.record_follower_fetch(2, 8)
    assert p.isr_change(LAG_MS) == [0, 1, 2]


def test_isr_expansion_needs_the_current_leader_epoch(tmp_path: Path, clock: Clock) -> None:
    """A follower at or past the high watermark but below the start of the leader's epoch may still hold
    a deposed leader's records there: not in sync yet."""
    old = new_partition(tmp_path / "old")
    lead(old)
    append(old, 10)
    data = old.log.read(0, 1 << 20)
    assert data is not None
    p = new_partition(tmp_path / "new")
    p.become_follower(PartitionRole(1, 1, [0, 1, 2], [0, 1, 2]))
    p.append_replicated(memoryview(data.read()))
    p.set_follower_high_watermark(5)
    p.become_leader(PartitionRole(0, 2, [0, 1, 2], [0, 1]))  # epoch 2 starts at offset 10
    assert p.high_watermark == 5
    clock.advance(10)
    p.record_follower_fetch(2, 7)  # >= the high watermark, < the epoch start
    assert p.isr_change(LAG_MS) is None
    clock.advance(10)
    p.record_follower_fetch(2, 10)
    assert p.isr_change(LAG_MS) == [0, 1, 2]


def test_a_dead_follower_is_not_readmitted_from_its_stale_log_end(tmp_path: Path, clock: Clock) -> None:
    """Regression (cabb6de): a follower removed from the ISR (the controller saw it die) had a log end at
    the high watermark; the leader must not put it back before it fetches again."""
    p = new_partition(tmp_path)
    lead(p)
    append(p, 5)
    p.record_follower_fetch(1, 5)
    p.record_follower_fetch(2, 5)
    assert p.high_watermark == 5
    clock.advance(100)
    lead(p, isr=[0, 1])  # the controller removed dead broker 2; same leader epoch
    for _ in range(10):  # the ISR loop runs every 250 ms
        clock.advance(250)
        p.record_follower_fetch(1, 5)
        assert p.isr_change(LAG_MS) is None
    clock.advance(250)
    p.record_follower_fetch(2, 5)  # it is back and fetching
    assert p.isr_change(LAG_MS) == [0, 1, 2]


def test_acks_all_completes_when_every_isr_member_has_the_records(tmp_path: Path, clock: Clock) -> None:
    async def scenario() -> None:
        p = new_partition(tmp_path)
        lead(p)
        out = p.append(memoryview(batch([b"a", b"b", b"c"])), acks=-1)
        assert (out.base_offset, out.last_offset) == (0, 2)
        waiting = asyncio.ensure_future(p.wait_committed(out.last_offset, 1, 10))
        await asyncio.sleep(0)
        p.record_follower_fetch(1, 3)
        p.record_follower_fetch(2, 2)  # one record short
        await asyncio.sleep(0)
        assert not waiting.done()
        p.record_follower_fetch(2, 3)
        await asyncio.wait_for(waiting, 1)  # no exception: acknowledged
        # Already committed: answered at once.
        await asyncio.wait_for(p.wait_committed(1, 1, 10), 1)

    asyncio.run(scenario())


def test_acks_all_times_out_without_the_followers(tmp_path: Path, clock: Clock) -> None:
    async def scenario() -> None:
        p = new_partition(tmp_path)
        lead(p)
        out = p.append(memoryview(batch([b"a"])), acks=-1)
        p.record_follower_fetch(1, 1)
        with pytest.raises(KafkaError) as e:
            await p.wait_committed(out.last_offset, 1, 0.05)
        assert e.value.code == ErrorCode.REQUEST_TIMED_OUT

    asyncio.run(scenario())


def test_acks_all_fails_when_the_isr_shrinks_below_min_insync_while_waiting(
    tmp_path: Path, clock: Clock
) -> None:
    async def scenario() -> None:
        p = new_partition(tmp_path, min_insync=2)
        lead(p)
        out = p.append(memoryview(batch([b"a"])), acks=-1)
        waiting = asyncio.ensure_future(p.wait_committed(out.last_offset, 1, 10))
        await asyncio.sleep(0)
        lead(p, isr=[0])  # both followers dropped: the high watermark reaches the record on the leader alone
        with pytest.raises(KafkaError) as e:
            await asyncio.wait_for(waiting, 1)
        assert e.value.code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND

    asyncio.run(scenario())


def test_acks_all_waiters_fail_when_leadership_is_lost(tmp_path: Path, clock: Clock) -> None:
    async def scenario() -> None:
        p = new_partition(tmp_path)
        lead(p)
        out = p.append(memoryview(batch([b"a"])), acks=-1)
        waiting = asyncio.ensure_future(p.wait_committed(out.last_offset, 1, 10))
        await asyncio.sleep(0)
        p.become_follower(PartitionRole(1, 2, [0, 1, 2], [1, 2]))
        with pytest.raises(KafkaError) as e:
            await asyncio.wait_for(waiting, 1)
        assert e.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    asyncio.run(scenario())


@pytest.mark.parametrize("then_leads_again", [False, True])
def test_acks_all_waiting_that_starts_after_a_leadership_move_is_refused_at_once(
    tmp_path: Path, clock: Clock, then_leads_again: bool
) -> None:
    """Produce appends, then waits in a task that runs later: a move in between (the etcd watch ran
    first) must not leave a waiter a follower never releases, nor acknowledge offsets the next epoch
    may have truncated and rewritten."""

    async def scenario() -> None:
        p = new_partition(tmp_path)
        lead(p)
        out = p.append(memoryview(batch([b"a"])), acks=-1)
        epoch = p.leader_epoch
        p.become_follower(PartitionRole(1, 2, [0, 1, 2], [0, 1, 2]))
        if then_leads_again:
            lead(p, epoch=3)
            p.record_follower_fetch(1, 1)
            p.record_follower_fetch(2, 1)
            assert p.high_watermark > out.last_offset  # committed, but in an epoch it was not written in
        with pytest.raises(KafkaError) as e:
            await asyncio.wait_for(p.wait_committed(out.last_offset, epoch, 10), 1)
        assert e.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    asyncio.run(scenario())


def test_acks_all_is_refused_below_min_insync_and_nothing_is_written(tmp_path: Path, clock: Clock) -> None:
    p = new_partition(tmp_path, min_insync=2)
    lead(p, isr=[0])
    with pytest.raises(KafkaError) as e:
        p.append(memoryview(batch([b"a"])), acks=-1)
    assert e.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.log.log_end_offset == 0
    # acks=1 does not need the ISR; min.insync.replicas 2 with an ISR of 2 accepts acks=all.
    assert append(p, 1, acks=1) == 1
    lead(p, isr=[0, 1])
    assert append(p, 1, acks=-1) == 2


def test_only_the_leader_appends(tmp_path: Path, clock: Clock) -> None:
    p = new_partition(tmp_path)
    p.become_follower(PartitionRole(1, 1, [0, 1, 2], [0, 1, 2]))
    with pytest.raises(KafkaError) as e:
        p.append(memoryview(batch([b"a"])))
    assert e.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_leader_stamps_its_epoch_and_records_where_it_starts(tmp_path: Path, clock: Clock) -> None:
    p = new_partition(tmp_path)
    lead(p, epoch=3)
    append(p, 2)
    lead(p, epoch=5)
    append(p, 3)
    epochs = [h.partition_leader_epoch for h in p.log.iter_batch_headers()]
    assert epochs == [3, 3, 5, 5, 5]
    assert p.epochs.entries() == [(3, 0), (5, 2)]
    # What OffsetForLeaderEpoch answers a follower of epoch 3, 4 and 5.
    assert p.epochs.end_offset_for(3, p.log.log_end_offset) == (3, 2)
    assert p.epochs.end_offset_for(4, p.log.log_end_offset) == (3, 2)
    assert p.epochs.end_offset_for(5, p.log.log_end_offset) == (5, 5)
    # As Kafka: older than any epoch ends where the first starts, newer than any is undefined.
    assert p.epochs.end_offset_for(2, p.log.log_end_offset) == (2, 0)
    assert p.epochs.end_offset_for(6, p.log.log_end_offset) == (-1, -1)
