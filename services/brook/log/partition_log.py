"""PartitionLog: one partition's log, a directory of segments named by their base offsets."""

from __future__ import annotations

import functools
import random
import shutil
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from pathlib import Path

from brook.config import TopicConfig
from brook.log.append import AppendResult, prepare_append
from brook.log.checkpoint import (
    RecoveryPoint,
    drop_recovery_point,
    fsync_dir,
    read_log_start_offset,
    write_clean_shutdown_marker,
    write_log_start_offset,
)
from brook.log.cleaner import (
    CleanerCheckpoint,
    CleanStats,
    clean_segments,
    dirty_bytes,
    first_dirty_segment,
    read_cleaner_checkpoint,
    tombstone_due,
    write_cleaner_checkpoint,
)
from brook.log.dir_health import LogDirHealth
from brook.log.file_slice import FileSlice
from brook.log.recovery import load_segments
from brook.log.retention import expired_segment_count
from brook.log.segment import MAX_RELATIVE_OFFSET, Segment, TimestampAndOffset
from brook.log.snapshot_files import delete_snapshots, read_snapshot, snapshot_offsets, write_snapshot
from brook.log.txn_index import AbortedTxn, TxnIndex
from brook.protocol.batch import BatchHeader
from brook.protocol.errors import ErrorCode, KafkaError


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _base(segment: Segment) -> int:
    return segment.base_offset


