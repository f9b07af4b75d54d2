"""Log compaction (cleanup.policy=compact): keep the newest record per key, drop expired tombstones.

The cleaner is background work and the one place that decodes records (brook.log.records); appends and
fetches never do. One pass (`clean_segments`):

1. Cleanable range: the inactive segments up to the first one whose max timestamp is younger than
   min.compaction.lag.ms (the active segment is never cleaned). Nothing to do when all of it is at or
   below the cleaner checkpoint (already clean), unless a kept tombstone has since expired.
2. Offset map: key -> offset of its newest record over the whole cleanable range.
3. Rewrite: consecutive segments are grouped while their total size fits segment.bytes (and their offsets
   an index), as Kafka does, and each group is written as one segment named after its first base offset.
   A record is kept when it is the newest for its key, unless it is a tombstone whose batch max timestamp
   is more than delete.retention.ms old. Records without a key are kept (Kafka rejects them at produce
   time; Brook's produce path does not decode records, so the cleaner does not silently drop them).
   A batch keeping all its records is copied byte for byte; one losing some is rebuilt with the same base
   offset, lastOffsetDelta, producer fields, codec and timestamps (new CRC); one losing all is dropped,
   except the last batch of an idempotent producer, kept empty so its sequence state survives. Control
   batches and batches that cannot be decoded are kept as they are (and while one exists in the range,
   no tombstone is removed: it may shadow an older value of its key). A single segment with nothing
   removed is left in place; a group emptied of every batch stays as an empty segment (its base offset
   keeps the log start), its mtime set to the newest source timestamp for time-based retention.
4. Swap, crash-safe: the group is written to `<base>.log.cleaned` and fsynced; renamed to
   `<base>.log.swap` (the commit point); the old segments are deleted; the swap file is renamed to
   `<base>.log` and its indexes are rebuilt. On open, `finish_interrupted_cleaning` discards `.cleaned`
   leftovers (the old segments are intact) and completes any `.swap` (deleting the old segments its
   offsets cover). Old segments' read files stay open for the FileSlices already handed out.
5. Checkpoint: `cleaner-offset-checkpoint` holds the first offset not yet cleaned and the max timestamp of
   the oldest tombstone kept (so a later pass can remove it once delete.retention.ms has passed).

Transactions (KIP-98): nothing at or past the first unstable offset is cleaned (`max_offset`: an open
transaction may still abort). Records of aborted transactions (the aborted-transaction index says which:
a transactional batch of producer P between an aborted transaction's first offset and its ABORT marker)
count for no key and are dropped, so an aborted value never replaces a committed one. A COMMIT/ABORT
marker goes once none of its transaction's records is left and its batch is older than
delete.retention.ms (a consumer that read the data has had that long to read the marker too), unless it
is its producer's last batch.

Offsets never change (compaction leaves gaps); the log start and end offsets stay as they are.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from brook.config import TopicConfig
from brook.log.batch_scan import iter_batches
from brook.log.checkpoint import fsync_dir
from brook.log.records import Record, RecordError, decode_records, empty_batch, rebuild_batch
from brook.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    TIME_INDEX_SUFFIX,
    Segment,
    parse_segment_name,
    segment_name,
)
from brook.log.txn_index import AbortedTxn
from brook.protocol.batch import HEADER_SIZE, NO_PRODUCER_ID, BatchHeader, parse_header
from brook.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
READ_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class CleanStats:
    """One compaction pass. records_removed counts every record dropped, tombstones included;
    tombstones_removed counts the tombstones among them (superseded or expired)."""

    segments_cleaned: int = 0  # segments rewritten (a group of n counts n)
    bytes_before: int = 0  # their size before
    bytes_after: int = 0  # the size of what replaced them
    records_removed: int = 0
    tombstones_removed: int = 0


@dataclass(frozen=True, slots=True)
class CleanerCheckpoint:
    offset: int  # every offset below this has been cleaned
    oldest_tombstone_ms: int = -1  # batch max timestamp of the oldest tombstone kept below it; -1: none


# ---- checkpoint file


def read_cleaner_checkpoint(directory: Path) -> CleanerCheckpoint | None:
    try:
        lines = (directory / CLEANER_CHECKPOINT_FILE).read_text().split()
    except FileNotFoundError:
        return None
    try:
        offset = int(lines[0])
        tombstone = int(lines[1]) if len(lines) > 1 else -1
    except (ValueError, IndexError):
        return None  # unreadable: everything counts as dirty again, which is only slower
    return CleanerCheckpoint(max(offset, 0), tombstone)


def write_cleaner_checkpoint(directory: Path, checkpoint: CleanerCheckpoint) -> None:
    path = directory / CLEANER_CHECKPOINT_FILE
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, f"{checkpoint.offset}\n{checkpoint.oldest_tombstone_ms}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(directory)


# ---- test seam: called after each on-disk step of a swap (tests raise here to simulate a crash)


def _step(name: str) -> None:
    """No-op; tests replace it to stop a pass after `name` ("cleaned", "swapped", "deleted", "renamed")."""


# ---- recovery


def _swap_next_offset(path: Path, base_offset: int) -> int:
    """The offset after the last batch of a swap file (its base offset when it holds none)."""
    next_offset = base_offset
    with open(path, "rb") as f:
        for _, h in iter_batches(f.fileno(), 0, os.fstat(f.fileno()).st_size):
            next_offset = h.last_offset + 1
    return next_offset


def _delete_segment_files(directory: Path, base_offset: int) -> None:
    name = segment_name(base_offset)
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX):
        (directory / (name + suffix)).unlink(missing_ok=True)


def finish_interrupted_cleaning(directory: Path) -> None:
    """Before loading segments: drop `.cleaned` leftovers and complete every `.swap` of a crashed pass.

    A `<base>.log.swap` replaces the segment at `base` and every segment whose base offset lies within
    its offsets; later segments of the same group, if not yet deleted, are a valid (less compacted)
    continuation, so they stay.
    """
    swaps: list[int] = []
    changed = False
    for path in list(directory.iterdir()):
        name = path.name
        if not name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)):
            continue
        base = parse_segment_name(name[: -len(SWAP_SUFFIX)]) if name.endswith(SWAP_SUFFIX) else None
        if base is not None:
            swaps.append(base)
        else:
            path.unlink(missing_ok=True)
            changed = True
    for base in sorted(swaps):
        swap = directory / (segment_name(base) + LOG_SUFFIX + SWAP_SUFFIX)
        end = _swap_next_offset(swap, base)
        log.info("%s: completing the interrupted swap of cleaned segment %d (to %d)", directory, base, end)
        for path in list(directory.iterdir()):
            other = parse_segment_name(path.name)
            if other is not None and (other == base or base < other < end):
                _delete_segment_files(directory, other)
        os.replace(swap, directory / (segment_name(base) + LOG_SUFFIX))  # indexes: rebuilt on load
    if changed or swaps:
        fsync_dir(directory)


# ---- reading


def _read_batches(segment: Segment) -> Iterator[tuple[BatchHeader, bytes]]:
    """Every batch of a sealed segment, whole; raises unless the batches cover the file exactly."""
    fd, end = segment.fd, segment.size
    buf, buf_start, pos = b"", 0, 0
    while pos < end:
        if pos + HEADER_SIZE > buf_start + len(buf):
            buf, buf_start = os.pread(fd, min(READ_CHUNK, end - pos), pos), pos
        h = parse_header(buf, pos - buf_start)  # KafkaError when unparseable (or cut short)
        if pos + h.size > end:
            break
        if pos + h.size > buf_start + len(buf):
            buf, buf_start = os.pread(fd, min(max(READ_CHUNK, h.size), end - pos), pos), pos
            if len(buf) < h.size:
                break
        start = pos - buf_start
        yield h, buf[start : start + h.size]
        pos += h.size
    if pos != end:
        raise KafkaError(
            ErrorCode.CORRUPT_MESSAGE, f"{segment.log_path}: torn batch at position {pos}; not cleaning it"
        )


def _records(h: BatchHeader, data: bytes, segment: Segment) -> list[Record] | None:
    """The batch's records, or None for a batch kept as it is (control, or undecodable)."""
    if h.is_control:
        return None
    try:
        return decode_records(data, h)
    except RecordError as e:
        log.warning("%s: batch at offset %d left uncleaned: %s", segment.log_path, h.base_offset, e)
        return None


