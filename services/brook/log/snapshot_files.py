"""State snapshots kept beside the segments (Kafka's `<offset>.snapshot` files).

A snapshot at offset N holds state derived from every batch below N, so that opening the log reads
only the batches from N on instead of all of them. What the state is belongs to the caller (the broker's
producer state and leader epochs); this module keeps the files: named by offset like segments, written
atomically, framed with a CRC-32C so that a torn or damaged file is seen and skipped (the caller then
falls back to an older snapshot or to a full scan). They go with their segments: retention deletes those
below the log's first segment, truncation those above its new end (they describe records that are gone).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import crc32c

SNAPSHOT_SUFFIX = ".snapshot"
_MAGIC = b"BRSN"
_HEAD = struct.Struct(">4sqII")  # magic, offset, body length, CRC-32C of the body


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offsets(directory: Path) -> list[int]:
    """Offsets of the snapshot files in `directory`, newest first."""
    out = []
    for path in directory.iterdir():
        name = path.name
        if name.endswith(SNAPSHOT_SUFFIX) and name[: -len(SNAPSHOT_SUFFIX)].isdigit():
            out.append(int(name[: -len(SNAPSHOT_SUFFIX)]))
    return sorted(out, reverse=True)


def write_snapshot(directory: Path, offset: int, body: bytes) -> None:
    """Write and rename into place, without fsync (as Kafka, which flushes them later): a snapshot only
    saves work, a torn one fails its CRC, and one that outlives the records it describes (a power loss
    before they reached the disk) lies past the recovered log end and is not used."""
    path = snapshot_path(directory, offset)
    tmp = path.with_name(path.name + ".tmp")  # a leftover is removed when the log is next opened
    data = _HEAD.pack(_MAGIC, offset, len(body), crc32c.crc32c(body)) + body
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_snapshot(directory: Path, offset: int) -> bytes | None:
    """The body of the snapshot at `offset`; None when it is missing, torn or damaged."""
    try:
        data = snapshot_path(directory, offset).read_bytes()
    except OSError:
        return None
    if len(data) < _HEAD.size:
        return None
    magic, at, length, crc = _HEAD.unpack_from(data)
    body = data[_HEAD.size :]
    if magic != _MAGIC or at != offset or length != len(body) or crc32c.crc32c(body) != crc:
        return None
    return body


def delete_snapshots(directory: Path, below: int | None = None, above: int | None = None) -> None:
    """Remove the snapshots at offsets < `below` or > `above` (both None: all of them)."""
    for offset in snapshot_offsets(directory):
        everything = below is None and above is None
        if everything or (below is not None and offset < below) or (above is not None and offset > above):
            snapshot_path(directory, offset).unlink(missing_ok=True)
