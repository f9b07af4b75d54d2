"""Committed batches read from a partition's log for its writer, on the event loop (the log is not
thread-safe): whole batches, as a read_committed fetch reads them, one pread of at most READ_BYTES per
call, so the caller yields to the loop between reads."""

from __future__ import annotations

from dataclasses import dataclass

from brook.log.txn_index import AbortedTxn
from brook.protocol.batch import BatchHeader, iter_headers

from .partition import WrittenPartition

READ_BYTES = 1024 * 1024  # per read of the log on the event loop
COMMIT_BYTES = 16 * 1024 * 1024  # at most this much of the log per snapshot (more: commit again at once)
Batches = list[tuple[bytes, BatchHeader]]


@dataclass(slots=True)
class Chunk:
    """Committed batches read from the log for [start, end) (those below the log start are gone), and
    the aborted transactions among them. Sent to the writer's worker process as it is (pickled)."""

    start: int
    end: int
    batches: Batches
    aborted: list[AbortedTxn]


def read_batches(p: WrittenPartition, pos: int, upper: int) -> tuple[Batches, int, int]:
    """(whole batches from `pos` below `upper`, the offset after them, bytes read): one pread."""
    found = p.log.read(pos, READ_BYTES, max_offset=upper)
    if found is None:
        return [], pos, 0
    data = p.log.read_bytes(found)
    whole = _whole_batches(data)
    batches: Batches = []
    for at, h in iter_headers(data[:whole]):
        if h.last_offset >= pos:
            batches.append((data[at : at + h.size], h))
            pos = h.last_offset + 1
    return batches, pos, whole


def _whole_batches(data: bytes) -> int:
    """The length of the whole batches at the front of `data` (a slice may end mid-batch)."""
    pos = 0
    while pos + 12 <= len(data):
        size = 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
        if pos + size > len(data):
            break
        pos += size
    return pos
