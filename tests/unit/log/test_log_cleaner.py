"""Log compaction: newest record per key, tombstones, min.compaction.lag.ms, codecs, producers, reopen."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from log_batches import FakeClock, open_log, with_base_offset

from brook.log import PartitionLog
from brook.log.cleaner import CLEANER_CHECKPOINT_FILE, CleanStats
from brook.log.records import RecordError, decode_records, read_varint
from brook.protocol.batch import iter_headers, parse_header

COMPACT = frozenset({"compact"})
NOW = 10_000_000
Rec = tuple[bytes | None, bytes | None]  # key, value (None: tombstone)
Row = tuple[int, bytes | None, bytes | None]  # offset, key, value


def kbatch(
    records: Sequence[Rec],
    *,
    ts: int = NOW,
    codec: int = 0,
    producer: tuple[int, int, int] = (-1, -1, -1),
    headers: list[tuple[str, bytes | None]] | None = None,
) -> bytes:
    """A magic-2 batch built by kafka-python (record i has timestamp ts + i)."""
    pid, epoch, seq = producer
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        batch_size=2**30,
    )
    for i, (key, value) in enumerate(records):
        b.append(i, timestamp=ts + i, key=key, value=value, headers=list(headers or []))
    return bytes(b.build())


def compact_log(path: Path, clock: FakeClock | None = None, **config: Any) -> PartitionLog:
    config.setdefault("cleanup_policy", COMPACT)
    return open_log(path, clock or FakeClock(NOW), **config)


def append_unchecked(log: PartitionLog, batch: bytes) -> None:
    """Append as a follower does, without the leader's record checks: keyless or undecodable records only
    reach a compacted log that way (or from before its cleanup.policy became compact)."""
    log.append(with_base_offset(batch, log.log_end_offset), assign_offsets=False)


def stored_batches(log: PartitionLog) -> list[DefaultRecordBatch]:
    """Every stored batch, read through read() a segment at a time, as kafka-python's reader sees it."""
    out: list[DefaultRecordBatch] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset and (s := log.read(offset, 1 << 30)) is not None:
        data = s.read()
        for pos, h in iter_headers(data):
            out.append(DefaultRecordBatch(data[pos : pos + h.size]))
        offset = iter_headers(data)[-1][1].last_offset + 1
    return out


def rows(log: PartitionLog) -> list[Row]:
    out: list[Row] = []
    for batch in stored_batches(log):
        assert batch.validate_crc()
        out.extend((r.offset, r.key, r.value) for r in batch)
    return out


def expected_after_compaction(written: Sequence[Row], first_uncleanable: int) -> list[Row]:
    """Kafka's rule: below the first uncleanable offset keep each key's newest record; keep the rest."""
    latest = {k: o for o, k, _ in written if o < first_uncleanable}
    return [(o, k, v) for o, k, v in written if o >= first_uncleanable or latest[k] == o]


def active_base(log: PartitionLog) -> int:
    return log._segments[-1].base_offset


def fill(log: PartitionLog, n: int, keys: int, *, ts: int = NOW) -> list[Row]:
    """n single-record batches cycling over `keys` keys; returns what was written."""
    written: list[Row] = []
    for i in range(n):
        key, value = b"k%d" % (i % keys), b"v%d" % i
        r = log.append(kbatch([(key, value)], ts=ts + i))
        written.append((r.base_offset, key, value))
    return written


def test_keeps_the_newest_record_per_key_across_segments(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "p", segment_bytes=400)
    written = fill(log, 60, keys=5)
    assert len(log._segments) > 5
    start, end, uncleanable = log.log_start_offset, log.log_end_offset, active_base(log)
    size = log.size_bytes
    stats = log.compact()
    expected = expected_after_compaction(written, uncleanable)
    assert rows(log) == expected
    assert (log.log_start_offset, log.log_end_offset) == (start, end)
    assert stats.records_removed == len(written) - len(expected) > 0
    assert stats.tombstones_removed == 0
    assert stats.segments_cleaned > 0
    assert stats.bytes_before - stats.bytes_after == size - log.size_bytes > 0
    # The log keeps working: appends continue at the log end offset.
    assert log.append(kbatch([(b"k0", b"new")])).base_offset == end


