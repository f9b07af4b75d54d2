"""DeleteRecords on a partition (broker/partition.py over a real log): the leader moves its log start
offset, followers follow the leader's from fetch responses, and the low watermark (the smallest log start
in the ISR) is what a DeleteRecords request waits for."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from brook.broker.partition import Partition, PartitionRole
from brook.config import TopicConfig
from brook.log import PartitionLog
from brook.protocol.errors import ErrorCode, KafkaError
from tests.support.records import batch


def new_partition(tmp_path: Path, name: str = "t-0", **configs: str) -> Partition:
    log = PartitionLog.open(tmp_path / name, TopicConfig.from_strings(configs))
    return Partition("t", 0, log, node_id=0, leads=False)


def lead(p: Partition, isr: list[int]) -> None:
    p.become_leader(PartitionRole(0, 1, [0, 1, 2], isr))


def fill(p: Partition, n: int) -> None:
    for i in range(n):
        p.append(memoryview(batch([f"v{i}".encode()])))


def test_delete_records_checks_the_offset_against_the_high_watermark(tmp_path: Path) -> None:
    p = new_partition(tmp_path)
    lead(p, [0, 1])
    fill(p, 10)
    p.record_follower_fetch(1, 6, 0)  # high watermark 6
    for bad in (7, -2, -1001):
        with pytest.raises(KafkaError) as e:
            p.delete_records(bad)
        assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert p.delete_records(4) == 4 and p.log.log_start_offset == 4
    assert p.delete_records(2) == 2 and p.log.log_start_offset == 4  # never moves back
    assert p.delete_records(-1) == 6 and p.log.log_start_offset == 6  # -1: the high watermark


def test_delete_records_needs_the_leader_and_a_delete_policy(tmp_path: Path) -> None:
    follower = new_partition(tmp_path)
    follower.become_follower(PartitionRole(1, 1, [0, 1], [0, 1]))
    with pytest.raises(KafkaError) as e:
        follower.delete_records(0)
    assert e.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    compacted = new_partition(tmp_path, "c-0", **{"cleanup.policy": "compact"})
    lead(compacted, [0])
    with pytest.raises(KafkaError) as e:
        compacted.delete_records(0)
    assert e.value.code == ErrorCode.POLICY_VIOLATION


def test_low_watermark_waits_for_the_in_sync_followers(tmp_path: Path) -> None:
    async def main() -> None:
        p = new_partition(tmp_path)
        lead(p, [0, 1, 2])
        fill(p, 10)
        p.record_follower_fetch(1, 10, 0)
        p.record_follower_fetch(2, 10, 0)
        assert p.delete_records(8) == 8
        wait = asyncio.ensure_future(p.wait_low_watermark(8, 5.0))
        await asyncio.sleep(0)
        p.record_follower_fetch(1, 10, 8)  # follower 1 followed; 2 not yet
        await asyncio.sleep(0)
        assert not wait.done() and p.low_watermark == 0
        p.record_follower_fetch(2, 10, 8)
        assert await wait == 8
        # A follower out of the ISR is not waited for; a timeout is REQUEST_TIMED_OUT.
        p.delete_records(9)
        with pytest.raises(KafkaError) as e:
            await p.wait_low_watermark(9, 0.05)
        assert e.value.code == ErrorCode.REQUEST_TIMED_OUT
        lead(p, [0, 1])
        p.record_follower_fetch(1, 10, 9)
        assert await p.wait_low_watermark(9, 0.05) == 9
        # Losing the leadership fails the waits.
        p.delete_records(10)
        wait = asyncio.ensure_future(p.wait_low_watermark(10, 5.0))
        await asyncio.sleep(0)
        p.become_follower(PartitionRole(1, 2, [0, 1, 2], [1]))
        with pytest.raises(KafkaError) as e:
            await wait
        assert e.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    asyncio.run(main())


def test_follower_follows_the_leaders_log_start_within_its_log(tmp_path: Path) -> None:
    leader = new_partition(tmp_path, "leader")
    lead(leader, [0])
    fill(leader, 6)
    data = leader.log.read(0, 1 << 20)
    assert data is not None
    f = new_partition(tmp_path, "follower")
    f.become_follower(PartitionRole(1, 1, [0, 1], [0, 1]))
    f.append_replicated(memoryview(data.read()))
    f.set_follower_log_start_offset(4)
    assert f.log.log_start_offset == 4
    f.set_follower_log_start_offset(100)  # the leader is ahead of this follower's log: its end at most
    assert f.log.log_start_offset == 6 == f.log.log_end_offset
    f.set_follower_log_start_offset(2)
    assert f.log.log_start_offset == 6
