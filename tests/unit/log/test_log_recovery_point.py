"""The recovery point: a crash after a clean restart verifies only what was appended since (what the
clean close left was fsynced with its indexes), as long as the active segment has not changed below
it; anything that does not agree with it, or a truncation, verifies the whole segment again.

A corrupt record byte stands for a batch torn by a machine crash: cut when it is verified, kept when
it lies in the part the recovery point vouches for (which is how these tests see what was verified)."""

from __future__ import annotations

from pathlib import Path

from log_batches import make_batch, open_log

from brook.log import PartitionLog
from brook.log.checkpoint import RECOVERY_POINT_FILE

SEG0 = "00000000000000000000"
CONFIG = {"index_interval_bytes": 200}  # several index entries in the segment


def _fill(log: PartitionLog, n: int, first_ts: int = 0) -> list[int]:
    """Append n batches of 2 records; the position of each."""
    positions = []
    for i in range(n):
        positions.append(log.size_bytes)
        log.append(make_batch(2, timestamp=first_ts + 1000 * i))
    return positions


def _restarted(path: Path) -> tuple[PartitionLog, list[int]]:
    """A log of 10 batches closed cleanly and opened again; the batches' positions."""
    log = open_log(path, **CONFIG)
    positions = _fill(log, 10)
    log.close()
    return open_log(path, **CONFIG), positions


def _corrupt(path: Path, position: int) -> None:
    """Flip a record byte of the batch at `position` (its CRC no longer matches)."""
    log_file = path / f"{SEG0}.log"
    data = bytearray(log_file.read_bytes())
    data[position + 70] ^= 1
    log_file.write_bytes(bytes(data))


def _reopened(path: Path, *corrupt: int) -> PartitionLog:
    """Open after a crash with a record byte of the batch at each position in `corrupt` flipped;
    every offset kept reads back."""
    for position in corrupt:
        _corrupt(path, position)
    log = open_log(path, **CONFIG)
    for offset in range(log.log_end_offset):
        assert log.read(offset, 1) is not None, offset
    return log


def test_a_crash_after_a_clean_restart_verifies_only_what_came_after(tmp_path: Path) -> None:
    path = tmp_path / "p"
    log, before = _restarted(path)
    assert (path / RECOVERY_POINT_FILE).exists()
    after = _fill(log, 6, first_ts=10_000)
    del log  # crash: no close
    # Batch 4 is vouched for (not read again); batch 3 of those appended since is verified, cut there.
    log = _reopened(path, before[4], after[3])
    assert log.log_end_offset == 2 * (10 + 3)
    assert log.max_timestamp() == (12_001, 25, -1)  # the second record of the last batch kept
    assert log.offset_for_timestamp(11_000) == (11_000, 22, -1)
    assert log.append(make_batch(1)).base_offset == 26


def test_the_point_holds_through_a_second_crash(tmp_path: Path) -> None:
    """The first recovery rewrote the indexes with entries past the point: they are set aside."""
    path = tmp_path / "p"
    log, before = _restarted(path)
    _fill(log, 6, first_ts=10_000)
    del log
    log = open_log(path, **CONFIG)
    assert log.log_end_offset == 32
    _fill(log, 2, first_ts=20_000)
    del log
    log = _reopened(path, before[7])
    assert log.log_end_offset == 36
    assert log.max_timestamp() == (21_001, 35, -1)


def test_a_truncation_below_the_point_verifies_the_whole_segment(tmp_path: Path) -> None:
    """A follower truncates and fetches the same batches again: positions and offsets agree with the
    point, but what it vouched for was rewritten since, so the whole segment is verified."""
    path = tmp_path / "p"
    log, before = _restarted(path)
    log.truncate_to(8)  # batches 4.. go
    assert not (path / RECOVERY_POINT_FILE).exists()
    for i in range(4, 10):
        log.append(make_batch(2, timestamp=1000 * i))
    del log
    assert _reopened(path, before[6]).log_end_offset == 12


def test_a_point_that_does_not_agree_with_the_segment_is_not_used(tmp_path: Path) -> None:
    path = tmp_path / "p"
    log, before = _restarted(path)
    del log
    point = path / RECOVERY_POINT_FILE
    base, position, next_offset = point.read_text().split()
    point.write_text(f"{base} {position} {int(next_offset) + 1}\n")
    assert _reopened(path, before[5]).log_end_offset == 10


def test_a_roll_drops_the_point(tmp_path: Path) -> None:
    path = tmp_path / "p"
    log = open_log(path, segment_bytes=1000, **CONFIG)
    _fill(log, 2)
    log.close()
    log = open_log(path, segment_bytes=1000, **CONFIG)
    assert (path / RECOVERY_POINT_FILE).exists()
    _fill(log, 10)
    assert not (path / RECOVERY_POINT_FILE).exists()
    log.close()