# ---- planning


def _group(segments: Sequence[Segment], upper_bound: int, config: TopicConfig) -> list[list[Segment]]:
    """Consecutive segments whose sizes (and index sizes, and offset span) fit one segment together."""
    groups: list[list[Segment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        size = segments[i].size
        entries = len(segments[i].offset_index)
        time_entries = len(segments[i].time_index)
        i += 1
        while i < len(segments):
            seg = segments[i]
            next_base = segments[i + 1].base_offset if i + 1 < len(segments) else upper_bound
            if (
                size + seg.size > config.segment_bytes
                or (entries + len(seg.offset_index) + 1) * 8 > config.segment_index_bytes
                or (time_entries + len(seg.time_index) + 1) * 12 > config.segment_index_bytes
                or next_base - 1 - group[0].base_offset > MAX_RELATIVE_OFFSET
            ):
                break
            group.append(seg)
            size += seg.size
            entries += len(seg.offset_index)
            time_entries += len(seg.time_index)
            i += 1
        groups.append(group)
    return groups


def _tombstone_timestamp(h: BatchHeader, segment: Segment) -> int:
    return h.max_timestamp if h.max_timestamp >= 0 else segment.largest_timestamp_ms()


# ---- the pass


@dataclass(slots=True)
class _GroupResult:
    size: int = 0
    changed: bool = False
    records_removed: int = 0
    tombstones_removed: int = 0
    oldest_tombstone_ms: int = -1


class _Pass:
    def __init__(
        self,
        directory: Path,
        config: TopicConfig,
        now_ms: int,
        latest: dict[bytes, int],
        last_batch_of_producer: dict[int, int],
        aborted: _Aborted,
        *,
        remove_tombstones: bool,
    ) -> None:
        self.aborted = aborted
        # Producers whose transaction (since their previous marker) still has records in the output.
        self._txn_kept: dict[int, bool] = {}
        self.directory = directory
        self.remove_tombstones = remove_tombstones
        self.horizon_ms = now_ms - config.delete_retention_ms  # tombstones whose batch is older go
        self.latest = latest
        self.last_batch_of_producer = last_batch_of_producer

    def clean_batch(
        self, h: BatchHeader, data: bytes, segment: Segment, result: _GroupResult
    ) -> bytes | None:
        """The batch as it should be written (`data` itself when unchanged), or None to drop it."""
        if h.is_control:
            return self._marker(h, data, result)
        out = self._clean_data(h, data, segment, result)
        if out is not None and h.is_transactional and (out is data or _has_records(out)):
            # Records of this transaction remain (an emptied batch kept for sequences has none).
            self._txn_kept[h.producer_id] = True
        return out

    def _marker(self, h: BatchHeader, data: bytes, result: _GroupResult) -> bytes | None:
        pid = h.producer_id
        records_left = self._txn_kept.pop(pid, False)
        expired = 0 <= h.max_timestamp < self.horizon_ms
        if records_left or not expired or self.last_batch_of_producer.get(pid) == h.base_offset:
            return data
        result.changed = True
        result.records_removed += 1
        return None

    def _clean_data(
        self, h: BatchHeader, data: bytes, segment: Segment, result: _GroupResult
    ) -> bytes | None:
        if self.aborted.holds(h):
            result.changed = True
            result.records_removed += h.last_offset - h.base_offset + 1
            return self._emptied(h)
        records = _records(h, data, segment)
        if records is None:
            return data
        ts = _tombstone_timestamp(h, segment)
        kept: list[Record] = []
        for r in records:
            offset = h.base_offset + r.offset_delta
            if r.key is not None and self.latest.get(r.key, offset) > offset:
                pass  # superseded
            elif r.tombstone and self.remove_tombstones and ts < self.horizon_ms:
                pass  # expired
            else:
                kept.append(r)
                if (
                    r.tombstone
                    and self.remove_tombstones  # else no pass is triggered to remove it
                    and (result.oldest_tombstone_ms < 0 or ts < result.oldest_tombstone_ms)
                ):
                    result.oldest_tombstone_ms = ts
                continue
            result.records_removed += 1
            result.tombstones_removed += int(r.tombstone)
        if len(kept) == len(records):
            return data
        result.changed = True
        if kept:
            return rebuild_batch(h, kept)
        return self._emptied(h)

    def _emptied(self, h: BatchHeader) -> bytes | None:
        """A batch that loses every record: dropped, unless it is its producer's last one."""
        producer = h.producer_id
        if producer != NO_PRODUCER_ID and self.last_batch_of_producer.get(producer) == h.base_offset:
            return empty_batch(h)  # keeps the producer's sequence state in the log
        return None

    def write_group(self, group: Sequence[Segment]) -> tuple[Path, _GroupResult]:
        """Write the group's cleaned batches to `<base>.log.cleaned` (fsynced)."""
        path = self.directory / (segment_name(group[0].base_offset) + LOG_SUFFIX + CLEANED_SUFFIX)
        result = _GroupResult(changed=len(group) > 1)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            pending: list[bytes] = []
            pending_size = 0
            for segment in group:
                for h, data in _read_batches(segment):
                    out = self.clean_batch(h, data, segment, result)
                    if out is None:
                        continue
                    pending.append(out)
                    pending_size += len(out)
                    if pending_size >= READ_CHUNK:
                        _write_all(fd, b"".join(pending))
                        result.size += pending_size
                        pending, pending_size = [], 0
            _write_all(fd, b"".join(pending))
            result.size += pending_size
            # Retention falls back to the file's mtime when a segment holds no timestamp (an emptied
            # one): date the file like the data it replaces, as Kafka keeps the source's modified time.
            newest_ns = max(s.largest_timestamp_ms() for s in group) * 1_000_000
            os.utime(fd, ns=(newest_ns, newest_ns))
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        os.close(fd)
        return path, result


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class _Aborted:
    """Which transactional batches belong to aborted transactions, from the aborted-transaction index."""

    def __init__(self, entries: Sequence[AbortedTxn]) -> None:
        self._by_producer: dict[int, list[tuple[int, int]]] = {}
        for e in entries:
            self._by_producer.setdefault(e.producer_id, []).append((e.first_offset, e.last_offset))

    def holds(self, h: BatchHeader) -> bool:
        if not h.is_transactional or h.is_control:
            return False
        spans = self._by_producer.get(h.producer_id)
        return spans is not None and any(first <= h.base_offset < last for first, last in spans)


def _has_records(batch: bytes) -> bool:
    """Whether a (possibly rebuilt) batch holds any record: an empty batch keeps only its header."""
    return parse_header(batch, 0).record_count > 0


def _first_dirty_index(segments: Sequence[Segment], inactive: int, first_dirty_offset: int) -> int:
    """Index of the first inactive segment holding offsets at or above `first_dirty_offset`."""
    for i in range(inactive):
        if segments[i + 1].base_offset > first_dirty_offset:
            return i
    return inactive


def cleanable_end(segments: Sequence[Segment], config: TopicConfig, now_ms: int, first_dirty: int) -> int:
    """Index of the first segment that may not be cleaned: the active one, or from `first_dirty` on the
    first whose max timestamp is younger than min.compaction.lag.ms."""
    inactive = len(segments) - 1
    if config.min_compaction_lag_ms > 0:
        for i in range(first_dirty, inactive):
            if now_ms - segments[i].largest_timestamp_ms() < config.min_compaction_lag_ms:
                return i
    return inactive


def dirty_bytes(segments: Sequence[Segment], checkpoint: CleanerCheckpoint | None) -> tuple[int, int]:
    """(dirty, total) bytes of the inactive segments: dirty ones hold offsets at or past the checkpoint."""
    inactive = len(segments) - 1
    total = sum(s.size for s in segments[:inactive])
    first = _first_dirty_index(segments, inactive, checkpoint.offset if checkpoint else -1)
    return sum(s.size for s in segments[first:inactive]), total


def first_dirty_segment(segments: Sequence[Segment], checkpoint: CleanerCheckpoint | None) -> Segment | None:
    """The oldest inactive segment not yet wholly cleaned, if any."""
    inactive = len(segments) - 1
    first = _first_dirty_index(segments, inactive, checkpoint.offset if checkpoint else -1)
    return segments[first] if first < inactive else None


def tombstone_due(config: TopicConfig, checkpoint: CleanerCheckpoint | None, now_ms: int) -> bool:
    """Whether a tombstone kept by an earlier pass has passed delete.retention.ms since."""
    return (
        checkpoint is not None
        and checkpoint.oldest_tombstone_ms >= 0
        and checkpoint.oldest_tombstone_ms < now_ms - config.delete_retention_ms
    )


def clean_segments(
    directory: Path,
    segments: list[Segment],
    config: TopicConfig,
    now_ms: int,
    checkpoint: CleanerCheckpoint | None,
    load_segment: Callable[[int], Segment],
    max_offset: int | None = None,
    aborted: Sequence[AbortedTxn] = (),
) -> tuple[CleanStats, CleanerCheckpoint | None]:
    """One compaction pass over `segments` (the partition's list, oldest first, last active), replaced in
    place group by group, only over segments wholly below `max_offset` (the first unstable offset).
    Returns the stats and the new checkpoint (None when nothing was done)."""
    inactive = len(segments) - 1
    first_dirty = _first_dirty_index(segments, inactive, checkpoint.offset if checkpoint else -1)
    end = cleanable_end(segments, config, now_ms, first_dirty)
    if max_offset is not None:
        end = min(end, sum(1 for i in range(end) if segments[i + 1].base_offset <= max_offset))
    in_aborted = _Aborted(aborted)
    if end == 0 or (first_dirty >= end and not tombstone_due(config, checkpoint, now_ms)):
        return CleanStats(), None
    cleanable = segments[:end]
    first_uncleanable = segments[end].base_offset

    latest: dict[bytes, int] = {}
    opaque = False  # a batch that could not be decoded: its keys are unknown
    for segment in cleanable:
        for h, data in _read_batches(segment):
            if in_aborted.holds(h):
                continue  # an aborted value is no key's newest
            records = _records(h, data, segment)
            if records is None:
                opaque = opaque or not h.is_control
                continue
            for r in records:
                offset = h.base_offset + r.offset_delta
                if r.key is not None and offset > latest.get(r.key, -1):
                    latest[r.key] = offset
    last_batch_of_producer: dict[int, int] = {}
    for segment in segments:
        for _, h in iter_batches(segment.fd, 0, segment.size):
            if h.producer_id != NO_PRODUCER_ID:
                last_batch_of_producer[h.producer_id] = h.base_offset

    # Expired tombstones go only when every older record is known to be gone with them: an opaque batch
    # could hold an older value of their key, which removing the tombstone would bring back.
    cleaner = _Pass(
        directory, config, now_ms, latest, last_batch_of_producer, in_aborted, remove_tombstones=not opaque
    )
    stats = CleanStats()
    oldest_tombstone = -1
    for group in _group(cleanable, first_uncleanable, config):
        base = group[0].base_offset
        cleaned, result = cleaner.write_group(group)
        if result.oldest_tombstone_ms >= 0 and (
            oldest_tombstone < 0 or result.oldest_tombstone_ms < oldest_tombstone
        ):
            oldest_tombstone = result.oldest_tombstone_ms
        if not result.changed:
            cleaned.unlink()
            continue
        _step("cleaned")
        swap = cleaned.with_name(segment_name(base) + LOG_SUFFIX + SWAP_SUFFIX)
        os.replace(cleaned, swap)
        fsync_dir(directory)
        _step("swapped")
        for segment in group:  # readers stay open for the FileSlices that hold them
            segment.delete()
            _step("deleted")
        os.replace(swap, directory / (segment_name(base) + LOG_SUFFIX))
        fsync_dir(directory)
        _step("renamed")
        i = next(k for k, s in enumerate(segments) if s is group[0])
        segments[i : i + len(group)] = [load_segment(base)]  # re-indexes the new file
        stats = CleanStats(
            segments_cleaned=stats.segments_cleaned + len(group),
            bytes_before=stats.bytes_before + sum(s.size for s in group),
            bytes_after=stats.bytes_after + result.size,
            records_removed=stats.records_removed + result.records_removed,
            tombstones_removed=stats.tombstones_removed + result.tombstones_removed,
        )
    return stats, CleanerCheckpoint(first_uncleanable, oldest_tombstone)