def test_offsets_are_kept_and_reads_at_gaps_return_the_next_batch(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "p", segment_bytes=200)
    written = fill(log, 20, keys=2)
    log.compact()
    kept = rows(log)
    offsets = [o for o, _, _ in kept]
    assert offsets == sorted(set(offsets)) and offsets[0] > 0  # gaps, no duplicates, no renumbering
    assert set(kept) <= set(written)
    # A fetch at a removed offset gets the next surviving batch.
    s = log.read(0, 1 << 20)
    assert s is not None
    first = parse_header(s.read())
    assert first.base_offset == offsets[0]


def test_partly_kept_batches_are_rebuilt_with_their_offsets(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "p", segment_bytes=300)
    log.append(kbatch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3"), (b"d", b"4")], ts=NOW))
    log.append(kbatch([(b"a", b"5"), (b"d", b"6")], ts=NOW + 10))
    log.append(kbatch([(b"z", b"x" * 300)], ts=NOW + 20))  # rolls: the first two are cleanable
    assert active_base(log) == 6
    stats = log.compact()
    assert stats.records_removed == 2
    first, second, _ = stored_batches(log)
    assert (first.base_offset, first.last_offset_delta, first.records_count) == (0, 3, 2)
    assert first.first_timestamp == NOW and first.max_timestamp == NOW + 2  # b@NOW+1, c@NOW+2
    assert [(r.offset, r.key, r.value, r.timestamp) for r in first] == [
        (1, b"b", b"2", NOW + 1),
        (2, b"c", b"3", NOW + 2),
    ]
    assert second.base_offset == 4 and second.records_count == 2  # untouched


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches(tmp_path: Path, codec: int) -> None:
    log = compact_log(tmp_path / "p", segment_bytes=600)
    headers: list[tuple[str, bytes | None]] = [("h1", b"x"), ("h2", None)]
    written: list[tuple[int, bytes, bytes]] = []
    for i in range(8):
        recs = [(b"key-%d" % ((i + j) % 6), b"value-%d-%d-" % (i, j) + b"z" * 80) for j in range(5)]
        r = log.append(kbatch(recs, ts=NOW + 10 * i, codec=codec, headers=headers))
        written += [(r.base_offset + j, k, v) for j, (k, v) in enumerate(recs)]
    log.append(kbatch([(b"tail", b"t")]))
    uncleanable = active_base(log)
    before = stored_batches(log)
    assert all(b.compression_type == codec for b in before[:-1])
    log.compact()
    after = stored_batches(log)
    assert all(b.compression_type == codec for b in after[:-1])  # same codec
    got = []
    for batch in after:
        assert batch.validate_crc()
        for r in batch:
            got.append((r.offset, r.key, r.value))
            assert r.key == b"tail" or r.headers == headers
    expected = expected_after_compaction([*written, (len(written), b"tail", b"t")], uncleanable)
    assert got == expected
    assert len(got) < len(written)


def test_idempotent_producer_fields_are_kept(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "p", segment_bytes=250)
    pid, epoch = 7, 3
    log.append(kbatch([(b"a", b"1"), (b"b", b"1")], producer=(pid, epoch, 0)))  # offsets 0-1: all go
    log.append(kbatch([(b"a", b"2"), (b"c", b"2")], producer=(pid, epoch, 2)))  # 2-3: a goes
    log.append(kbatch([(b"b", b"3"), (b"d", b"3")], producer=(pid, epoch, 4)))  # 4-5: kept whole
    log.append(kbatch([(b"e", b"4"), (b"f", b"4")], producer=(pid, epoch, 6)))  # 6-7: last of pid 7: empty
    log.append(kbatch([(b"a", b"5"), (b"e", b"5"), (b"f", b"5")]))  # 8-10: no producer
    log.append(kbatch([(b"z", b"z" * 300)]))  # 11: roll
    assert active_base(log) == 11
    log.compact()
    batches = [(b.base_offset, b.last_offset_delta, b.producer_id, b.producer_epoch, b.base_sequence,
                b.records_count) for b in stored_batches(log)]  # fmt: skip
    assert batches == [
        (2, 1, pid, epoch, 2, 1),
        (4, 1, pid, epoch, 4, 2),
        (6, 1, pid, epoch, 6, 0),  # kept empty: the producer's sequence state stays in the log
        (8, 2, -1, -1, -1, 3),
        (11, 0, -1, -1, -1, 1),
    ]
    assert [h.last_sequence for h in log.iter_batch_headers() if h.producer_id == pid] == [3, 5, 7]
    assert [(o, k) for o, k, _ in rows(log)] == [(3, b"c"), (4, b"b"), (5, b"d"), (8, b"a"), (9, b"e"),
                                                 (10, b"f"), (11, b"z")]  # fmt: skip


def test_tombstones_are_kept_until_delete_retention_ms(tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    log = compact_log(tmp_path / "p", clock, segment_bytes=150, delete_retention_ms=60_000)
    log.append(kbatch([(b"a", b"1")], ts=NOW))
    log.append(kbatch([(b"b", b"1")], ts=NOW))
    log.append(kbatch([(b"a", None)], ts=NOW + 1))  # tombstone for a
    log.append(kbatch([(b"c", b"1")], ts=NOW + 2))
    log.append(kbatch([(b"d", b"1")], ts=NOW + 3))
    assert active_base(log) == 4

    stats = log.compact(NOW + 1000)
    assert (stats.records_removed, stats.tombstones_removed) == (1, 0)  # a=1 superseded
    assert rows(log) == [(1, b"b", b"1"), (2, b"a", None), (3, b"c", b"1"), (4, b"d", b"1")]
    assert log.compact(NOW + 2000) == CleanStats()  # clean, and the tombstone is young
    assert not log.compaction_due(NOW + 2000)

    # Once delete.retention.ms has passed, a pass is due even with no new data, and removes it.
    assert log.compaction_due(NOW + 61_002)
    stats = log.compact(NOW + 61_002)
    assert (stats.records_removed, stats.tombstones_removed) == (1, 1)
    assert rows(log) == [(1, b"b", b"1"), (3, b"c", b"1"), (4, b"d", b"1")]
    assert log.compact(NOW + 70_000) == CleanStats()
    assert not log.compaction_due(NOW + 70_000)


def test_a_superseded_tombstone_goes_at_once(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "p", segment_bytes=150, delete_retention_ms=10**9)
    log.append(kbatch([(b"a", None)]))
    log.append(kbatch([(b"a", b"back")]))
    log.append(kbatch([(b"x", b"x")]))
    stats = log.compact()
    assert (stats.records_removed, stats.tombstones_removed) == (1, 1)
    assert rows(log) == [(1, b"a", b"back"), (2, b"x", b"x")]


def test_min_compaction_lag_leaves_young_segments_alone(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "p", segment_bytes=200, min_compaction_lag_ms=50_000)
    old = fill(log, 8, keys=2, ts=NOW - 100_000)  # offsets 0-7: old enough
    young = fill(log, 8, keys=2, ts=NOW - 10_000)  # offsets 8-15: too young
    first_young_segment = next(s.base_offset for s in log._segments if s.max_timestamp >= NOW - 50_000)
    stats = log.compact(NOW)
    assert stats.records_removed > 0
    assert rows(log) == expected_after_compaction(old + young, first_young_segment)
    assert 0 < log.dirty_ratio() < 1
    # Later the young segments are old enough too.
    log.compact(NOW + 100_000)
    assert rows(log) == expected_after_compaction(old + young, active_base(log))


def test_compacting_a_clean_log_is_a_no_op(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "p", segment_bytes=300)
    fill(log, 30, keys=3)
    log.compact()
    files = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in (tmp_path / "p").iterdir()}
    assert log.compact() == CleanStats()
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in (tmp_path / "p").iterdir()} == files


