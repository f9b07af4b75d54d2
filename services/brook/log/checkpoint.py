"""Small files in a partition directory: the log-start-offset checkpoint and the clean-shutdown marker."""

from __future__ import annotations

import os
from pathlib import Path

LOG_START_OFFSET_FILE = "log-start-offset"
CLEAN_SHUTDOWN_FILE = "clean-shutdown"


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
    """Whether the last close was clean; removes the marker (durably) so a crash from now on is not."""
    path = directory / CLEAN_SHUTDOWN_FILE
    if not path.exists():
        return False
    path.unlink()
    fsync_dir(directory)
    return True


def write_clean_shutdown_marker(directory: Path) -> None:
    _write_atomically(directory / CLEAN_SHUTDOWN_FILE, b"")
