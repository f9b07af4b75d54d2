"""The leader-epoch cache: the first offset written under each leader epoch.

A follower asks the leader for the end offset of its own latest epoch (OffsetForLeaderEpoch) and
truncates anything past it, so records written by a deposed leader never survive a leader change.
The cache is derived from the partitionLeaderEpoch field of the batches (stamped by the leader, kept by
followers), so it is rebuilt from batch headers and needs no file of its own.
"""

from __future__ import annotations

import bisect

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self) -> None:
        self._epochs: list[int] = []
        self._starts: list[int] = []

    def __len__(self) -> int:
        return len(self._epochs)

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset` (ignored unless it is a newer epoch)."""
        if epoch < 0 or (self._epochs and epoch <= self._epochs[-1]):
            return
        self._epochs.append(epoch)
        self._starts.append(start_offset)

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch `offset` was written in: the latest starting at or before it (-1: none)."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch answers (Kafka's LeaderEpochFileCache.endOffsetFor):
        the latest epoch ends at the log end; an older one at the start of the next epoch, with the
        largest known epoch ≤ `epoch` (or `epoch` itself when older than all); an epoch newer than any
        known is undefined."""
        if self._epochs and epoch == self._epochs[-1]:
            return epoch, log_end_offset
        i = bisect.bisect_right(self._epochs, epoch)  # the first epoch newer than `epoch`
        if epoch == UNDEFINED_EPOCH or i == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        return (self._epochs[i - 1] if i > 0 else epoch), self._starts[i]

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after `end_offset` (the log was truncated there)."""
        while self._starts and self._starts[-1] >= end_offset:
            self._epochs.pop()
            self._starts.pop()

    def truncate_from_start(self, start_offset: int) -> None:
        """Retention moved the log start: the epoch holding it now starts there."""
        i = bisect.bisect_right(self._starts, start_offset) - 1
        if i > 0:
            del self._epochs[:i]
            del self._starts[:i]
        if self._starts and self._starts[0] < start_offset:
            self._starts[0] = start_offset
