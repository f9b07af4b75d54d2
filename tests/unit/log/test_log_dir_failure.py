"""A write that fails in a log directory takes it offline: KAFKA_STORAGE_ERROR, one ERROR line, nothing
more written (no clean-shutdown marker), and a reopen that recovers exactly what was written whole."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from log_batches import FakeClock, make_batch

from brook.config import TopicConfig
from brook.log import LogDirHealth, PartitionLog
from brook.log.checkpoint import CLEAN_SHUTDOWN_FILE
from brook.protocol.errors import ErrorCode, KafkaError

HOUR = 3_600_000


class FullDisk:
    """Stands in for the `os` module of one brook.log module: writes take room from `room` bytes; once
    it is used up, a write is cut short, and the next one fails with ENOSPC, as on a full filesystem."""

    def __init__(self, room: int) -> None:
        self.room = room

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def write(self, fd: int, data: Any) -> int:
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = min(len(data), self.room)
        self.room -= n
        return os.write(fd, bytes(data[:n]))


def _open(path: Path, health: LogDirHealth, clock: FakeClock | None = None, **config: Any) -> PartitionLog:
    return PartitionLog.open(path, TopicConfig(**config), clock=clock or FakeClock(), health=health)


def _storage_error(fn: Any, *args: Any) -> KafkaError:
    with pytest.raises(KafkaError) as e:
        fn(*args)
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR, e.value
    return e.value


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_full_disk_takes_the_directory_offline_and_keeps_what_was_acknowledged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    health = LogDirHealth(tmp_path)
    log = _open(tmp_path / "t-0", health)
    batch = make_batch(5, value_size=100)
    disk = FullDisk(room=3 * len(batch) + len(batch) // 2)  # the 4th batch is cut short
    monkeypatch.setattr("brook.log.segment.os", disk)
    acked = 0
    with caplog.at_level(logging.ERROR):
        for _ in range(3):
            log.append(batch)
            acked += 5
        e = _storage_error(log.append, batch)
        assert "ENOSPC" in str(e) and "append to t-0" in str(e)
        assert health.offline and "ENOSPC" in (health.failure or "")
        # The torn batch is gone from the file: nothing past what was acknowledged.
        assert (tmp_path / "t-0" / "00000000000000000000.log").stat().st_size == 3 * len(batch)
        # Every later operation is refused, without another ERROR line.
        _storage_error(log.append, batch)
        _storage_error(log.read, 0, 1 << 20)
        _storage_error(log.flush)
        _storage_error(lambda: list(log.iter_batch_headers()))
        log.close()
    errors = _errors(caplog)
    assert len(errors) == 1, errors
    assert str(tmp_path) in errors[0] and "ENOSPC" in errors[0]
    assert not (tmp_path / "t-0" / CLEAN_SHUTDOWN_FILE).exists()  # the next open recovers the tail

    monkeypatch.undo()
    log = _open(tmp_path / "t-0", LogDirHealth(tmp_path))
    assert log.log_end_offset == acked
    s = log.read(0, 1 << 20)
    assert s is not None and s.size == 3 * len(batch)
    log.append(batch)  # back in service
    assert log.log_end_offset == acked + 5


def test_a_short_write_whose_truncation_fails_too_is_cut_by_recovery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    health = LogDirHealth(tmp_path)
    log = _open(tmp_path / "t-0", health)
    batch = make_batch(3)
    log.append(batch)
    disk = FullDisk(room=len(batch) // 2)

    def no_truncate(fd: int, size: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    disk.ftruncate = no_truncate  # type: ignore[attr-defined]
    monkeypatch.setattr("brook.log.segment.os", disk)
    _storage_error(log.append, batch)
    path = tmp_path / "t-0" / "00000000000000000000.log"
    assert path.stat().st_size == len(batch) + len(batch) // 2  # a torn tail on disk ...
    monkeypatch.undo()
    log.release()
    log = _open(tmp_path / "t-0", LogDirHealth(tmp_path))  # ... cut by recovery
    assert log.log_end_offset == 3 and path.stat().st_size == len(batch)


def test_an_index_write_failure_takes_the_directory_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    health = LogDirHealth(tmp_path)
    batch = make_batch(2)
    log = _open(tmp_path / "t-0", health, segment_bytes=len(batch))
    monkeypatch.setattr("brook.log.index.os", FullDisk(room=0))
    log.append(batch)  # an active segment's index entries stay in memory: nothing written yet
    e = _storage_error(log.append, make_batch(2))  # the roll writes the sealed segment's indexes
    assert "ENOSPC" in str(e)
    assert health.offline
    monkeypatch.undo()
    log.release()
    # The first batch was fsynced before its indexes failed; the second was never written.
    log = _open(tmp_path / "t-0", LogDirHealth(tmp_path))
    assert log.log_end_offset == 2
    assert [h.base_offset for h in log.iter_batch_headers()] == [0]


def test_a_failed_fsync_takes_the_directory_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    health = LogDirHealth(tmp_path)
    log = _open(tmp_path / "t-0", health)
    log.append(make_batch(1))

    class FailingFsync:
        def __getattr__(self, name: str) -> Any:
            return getattr(os, name)

        def fsync(self, fd: int) -> None:
            raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr("brook.log.segment.os", FailingFsync())
    _storage_error(log.flush)
    assert health.failure is not None and "EIO" in health.failure and "flush of t-0" in health.failure


def test_a_failed_roll_takes_the_directory_offline_and_reopens_consistent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    health = LogDirHealth(tmp_path)
    batch = make_batch(1)
    log = _open(tmp_path / "t-0", health, segment_bytes=len(batch))
    log.append(batch)

    def no_dir_sync(directory: Path) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("brook.log.partition_log.fsync_dir", no_dir_sync)
    _storage_error(log.append, batch)  # rolls first: the new segment's directory entry fails
    assert health.offline
    monkeypatch.undo()
    log.release()
    log = _open(tmp_path / "t-0", LogDirHealth(tmp_path), segment_bytes=len(batch))
    assert log.log_end_offset == 1
    log.append(batch)
    assert log.log_end_offset == 2


def test_retention_frees_space_while_offline_but_writes_nothing(tmp_path: Path) -> None:
    health = LogDirHealth(tmp_path)
    clock = FakeClock(0)
    batch_len = len(make_batch(1))
    log = _open(tmp_path / "t-0", health, clock, segment_bytes=2 * batch_len, retention_ms=HOUR)
    for _ in range(7):
        log.append(make_batch(1, timestamp=0))
    assert len(list((tmp_path / "t-0").glob("*.log"))) == 4
    health.fail("append to t-0", OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    clock.now = 10 * HOUR  # every segment expired, the active one too
    assert log.apply_retention() == 3  # the sealed ones; the active segment stays
    assert [p.name for p in (tmp_path / "t-0").glob("*.log")] == ["00000000000000000006.log"]
    assert not (tmp_path / "t-0" / "log-start-offset").exists()  # nothing written
    log.close()
    log = _open(tmp_path / "t-0", LogDirHealth(tmp_path), clock, segment_bytes=2 * batch_len)
    assert (log.log_start_offset, log.log_end_offset) == (6, 7)


def test_probe_and_reopening(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    health = LogDirHealth(tmp_path)
    seen: list[str | None] = []
    health.on_offline(lambda h: seen.append(h.failure))
    with caplog.at_level(logging.ERROR):
        health.fail("append to t-0", OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
        health.fail("flush of t-0", OSError(errno.EIO, os.strerror(errno.EIO)))  # a consequence
    assert len(_errors(caplog)) == 1 and len(seen) == 1
    assert health.failure == "append to t-0: [ENOSPC] No space left on device"
    why = health.probe(min_free_bytes=1 << 62)
    assert why is not None and "bytes free" in why
    assert health.probe(min_free_bytes=0) is None
    assert list(tmp_path.iterdir()) == []  # the probe cleans up after itself
    assert health.offline  # a probe changes nothing by itself
    with pytest.raises(RuntimeError), health.reopening():
        assert not health.offline
        raise RuntimeError("a bug while reopening")
    assert health.failure == "append to t-0: [ENOSPC] No space left on device"  # offline as it was
    with caplog.at_level(logging.ERROR), health.reopening():  # a disk whose reads fail for a while
        health.fail("opening t-0", OSError(errno.EIO, os.strerror(errno.EIO)))
    assert health.failure == "opening t-0: [EIO] Input/output error"  # offline still, not anew:
    assert len(_errors(caplog)) == 1 and len(seen) == 1  # no ERROR, no listeners at every probe
    with health.reopening() as why:
        assert why == "opening t-0: [EIO] Input/output error"
    assert not health.offline
    health.check()
    health.fail("append to t-0", OSError(errno.EIO, os.strerror(errno.EIO)))  # offline anew: said
    assert len(_errors(caplog)) == 2 and len(seen) == 2
