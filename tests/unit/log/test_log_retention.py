"""Delete retention by time and size; log start offset checkpointing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from log_batches import FakeClock, base_offset_of, make_batch, open_log

from brook.log import PartitionLog
from brook.protocol.errors import ErrorCode, KafkaError

HOUR = 3_600_000


def _logs(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.name.endswith(".log"))


def _fill(log_dir: Path, clock: FakeClock, **config: Any) -> PartitionLog:
    """Four segments of 2 batches each; segment i has timestamps around i hours."""
    key = b"k" if "compact" in config.get("cleanup_policy", ()) else None  # compacted topics need keys
    batch_len = len(make_batch(1, key=key))
    log = open_log(log_dir, clock, segment_bytes=2 * batch_len, **config)
    for i in range(8):
        log.append(make_batch(1, timestamp=(i // 2) * HOUR, key=key))
    assert len(_logs(log_dir)) == 4
    return log


def test_retention_by_time_advances_log_start_and_survives_reopen(tmp_path: Path) -> None:
    clock = FakeClock(4 * HOUR)
    log = _fill(tmp_path / "p", clock, retention_ms=2 * HOUR)
    # Segment 0 (t=0) and 1 (t=1h) are more than 2h old at t=4h; segment 2 (t=2h) is exactly 2h old.
    assert log.apply_retention() == 2
    assert log.log_start_offset == 4 and log.log_end_offset == 8
    assert _logs(tmp_path / "p") == ["00000000000000000004.log", "00000000000000000006.log"]
    assert not (tmp_path / "p" / "00000000000000000000.index").exists()
    with pytest.raises(KafkaError) as e:
        log.read(3, 100)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    s = log.read(4, 100)
    assert s is not None and base_offset_of(s.read()) == 4
    assert log.apply_retention() == 0
    log.close()
    log = open_log(tmp_path / "p", clock, retention_ms=2 * HOUR)
    assert (log.log_start_offset, log.log_end_offset) == (4, 8)


def test_retention_disabled(tmp_path: Path) -> None:
    clock = FakeClock(100 * HOUR)
    assert _fill(tmp_path / "a", clock, retention_ms=-1).apply_retention() == 0
    compacted = _fill(tmp_path / "b", clock, cleanup_policy=frozenset({"compact"}), retention_ms=1)
    assert compacted.apply_retention() == 0


def test_retention_by_bytes_keeps_the_active_segment(tmp_path: Path) -> None:
    clock = FakeClock(0)
    log = _fill(tmp_path / "p", clock, retention_ms=-1, retention_bytes=1)
    assert log.apply_retention() == 3
    assert log.log_start_offset == 6 and log.log_end_offset == 8
    assert _logs(tmp_path / "p") == ["00000000000000000006.log"]


def test_retention_by_bytes_keeps_at_least_the_limit(tmp_path: Path) -> None:
    clock = FakeClock(0)
    segment = 2 * len(make_batch(1))
    log = _fill(tmp_path / "p", clock, retention_ms=-1, retention_bytes=2 * segment)
    assert log.apply_retention() == 2
    assert log.size_bytes == 2 * segment
    assert log.log_start_offset == 4


def test_everything_expired_keeps_the_log_end_offset(tmp_path: Path) -> None:
    clock = FakeClock(100 * HOUR)
    log = _fill(tmp_path / "p", clock, retention_ms=HOUR)
    assert log.apply_retention() == 4
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (8, 8, 0)
    assert _logs(tmp_path / "p") == ["00000000000000000008.log"]
    assert log.read(8, 100) is None
    assert log.apply_retention() == 0  # an empty active segment is never expired
    r = log.append(make_batch(1, timestamp=100 * HOUR))
    assert r.base_offset == 8
    log.close()
    log = open_log(tmp_path / "p", clock, retention_ms=HOUR)
    assert (log.log_start_offset, log.log_end_offset) == (8, 9)


def test_deleted_to_nothing_without_a_clean_close(tmp_path: Path) -> None:
    clock = FakeClock(100 * HOUR)
    log = _fill(tmp_path / "p", clock, retention_ms=HOUR)
    log.apply_retention()
    # Simulate a crash: no close(), and the empty active segment is gone too.
    for name in os.listdir(tmp_path / "p"):
        if name.startswith("0000"):
            os.unlink(tmp_path / "p" / name)
    log = open_log(tmp_path / "p", clock, retention_ms=HOUR)
    assert (log.log_start_offset, log.log_end_offset) == (8, 8)


def test_segments_without_timestamps_use_the_file_mtime(tmp_path: Path) -> None:
    clock = FakeClock(10 * HOUR)
    batch_len = len(make_batch(1))
    log = open_log(tmp_path / "p", clock, segment_bytes=batch_len, retention_ms=HOUR)
    log.append(make_batch(1, timestamp=-1))
    log.append(make_batch(1, timestamp=-1))
    first = tmp_path / "p" / "00000000000000000000.log"
    os.utime(first, ns=(0, 0))  # the epoch: long expired at t=10h
    assert log.apply_retention() == 1
    assert log.log_start_offset == 1


def test_file_slice_outlives_the_deleted_segment(tmp_path: Path) -> None:
    clock = FakeClock(100 * HOUR)
    log = _fill(tmp_path / "p", clock, retention_ms=HOUR)
    s = log.read(0, 1 << 20)
    assert s is not None
    expected = s.read()
    assert log.apply_retention() == 4
    assert s.read() == expected  # a fetch being sent keeps its file open
    fd = s.file.fileno()
    del s
    with pytest.raises(OSError):
        os.fstat(fd)  # closed once the last holder let go


def test_advance_log_start_offset_is_durable_and_deletes_whole_segments(tmp_path: Path) -> None:
    """DeleteRecords: offsets below the new start are unreadable at once and after a restart."""
    clock = FakeClock(0)
    log = _fill(tmp_path / "p", clock, retention_ms=-1)  # segments at 0, 2, 4, 6
    assert log.advance_log_start_offset(3)
    assert log.log_start_offset == 3
    assert _logs(tmp_path / "p")[0] == "00000000000000000002.log"  # 2 still holds offset 3
    with pytest.raises(KafkaError) as e:
        log.read(2, 100)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    s = log.read(3, 100)
    assert s is not None and base_offset_of(s.read()) == 3
    assert not log.advance_log_start_offset(3) and not log.advance_log_start_offset(1)  # never back
    with pytest.raises(KafkaError) as e:
        log.advance_log_start_offset(9)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert log.advance_log_start_offset(8)  # everything: the active segment stays, unreadable
    assert _logs(tmp_path / "p") == ["00000000000000000006.log"]
    assert log.read(8, 100) is None
    # No clean close: the checkpoint alone keeps the start.
    log = open_log(tmp_path / "p", clock, retention_ms=-1)
    assert (log.log_start_offset, log.log_end_offset) == (8, 8)
    assert log.append(make_batch(1)).base_offset == 8


def test_segments_below_a_checkpointed_start_are_deleted_at_open(tmp_path: Path) -> None:
    """A crash after the checkpoint was written but before the segments below it were deleted."""
    clock = FakeClock(0)
    _fill(tmp_path / "p", clock, retention_ms=-1).close()
    (tmp_path / "p" / "log-start-offset").write_text("5\n")
    log = open_log(tmp_path / "p", clock, retention_ms=-1)
    assert (log.log_start_offset, log.log_end_offset) == (5, 8)
    assert _logs(tmp_path / "p") == ["00000000000000000004.log", "00000000000000000006.log"]
