"""A replica that becomes leader must judge an idempotent producer's batches as the old leader would:
its producer state follows the batches it replicated, truncated and rebuilt with its log, and the old
leader acknowledges nothing that a replica it is adding to the ISR might not have."""

from __future__ import annotations

from pathlib import Path

import pytest

from brook.broker.partition import Partition, PartitionRole
from brook.config import TopicConfig
from brook.log import PartitionLog
from brook.protocol.errors import ErrorCode, KafkaError
from tests.support.records import batch

PID = 4242


def open_partition(path: Path, node_id: int, leads: bool) -> Partition:
    return Partition("t", 0, PartitionLog.open(path, TopicConfig()), node_id=node_id, leads=leads)


def seq_batch(first_seq: int, n: int = 2, epoch: int = 0) -> memoryview:
    values = [f"s{first_seq + i}".encode() for i in range(n)]
    return memoryview(batch(values, producer_id=PID, producer_epoch=epoch, base_sequence=first_seq))


def stored(p: Partition, start: int = 0) -> memoryview:
    """The partition's batches from `start` as a leader serves them to a follower's fetch."""
    chunk = p.log.read(start, 1 << 20)  # one segment holds them all
    assert chunk is not None
    return memoryview(chunk.read())


def lead(p: Partition, epoch: int, replicas: list[int], isr: list[int], version: int) -> None:
    p.become_leader(PartitionRole(p.node_id, epoch, replicas, isr, version))


def follow(p: Partition, leader: int, epoch: int, replicas: list[int], version: int) -> None:
    p.become_follower(PartitionRole(leader, epoch, replicas, list(replicas), version))


@pytest.fixture
def leader(tmp_path: Path) -> Partition:
    p = open_partition(tmp_path / "leader", 1, leads=False)
    lead(p, 0, [1, 2], [1], version=1)
    for seq in range(0, 12, 2):  # six batches of two: more than the five a producer entry caches
        p.append(seq_batch(seq))
    return p


def test_a_follower_that_leads_answers_retries_and_gaps_as_the_old_leader(
    leader: Partition, tmp_path: Path
) -> None:
    follower = open_partition(tmp_path / "follower", 2, leads=False)
    follow(follower, 1, 0, [1, 2], version=1)
    follower.append_replicated(stored(leader))
    assert follower.log.log_end_offset == leader.log.log_end_offset == 12

    lead(follower, 1, [1, 2], [2], version=2)
    retried = follower.append(seq_batch(10))  # the last batch again: its original offsets
    assert (retried.base_offset, retried.last_offset) == (10, 11)
    assert follower.log.log_end_offset == 12
    with pytest.raises(KafkaError) as gap:
        follower.append(seq_batch(14))
    assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(KafkaError) as old:
        follower.append(seq_batch(0))  # written, but no longer among the cached five
    assert old.value.code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER
    assert follower.append(seq_batch(12)).base_offset == 12


def test_a_replica_created_empty_learns_the_producer_from_its_first_fetched_batch(
    leader: Partition, tmp_path: Path
) -> None:
    """A replica added by a reassignment starts with an empty log: its first append counts too."""
    follower = open_partition(tmp_path / "follower", 2, leads=False)
    follow(follower, 1, 0, [1, 2], version=1)
    first = stored(leader)[: len(seq_batch(0))]  # exactly the first batch
    follower.append_replicated(first)
    follower.append_replicated(stored(leader, 2))
    lead(follower, 1, [1, 2], [2], version=2)
    with pytest.raises(KafkaError) as gap:
        follower.append(seq_batch(13))
    assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert follower.append(seq_batch(12)).base_offset == 12


def test_truncation_rebuilds_producer_state_from_the_kept_prefix(leader: Partition, tmp_path: Path) -> None:
    """A deposed leader's uncommitted batches go; the sequences they used are free again."""
    follower = open_partition(tmp_path / "follower", 2, leads=False)
    follow(follower, 1, 0, [1, 2], version=1)
    follower.append_replicated(stored(leader))
    follower.truncate_to(8)  # drops the batches of sequences 8..11
    lead(follower, 1, [1, 2], [2], version=2)
    with pytest.raises(KafkaError) as gap:
        follower.append(seq_batch(10))
    assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    again = follower.append(seq_batch(8))  # not a duplicate any more: written anew
    assert (again.base_offset, follower.log.log_end_offset) == (8, 10)
    assert follower.append(seq_batch(6)).base_offset == 6  # a kept batch is still a duplicate
    assert follower.log.log_end_offset == 10


def test_producer_state_survives_a_restart_of_a_follower(leader: Partition, tmp_path: Path) -> None:
    follower = open_partition(tmp_path / "follower", 2, leads=False)
    follow(follower, 1, 0, [1, 2], version=1)
    follower.append_replicated(stored(leader))
    follower.log.close()
    reopened = open_partition(tmp_path / "follower", 2, leads=False)
    lead(reopened, 1, [2], [2], version=2)
    assert reopened.append(seq_batch(10)).base_offset == 10
    assert reopened.append(seq_batch(12)).base_offset == 12


def test_a_reset_follower_forgets_the_state_of_the_dropped_log(leader: Partition, tmp_path: Path) -> None:
    """Behind the leader's log start, a follower starts over there: nothing of the old log remains."""
    follower = open_partition(tmp_path / "follower", 2, leads=False)
    follow(follower, 1, 0, [1, 2], version=1)
    follower.append_replicated(stored(leader))
    follower.reset_to(100)
    assert follower.epochs.latest_epoch == -1
    assert follower.log.log_end_offset == 100
    lead(follower, 1, [2], [2], version=2)
    # The producer is unknown now, as on a leader whose log start passed its batches: any sequence.
    assert follower.append(seq_batch(40)).base_offset == 100


def test_the_high_watermark_waits_for_a_follower_being_added_to_the_isr(leader: Partition) -> None:
    """Between writing an ISR expansion and seeing it, the leader may not acknowledge without the
    new member: the controller may already have made it leader."""
    assert leader.high_watermark == 12  # ISR [1]: the leader alone
    leader.record_follower_fetch(2, 12)
    new_isr = leader.isr_change(lag_max_ms=10_000)
    assert new_isr == [1, 2]
    leader.propose_isr(new_isr)
    leader.append(seq_batch(12))
    assert leader.high_watermark == 12, "acknowledged without the replica being added"
    leader.record_follower_fetch(2, 14)
    assert leader.high_watermark == 14
    # The write was refused (another change won): the partition's next role no longer counts it.
    lead(leader, 0, [1, 2], [1], version=2)
    leader.append(seq_batch(14))
    assert leader.high_watermark == 16
