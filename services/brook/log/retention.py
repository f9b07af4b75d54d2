"""Which of the oldest segments delete-retention removes (retention.ms, retention.bytes)."""

from __future__ import annotations

from collections.abc import Sequence

from brook.config import TopicConfig
from brook.log.segment import Segment


def expired_segment_count(segments: Sequence[Segment], config: TopicConfig, now_ms: int) -> int:
    """How many leading segments to delete.

    By time: each segment whose largest timestamp (file mtime when it has none) is more than
    retention.ms old, stopping at the first that is not; the active segment counts when it is non-empty
    (the caller rolls first). By size: then the oldest inactive segments while the rest still holds
    retention.bytes or more.
    """
    if not config.deletes or not segments:
        return 0
    last = len(segments) - 1
    n = 0
    if config.retention_ms >= 0:
        while n <= last:
            segment = segments[n]
            if n == last and segment.size == 0:
                break
            if now_ms - segment.largest_timestamp_ms() <= config.retention_ms:
                break
            n += 1
    if config.retention_bytes >= 0:
        remaining = sum(s.size for s in segments[n:])
        while n < last and remaining - segments[n].size >= config.retention_bytes:
            remaining -= segments[n].size
            n += 1
    return n