class PartitionLog:
    """Appends, reads and retention over a partition's segments. Synchronous file I/O; not thread-safe.

    Every operation runs under its log directory's guard (brook.log.dir_health): an OSError takes the
    directory offline and is answered KAFKA_STORAGE_ERROR, as is every operation after it.
    """

    def __init__(
        self,
        directory: Path,
        config: TopicConfig,
        clock: Callable[[], int],
        segments: list[Segment],
        log_start_offset: int,
        cleaner_checkpoint: CleanerCheckpoint | None = None,
        health: LogDirHealth | None = None,
        txn_index: TxnIndex | None = None,
    ) -> None:
        self.directory = directory
        self._name = directory.name
        self._health = health if health is not None else LogDirHealth(directory.parent)
        self._read_failed = functools.partial(self._health.fail, f"read of {self._name}")  # FileSlice
        self._config = config
        self._clock = clock
        self._segments = segments  # oldest first; the last is the active segment
        self._log_start_offset = log_start_offset
        self._unflushed_records = 0
        self._first_unflushed_ms: int | None = None
        self._closed = False
        self._cleaner_checkpoint = cleaner_checkpoint
        self._txn_index = txn_index if txn_index is not None else TxnIndex(directory, [])
        # Called with a new segment's base offset when the log rolls (before the batch that rolled it is
        # written): the owner of the state derived from the batches snapshots it there.
        self.on_roll: Callable[[int], None] | None = None
        self._roll_jitter_ms = self._random_jitter()

    @classmethod
    def open(
        cls,
        directory: Path,
        config: TopicConfig,
        *,
        clock: Callable[[], int] = wall_clock_ms,
        health: LogDirHealth | None = None,
        sync: bool = True,
    ) -> PartitionLog:
        """Open (creating it if missing) and recover the partition directory. sync=False: the caller
        fsyncs a new directory (and its parent) before using the log."""
        directory = Path(directory)
        health = health if health is not None else LogDirHealth(directory.parent)
        with health.guard("opening", directory.name):
            directory.mkdir(parents=True, exist_ok=True)
            checkpoint = read_log_start_offset(directory)
            segments = load_segments(directory, config.index_interval_bytes, clock(), checkpoint, sync=sync)
            # The checkpoint may lag (a crash between deleting segments and writing it): never below the
            # first segment.
            start = min(max(checkpoint or 0, segments[0].base_offset), segments[-1].next_offset)
            cleaned = read_cleaner_checkpoint(directory)
            plog = cls(directory, config, clock, segments, start, cleaned, health, TxnIndex.load(directory))
            plog._delete_segments_below(start)  # a crash after an advance's checkpoint, before its deletions
            plog._sync_txn_index()
        return plog

    # ---- state

    @property
    def config(self) -> TopicConfig:
        return self._config

    def update_config(self, config: TopicConfig) -> None:
        self._config = config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._active.next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def offline(self) -> bool:
        """The log directory failed: nothing is read or written here until the log is reopened."""
        return self._health.offline

    @property
    def _active(self) -> Segment:
        return self._segments[-1]

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"log {self.directory} is closed")

    # ---- append

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        assign_offsets: bool = True,
        leader_epoch: int | None = None,
        headers: list[tuple[int, BatchHeader]] | None = None,
        in_place: bool = False,
    ) -> AppendResult:
        """Validate all batches, then write them with one write to the active segment (all or nothing).
        `headers` and `in_place`: see prepare_append."""
        self._check_open()
        config = self._config
        now = self._clock()
        with self._health.guard("append to", self._name):
            prepared = prepare_append(
                records,
                config,
                self.log_end_offset,
                assign_offsets=assign_offsets,
                leader_epoch=leader_epoch,
                now_ms=now,
                headers=headers,
                in_place=in_place,
            )
            result = prepared.result
            self._maybe_roll(len(prepared.data), result.base_offset, result.last_offset, now)
            self._active.append(prepared.data, prepared.batches, config.index_interval_bytes)
            self._unflushed_records += result.record_count
            if self._first_unflushed_ms is None:
                self._first_unflushed_ms = now
            if (
                self._unflushed_records >= config.flush_messages
                or now - self._first_unflushed_ms >= config.flush_ms
            ):
                self._flush()
        return result

    def _maybe_roll(self, incoming: int, first_offset: int, last_offset: int, now: int) -> None:
        segment = self._active
        config = self._config
        overflow = last_offset - segment.base_offset > MAX_RELATIVE_OFFSET
        if segment.size == 0:
            if overflow:  # a follower jumping far ahead: re-base the empty segment
                self._roll(first_offset, now)
            return
        if (
            overflow
            or segment.size + incoming > config.segment_bytes
            or now - segment.created_ms > config.max_segment_ms - self._roll_jitter_ms
            or segment.offset_index.is_full(config.segment_index_bytes)
            or segment.time_index.is_full(config.segment_index_bytes)
        ):
            self._roll(first_offset, now)

    def _random_jitter(self) -> int:
        """segment.jitter.ms: a segment's random head start on its age limit, as Kafka's (so that
        partitions created together do not all roll at once)."""
        config = self._config
        bound = min(config.segment_jitter_ms, config.max_segment_ms)
        return random.randrange(bound) if bound > 0 else 0

    def _roll(self, base_offset: int, now: int) -> None:
        """Seal the active segment (fsynced), start a new one at `base_offset`; an empty one is replaced."""
        old = self._active
        if old.size == 0:
            if old.base_offset == base_offset:
                return
            old.delete()
            self._segments.pop()
        else:
            old.deactivate()
        self._segments.append(Segment.create(self.directory, base_offset, now))
        self._roll_jitter_ms = self._random_jitter()
        drop_recovery_point(self.directory, sync=False)  # the fsync below covers it
        fsync_dir(self.directory)
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        self._unflushed_records = 0
        self._first_unflushed_ms = None
        if self.on_roll is not None and not self._health.offline:
            self.on_roll(base_offset)

    def flush_if_due(self) -> bool:
        """Flush when the oldest unflushed append is older than flush.ms (for partitions gone quiet)."""
        first = self._first_unflushed_ms
        if first is None or self._clock() - first < self.config.flush_ms:
            return False
        self.flush()
        return True

    def flush(self) -> None:
        """fsync the active segment (sealed segments were fsynced when rolled)."""
        self._check_open()
        with self._health.guard("flush of", self._name):
            self._flush()

    def _flush(self) -> None:
        self._active.flush()
        self._unflushed_records = 0
        self._first_unflushed_ms = None

    # ---- read

    def _segment_index(self, offset: int) -> int:
        """Index of the segment that would hold `offset` (the last with base offset <= it, or the first)."""
        return max(0, bisect_right(self._segments, offset, key=_base) - 1)

    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one: bool = True
    ) -> FileSlice | None:
        """Whole batches from the one containing `offset`, within one segment.

        The slice ends at max_bytes (possibly mid-batch, as Kafka does: clients drop a partial trailing
        batch), at the first batch starting at or after max_offset, or at the segment's end; with min_one it
        covers at least the first batch. None when there is nothing to return.
        """
        self._check_open()
        with self._health.guard("read of", self._name):
            return self._read(offset, max_bytes, max_offset, min_one)

    def read_bytes(self, chunk: FileSlice) -> bytes:
        """A slice's bytes (pread) under the directory's guard: a failed read takes it offline (Kafka's
        KafkaStorageException on read) instead of failing the request and its connection."""
        with self._health.guard("read of", self._name):
            return chunk.read()

    def _read(self, offset: int, max_bytes: int, max_offset: int | None, min_one: bool) -> FileSlice | None:
        if offset < self._log_start_offset or offset > self.log_end_offset:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {offset} is outside [{self._log_start_offset}, {self.log_end_offset}]",
            )
        if offset == self.log_end_offset or (max_offset is not None and offset >= max_offset):
            return None
        segments = self._segments
        i = self._segment_index(offset)
        found = None
        while i < len(segments):
            found = segments[i].locate(offset)
            if found is not None:
                break
            i += 1  # `offset` is past this segment's last batch: the next segment starts after it
        if found is None:
            return None
        segment = segments[i]
        start, first_size = found
        end = segment.size
        if max_offset is not None:
            upper = segments[i + 1].base_offset if i + 1 < len(segments) else segment.next_offset
            if max_offset < upper:
                bound = segment.position_of(max_offset, start)
                if bound is not None:
                    end = bound
        want = max(max_bytes, first_size) if min_one else max_bytes
        end = min(end, start + max(want, 0))
        if end <= start:
            return None
        return FileSlice(segment.reader, start, end - start, self._read_failed)

    def iter_batch_headers(self, start_offset: int = 0) -> Iterator[BatchHeader]:
        """Headers of the stored batches whose last offset is >= start_offset, in order."""
        self._check_open()
        with self._health.guard("read of", self._name):
            for segment in self._segments[self._segment_index(start_offset) :]:
                yield from segment.iter_headers(start_offset)

    def offset_for_timestamp(self, timestamp_ms: int) -> TimestampAndOffset | None:
        """The first record at or after the log start whose timestamp is >= timestamp_ms (its timestamp,
        offset and leader epoch), or None. Decodes only the batch(es) that may hold it."""
        self._check_open()
        start = self._log_start_offset
        with self._health.guard("read of", self._name):
            for segment in self._segments:
                if segment.max_timestamp < timestamp_ms:
                    continue
                found = segment.search_timestamp(timestamp_ms, start)
                if found is not None:
                    return found
        return None

    def max_timestamp(self) -> TimestampAndOffset | None:
        """The first record with the largest timestamp in the log (ListOffsets MAX_TIMESTAMP), or None."""
        self._check_open()
        self._health.check()
        best: Segment | None = None
        for segment in self._segments:
            if segment.offset_of_max_timestamp < 0:
                continue
            if best is None or segment.max_timestamp > best.max_timestamp:
                best = segment
        return best.max_timestamp_record() if best is not None else None

    # ---- aborted transactions

    def record_aborted(self, entry: AbortedTxn) -> None:
        """Index a transaction aborted by the marker just appended at entry.last_offset."""
        self._check_open()
        with self._health.guard("txn index write of", self._name):
            i = self._segment_index(entry.last_offset)
            self._txn_index.append(entry, self._segments[i].base_offset)

    @property
    def last_indexed_abort(self) -> int:
        return self._txn_index.last_offset

    def aborted_transactions(self, start: int, upper: int) -> list[AbortedTxn]:
        return self._txn_index.collect(start, upper)

    def _sync_txn_index(self) -> None:
        self._txn_index.sync([s.base_offset for s in self._segments], self.log_end_offset)

    # ---- state snapshots (brook.log.snapshot_files)

    def write_snapshot(self, offset: int, body: bytes) -> None:
        self._check_open()
        with self._health.guard("snapshot of", self._name):
            write_snapshot(self.directory, offset, body)

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshots that can seed a scan from there (from the first segment's base offset
        to the log end), newest first."""
        self._check_open()
        first, end = self._segments[0].base_offset, self.log_end_offset
        with self._health.guard("reading snapshots of", self._name):
            return [o for o in snapshot_offsets(self.directory) if first <= o <= end]

    def read_snapshot(self, offset: int) -> bytes | None:
        """A snapshot's body; None when it is missing, torn or damaged."""
        self._check_open()
        with self._health.guard("reading snapshots of", self._name):
            return read_snapshot(self.directory, offset)

    # ---- retention and truncation

    def apply_retention(self) -> int:
        """Delete the oldest segments past retention.ms / retention.bytes; returns how many were deleted.

        Also while the log directory is offline, since deleting frees space: then only whole sealed
        segments go, and nothing is written (the log start checkpoint may lag; open() corrects it).
        """
        self._check_open()
        offline = self._health.offline
        with self._health.guard("retention of", self._name, while_offline=True):
            now = self._clock()
            n = expired_segment_count(self._segments, self._config, now)
            if offline:
                n = min(n, len(self._segments) - 1)
            if n == 0:
                return 0
            if n == len(self._segments):
                self._roll(self.log_end_offset, now)  # the active segment expired: keep the log end offset
            for segment in self._segments[:n]:  # oldest first, so a crash leaves a contiguous log
                segment.delete()
            del self._segments[:n]
            delete_snapshots(self.directory, below=self._segments[0].base_offset)
            start = max(self._log_start_offset, self._segments[0].base_offset)
            if offline:
                self._log_start_offset = start
            else:
                self._set_log_start_offset(start)
                self._sync_txn_index()
        return n

    def advance_log_start_offset(self, offset: int) -> bool:
        """Move the log start offset up to `offset` (DeleteRecords on a leader, a follower following its
        leader's): what is below becomes unreadable at once, the checkpoint makes that durable, and the
        segments wholly below it are deleted. False when the log already starts there or later."""
        self._check_open()
        if offset <= self._log_start_offset:
            return False
        if offset > self.log_end_offset:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"log start offset {offset} would pass the log end offset {self.log_end_offset}",
            )
        with self._health.guard("deleting records of", self._name):
            self._set_log_start_offset(offset)
            self._delete_segments_below(offset)
        return True

    def _delete_segments_below(self, offset: int) -> None:
        """Delete the leading segments whose successor starts at or below `offset` (never the active one)."""
        segments = self._segments
        n = 0
        while n + 1 < len(segments) and segments[n + 1].base_offset <= offset:
            n += 1
        for segment in segments[:n]:  # oldest first, so a crash leaves a contiguous log
            segment.delete()
        del segments[:n]
        if n:
            delete_snapshots(self.directory, below=segments[0].base_offset)
            self._sync_txn_index()

    def _set_log_start_offset(self, offset: int) -> None:
        if offset != self._log_start_offset:
            self._log_start_offset = offset
            write_log_start_offset(self.directory, offset)

    def reset_to(self, offset: int) -> None:
        """Drop everything and go on, empty, at `offset` (e.g. a follower whose log end is below the
        leader's log start after retention)."""
        self._check_open()
        with self._health.guard("reset of", self._name):
            self._reset_to(offset)

    def _reset_to(self, offset: int) -> None:
        drop_recovery_point(self.directory)  # before the data it vouches for changes
        for segment in reversed(self._segments):
            segment.delete()
        delete_snapshots(self.directory)
        self._segments[:] = [Segment.create(self.directory, offset, self._clock())]
        fsync_dir(self.directory)
        self._set_log_start_offset(offset)
        cleaned = self._cleaner_checkpoint
        if cleaned is not None:
            self._set_cleaner_checkpoint(CleanerCheckpoint(offset, cleaned.oldest_tombstone_ms))
        self._sync_txn_index()
        self._unflushed_records = 0
        self._first_unflushed_ms = None

    def truncate_to(self, offset: int) -> None:
        """Drop every batch that holds an offset >= `offset` (a batch straddling it goes whole)."""
        self._check_open()
        with self._health.guard("truncation of", self._name):
            self._truncate_to(offset)

    def _truncate_to(self, offset: int) -> None:
        if offset >= self.log_end_offset:
            return
        segments = self._segments
        if offset <= segments[0].base_offset or offset < self._log_start_offset:
            self._reset_to(offset)  # nothing below `offset` survives
            return
        keep = bisect_left(segments, offset, key=_base)  # segments starting at or after `offset` go
        for segment in reversed(segments[keep:]):
            segment.delete()
        del segments[keep:]
        drop_recovery_point(self.directory)  # before the data it vouches for changes
        segments[-1].truncate_to(offset)
        segments[-1].activate()
        delete_snapshots(self.directory, above=self.log_end_offset)  # they describe records now gone
        if self._log_start_offset > self.log_end_offset:
            self._set_log_start_offset(self.log_end_offset)
        cleaned = self._cleaner_checkpoint
        if cleaned is not None and cleaned.offset > offset:
            self._set_cleaner_checkpoint(CleanerCheckpoint(offset, cleaned.oldest_tombstone_ms))
        self._sync_txn_index()
        self._unflushed_records = 0
        self._first_unflushed_ms = None

    # ---- compaction

    def compact(self, now_ms: int | None = None, max_offset: int | None = None) -> CleanStats:
        """One compaction pass (cleanup.policy has compact; a no-op otherwise): see brook.log.cleaner.
        `max_offset`: the first unstable offset (an open transaction's first record); nothing from it on
        is cleaned.

        Blocking file I/O proportional to the cleanable bytes; like every method here, not to be run
        concurrently with other calls on this log.
        """
        self._check_open()
        if not self._config.compacted:
            return CleanStats()
        now = self._clock() if now_ms is None else now_ms
        index_interval = self._config.index_interval_bytes

        def load(base_offset: int) -> Segment:
            return Segment.load(self.directory, base_offset, now, index_interval, recover=False)

        with self._health.guard("compaction of", self._name):
            stats, checkpoint = clean_segments(
                self.directory,
                self._segments,
                self._config,
                now,
                self._cleaner_checkpoint,
                load,
                max_offset,
                self._txn_index.entries(),
            )
            if checkpoint is not None:
                self._set_cleaner_checkpoint(checkpoint)
            if stats.segments_cleaned:
                self._sync_txn_index()
        return stats

    def dirty_ratio(self) -> float:
        """Share of the inactive segments' bytes not yet compacted (at or past the cleaner checkpoint)."""
        dirty, total = dirty_bytes(self._segments, self._cleaner_checkpoint)
        return dirty / total if total else 0.0

    def compaction_due(self, now_ms: int | None = None) -> bool:
        """Whether a compact() pass is worth running: a compacted topic whose dirty ratio reached
        min.cleanable.dirty.ratio, a kept tombstone has passed delete.retention.ms, or dirty records are
        older than max.compaction.lag.ms."""
        config = self._config
        if self._closed or self.offline or not config.compacted or len(self._segments) < 2:
            return False
        now = self._clock() if now_ms is None else now_ms
        ratio = self.dirty_ratio()
        return (
            (ratio > 0 and ratio >= config.min_cleanable_dirty_ratio)
            or tombstone_due(config, self._cleaner_checkpoint, now)
            or (ratio > 0 and self._dirty_too_long(now))
        )

    def _dirty_too_long(self, now: int) -> bool:
        """max.compaction.lag.ms: the first uncleaned inactive segment's first batch is older than it
        (Kafka's LogCleanerManager reads the same timestamp)."""
        lag = self._config.max_compaction_lag_ms
        first = first_dirty_segment(self._segments, self._cleaner_checkpoint)
        if lag >= 2**63 - 1 or first is None:
            return False
        head = next(first.iter_headers(first.base_offset), None)
        return head is not None and 0 < head.max_timestamp < now - lag

    def _set_cleaner_checkpoint(self, checkpoint: CleanerCheckpoint) -> None:
        if checkpoint != self._cleaner_checkpoint:
            write_cleaner_checkpoint(self.directory, checkpoint)
            self._cleaner_checkpoint = checkpoint

    # ---- lifecycle

    def close(self) -> None:
        """Seal the active segment (fsync), mark the shutdown clean, release the files.

        While the log directory is offline (or when this fails), only release them: without the
        marker, the next open re-validates the tail."""
        if self._closed:
            return
        try:
            with self._health.guard("closing", self._name):
                active = self._active
                active.deactivate()
                point = RecoveryPoint(active.base_offset, active.size, active.next_offset)
                write_clean_shutdown_marker(self.directory, point)
        except KafkaError:
            pass  # the directory is offline: said once already, and the next open recovers
        finally:
            for segment in self._segments:
                segment.release()
            self._closed = True

    def release(self) -> None:
        """Let go of the files, writing nothing: after its directory failed, this log's state in memory
        is stale (the log is reopened from disk instead, and recovers its tail for want of a marker)."""
        if not self._closed:
            for segment in self._segments:
                segment.release()
            self._closed = True

    def delete(self) -> None:
        """Release the files and remove the partition directory."""
        if not self._closed:
            for segment in self._segments:
                segment.release()
            self._closed = True
        shutil.rmtree(self.directory, ignore_errors=True)
