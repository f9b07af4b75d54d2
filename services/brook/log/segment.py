"""One segment: a `.log` file of whole record batches starting at `base_offset`, with its two indexes.

While the segment is active its log file is opened once, read-write with O_APPEND: appends go to the end,
reads use explicit positions (pread / sendfile). An inactive segment is read through a read-only file
object opened on first use. The indexes hold no descriptor (see brook.log.index).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from brook.log.batch_scan import index_entries, iter_batches
from brook.log.checkpoint import RecoveryPoint
from brook.log.file_slice import SegmentFile
from brook.log.index import OffsetIndex, TimeIndex
from brook.log.records import RecordError, record_timestamps
from brook.protocol.batch import BatchHeader
from brook.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
MAX_RELATIVE_OFFSET = 0xFFFFFFFF

# (position in the appended buffer, base offset, last offset, size, max timestamp) of one batch.
BatchInfo = tuple[int, int, int, int, int]


class TimestampAndOffset(NamedTuple):
    """A record found by timestamp: its timestamp, offset, and its batch's leader epoch (-1: none)."""

    timestamp: int
    offset: int
    leader_epoch: int


# Tail readers are a few batches behind; ~10 KB per partition at most (4,500 partitions: 45 MB).
_RECENT_BATCHES = 64


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


def parse_segment_name(name: str) -> int | None:
    """Base offset of a `.log` file name, or None when it is not one of ours."""
    stem, dot, suffix = name.partition(".")
    if dot and "." + suffix == LOG_SUFFIX and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


