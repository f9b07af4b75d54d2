"""Idempotent-producer state (broker/producer_state.py) and the partition's deduplication built on it:
sequences, epochs, duplicates of the last five batches, out-of-order batches, rebuild from the log."""

from __future__ import annotations

from pathlib import Path

import pytest

from brook.broker.partition import Partition, PartitionRole
from brook.broker.producer_state import CACHED_BATCHES, ProducerStateTable
from brook.config import TopicConfig
from brook.log import PartitionLog
from brook.protocol.batch import BatchHeader
from brook.protocol.errors import ErrorCode, KafkaError
from tests.support.records import batch

PID = 4000


def header(
    seq: int, records: int = 1, *, pid: int = PID, epoch: int = 0, base_offset: int = 0
) -> BatchHeader:
    return BatchHeader(
        base_offset=base_offset,
        batch_length=100,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=0,
        last_offset_delta=records - 1,
        base_timestamp=0,
        max_timestamp=0,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        record_count=records,
    )


def appended(table: ProducerStateTable, h: BatchHeader, offset: int) -> None:
    assert table.check(h) is None
    table.record(h, offset)


def code_of(table: ProducerStateTable, h: BatchHeader) -> ErrorCode:
    with pytest.raises(KafkaError) as e:
        table.check(h)
    return e.value.code