def test_a_log_with_nothing_to_remove_is_left_in_place(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "p", segment_bytes=200)
    fill(log, 12, keys=12)  # every key once
    before = {p.name: p.read_bytes() for p in (tmp_path / "p").iterdir() if p.suffix == ".log"}
    stats = log.compact()
    assert stats == CleanStats()
    assert {p.name: p.read_bytes() for p in (tmp_path / "p").iterdir() if p.suffix == ".log"} == before
    assert log.dirty_ratio() == 0.0  # still checkpointed


def test_small_cleaned_segments_are_grouped(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "p", segment_bytes=200)
    written = fill(log, 30, keys=2)
    n = len(log._segments)
    log.compact()  # each segment shrinks to at most 2 batches
    log.update_config(log.config.__class__(cleanup_policy=COMPACT, segment_bytes=100_000))
    log.update_config(log.config.__class__(cleanup_policy=COMPACT, segment_bytes=200))
    more = fill(log, 4, keys=2)  # rolls: a little dirty data
    log.update_config(log.config.__class__(cleanup_policy=COMPACT, segment_bytes=100_000))
    stats = log.compact()
    assert len(log._segments) <= 3 < n and stats.segments_cleaned > 1
    assert rows(log) == expected_after_compaction(written + more, active_base(log))


