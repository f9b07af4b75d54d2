"""Small files in a partition directory: the log-start-offset checkpoint, the clean-shutdown marker
and the recovery point it becomes."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

LOG_START_OFFSET_FILE = "log-start-offset"
CLEAN_SHUTDOWN_FILE = "clean-shutdown"
RECOVERY_POINT_FILE = "recovery-point"


@dataclass(frozen=True, slots=True)
class RecoveryPoint:
    """The active segment as a clean close left it (fsynced, its indexes written): after a crash only
    what follows `position` needs verifying. `next_offset` is the offset after the batch ending there."""

    base_offset: int
    position: int
    next_offset: int


def fsync_dir(directory: Path) -> None:
    """Make created, renamed and removed names in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def read_log_start_offset(directory: Path) -> int | None:
    try:
        text = (directory / LOG_START_OFFSET_FILE).read_text()
    except FileNotFoundError:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        return None  # unreadable: fall back to the first segment's base offset
    return value if value >= 0 else None


def write_log_start_offset(directory: Path, offset: int) -> None:
    _write_atomically(directory / LOG_START_OFFSET_FILE, f"{offset}\n".encode())


def take_clean_shutdown_marker(directory: Path) -> bool:
    """Whether the last close was clean. The marker becomes the recovery point (durably, as one rename),
    so a crash from now on is not clean but recovers only what was appended since."""
    path = directory / CLEAN_SHUTDOWN_FILE
    if not path.exists():
        return False
    os.replace(path, directory / RECOVERY_POINT_FILE)
    fsync_dir(directory)
    return True


def write_clean_shutdown_marker(directory: Path, active: RecoveryPoint) -> None:
    """Mark a clean close; `active` is the active segment as closed (fsynced, indexes written)."""
    text = f"{active.base_offset} {active.position} {active.next_offset}\n"
    _write_atomically(directory / CLEAN_SHUTDOWN_FILE, text.encode())


def read_recovery_point(directory: Path) -> RecoveryPoint | None:
    """The recovery point a clean close left, or None (none, or unreadable: verify the whole segment)."""
    try:
        fields = (directory / RECOVERY_POINT_FILE).read_text().split()
        base, position, next_offset = (int(f) for f in fields)
    except (FileNotFoundError, ValueError):
        return None
    if min(base, position, next_offset) < 0 or next_offset < base:
        return None
    return RecoveryPoint(base, position, next_offset)


def drop_recovery_point(directory: Path, *, sync: bool = True) -> None:
    """The active segment is about to change below its recovery point (truncated, replaced, rolled):
    verify all of it after a crash. Durable (sync=False: the caller fsyncs the directory next), so the
    point cannot come back to vouch for data it never saw."""
    path = directory / RECOVERY_POINT_FILE
    if path.exists():
        path.unlink()
        if sync:
            fsync_dir(directory)
