"""Segment rolling and index lookups across segments."""

from __future__ import annotations

import contextlib
import os
import random
from pathlib import Path

from log_batches import FakeClock, base_offset_of, make_batch, open_log

from brook.protocol.batch import parse_header


def _segment_files(path: Path, suffix: str = ".log") -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.name.endswith(suffix))


def test_roll_by_size(tmp_path: Path) -> None:
    batch = make_batch(2)  # 2 records per batch
    log = open_log(tmp_path / "p", segment_bytes=3 * len(batch))
    for _ in range(7):
        log.append(batch)
    assert _segment_files(tmp_path / "p") == [
        "00000000000000000000.log",
        "00000000000000000006.log",
        "00000000000000000012.log",
    ]
    assert log.size_bytes == 7 * len(batch)
    # One read never spans two segments.
    s = log.read(0, 1 << 20)
    assert s is not None and s.size == 3 * len(batch)
    s = log.read(6, 1 << 20)
    assert s is not None and base_offset_of(s.read()) == 6 and s.size == 3 * len(batch)


def test_an_oversized_append_goes_to_a_fresh_segment_whole(tmp_path: Path) -> None:
    small, big = make_batch(1), make_batch(1, value_size=500)
    log = open_log(tmp_path / "p", segment_bytes=200)
    log.append(small)
    log.append(big)
    log.append(small)
    assert _segment_files(tmp_path / "p") == [
        "00000000000000000000.log",
        "00000000000000000001.log",
        "00000000000000000002.log",
    ]


def test_roll_by_age(tmp_path: Path) -> None:
    clock = FakeClock(1_000_000)
    log = open_log(tmp_path / "p", clock, segment_ms=60_000)
    log.append(make_batch(1))
    clock.now += 60_000
    log.append(make_batch(1))  # exactly segment.ms: not yet
    assert len(_segment_files(tmp_path / "p")) == 1
    clock.now += 1
    log.append(make_batch(1))
    assert _segment_files(tmp_path / "p") == ["00000000000000000000.log", "00000000000000000002.log"]


