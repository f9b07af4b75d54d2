"""Fetch from follower (KIP-392): Kafka's RackAwareReplicaSelector decisions on a leader, and a
follower serving consumers only up to a high watermark its current leader sent."""

from __future__ import annotations

from pathlib import Path

from brook.broker.partition import Partition, PartitionRole
from brook.config import TopicConfig
from brook.log import PartitionLog
from brook.replication.replica_selector import preferred_read_replica
from tests.unit.log.log_batches import make_batch

RACKS = {0: "a", 1: "b", 2: "c", 3: "b"}


def _partition(tmp_path: Path, node_id: int = 0) -> Partition:
    log = PartitionLog.open(tmp_path / f"p{node_id}", TopicConfig(), clock=lambda: 1_000)
    return Partition("t", 0, log, node_id=node_id, leads=False)


def _leader(tmp_path: Path, replicas: list[int], isr: list[int]) -> Partition:
    p = _partition(tmp_path)
    p.become_leader(PartitionRole(0, 1, replicas, isr))
    return p


def test_the_follower_in_the_client_rack_is_preferred(tmp_path: Path) -> None:
    p = _leader(tmp_path, [0, 1, 2], [0, 1, 2])
    p.record_follower_fetch(1, 0, 0)
    p.record_follower_fetch(2, 0, 0)
    assert preferred_read_replica(p, "b", 0, RACKS) == 1
    assert preferred_read_replica(p, "c", 0, RACKS) == 2
    assert preferred_read_replica(p, "a", 0, RACKS) is None  # the leader's own rack: the leader
    assert preferred_read_replica(p, "z", 0, RACKS) is None  # no replica there: the leader
    assert preferred_read_replica(p, "", 0, RACKS) is None  # no client rack: the leader
    assert preferred_read_replica(p, "b", 0, {0: "a", 2: "c"}) is None  # broker 1 not live


def test_only_in_sync_followers_holding_the_offset_qualify(tmp_path: Path) -> None:
    p = _leader(tmp_path, [0, 1, 2, 3], [0, 1, 2])  # 3 is out of the ISR
    p.record_follower_fetch(1, 0, 0)
    p.record_follower_fetch(3, 0, 0)
    assert preferred_read_replica(p, "b", 0, RACKS) == 1
    assert preferred_read_replica(p, "b", 1, RACKS) is None  # past follower 1's log end
    p.record_follower_fetch(1, 5, 3)
    assert preferred_read_replica(p, "b", 2, RACKS) is None  # below follower 1's log start
    assert preferred_read_replica(p, "b", 3, RACKS) == 1


def test_the_most_caught_up_follower_of_the_rack_wins(tmp_path: Path) -> None:
    p = _leader(tmp_path, [0, 1, 2, 3], [0, 1, 2, 3])
    p.record_follower_fetch(1, 0, 0)
    p.record_follower_fetch(3, 0, 0)
    assert preferred_read_replica(p, "b", 0, RACKS) == 3  # equal log ends: the latest caught up
    p.record_follower_fetch(1, 0, 0)
    assert preferred_read_replica(p, "b", 0, RACKS) == 1


def test_a_follower_does_not_choose(tmp_path: Path) -> None:
    p = _partition(tmp_path, node_id=1)
    p.become_follower(PartitionRole(0, 1, [0, 1], [0, 1]))
    assert preferred_read_replica(p, "b", 0, RACKS) is None


def test_a_follower_serves_consumers_up_to_the_leaders_high_watermark(tmp_path: Path) -> None:
    p = _partition(tmp_path, node_id=1)
    p.append_replicated(memoryview(make_batch(5)))
    p.become_follower(PartitionRole(0, 1, [0, 1], [0, 1]))
    assert p.consumer_high_watermark == 0  # its own high watermark is not known to be committed
    p.set_follower_high_watermark(3)
    assert p.consumer_high_watermark == 3
    p.become_follower(PartitionRole(0, 1, [0, 1], [0]))  # same leader and epoch: still known
    assert p.consumer_high_watermark == 3
    p.become_follower(PartitionRole(2, 2, [0, 1, 2], [1, 2]))  # a new leader: wait for its value
    assert p.consumer_high_watermark == 0
    p.set_follower_high_watermark(9)
    assert p.consumer_high_watermark == 5  # never past its own log end