class Segment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        size: int,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        created_ms: int,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = directory / (segment_name(base_offset) + LOG_SUFFIX)
        self.size = size
        self.offset_index = offset_index
        self.time_index = time_index
        # segment.ms counts from here: creation, or the open after a restart (no client timestamps).
        self.created_ms = created_ms
        last = time_index.last()
        # The max timestamp and its batch; for an inactive segment the time index's last entry holds it.
        self.max_timestamp, self.offset_of_max_timestamp = last if last is not None else (-1, -1)
        # Exact only while active (or after a scan): the offset after the last batch.
        self.next_offset = base_offset
        self.bytes_since_index_entry = 0
        self._tail_known = size == 0
        self._append_fd: int | None = None
        self._reader: SegmentFile | None = None
        # Base offset -> (position, size) of the batches appended since the segment became active: a
        # reader at the tail (followers, caught-up consumers) asks for exactly these offsets, and finds
        # them without reading batch headers from the file. Cleared when it grows past _RECENT_BATCHES.
        self._recent: dict[int, tuple[int, int]] = {}

    # ---- creation and loading

    @classmethod
    def create(cls, directory: Path, base_offset: int, now_ms: int) -> Segment:
        """A new, empty, active segment (any stale files of that name are emptied)."""
        name = segment_name(base_offset)
        offset_index = OffsetIndex(directory / (name + INDEX_SUFFIX), base_offset)
        time_index = TimeIndex(directory / (name + TIME_INDEX_SUFFIX), base_offset)
        for path in (directory / (name + LOG_SUFFIX), offset_index.path, time_index.path):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        segment = cls(directory, base_offset, 0, offset_index, time_index, now_ms)
        segment.activate()
        return segment

    @classmethod
    def load(
        cls,
        directory: Path,
        base_offset: int,
        now_ms: int,
        index_interval_bytes: int,
        *,
        recover: bool,
        trusted: RecoveryPoint | None = None,
    ) -> Segment:
        """Open an existing segment (inactive).

        recover=True (the last segment after an unclean shutdown): check every batch (header, CRC,
        increasing offsets), truncate the file at the first bad one, and rebuild both indexes; with
        `trusted` (what the last clean close left of this segment), only the batches after it, when
        the indexes and the file still agree with it. Otherwise trust the file and load the indexes,
        rebuilding any that is missing or inconsistent.
        """
        name = segment_name(base_offset)
        log_path = directory / (name + LOG_SUFFIX)
        size = log_path.stat().st_size
        index_path = directory / (name + INDEX_SUFFIX)
        time_path = directory / (name + TIME_INDEX_SUFFIX)
        offset_index = None if recover else OffsetIndex.load(index_path, base_offset, size)
        time_index = None if recover else TimeIndex.load(time_path, base_offset, size)
        if size > 0 and time_index is not None and not time_index.timestamps:
            time_index = None  # the first timestamped batch always makes an entry; rebuild to be sure
        if offset_index is not None and time_index is not None:
            return cls(directory, base_offset, size, offset_index, time_index, now_ms)
        segment = cls(
            directory,
            base_offset,
            size,
            OffsetIndex(index_path, base_offset),
            TimeIndex(time_path, base_offset),
            now_ms,
        )
        if recover and trusted is not None and segment._resume(trusted):
            log.info("%s: verifying from the recovery point, position %d", log_path, trusted.position)
            segment._rebuild(index_interval_bytes, recover=True, start=trusted.position)
        else:
            segment._rebuild(index_interval_bytes, recover=recover)
        return segment

    def _resume(self, point: RecoveryPoint) -> bool:
        """Take the indexes and the batches up to `point` as the last clean close left them; False when
        they do not agree with it (the whole segment is verified then)."""
        if point.base_offset != self.base_offset or point.position > self.size:
            return False
        offset_index = OffsetIndex.load(self.offset_index.path, self.base_offset, self.size)
        time_index = TimeIndex.load(self.time_index.path, self.base_offset, self.size)
        if offset_index is None or time_index is None:
            return False
        # A recovery since the close rewrote them with entries past the point: in memory only, those
        # go (the files are rewritten when the verification ends).
        for index in (offset_index, time_index):
            index.open_for_append()
        offset_index.truncate_to_position(point.position)
        time_index.truncate_to_offset(point.next_offset)
        # From the last index entry to the point: whole batches ending exactly there, at its offset.
        start = offset_index.last_position
        last = time_index.last()
        max_ts, max_offset = last if last is not None else (-1, -1)
        end, next_offset = start, self.base_offset if start == 0 else -1
        for pos, h in iter_batches(self.fd, start, point.position, verify_crc=True):
            if pos != end:
                return False
            end, next_offset = pos + h.size, h.last_offset + 1
            if h.max_timestamp > max_ts:
                max_ts, max_offset = h.max_timestamp, h.base_offset
        if end != point.position or next_offset != point.next_offset:
            return False
        self.offset_index, self.time_index = offset_index, time_index
        self.max_timestamp, self.offset_of_max_timestamp = max_ts, max_offset
        self.bytes_since_index_entry = point.position - start
        self.next_offset = next_offset
        return True

    def _rebuild(self, index_interval_bytes: int, *, recover: bool, start: int = 0) -> None:
        """Re-index from the log file; when recovering, also verify CRCs and cut off a bad tail. From
        `start` > 0 the indexes and state up to it are kept (_resume)."""
        if start == 0:
            self.offset_index.clear()
            self.time_index.clear()
            self.max_timestamp, self.offset_of_max_timestamp = -1, -1
            self.bytes_since_index_entry = 0
            self.next_offset = self.base_offset
        expected = self.next_offset
        valid_end = start
        highest = self.base_offset + MAX_RELATIVE_OFFSET
        for pos, base, last, size, max_ts in index_entries(self.fd, start, self.size, verify_crc=recover):
            if base < expected or last < base or last > highest:
                break
            self._index_batch(pos, base, size, max_ts, index_interval_bytes)
            expected = last + 1
            valid_end = pos + size
        self.next_offset = expected
        self._tail_known = True
        if recover and valid_end < self.size:
            log.warning(
                "%s: truncating %d bytes of torn or invalid data at position %d",
                self.log_path,
                self.size - valid_end,
                valid_end,
            )
            os.truncate(self.log_path, valid_end)
            self.size = valid_end
            self._fsync_log()
        if self.max_timestamp > self.time_index.last_timestamp:
            self.time_index.append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.write_file()
        self.time_index.write_file()

    def _scan_tail(self) -> None:
        """Recompute the append state from the last offset-index entry to the end of the file."""
        start = self.offset_index.last_position
        self.bytes_since_index_entry = self.size - start
        last = self.time_index.last()
        self.max_timestamp, self.offset_of_max_timestamp = last if last is not None else (-1, -1)
        self.next_offset = self.base_offset
        for _, h in iter_batches(self.fd, start, self.size):
            self.next_offset = h.last_offset + 1
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = h.max_timestamp, h.base_offset
        self._tail_known = True

    # ---- active state

    @property
    def active(self) -> bool:
        return self._append_fd is not None

    def activate(self) -> None:
        """Open for appends (the segment becomes the partition's active segment)."""
        if self._append_fd is None:
            # One descriptor per active segment serves reads and appends (O_APPEND: a write goes to the
            # end whatever reads do); a read-only one opened before is closed by its last holder.
            self._reader = SegmentFile(self.log_path, "a+")
            self._append_fd = self._reader.fileno()
        if not self._tail_known:
            self._scan_tail()
        self.offset_index.open_for_append()
        self.time_index.open_for_append()

    def deactivate(self) -> None:
        """Seal the segment: record its max timestamp in the time index, fsync everything, close writers."""
        if self._append_fd is None:
            return
        if self.max_timestamp > self.time_index.last_timestamp:
            self.time_index.append(self.max_timestamp, self.offset_of_max_timestamp)
        self._fsync_log()
        self.offset_index.flush()
        self.time_index.flush()
        self._append_fd = None
        self._recent.clear()
        # Reopened read-only on the next read: a sealed segment nobody reads holds no descriptor (a
        # FileSlice in flight keeps the old file object, closed by its last holder).
        self._reader = None
        self.offset_index.close()
        self.time_index.close()

    def append(
        self, data: bytes | bytearray | memoryview, batches: Sequence[BatchInfo], index_interval_bytes: int
    ) -> None:
        """Write `data` (whole batches, validated, offsets assigned) with one write, then index it."""
        if self._append_fd is None:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"segment {self.log_path} is not active")
        start = self.size
        view = memoryview(data)
        written = 0
        try:
            while written < len(view):
                written += os.write(self._append_fd, view[written:])
        except OSError:
            # Leave no partial batch behind: the append is all-or-nothing. (Should this fail too, the
            # torn tail lies past `size`, is never read, and recovery cuts it when the log is reopened.)
            with contextlib.suppress(OSError):
                os.ftruncate(self._append_fd, start)
            raise  # the log directory's guard takes the directory offline
        self.size = start + len(view)
        self.next_offset = batches[-1][2] + 1
        recent = self._recent
        if len(recent) > _RECENT_BATCHES:
            recent.clear()
        for pos, base_offset, _last, size, max_ts in batches:
            recent[base_offset] = (start + pos, size)
            self._index_batch(start + pos, base_offset, size, max_ts, index_interval_bytes)

    def _index_batch(
        self, position: int, base_offset: int, size: int, max_timestamp: int, index_interval_bytes: int
    ) -> None:
        indexed = False
        if not self.offset_index.positions or self.bytes_since_index_entry >= index_interval_bytes:
            self.offset_index.append(base_offset, position)
            self.bytes_since_index_entry = 0
            indexed = True
        self.bytes_since_index_entry += size
        if max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = max_timestamp, base_offset
        if indexed and self.max_timestamp > self.time_index.last_timestamp:
            self.time_index.append(self.max_timestamp, self.offset_of_max_timestamp)

    def flush(self) -> None:
        """fsync the log file (the indexes are rebuilt on recovery, so they wait for roll/close)."""
        self._fsync_log()

    def _fsync_log(self) -> None:
        if self._append_fd is not None:
            os.fsync(self._append_fd)
        else:
            fd = os.open(self.log_path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    # ---- reading

    @property
    def reader(self) -> SegmentFile:
        """The read-only file object (opened on first use)."""
        if self._reader is None:
            self._reader = SegmentFile(self.log_path, "rb")
        return self._reader

    @property
    def fd(self) -> int:
        return self.reader.fileno()

    def locate(self, offset: int) -> tuple[int, int] | None:
        """(position, size) of the first batch whose last offset is >= `offset`."""
        hint = self._recent.get(offset)
        if hint is not None:
            return hint
        found = self.find_batch(offset)
        return None if found is None else (found[0], found[1].size)

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= `offset`."""
        for pos, h in iter_batches(self.fd, self.offset_index.lookup(offset), self.size):
            if h.last_offset >= offset:
                return pos, h
        return None

    def position_of(self, offset: int, start: int) -> int | None:
        """Position of the first batch at or after `start` whose base offset is >= `offset`."""
        hint = self._recent.get(offset)
        if hint is not None and hint[0] >= start:
            return hint[0]
        for pos, h in iter_batches(self.fd, max(start, self.offset_index.lookup(offset)), self.size):
            if h.base_offset >= offset:
                return pos
        return None

    def _records(self, position: int, header: BatchHeader) -> list[tuple[int, int]]:
        """(offset, timestamp) of the records of the batch at `position` (decompressed if needed)."""
        data = os.pread(self.fd, header.size, position)
        try:
            if len(data) < header.size:
                raise RecordError(f"batch at {position} is cut short")
            return record_timestamps(data, header)
        except RecordError as e:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{self.log_path} at {position}: {e}") from e

    def search_timestamp(self, timestamp: int, min_offset: int) -> TimestampAndOffset | None:
        """The first record at or after `min_offset` whose timestamp is >= `timestamp`, as Kafka's
        FileRecords.searchForTimestamp: the time index skips the batches that end below it, headers skip
        those whose max timestamp is lower, and only a batch that reaches it is decoded."""
        skip_to = self.time_index.lookup_before(timestamp)
        start_offset = max(min_offset, skip_to if skip_to is not None else min_offset)
        for pos, h in iter_batches(self.fd, self.offset_index.lookup(start_offset), self.size):
            if h.max_timestamp < timestamp or h.last_offset < min_offset:
                continue
            for offset, ts in self._records(pos, h):
                if ts >= timestamp and offset >= min_offset:
                    return TimestampAndOffset(ts, offset, h.partition_leader_epoch)
        return None

    def max_timestamp_record(self) -> TimestampAndOffset | None:
        """The first record holding the segment's max timestamp (KIP-734), found in the first batch whose
        max timestamp is it; None when the segment has no timestamp or that batch lost the record."""
        if self.offset_of_max_timestamp < 0:
            return None
        start = self.offset_index.lookup(self.offset_of_max_timestamp)
        for pos, h in iter_batches(self.fd, start, self.size):
            if h.max_timestamp != self.max_timestamp:
                continue
            for offset, ts in self._records(pos, h):
                if ts == h.max_timestamp:
                    return TimestampAndOffset(ts, offset, h.partition_leader_epoch)
            return None
        return None

    def iter_headers(self, start_offset: int) -> Iterator[BatchHeader]:
        """Headers of the batches whose last offset is >= `start_offset`."""
        for _, h in iter_batches(self.fd, self.offset_index.lookup(start_offset), self.size):
            if h.last_offset >= start_offset:
                yield h

    def largest_timestamp_ms(self) -> int:
        """The segment's max timestamp, or the file's mtime when it holds none (as Kafka's retention does)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return self.log_path.stat().st_mtime_ns // 1_000_000

    # ---- truncation and deletion

    def truncate_to(self, offset: int) -> None:
        """Drop the batch containing `offset` and everything after it."""
        self._recent.clear()
        found = self.find_batch(offset)
        if found is None:
            return
        pos, h = found
        if self._append_fd is not None:
            os.ftruncate(self._append_fd, pos)
        else:
            os.truncate(self.log_path, pos)
        self.size = pos
        self.offset_index.truncate_to_position(pos)
        self.time_index.truncate_to_offset(h.base_offset)
        self._fsync_log()
        self._scan_tail()

    def release(self) -> None:
        """Stop appending and drop the reader (closed by its last holder: see SegmentFile)."""
        self._append_fd = None
        self._recent.clear()
        self.offset_index.close()
        self.time_index.close()
        self._reader = None

    def delete(self) -> None:
        self.release()
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete_file()
        self.time_index.delete_file()