def test_a_new_producer_starts_at_any_sequence_then_must_follow_on() -> None:
    t = ProducerStateTable()
    appended(t, header(17, 3), 0)  # unknown producer: its state may have aged out with retention
    appended(t, header(20, 2), 3)
    assert code_of(t, header(23)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # 22 is next
    appended(t, header(22), 5)


def test_retried_batches_of_the_last_five_are_duplicates_with_their_original_offsets() -> None:
    t = ProducerStateTable()
    for i in range(7):
        appended(t, header(i * 2, 2), 100 + i * 2)
    assert CACHED_BATCHES == 5
    for i in range(2, 7):
        dup = t.check(header(i * 2, 2))
        assert dup is not None
        assert (dup.first_seq, dup.last_seq) == (i * 2, i * 2 + 1)
        assert (dup.base_offset, dup.last_offset) == (100 + i * 2, 101 + i * 2)
    # Older than the last five: written, but its offsets are no longer known.
    assert code_of(t, header(2, 2)) == ErrorCode.DUPLICATE_SEQUENCE_NUMBER
    assert code_of(t, header(0, 2)) == ErrorCode.DUPLICATE_SEQUENCE_NUMBER
    # A batch overlapping a cached one without matching it is not a retry of it.
    assert code_of(t, header(12, 1)) == ErrorCode.DUPLICATE_SEQUENCE_NUMBER


def test_a_gap_in_the_sequence_is_out_of_order() -> None:
    t = ProducerStateTable()
    appended(t, header(0, 5), 0)
    assert code_of(t, header(6)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert code_of(t, header(1000)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    appended(t, header(5), 5)


def test_epochs_fence_older_producers_and_a_new_epoch_starts_at_zero() -> None:
    t = ProducerStateTable()
    appended(t, header(0, 3, epoch=1), 0)
    assert code_of(t, header(3, epoch=0)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert code_of(t, header(5, epoch=2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    appended(t, header(0, 2, epoch=2), 3)
    # The old epoch's batches are forgotten; the old epoch is fenced from now on.
    assert code_of(t, header(0, 3, epoch=1)) == ErrorCode.INVALID_PRODUCER_EPOCH
    dup = t.check(header(0, 2, epoch=2))
    assert dup is not None and dup.base_offset == 3
    appended(t, header(2, epoch=2), 5)


def test_sequences_wrap_after_int32_max() -> None:
    t = ProducerStateTable()
    top = 2**31 - 1
    appended(t, header(top - 1, 2), 0)  # top-1 .. top
    appended(t, header(0, 2), 2)
    appended(t, header(2), 4)


def test_producers_are_independent_and_non_idempotent_batches_are_never_checked() -> None:
    t = ProducerStateTable()
    appended(t, header(0, 2, pid=1), 0)
    appended(t, header(0, 2, pid=2), 2)
    assert t.check(header(0, 2, pid=1)) is not None
    assert code_of(t, header(5, pid=2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    for _ in range(3):
        appended(t, header(-1, 1, pid=-1, epoch=-1), 4)


def test_clear_forgets_every_producer() -> None:
    t = ProducerStateTable()
    appended(t, header(0, 2), 0)
    t.clear()
    assert t.check(header(0, 2)) is None  # not a known duplicate any more
    appended(t, header(9), 2)  # and any sequence is accepted again


def stamped(seq: int, ts: int, *, pid: int = PID, transactional: bool = False) -> BatchHeader:
    attributes = 0x10 if transactional else 0  # the transactional bit
    return header(seq, pid=pid)._replace(max_timestamp=ts, attributes=attributes)


def test_idle_producers_expire_by_their_last_batch_unless_in_a_transaction() -> None:
    t = ProducerStateTable()
    t.record(stamped(0, 1_000), 0)
    t.record(stamped(1, 5_000), 1)  # the newest batch counts
    t.record(stamped(0, 1_000, pid=7), 2)
    t.record(stamped(0, 1_000, pid=8, transactional=True), 3)  # an open transaction
    t.record(stamped(0, 1_000, pid=9), 4, timestamp=9_000)  # LogAppendTime: the stamped time
    assert t.expire(now_ms=9_000, max_idle_ms=5_000) == 1
    assert set(t.entries()) == {PID, 8, 9}
    assert t.expire(now_ms=10_000, max_idle_ms=5_000) == 1  # idle exactly that long
    assert set(t.entries()) == {8, 9}
    assert t.check(header(5)) is None  # forgotten: any sequence again
    t.entries()[9].last_timestamp = -1  # unknown (an older snapshot): its clock starts now
    assert t.expire(now_ms=100_000, max_idle_ms=5_000) == 0
    assert t.expire(now_ms=105_000, max_idle_ms=5_000) == 1
    assert set(t.entries()) == {8}


# -- through the partition: what a Produce request sees ---------------------------------------------


def leader(tmp_path: Path) -> Partition:
    log = PartitionLog.open(tmp_path / "t-0", TopicConfig())
    return Partition("t", 0, log, node_id=0, leads=True)


def idem(values: list[bytes], seq: int, epoch: int = 0, pid: int = PID) -> memoryview:
    return memoryview(batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq))


def test_a_retried_produce_is_answered_with_its_offsets_and_not_written_again(tmp_path: Path) -> None:
    p = leader(tmp_path)
    first = p.append(idem([b"a", b"b"], 0))
    p.append(idem([b"c"], 2))
    size = p.log.size_bytes
    again = p.append(idem([b"a", b"b"], 0))
    assert (again.base_offset, again.last_offset) == (first.base_offset, first.last_offset) == (0, 1)
    assert p.log.log_end_offset == 3 and p.log.size_bytes == size


def test_a_request_mixing_retried_and_new_batches_is_refused(tmp_path: Path) -> None:
    p = leader(tmp_path)
    p.append(idem([b"a"], 0))
    mixed = memoryview(bytes(idem([b"a"], 0)) + bytes(idem([b"b"], 1)))
    with pytest.raises(KafkaError) as e:
        p.append(mixed)
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.log.log_end_offset == 1


def test_an_out_of_order_produce_writes_nothing(tmp_path: Path) -> None:
    p = leader(tmp_path)
    p.append(idem([b"a"], 0))
    with pytest.raises(KafkaError) as e:
        p.append(idem([b"c"], 2))
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(KafkaError) as e:
        p.append(idem([b"z"], 5, epoch=1))  # a new epoch must start at sequence 0
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.log.log_end_offset == 1


def test_producer_state_is_rebuilt_from_the_log_at_start_up(tmp_path: Path) -> None:
    """A broker restarted after a crash still recognises a retry of a batch it wrote before."""
    p = leader(tmp_path)
    for i in range(7):
        p.append(idem([f"r{i}".encode()], i))
    p.append(idem([b"other"], 0, pid=PID + 1))
    p.log.close()
    reopened = leader(tmp_path)
    dup = reopened.append(idem([b"r6"], 6))
    assert (dup.base_offset, dup.last_offset) == (6, 6)
    dup = reopened.append(idem([b"other"], 0, pid=PID + 1))
    assert dup.base_offset == 7
    assert reopened.log.log_end_offset == 8
    with pytest.raises(KafkaError) as e:  # not a new producer: its sequence goes on from 7
        reopened.append(idem([b"r9"], 9))
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert reopened.append(idem([b"r7"], 7)).base_offset == 8


def test_a_follower_keeps_producer_state_from_replicated_batches(tmp_path: Path) -> None:
    """After a failover the new leader recognises a producer's retry of a batch the old leader wrote."""
    old = leader(tmp_path / "old")
    old.append(idem([b"a", b"b"], 0))
    old.append(idem([b"c"], 2))
    data = old.log.read(0, 1 << 20)
    assert data is not None
    log = PartitionLog.open(tmp_path / "new" / "t-0", TopicConfig())
    new = Partition("t", 0, log, node_id=1, leads=False)
    new.become_follower(PartitionRole(0, 0, [0, 1], [0, 1]))
    new.append_replicated(memoryview(data.read()))
    new.become_leader(PartitionRole(1, 1, [0, 1], [1]))
    dup = new.append(idem([b"c"], 2))
    assert (dup.base_offset, dup.last_offset) == (2, 2)
    assert new.log.log_end_offset == 3
    assert new.append(idem([b"d"], 3)).base_offset == 3


def test_a_marker_while_a_partition_is_verified_voids_the_verification() -> None:
    """KIP-890's guard: a marker of the producer between the coordinator's confirmation and the append
    means the transaction it confirmed has ended, so the append must not open one."""
    t = ProducerStateTable()
    assert t.needs_verification(PID, 0)
    guard = t.start_verification(PID)
    assert t.verified(PID, guard)
    marker = header(-1)._replace(attributes=0x30)  # control and transactional, no sequence
    t.record(marker, 5, control=0)
    assert not t.verified(PID, guard)
    t.start_verification(PID)
    t.record(header(0)._replace(attributes=0x10), 6)  # the transaction's first batch: it is open here
    assert not t.needs_verification(PID, 0)
    assert t.needs_verification(PID, 1)  # a bumped epoch opens a new one


def test_two_requests_verified_for_one_transaction_both_append() -> None:
    """Two Produce requests of one producer to a partition (in flight together), both verified with
    the same guard: the first one's batch opens the transaction, and the second's must append into
    it, not be refused as if the transaction had ended (Kafka checks the guard only while no
    transaction of the producer is open)."""
    t = ProducerStateTable()
    first, second = t.start_verification(PID), t.start_verification(PID)
    assert t.verified(PID, first)
    t.record(header(0)._replace(attributes=0x10), 6)  # the first request's batch opens it
    assert t.verified(PID, second)
    t.record(header(-1)._replace(attributes=0x30), 7, control=0)  # its marker: it ended
    assert not t.verified(PID, second)
