"""Idempotent-producer deduplication per partition (producer id, epoch, sequence), as Kafka does it.

For each producer the partition remembers its epoch and the last few batches it appended (sequence range
and offset). A retried batch that matches one of them is answered with its original offset and not
written again; a gap in the sequence is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is fenced.
State is rebuilt from the log's batch headers at start-up, so it survives a crash.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from brook.protocol.batch import NO_PRODUCER_ID, BatchHeader
from brook.protocol.errors import ErrorCode, KafkaError

CACHED_BATCHES = 5  # Kafka keeps the last 5: max.in.flight.requests.per.connection for idempotence
_SEQ_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class CachedBatch:
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[CachedBatch] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def _next_seq(seq: int) -> int:
    return 0 if seq == _SEQ_MAX else seq + 1


class ProducerStateTable:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

    def check(self, h: BatchHeader) -> CachedBatch | None:
        """Validate a batch before append. Returns the cached original when it is a duplicate."""
        if h.producer_id == NO_PRODUCER_ID:
            return None
        entry = self._producers.get(h.producer_id)
        if entry is None:
            # Unknown producer (new, or its state aged out with retention): accept from any sequence.
            return None
        if h.producer_epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {h.producer_id} epoch {h.producer_epoch} is older than {entry.epoch}",
            )
        if h.producer_epoch > entry.epoch:
            if h.base_sequence != 0:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"new epoch {h.producer_epoch} must start at sequence 0, got {h.base_sequence}",
                )
            return None
        for b in entry.batches:
            if b.first_seq == h.base_sequence and b.last_seq == h.last_sequence:
                return b
        if h.base_sequence != _next_seq(entry.last_seq):
            if h.base_sequence <= entry.last_seq:
                raise KafkaError(
                    ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
                    f"sequence {h.base_sequence} was already written and is no longer cached",
                )
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {h.producer_id}: expected sequence {_next_seq(entry.last_seq)}, "
                f"got {h.base_sequence}",
            )
        return None

    def record(self, h: BatchHeader, base_offset: int) -> None:
        """Remember a batch appended at `base_offset` (its header may still carry the client's offset)."""
        if h.producer_id == NO_PRODUCER_ID:
            return
        entry = self._producers.get(h.producer_id)
        if entry is None or h.producer_epoch != entry.epoch:
            entry = self._producers[h.producer_id] = ProducerEntry(h.producer_epoch)
        entry.batches.append(
            CachedBatch(h.base_sequence, h.last_sequence, base_offset, base_offset + h.last_offset_delta)
        )

    def clear(self) -> None:
        self._producers.clear()
