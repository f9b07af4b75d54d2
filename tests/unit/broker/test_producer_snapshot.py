"""Producer-state snapshots: written at segment roll and at clean shutdown, read at start-up so that only
the log's tail is scanned; a damaged snapshot falls back to an older one or a full scan; snapshots go
with their segments (retention below, truncation above)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from brook.broker.partition import Partition
from brook.broker.producer_snapshot import decode_snapshot, encode_snapshot
from brook.broker.producer_state import ProducerStateTable
from brook.config import TopicConfig
from brook.log import PartitionLog
from brook.log.snapshot_files import snapshot_path
from brook.protocol.batch import BatchHeader, parse_header
from brook.protocol.errors import ErrorCode, KafkaError
from brook.replication.epochs import LeaderEpochCache
from tests.support.records import batch

SMALL = replace(TopicConfig(), segment_bytes=400)  # a roll every few batches


_opened: list[PartitionLog] = []


@pytest.fixture(autouse=True)
def _release_files() -> Iterator[None]:
    """Each test opens many small segments: let go of their file descriptors (the suite's process runs
    on, and select() cannot take descriptors past 1023)."""
    yield
    for plog in _opened:
        plog.release()
    _opened.clear()


def open_partition(path: Path, scanned: list[int] | None = None) -> Partition:
    """The partition at `path`; `scanned` collects the offset each header scan of the log starts at."""
    plog = PartitionLog.open(path, SMALL)
    _opened.append(plog)
    if scanned is not None:
        iterate = plog.iter_batch_headers

        def recording(start_offset: int = 0) -> Iterator[BatchHeader]:
            scanned.append(start_offset)
            return iterate(start_offset)

        plog.iter_batch_headers = recording  # type: ignore[method-assign]
    return Partition("t", 0, plog, node_id=0, leads=True)


def idem(pid: int, seq: int, epoch: int = 0, transactional: bool = False) -> memoryview:
    values = [b"value-%d" % seq, b"more"]
    return memoryview(
        batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=transactional)
    )


def fill(p: Partition, pid: int, batches: int) -> list[int]:
    """Append `batches` idempotent batches of producer `pid` (2 records each); their base offsets."""
    return [p.append(idem(pid, 2 * i)).base_offset for i in range(batches)]


def snapshots(path: Path) -> list[int]:
    return sorted(int(f.name.split(".")[0]) for f in path.glob("*.snapshot"))


def test_roll_and_clean_shutdown_write_snapshots_and_restart_reads_only_the_tail(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    p = open_partition(path)
    offsets = fill(p, 7, 20)
    rolled = snapshots(path)
    assert len(rolled) >= 3  # one per roll, at the new segment's base offset
    bases = [int(f.name.split(".")[0]) for f in sorted(path.glob("*.log"))]
    assert set(rolled) <= set(bases)
    p.close()
    assert snapshots(path)[-1] == p.log.log_end_offset == 40

    scanned: list[int] = []
    again = open_partition(path, scanned)
    assert scanned == [40]  # nothing before the clean-shutdown snapshot is read
    # The last five batches are still known: a retry is answered with its original offset...
    assert again.append(idem(7, 38)).base_offset == offsets[-1]
    # ...and the sequence goes on where it was.
    with pytest.raises(KafkaError) as e:
        again.append(idem(7, 44))
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert again.append(idem(7, 40)).base_offset == 40
    assert again.epochs.entries() == p.epochs.entries()


def test_after_a_crash_the_scan_starts_at_the_newest_roll_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    p = open_partition(path)
    offsets = fill(p, 7, 20)
    newest = snapshots(path)[-1]
    p.log.release()  # a crash: no shutdown snapshot, no clean-shutdown marker
    scanned: list[int] = []
    again = open_partition(path, scanned)
    assert scanned == [newest]
    assert again.append(idem(7, 38)).base_offset == offsets[-1]


def test_a_damaged_snapshot_falls_back_to_an_older_one_then_to_a_full_scan(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    p = open_partition(path)
    offsets = fill(p, 7, 20)
    p.close()
    newest, older = snapshots(path)[-1], snapshots(path)[-2]
    data = bytearray(snapshot_path(path, newest).read_bytes())
    data[-1] ^= 0xFF  # the CRC no longer matches
    snapshot_path(path, newest).write_bytes(bytes(data))
    scanned: list[int] = []
    again = open_partition(path, scanned)
    assert scanned == [older]
    assert again.append(idem(7, 38)).base_offset == offsets[-1]
    again.log.release()

    for offset in snapshots(path):
        snapshot_path(path, offset).write_bytes(b"not a snapshot")
    scanned = []
    third = open_partition(path, scanned)
    assert scanned == [0]  # a full scan
    assert third.append(idem(7, 38)).base_offset == offsets[-1]


def test_open_transactions_survive_a_restart_through_the_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    p = open_partition(path)
    fill(p, 7, 10)
    first = p.append(idem(9, 0, epoch=3, transactional=True)).base_offset
    fill(p, 8, 10)  # rolls past the transaction's first batch
    assert p.last_stable_offset == first
    p.close()
    scanned: list[int] = []
    again = open_partition(path, scanned)
    assert scanned == [p.log.log_end_offset]
    assert again.producers.ongoing() == {9: first}
    assert again.last_stable_offset == first
    with pytest.raises(KafkaError) as e:
        again.append_marker(9, 2, False, 0)  # an older epoch is still fenced
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    abort_at = again.append_marker(9, 3, False, 0)
    assert again.last_stable_offset == again.high_watermark
    assert [
        (a.producer_id, a.first_offset, a.last_offset) for a in again.log.aborted_transactions(0, 99)
    ] == [(9, first, abort_at)]


def test_snapshots_go_with_their_segments(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    p = open_partition(path)
    fill(p, 7, 30)
    before = snapshots(path)
    # Retention (here DeleteRecords) deletes the segments below a new log start: their snapshots too.
    p.delete_records(before[2] + 1)
    first_base = min(int(f.name.split(".")[0]) for f in path.glob("*.log"))
    assert first_base == before[2]
    assert snapshots(path) == [o for o in before if o >= first_base]
    # A truncation below a snapshot invalidates it (it describes records that are gone).
    cut = before[-2] + 1
    p.truncate_to(cut)
    assert all(o <= p.log.log_end_offset for o in snapshots(path))
    assert before[-1] not in snapshots(path)
    # Producer state is that of the surviving log: the batch at the new end is no duplicate any more.
    seq_at_end = p.log.log_end_offset  # 2 records per batch, sequence == offset for producer 7
    assert p.append(idem(7, seq_at_end)).base_offset == p.log.log_end_offset - 2
    # A reset (a follower behind its leader's log start) drops them all.
    p.reset_to(1000)
    assert snapshots(path) == []


def test_encoding_round_trips_and_rejects_garbage() -> None:
    table = ProducerStateTable()
    for pid, epoch, seq, offset in [(1, 0, 0, 0), (1, 0, 2, 2), (5, 7, 0, 4)]:
        raw = batch(
            [b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=pid == 5
        )
        table.record(parse_header(raw, 0), offset, now_ms=1234)
    epochs = LeaderEpochCache()
    epochs.assign(0, 0)
    epochs.assign(3, 4)
    body = encode_snapshot(table, epochs)
    decoded = decode_snapshot(body)
    assert decoded is not None
    t2, e2 = decoded
    assert t2.entries() == table.entries()
    assert t2.ongoing() == {5: 4}
    assert t2.txn_start_ms(5) == 1234
    assert e2.entries() == [(0, 0), (3, 4)]
    assert decode_snapshot(body[:-3]) is None
    assert decode_snapshot(body + b"x") is None
    assert decode_snapshot(b"\x00\x09") is None  # an unknown version


def test_a_version_2_snapshot_is_read_with_unknown_last_timestamps() -> None:
    body = struct.pack(">hi", 2, 0) + struct.pack(">i", 1) + struct.pack(">qhib", 4, 1, 3, 1)
    body += struct.pack(">iiqq", 0, 4, 10, 14) + struct.pack(">i", 0)
    decoded = decode_snapshot(body)
    assert decoded is not None
    entry = decoded[0].entries()[4]
    assert (entry.epoch, entry.coordinator_epoch, entry.last_timestamp, entry.last_seq) == (1, 3, -1, 4)