def test_dirty_ratio(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "p", segment_bytes=200)
    assert log.dirty_ratio() == 0.0  # only the active segment
    fill(log, 20, keys=2)
    assert log.dirty_ratio() == 1.0
    assert log.compaction_due()
    log.compact()
    assert log.dirty_ratio() == 0.0
    assert not log.compaction_due()
    fill(log, 20, keys=2)
    ratio = log.dirty_ratio()
    assert 0.5 < ratio < 1.0
    cleaned = int((tmp_path / "p" / CLEANER_CHECKPOINT_FILE).read_text().split()[0])
    assert 0 < cleaned < 20
    dirty = sum(s.size for s in log._segments[:-1] if s.base_offset >= cleaned)
    assert ratio == pytest.approx(dirty / sum(s.size for s in log._segments[:-1]))


def test_reopen_after_compaction(tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    log = compact_log(tmp_path / "p", clock, segment_bytes=300)
    fill(log, 40, keys=4)
    log.compact()

    def state(log: PartitionLog) -> tuple[object, ...]:
        return (rows(log), log.log_start_offset, log.log_end_offset, log.size_bytes, log.dirty_ratio())

    before = state(log)
    ts = log.offset_for_timestamp(NOW + 20)
    log.close()
    for crashed in (False, True):
        log = compact_log(tmp_path / "p", clock, segment_bytes=300)
        assert state(log) == before
        assert log.offset_for_timestamp(NOW + 20) == ts
        for s in log._segments:
            assert s.offset_index.path.exists() and s.time_index.path.exists()
        if not crashed:
            log.close()
    assert log.compact() == CleanStats()
    assert log.append(kbatch([(b"k1", b"x")])).base_offset == before[2]


def test_file_slices_handed_out_before_compaction_stay_readable(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "p", segment_bytes=300)
    fill(log, 30, keys=2)
    s = log.read(0, 1 << 20)
    assert s is not None
    original = s.read()
    log.compact()
    assert log.read(0, 1 << 20) != s
    assert s.read() == original


def test_policies(tmp_path: Path) -> None:
    # delete only: compact() does nothing.
    log = open_log(tmp_path / "d", FakeClock(NOW), segment_bytes=200)
    fill(log, 10, keys=1)
    assert log.compact() == CleanStats()
    assert len(rows(log)) == 10
    # compact,delete: compaction and retention both apply; compact alone: no retention.
    for policy, name in ((frozenset({"compact", "delete"}), "cd"), (COMPACT, "c")):
        clock = FakeClock(NOW)
        log = compact_log(tmp_path / name, clock, segment_bytes=200, cleanup_policy=policy, retention_ms=1000)
        fill(log, 10, keys=1, ts=NOW - 5000)
        assert log.compact().records_removed > 0
        deleted = log.apply_retention()
        assert (deleted > 0) == (name == "cd")


def test_truncation_below_the_checkpoint_lowers_it(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "p", segment_bytes=200)
    fill(log, 20, keys=2)
    log.compact()
    assert log.dirty_ratio() == 0.0
    log.truncate_to(5)
    assert int((tmp_path / "p" / CLEANER_CHECKPOINT_FILE).read_text().split()[0]) == 5
    fill(log, 10, keys=2)
    assert log.dirty_ratio() > 0.5


def test_control_and_keyless_records_are_kept(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "p", segment_bytes=150)
    control = bytearray(kbatch([(struct.pack(">hh", 0, 1), b"\x00\x00\x00\x00\x00\x00")], producer=(5, 0, 0)))
    struct.pack_into(">h", control, 21, 0x30)  # transactional + control
    struct.pack_into(">I", control, 17, crc32c.crc32c(bytes(control[21:])))
    append_unchecked(log, kbatch([(None, b"no key")]))
    log.append(bytes(control))
    append_unchecked(log, kbatch([(None, b"no key")]))
    log.append(kbatch([(b"x", b"x")]))
    assert log.compact() == CleanStats()
    assert [b.is_control_batch for b in stored_batches(log)] == [False, True, False, False]


def test_record_decoding_errors() -> None:
    good = kbatch([(b"k", b"v")])
    h = parse_header(good)
    assert [(r.key, r.tombstone) for r in decode_records(good, h)] == [(b"k", False)]
    with pytest.raises(RecordError):
        decode_records(good[:-1], parse_header(good[:-1]))
    with pytest.raises(RecordError):
        read_varint(b"\xff\xff", 0)
    gz = bytearray(kbatch([(b"k", b"v" * 100)], codec=1))
    gz[-6] ^= 0xFF  # the gzip trailer's CRC-32
    with pytest.raises(RecordError):
        decode_records(bytes(gz), parse_header(gz))


def test_undecodable_batches_are_kept(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "p", segment_bytes=150)
    bad = bytearray(kbatch([(b"a", b"v" * 100)], codec=1))
    bad[-6] ^= 0xFF  # corrupt the gzip trailer, then re-sign the batch so the log accepts it
    struct.pack_into(">I", bad, 17, crc32c.crc32c(bytes(bad[21:])))
    append_unchecked(log, bytes(bad))
    log.append(kbatch([(b"a", b"2")]))
    log.append(kbatch([(b"a", b"3")]))
    log.append(kbatch([(b"x", b"x")]))
    assert log.compact().records_removed == 1
    assert [b.base_offset for b in stored_batches(log)] == [0, 2, 3]


def test_tombstones_stay_while_an_undecodable_batch_may_hide_an_older_value(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "p", segment_bytes=150, delete_retention_ms=1000)
    bad = bytearray(kbatch([(b"a", b"v" * 100)], codec=1))
    bad[-6] ^= 0xFF
    struct.pack_into(">I", bad, 17, crc32c.crc32c(bytes(bad[21:])))
    append_unchecked(log, bytes(bad))  # holds a=v..., which the cleaner cannot see
    log.append(kbatch([(b"a", None)], ts=NOW - 10_000))
    log.append(kbatch([(b"x", b"x")]))
    assert log.compact(NOW) == CleanStats()
    assert [b.base_offset for b in stored_batches(log)] == [0, 1, 2]  # 1 shadows the unreadable a=v...
    assert not log.compaction_due(NOW + 10**6)
