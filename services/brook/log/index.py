"""Sparse per-segment indexes: kept in memory for lookups (arrays + bisect), appended to files.

`.index`     relative offset u32 | file position u32 (big-endian): the batch starting at that position has
             that base offset; one entry per index.interval.bytes of log (and always the first batch).
`.timeindex` timestamp i64 | relative offset u32: the segment's max timestamp so far and the base offset of
             the batch holding it, added alongside offset-index entries when the max has grown, and once
             more when the segment stops being active so its last entry is the segment's max timestamp.
Both are rebuildable from the log, so an active segment's are kept in memory and written (whole, fsynced)
only when the segment is rolled or closed.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from itertools import pairwise
from pathlib import Path

from brook.log.checkpoint import fsync_dir

OFFSET_ENTRY = struct.Struct(">II")
TIME_ENTRY = struct.Struct(">qI")

if array("I").itemsize != 4 or array("q").itemsize != 8:  # pragma: no cover - every platform we run on
    raise ImportError("brook.log needs 4-byte array('I') and 8-byte array('q')")

_LITTLE_ENDIAN = sys.byteorder == "little"


def _strictly_increasing(values: array[int]) -> bool:
    return all(a < b for a, b in pairwise(values))


class _IndexFile:
    """The file side of an index. While its segment is active the entries live in memory only and the
    file is rewritten whole when the segment is sealed (flush): no descriptor is held per partition,
    and an unclean shutdown rebuilds the active segment's indexes from the log anyway."""

    entry_size = 0

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._live = False  # active: the file may lag the entries in memory
        self._dirty = False  # entries changed since the file was last written

    def __len__(self) -> int:
        raise NotImplementedError

    def is_full(self, max_bytes: int) -> bool:
        return (len(self) + 1) * self.entry_size > max_bytes

    def open_for_append(self) -> None:
        self._live = True

    def flush(self) -> None:
        """Make the file hold every entry (durably): the segment is being sealed or closed cleanly."""
        if self._live and self._dirty:
            self.write_file()

    def close(self) -> None:
        """Stop tracking appends, writing nothing (after flush, or when the state is not trusted)."""
        self._live = False

    def _encode(self) -> bytes:
        raise NotImplementedError

    def write_file(self) -> None:
        """Replace the file with the in-memory entries (write a temp file, fsync, rename)."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, self._encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        # The rename too: a sealed segment's index must not fall back to an older file after a crash
        # (a stale time index would understate the segment's max timestamp, which retention uses).
        fsync_dir(self.path.parent)
        self._dirty = False

    def _truncate_file(self, entries: int) -> None:
        if self._live:
            self._dirty = True  # the file may hold fewer entries than memory: rewritten when sealed
        else:
            os.truncate(self.path, entries * self.entry_size)

    def delete_file(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class OffsetIndex(_IndexFile):
    entry_size = OFFSET_ENTRY.size

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path, base_offset)
        self.relative_offsets: array[int] = array("I")
        self.positions: array[int] = array("I")

    def __len__(self) -> int:
        return len(self.positions)

    def clear(self) -> None:
        """Forget the entries in memory (before a rebuild, which then rewrites the file)."""
        self.relative_offsets = array("I")
        self.positions = array("I")

    @classmethod
    def load(cls, path: Path, base_offset: int, segment_size: int) -> OffsetIndex | None:
        """The index in `path`, or None when it is missing or does not fit the segment (then rebuild it)."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        if len(data) % cls.entry_size:
            return None
        flat = array("I")
        flat.frombytes(data)
        if _LITTLE_ENDIAN:
            flat.byteswap()
        index = cls(path, base_offset)
        index.relative_offsets = flat[0::2]
        index.positions = flat[1::2]
        positions = index.positions
        if segment_size > 0 and (not positions or positions[0] != 0 or positions[-1] >= segment_size):
            return None  # the first batch is always indexed, and no entry may point past the end
        if segment_size == 0 and positions:
            return None
        if not (_strictly_increasing(positions) and _strictly_increasing(index.relative_offsets)):
            return None
        return index

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        self.relative_offsets.append(relative)
        self.positions.append(position)
        self._dirty = True

    def lookup(self, offset: int) -> int:
        """File position of the last indexed batch whose base offset is <= `offset` (0 when none is)."""
        i = bisect_right(self.relative_offsets, offset - self.base_offset) - 1
        return self.positions[i] if i >= 0 else 0

    @property
    def last_position(self) -> int:
        return self.positions[-1] if self.positions else 0

    def truncate_to_position(self, size: int) -> None:
        """Drop entries for batches at or past `size` bytes."""
        n = bisect_left(self.positions, size)
        if n < len(self.positions):
            del self.relative_offsets[n:]
            del self.positions[n:]
            self._truncate_file(n)

    def _encode(self) -> bytes:
        flat = array("I", [0]) * (2 * len(self.positions))
        flat[0::2] = self.relative_offsets
        flat[1::2] = self.positions
        if _LITTLE_ENDIAN:
            flat.byteswap()
        return flat.tobytes()


class TimeIndex(_IndexFile):
    entry_size = TIME_ENTRY.size

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path, base_offset)
        self.timestamps: array[int] = array("q")
        self.relative_offsets: array[int] = array("I")

    def __len__(self) -> int:
        return len(self.timestamps)

    def clear(self) -> None:
        """Forget the entries in memory (before a rebuild, which then rewrites the file)."""
        self.timestamps = array("q")
        self.relative_offsets = array("I")

    @classmethod
    def load(cls, path: Path, base_offset: int, segment_size: int) -> TimeIndex | None:
        """The index in `path`, or None when it is missing or inconsistent (then rebuild it)."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        if len(data) % cls.entry_size:
            return None
        index = cls(path, base_offset)
        for ts, rel in TIME_ENTRY.iter_unpack(data):
            index.timestamps.append(ts)
            index.relative_offsets.append(rel)
        if segment_size == 0 and index.timestamps:
            return None
        if not _strictly_increasing(index.timestamps):
            return None
        rels = index.relative_offsets
        if any(a > b for a, b in pairwise(rels)):
            return None
        return index

    def append(self, timestamp: int, offset: int) -> None:
        relative = offset - self.base_offset
        self.timestamps.append(timestamp)
        self.relative_offsets.append(relative)
        self._dirty = True

    @property
    def last_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def last(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the last entry."""
        if not self.timestamps:
            return None
        return self.timestamps[-1], self.base_offset + self.relative_offsets[-1]

    def lookup_before(self, timestamp: int) -> int | None:
        """Offset of the last entry with a timestamp < `timestamp`: no batch up to it reaches `timestamp`."""
        i = bisect_left(self.timestamps, timestamp) - 1
        return self.base_offset + self.relative_offsets[i] if i >= 0 else None

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries for batches at or past `offset`."""
        n = bisect_left(self.relative_offsets, offset - self.base_offset)
        if n < len(self.timestamps):
            del self.timestamps[n:]
            del self.relative_offsets[n:]
            self._truncate_file(n)

    def _encode(self) -> bytes:
        pairs = zip(self.timestamps, self.relative_offsets, strict=True)
        return b"".join(TIME_ENTRY.pack(ts, rel) for ts, rel in pairs)
