"""A partition's transactions: open transactions hold the last stable offset, markers close them, aborts
are indexed, and all of it is rebuilt from the log after a restart (and on a follower)."""

from __future__ import annotations

from pathlib import Path

import pytest

from brook.broker.partition import Partition
from brook.config import TopicConfig
from brook.log import PartitionLog
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.txn_records import build_control_batch
from tests.support.records import batch


def open_partition(path: Path) -> Partition:
    return Partition("t", 0, PartitionLog.open(path, TopicConfig()), node_id=0, leads=True)


def txn_batch(pid: int, seq: int, n: int = 2, epoch: int = 0) -> memoryview:
    values = [b"v%d" % i for i in range(n)]
    return memoryview(
        batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)
    )


def test_lso_follows_open_transactions_and_aborts_are_indexed(tmp_path: Path) -> None:
    p = open_partition(tmp_path / "t-0")
    p.append(memoryview(batch([b"plain"])))  # offset 0
    p.append(txn_batch(7, 0))  # 1-2: producer 7 opens a transaction
    p.append(txn_batch(8, 0))  # 3-4: producer 8 too
    assert p.last_stable_offset == 1
    assert p.producers.ongoing() == {7: 1, 8: 3}
    commit_at = p.append_marker(7, 0, True, 0)  # 5
    assert p.last_stable_offset == 3
    abort_at = p.append_marker(8, 0, False, 0)  # 6
    assert p.last_stable_offset == p.high_watermark == 7
    assert (commit_at, abort_at) == (5, 6)
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in p.log.aborted_transactions(0, 7)] == [
        (8, 3, 6)
    ]
    p.append(txn_batch(8, 0, epoch=1))  # 7-8: a new transaction of a new epoch is open at restart
    p.log.close()

    again = open_partition(tmp_path / "t-0")
    assert again.producers.ongoing() == {8: 7}
    assert again.last_stable_offset == 7
    assert [a.last_offset for a in again.log.aborted_transactions(0, 10)] == [6]


def test_markers_fence_older_epochs_and_clients_cannot_write_them(tmp_path: Path) -> None:
    p = open_partition(tmp_path / "t-0")
    p.append(txn_batch(7, 0, epoch=2))
    with pytest.raises(KafkaError) as e:
        p.append_marker(7, 1, False, 0)
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    p.append_marker(7, 3, False, 0)  # a fencing abort with the bumped epoch
    with pytest.raises(KafkaError) as e:
        p.append(txn_batch(7, 2, epoch=2))  # the zombie's next batch
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(KafkaError) as e:
        p.append(memoryview(build_control_batch(7, 3, True, 0, 0)))
    assert e.value.code == ErrorCode.INVALID_RECORD


def test_a_crash_between_marker_and_index_entry_is_repaired(tmp_path: Path) -> None:
    p = open_partition(tmp_path / "t-0")
    p.append(txn_batch(7, 0))
    p.append_marker(7, 0, False, 0)
    p.log.close()
    for f in (tmp_path / "t-0").glob("*.txnindex"):
        f.unlink()  # as if the process died before the entry was written
    again = open_partition(tmp_path / "t-0")
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in again.log.aborted_transactions(0, 5)] == [
        (7, 0, 2)
    ]


def keyed_txn_batch(pid: int, seq: int, key: bytes, value: bytes) -> memoryview:
    return memoryview(
        batch([value], key=key, producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)
    )


def compacted_values(p: Partition) -> dict[bytes, bytes]:
    """key -> value as a reader of the whole log sees them (last write wins), control batches skipped."""
    from kafka.record.default_records import DefaultRecordBatch

    from brook.protocol.batch import iter_headers

    seen: dict[bytes, bytes] = {}
    offset = p.log.log_start_offset
    while offset < p.log.log_end_offset and (s := p.log.read(offset, 1 << 30)) is not None:
        data = s.read()
        for pos, h in iter_headers(data):
            if not h.is_control:
                for r in DefaultRecordBatch(data[pos : pos + h.size]):
                    seen[r.key] = r.value
            offset = h.last_offset + 1
    return seen


