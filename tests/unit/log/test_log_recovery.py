"""Reopening, crash recovery, index rebuilds, truncation, flushing and deletion."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from log_batches import FakeClock, make_batch, open_log, with_base_offset

from brook.log import PartitionLog
from brook.protocol.batch import iter_headers

SEG0 = "00000000000000000000"


def _contents(log: PartitionLog) -> bytes:
    """Every stored byte, a segment per read()."""
    out = bytearray()
    offset = log.log_start_offset
    while (s := log.read(offset, 1 << 30)) is not None:
        data = s.read()
        out += data
        offset = iter_headers(data)[-1][1].last_offset + 1
    return bytes(out)


def _crash(log: PartitionLog) -> None:
    """Drop the log without close(): no clean-shutdown marker (file descriptors are left to the GC)."""
    del log


def _fill(path: Path, n: int = 10, **config: Any) -> tuple[PartitionLog, list[bytes]]:
    log = open_log(path, **config)
    batches = [make_batch(i % 3 + 1, timestamp=1000 * i) for i in range(n)]
    for b in batches:
        log.append(b)
    return log, batches


def test_clean_reopen(tmp_path: Path) -> None:
    log, _ = _fill(tmp_path / "p", segment_bytes=400)
    before = (log.log_start_offset, log.log_end_offset, log.size_bytes, _contents(log))
    log.close()
    log.close()  # idempotent
    assert (tmp_path / "p" / "clean-shutdown").exists()
    log = open_log(tmp_path / "p", segment_bytes=400)
    assert not (tmp_path / "p" / "clean-shutdown").exists()
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes, _contents(log)) == before
    assert log.offset_for_timestamp(4500) is not None
    assert log.max_timestamp() == (9000, 18, -1)  # batch 9 (1 record at offset 18)
    r = log.append(make_batch(1))
    assert r.base_offset == before[1]


@pytest.mark.parametrize("tail", [b"\x00" * 100, make_batch(5)[:-1], make_batch(5)[:30], b"garbage!"])
def test_torn_tail_is_truncated(tmp_path: Path, tail: bytes) -> None:
    log, _ = _fill(tmp_path / "p")
    before = (log.log_end_offset, log.size_bytes, _contents(log))
    _crash(log)
    with open(tmp_path / "p" / f"{SEG0}.log", "ab") as f:
        f.write(tail)
    log = open_log(tmp_path / "p")
    assert (log.log_end_offset, log.size_bytes, _contents(log)) == before
    assert (tmp_path / "p" / f"{SEG0}.log").stat().st_size == before[1]
    assert log.append(make_batch(1)).base_offset == before[0]


def test_bad_crc_in_the_last_segment_truncates_from_that_batch(tmp_path: Path) -> None:
    log, batches = _fill(tmp_path / "p", n=5)
    _crash(log)
    path = tmp_path / "p" / f"{SEG0}.log"
    data = bytearray(path.read_bytes())
    third = len(batches[0]) + len(batches[1])
    data[third + 70] ^= 1  # a record byte of the third batch (offsets 3..5)
    path.write_bytes(bytes(data))
    log = open_log(tmp_path / "p")
    assert log.log_end_offset == 3
    assert log.size_bytes == third
    assert log.offset_for_timestamp(2000) is None
    assert log.max_timestamp() == (1001, 2, -1)  # the second record of batch 1


def test_after_a_crash_only_the_last_segment_is_recovered(tmp_path: Path) -> None:
    log, _ = _fill(tmp_path / "p", n=30, segment_bytes=500)
    end, size = log.log_end_offset, log.size_bytes
    logs = sorted(p for p in (tmp_path / "p").iterdir() if p.suffix == ".log")
    assert len(logs) > 2
    _crash(log)
    with open(logs[-1], "ab") as f:
        f.write(b"\x01" * 10)
    log = open_log(tmp_path / "p", segment_bytes=500)
    assert (log.log_end_offset, log.size_bytes) == (end, size)
    assert log.max_timestamp() == (29_002, end - 1, -1)  # batch 29's last record


def _index_files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in path.iterdir() if p.suffix in (".index", ".timeindex")}


@pytest.mark.parametrize("damage", ["missing", "odd-size", "non-monotonic", "past-end", "time-missing"])
@pytest.mark.parametrize("clean", [True, False])
def test_bad_indexes_are_rebuilt(tmp_path: Path, damage: str, clean: bool) -> None:
    def filled(path: Path) -> tuple[bytes, int]:
        log, _ = _fill(path, n=40, segment_bytes=600, index_interval_bytes=100)
        contents, end = _contents(log), log.log_end_offset
        if clean:
            log.close()
        else:
            log.flush()
            _crash(log)  # the active segment's indexes were never written (kept in memory)
        return contents, end

    contents, end = filled(tmp_path / "p")
    filled(tmp_path / "undamaged")
    open_log(tmp_path / "undamaged", segment_bytes=600, index_interval_bytes=100).close()
    expected = _index_files(tmp_path / "undamaged")
    files = _index_files(tmp_path / "p")
    for name in files:
        path = tmp_path / "p" / name
        if damage == "missing" or (damage == "time-missing" and name.endswith(".timeindex")):
            path.unlink()
        elif damage == "odd-size":
            path.write_bytes(files[name] + b"\x00")
        elif damage == "non-monotonic" and name.endswith(".index") and len(files[name]) >= 16:
            path.write_bytes(files[name][8:16] + files[name][:8] + files[name][16:])
        elif damage == "past-end" and name.endswith(".index"):
            path.write_bytes(files[name] + (1).to_bytes(4, "big") + (10**6).to_bytes(4, "big"))
    log = open_log(tmp_path / "p", segment_bytes=600, index_interval_bytes=100)
    log.close()
    assert _index_files(tmp_path / "p") == expected
    log = open_log(tmp_path / "p", segment_bytes=600, index_interval_bytes=100)
    assert log.log_end_offset == end
    assert _contents(log) == contents
    for offset in range(end):
        s = log.read(offset, 1)
        assert s is not None
    assert log.offset_for_timestamp(20_500) is not None


def test_leftover_files_are_removed(tmp_path: Path) -> None:
    log, _ = _fill(tmp_path / "p", n=3)
    log.close()
    (tmp_path / "p" / "00000000000000000099.index").write_bytes(b"\x00" * 8)
    (tmp_path / "p" / "00000000000000000099.timeindex").write_bytes(b"")
    (tmp_path / "p" / f"{SEG0}.index.tmp").write_bytes(b"x")
    open_log(tmp_path / "p")
    names = sorted(p.name for p in (tmp_path / "p").iterdir())
    assert names == [f"{SEG0}.index", f"{SEG0}.log", f"{SEG0}.timeindex", "recovery-point"]


def test_truncate_to(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p", segment_bytes=300, index_interval_bytes=0)
    batches = [make_batch(3, timestamp=100 * i) for i in range(12)]  # batch i: offsets 3i..3i+2
    for b in batches:
        log.append(b)
    assert len([p for p in (tmp_path / "p").iterdir() if p.suffix == ".log"]) > 3
    log.truncate_to(100)  # past the end: nothing
    assert log.log_end_offset == 36
    log.truncate_to(22)  # inside batch 7 (21..23): the whole batch goes
    assert log.log_end_offset == 21
    assert [h.base_offset for h in log.iter_batch_headers()][-1] == 18
    assert log.offset_for_timestamp(650) is None
    assert log.max_timestamp() == (602, 20, -1)  # batch 6's last record
    log.truncate_to(9)  # a batch boundary
    assert log.log_end_offset == 9
    assert log.size_bytes == sum(len(b) for b in batches[:3])
    r = log.append(make_batch(1, timestamp=5))
    assert r.base_offset == 9
    s = log.read(9, 100)
    assert s is not None and s.read() == with_base_offset(make_batch(1, timestamp=5), 9)
    log.close()
    log = open_log(tmp_path / "p", segment_bytes=300, index_interval_bytes=0)
    assert log.log_end_offset == 10
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (0, 0, 0)
    assert log.append(make_batch(2)).base_offset == 0


def test_truncate_below_the_log_start_starts_over(tmp_path: Path) -> None:
    clock = FakeClock(10**9)
    log = open_log(tmp_path / "p", clock, segment_bytes=100, retention_ms=1000)
    for i in range(4):
        log.append(make_batch(1, timestamp=i))
    log.append(make_batch(1, timestamp=10**9))
    assert log.apply_retention() == 4
    assert log.log_start_offset == 4
    log.truncate_to(2)
    assert (log.log_start_offset, log.log_end_offset) == (2, 2)
    log.close()
    log = open_log(tmp_path / "p", clock)
    assert (log.log_start_offset, log.log_end_offset) == (2, 2)


def test_flush_messages_triggers_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(tmp_path / "p", flush_messages=5)
    calls: list[int] = []
    real = os.fsync

    def counting_fsync(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    log.append(make_batch(2))
    log.append(make_batch(2))
    assert calls == []
    log.append(make_batch(1))  # 5 unflushed records
    assert len(calls) == 1
    log.append(make_batch(4))
    assert len(calls) == 1
    log.append(make_batch(1))
    assert len(calls) == 2


def test_flush_ms_triggers_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock(0)
    log = open_log(tmp_path / "p", clock, flush_ms=1000)
    calls: list[int] = []
    monkeypatch.setattr(os, "fsync", calls.append)
    log.append(make_batch(1))
    clock.now = 999
    log.append(make_batch(1))
    assert calls == []
    clock.now = 1000
    log.append(make_batch(1))
    assert len(calls) == 1
    log.flush()
    assert len(calls) == 2


def test_update_config_applies_to_later_appends(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    log.append(make_batch(1))
    log.update_config(log.config.__class__(segment_bytes=1))
    assert log.config.segment_bytes == 1
    log.append(make_batch(1))
    assert len([p for p in (tmp_path / "p").iterdir() if p.suffix == ".log"]) == 2


def test_delete_removes_the_directory(tmp_path: Path) -> None:
    log, _ = _fill(tmp_path / "p", n=3)
    log.delete()
    assert not (tmp_path / "p").exists()