def test_roll_when_the_offset_index_is_full(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p", index_interval_bytes=0, segment_index_bytes=8 * 4)
    for _ in range(10):
        log.append(make_batch(1))
    assert _segment_files(tmp_path / "p") == [
        "00000000000000000000.log",
        "00000000000000000004.log",
        "00000000000000000008.log",
    ]
    assert (tmp_path / "p" / "00000000000000000000.index").stat().st_size == 32


def test_sparse_index_entries(tmp_path: Path) -> None:
    batch = make_batch(1, value_size=100)
    log = open_log(tmp_path / "p", index_interval_bytes=3 * len(batch))
    for _ in range(10):
        log.append(batch)
    log.close()  # an active segment's index is written when it is sealed
    # The first batch, then every batch after >= 3 batches' worth of bytes.
    data = (tmp_path / "p" / "00000000000000000000.index").read_bytes()
    entries = [
        (int.from_bytes(data[i : i + 4], "big"), int.from_bytes(data[i + 4 : i + 8], "big"))
        for i in range(0, len(data), 8)
    ]
    assert entries == [(0, 0), (3, 3 * len(batch)), (6, 6 * len(batch)), (9, 9 * len(batch))]


def test_reads_of_every_offset_across_many_segments(tmp_path: Path) -> None:
    rng = random.Random(7)
    log = open_log(tmp_path / "p", segment_bytes=5_000, index_interval_bytes=300)
    spans = []  # (base, last) per batch
    for _ in range(300):
        n = rng.randint(1, 5)
        r = log.append(make_batch(n, value_size=rng.randint(0, 60)))
        spans.append((r.base_offset, r.last_offset))
    assert len(_segment_files(tmp_path / "p")) > 5
    end = log.log_end_offset
    assert end == spans[-1][1] + 1
    for offset in range(end):
        s = log.read(offset, 1)
        assert s is not None
        h = parse_header(s.read(), 0)
        assert h.base_offset <= offset <= h.last_offset
        assert s.size == h.size
    assert [(h.base_offset, h.last_offset) for h in log.iter_batch_headers()] == spans
    # Reopen (clean) and check again from the loaded indexes.
    log.close()
    log = open_log(tmp_path / "p", segment_bytes=5_000, index_interval_bytes=300)
    assert log.log_end_offset == end
    for offset in range(0, end, 7):
        s = log.read(offset, 1)
        assert s is not None
        h = parse_header(s.read(), 0)
        assert h.base_offset <= offset <= h.last_offset


def test_roll_when_relative_offsets_would_overflow(tmp_path: Path) -> None:
    far = 2**32 + 5
    log = open_log(tmp_path / "p")
    log.append(make_batch(1, base_offset=0), assign_offsets=False)
    log.append(make_batch(2, base_offset=far), assign_offsets=False)
    assert _segment_files(tmp_path / "p") == ["00000000000000000000.log", f"{far:020d}.log"]
    assert log.log_end_offset == far + 2
    s = log.read(1, 1 << 20)  # in the gap: served from the next segment
    assert s is not None and base_offset_of(s.read()) == far
    # An empty active segment is re-based rather than rolled.
    log2 = open_log(tmp_path / "q")
    log2.append(make_batch(1, base_offset=far), assign_offsets=False)
    assert _segment_files(tmp_path / "q") == [f"{far:020d}.log"]
    assert (log2.log_start_offset, log2.log_end_offset) == (far, far + 1)


def _open_files_under(path: Path) -> list[str]:
    """The files under `path` this process has open (from /proc/self/fd)."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(str(path)):
                out.append(Path(target).name)
    return sorted(out)


def test_a_partition_holds_one_descriptor_its_active_segment(tmp_path: Path) -> None:
    """Descriptors are what bounds the partitions a broker can host (see max.broker.partitions)."""
    batch = make_batch(1, value_size=100)
    log = open_log(tmp_path / "p", segment_bytes=3 * len(batch))
    for _ in range(20):
        log.append(batch)
    assert len(_segment_files(tmp_path / "p")) > 5
    active = f"{log.log_end_offset - 2:020d}.log"  # the last two batches went to the newest segment
    assert _open_files_under(tmp_path) == [active]
    s = log.read(0, 1 << 20)  # a sealed segment is opened when read, and stays open for the next reads
    assert s is not None and s.read()
    assert _open_files_under(tmp_path) == sorted([active, f"{0:020d}.log"])
    log.close()
    del s
    assert _open_files_under(tmp_path) == []


def test_tail_reads_agree_with_the_file_after_appends_truncations_and_rolls(tmp_path: Path) -> None:
    """The active segment finds recently appended batches without reading headers: each read must be
    the file range a scan of the headers gives, also once a truncation has put other batches at the
    same offsets."""
    rng = random.Random(11)
    log = open_log(tmp_path / "p", segment_bytes=20_000, index_interval_bytes=500)

    def scanned(offset: int, max_offset: int | None) -> tuple[int, int] | None:
        hints = [(seg, seg._recent) for seg in log._segments]
        for seg, _ in hints:
            seg._recent = {}
        try:
            s = log.read(offset, 1_000_000, max_offset=max_offset)
        finally:
            for seg, recent in hints:
                seg._recent = recent
        return None if s is None else (s.position, s.size)

    def check(offset: int, max_offset: int | None) -> None:
        s = log.read(offset, 1_000_000, max_offset=max_offset)
        assert (None if s is None else (s.position, s.size)) == scanned(offset, max_offset)
        if s is not None:
            h = parse_header(s.read(), 0)
            assert h.base_offset <= offset <= h.last_offset

    hits = 0
    for step in range(400):
        r = log.append(make_batch(rng.randint(1, 4), value_size=rng.randint(0, 80)))
        end = log.log_end_offset
        hits += r.base_offset in log._segments[-1]._recent
        for offset in {r.base_offset, max(log.log_start_offset, r.base_offset - 3), end}:
            check(offset, None)
            check(offset, r.base_offset)
        if step % 37 == 36:  # a follower's truncation: the same offsets get other batches next
            log.truncate_to(max(log.log_start_offset, end - rng.randint(1, 6)))
            assert log.log_end_offset <= end
    assert hits > 300  # the reads above went through the hints
