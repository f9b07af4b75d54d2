"""Opening a partition directory: find the segments, and recover after an unclean shutdown.

After a clean close every file is trusted. Otherwise only the last segment can hold unflushed data
(a segment is fsynced with its indexes when it is rolled), so it alone is verified batch by batch
(header, CRC-32C, increasing offsets), cut at the first torn or invalid batch, and re-indexed: from
the recovery point when the last clean close left one for it (what it held then was fsynced with
its indexes; the point goes when the segment is truncated or rolled), else from its start.
A compaction pass cut short is finished or undone first (see brook.log.cleaner).
"""

from __future__ import annotations

import logging
from pathlib import Path

from brook.log.checkpoint import fsync_dir, read_recovery_point, take_clean_shutdown_marker
from brook.log.cleaner import finish_interrupted_cleaning
from brook.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, Segment, parse_segment_name

log = logging.getLogger(__name__)


def _remove_leftovers(directory: Path, bases: set[int]) -> None:
    """Temp files of interrupted rewrites, and indexes whose log file is gone (a deletion cut short)."""
    for path in directory.iterdir():
        name = path.name
        if name.endswith(".tmp"):
            path.unlink(missing_ok=True)
            continue
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            if name.endswith(suffix):
                stem = name[: -len(suffix)]
                base = parse_segment_name(stem + LOG_SUFFIX)
                if base is not None and base not in bases:
                    path.unlink(missing_ok=True)


def load_segments(
    directory: Path,
    index_interval_bytes: int,
    now_ms: int,
    checkpointed_start: int | None,
    *,
    sync: bool = True,
) -> list[Segment]:
    """The partition's segments, oldest first; the last one is active. Creates the first if there is none."""
    directory.mkdir(parents=True, exist_ok=True)
    clean = take_clean_shutdown_marker(directory)
    finish_interrupted_cleaning(directory)  # a compaction cut short: before the segments are listed
    bases = {b for p in directory.iterdir() if (b := parse_segment_name(p.name)) is not None}
    _remove_leftovers(directory, bases)
    ordered = sorted(bases)
    point = None
    if not clean and ordered:
        point = read_recovery_point(directory)
        log.info("%s: no clean-shutdown marker; recovering segment %d", directory, ordered[-1])
    last = len(ordered) - 1
    segments = [
        Segment.load(
            directory, base, now_ms, index_interval_bytes, recover=not clean and i == last, trusted=point
        )
        for i, base in enumerate(ordered)
    ]
    if not segments:
        segments.append(Segment.create(directory, checkpointed_start or 0, now_ms))
        if sync:
            fsync_dir(directory)
    segments[-1].activate()
    return segments
