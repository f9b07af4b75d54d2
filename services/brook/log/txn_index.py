"""The aborted-transaction index, Kafka's `.txnindex`: one file per segment, one 34-byte entry per
transaction aborted by a marker in that segment (version i16, producerId i64, firstOffset i64,
lastOffset i64 = the marker's offset, lastStableOffset i64).

A read_committed Fetch needs the aborted transactions overlapping the offsets it returns; keeping
them here (in memory, sorted by marker offset) answers that without reading any record. Entries
belong to the segment holding their marker; when segments are deleted, truncated or merged by the
cleaner, `sync` re-files them.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from pathlib import Path

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int


def _path(directory: Path, segment_base: int) -> Path:
    return directory / f"{segment_base:020d}{TXN_INDEX_SUFFIX}"


def _last_offset(e: AbortedTxn) -> int:
    return e.last_offset


class TxnIndex:
    def __init__(self, directory: Path, entries: list[AbortedTxn]) -> None:
        self.directory = directory
        self._entries = entries  # sorted by last_offset

    @classmethod
    def load(cls, directory: Path) -> TxnIndex:
        entries: list[AbortedTxn] = []
        for path in directory.glob("*" + TXN_INDEX_SUFFIX):
            data = path.read_bytes()
            whole = len(data) - len(data) % _ENTRY.size  # a torn last entry is rebuilt from the log
            for pos in range(0, whole, _ENTRY.size):
                _, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
                entries.append(AbortedTxn(pid, first, last, lso))
        entries.sort(key=_last_offset)
        return cls(directory, entries)

    @property
    def last_offset(self) -> int:
        """The offset of the newest indexed marker (-1: none)."""
        return self._entries[-1].last_offset if self._entries else -1

    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    def append(self, entry: AbortedTxn, segment_base: int) -> None:
        if entry.last_offset <= self.last_offset:
            return  # already indexed (a rebuild after restart sees it again)
        fd = os.open(_path(self.directory, segment_base), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, _ENTRY.pack(0, entry.producer_id, entry.first_offset, entry.last_offset,
                                     entry.last_stable_offset))  # fmt: skip
        finally:
            os.close(fd)
        self._entries.append(entry)

    def collect(self, start: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions that may hold records in [start, upper): marker at or after start,
        first offset below upper; ordered by first offset, as consumers expect."""
        i = bisect_left(self._entries, start, key=_last_offset)
        out = [e for e in self._entries[i:] if e.first_offset < upper]
        out.sort(key=lambda e: e.first_offset)
        return out

    def sync(self, segment_bases: list[int], log_end_offset: int) -> None:
        """Re-file the entries after segments were deleted, truncated or merged: entries whose marker is
        gone are dropped; each file holds the entries of its segment again."""
        if not segment_bases:
            return
        first = segment_bases[0]
        keep = [e for e in self._entries if first <= e.last_offset < log_end_offset]
        files: dict[int, list[AbortedTxn]] = {}
        for e in keep:
            base = segment_bases[bisect_right(segment_bases, e.last_offset) - 1]
            files.setdefault(base, []).append(e)
        existing = {p for p in self.directory.glob("*" + TXN_INDEX_SUFFIX)}
        for base, entries in files.items():
            path = _path(self.directory, base)
            data = b"".join(
                _ENTRY.pack(0, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
                for e in entries
            )
            existing.discard(path)
            if path.exists() and path.read_bytes() == data:
                continue
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        for path in existing:
            path.unlink(missing_ok=True)
        self._entries = keep