def test_compaction_drops_aborted_values_and_stops_at_open_transactions(tmp_path: Path) -> None:
    """An aborted value must never replace the committed one of its key (issue 13: the cleaner knew
    nothing of transactions), and nothing at or past the first unstable offset is cleaned."""
    config = TopicConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=200)
    p = Partition("t", 0, PartitionLog.open(tmp_path / "t-0", config), node_id=0, leads=True)
    p.append(memoryview(batch([b"committed"], key=b"k")))
    p.append(keyed_txn_batch(7, 0, b"k", b"aborted"))
    p.append_marker(7, 0, False, 0)
    p.append(keyed_txn_batch(8, 0, b"open-key", b"open-1"))  # open: the first unstable offset
    open_at = p.last_stable_offset
    p.append(keyed_txn_batch(8, 1, b"open-key", b"open-2"))
    for i in range(12):  # enough segments for the cleaner to have a range
        p.append(memoryview(batch([b"x%d" % i], key=b"other")))
    assert len(p.log._segments) > 3
    p.log.compact(max_offset=p.last_stable_offset)
    values = compacted_values(p)
    assert values[b"k"] == b"committed"
    assert values[b"open-key"] == b"open-2"
    # The open transaction's records are both still there (nothing from open_at on was cleaned).
    assert sum(1 for s in p.log._segments if s.base_offset <= open_at) >= 1
    s = p.log.read(open_at, 1 << 20)
    assert s is not None and b"open-1" in s.read()


def control_offsets(p: Partition) -> list[int]:
    from brook.protocol.batch import iter_headers

    found: list[int] = []
    offset = p.log.log_start_offset
    while offset < p.log.log_end_offset and (s := p.log.read(offset, 1 << 30)) is not None:
        for _, h in iter_headers(s.read()):
            if h.is_control:
                found.append(h.base_offset)
            offset = h.last_offset + 1
    return found


def test_markers_go_once_their_transaction_has_no_records_left(tmp_path: Path) -> None:
    """Kafka's cleaner keeps a COMMIT/ABORT marker until none of its transaction's records are left and
    delete.retention.ms has passed; a producer's last batch always stays (its epoch)."""
    import time

    config = TopicConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=200, delete_retention_ms=0)
    p = Partition("t", 0, PartitionLog.open(tmp_path / "t-0", config), node_id=0, leads=True)
    p.append(keyed_txn_batch(7, 0, b"a", b"aborted"))
    aborted_marker = p.append_marker(7, 0, False, 0)  # nothing of it is kept: goes
    p.append(keyed_txn_batch(8, 0, b"b", b"old"))
    superseded_marker = p.append_marker(8, 0, True, 0)  # its only record is superseded below: goes
    p.append(memoryview(batch([b"new"], key=b"b")))
    p.append(keyed_txn_batch(9, 0, b"c", b"kept"))
    kept_marker = p.append_marker(9, 0, True, 0)  # its record is the newest of "c": stays
    p.append(keyed_txn_batch(7, 1, b"z", b"z"))
    last_of_7 = p.append_marker(7, 0, True, 0)
    p.append(keyed_txn_batch(8, 1, b"y", b"y"))
    last_of_8 = p.append_marker(8, 0, True, 0)
    p.append(keyed_txn_batch(9, 1, b"w", b"w"))
    last_of_9 = p.append_marker(9, 0, True, 0)
    for i in range(12):
        p.append(memoryview(batch([b"x%d" % i], key=b"filler")))
    markers = [aborted_marker, superseded_marker, kept_marker, last_of_7, last_of_8, last_of_9]
    assert control_offsets(p) == markers
    p.log.compact(now_ms=int(time.time() * 1000) + 10_000, max_offset=p.last_stable_offset)
    assert control_offsets(p) == [kept_marker, last_of_7, last_of_8, last_of_9]
    values = compacted_values(p)
    assert values[b"b"] == b"new" and values[b"c"] == b"kept" and b"a" not in values


def test_markers_of_a_deposed_coordinator_are_fenced(tmp_path: Path) -> None:
    """A marker with an older coordinator epoch than the producer's last one is
    TRANSACTION_COORDINATOR_FENCED, also after a restart (the epoch is in the marker, and snapshots)."""
    p = open_partition(tmp_path / "t-0")
    p.append(txn_batch(7, 0))
    p.append_marker(7, 0, True, 5)  # coordinator epoch 5
    p.append(txn_batch(7, 2))
    with pytest.raises(KafkaError) as e:
        p.append_marker(7, 0, False, 4)  # a zombie coordinator of epoch 4
    assert e.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    p.log.close()
    again = open_partition(tmp_path / "t-0")
    with pytest.raises(KafkaError) as e:
        again.append_marker(7, 0, False, 4)
    assert e.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    again.append_marker(7, 0, True, 6)  # a newer coordinator goes on
