"""Idempotent-producer deduplication per partition (producer id, epoch, sequence), as Kafka does it.

For each producer the partition remembers its epoch and the last few batches it appended (sequence range
and offset). A retried batch that matches one of them is answered with its original offset and not
written again; a gap in the sequence is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is fenced.
State is rebuilt at start-up from the newest snapshot (brook.broker.producer_snapshot) and the batch
headers after it, or from all of them, so it survives a crash.

Transactions (KIP-98): a producer's first transactional batch opens its transaction at that offset; a
COMMIT/ABORT marker (control batch) closes it. The earliest open transaction bounds the last stable
offset, up to which read_committed consumers read.

A producer idle for producer.id.expiration.ms (by its last batch's timestamp, as Kafka) and with no open
transaction is forgotten (`expire`), or every producer instance a client ever started would stay in
memory, in every snapshot and in every start-up for good.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from brook.protocol.batch import NO_PRODUCER_ID, BatchHeader
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.txn_records import CONTROL_ABORT

CACHED_BATCHES = 5  # Kafka keeps the last 5: max.in.flight.requests.per.connection for idempotence
_SEQ_MAX = 2**31 - 1
NO_SEQUENCE = -1  # coordinator writes (markers, transactional offset commits) carry no sequence


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the marker
    aborted: bool


class CachedBatch(NamedTuple):  # one per appended or replayed batch: a tuple is the cheapest to build
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[CachedBatch] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))
    # The newest transaction coordinator epoch of this producer's markers: an older one is fenced.
    coordinator_epoch: int = -1
    last_timestamp: int = -1  # of its last batch (its max timestamp); -1: unknown (an older snapshot)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def _next_seq(seq: int) -> int:
    return 0 if seq == _SEQ_MAX else seq + 1


class ProducerStateTable:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}
        self._ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self._txn_start_ms: dict[int, int] = {}
        # KIP-890: a producer whose first transactional batch here waits for its coordinator to confirm
        # the partition is in the transaction -> the guard that confirmation must still hold at append
        # (a marker meanwhile, ending the transaction, drops it: Kafka's VerificationGuard).
        self._verifying: dict[int, object] = {}

    def needs_verification(self, producer_id: int, epoch: int) -> bool:
        """Whether a transactional batch of this producer would open a transaction here."""
        entry = self._producers.get(producer_id)
        return producer_id not in self._ongoing or entry is None or entry.epoch != epoch

    def start_verification(self, producer_id: int) -> object:
        return self._verifying.setdefault(producer_id, object())

    def verified(self, producer_id: int, guard: object) -> bool:
        """Whether a verified batch may be appended: a transaction of the producer is open here now
        (a concurrent request's batch opened it since: Kafka checks the guard only while none is), or
        the guard taken before verifying still holds (no marker of this producer since)."""
        return producer_id in self._ongoing or self._verifying.get(producer_id) is guard

    def check(self, h: BatchHeader) -> CachedBatch | None:
        """Validate a batch before append. Returns the cached original when it is a duplicate."""
        if h.producer_id == NO_PRODUCER_ID:
            return None
        entry = self._producers.get(h.producer_id)
        if entry is None:
            # Unknown producer (new, or its state aged out with retention): accept from any sequence.
            return None
        self.check_epoch(h.producer_id, h.producer_epoch)
        if h.base_sequence == NO_SEQUENCE and (h.is_control or h.is_transactional):
            return None
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

    def check_epoch(self, producer_id: int, epoch: int) -> None:
        entry = self._producers.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {producer_id} epoch {epoch} is older than {entry.epoch}",
            )

    def check_coordinator_epoch(self, producer_id: int, coordinator_epoch: int) -> None:
        """A marker from an older transaction coordinator than the last one seen (a zombie coordinator,
        deposed since) is TRANSACTION_COORDINATOR_FENCED, as in Kafka."""
        entry = self._producers.get(producer_id)
        if entry is not None and coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"producer {producer_id}: coordinator epoch {coordinator_epoch} is older than "
                f"{entry.coordinator_epoch}",
            )

    def record(
        self,
        h: BatchHeader,
        base_offset: int,
        control: int = -1,
        now_ms: int = 0,
        coordinator_epoch: int = -1,
        timestamp: int | None = None,
    ) -> CompletedTxn | None:
        """Remember a batch appended at `base_offset` (its header may still carry the client's offset);
        `control`: a marker's type, `coordinator_epoch` its coordinator's; `timestamp`: the batch's max
        timestamp when the header's is not it (LogAppendTime). Returns the transaction a marker
        closed."""
        if h.producer_id == NO_PRODUCER_ID:
            return None
        entry = self._producers.get(h.producer_id)
        if entry is None or h.producer_epoch != entry.epoch:
            batches = entry.batches if entry is not None and h.base_sequence == NO_SEQUENCE else None
            known = entry.coordinator_epoch if entry is not None else -1
            entry = self._producers[h.producer_id] = ProducerEntry(h.producer_epoch, coordinator_epoch=known)
            if batches is not None:  # a marker of a bumped epoch: the old sequences stay known
                entry.batches = batches
        entry.last_timestamp = h.max_timestamp if timestamp is None else timestamp
        if h.is_control:
            entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
            first = self._ongoing.pop(h.producer_id, None)
            self._txn_start_ms.pop(h.producer_id, None)
            self._verifying.pop(h.producer_id, None)
            if first is None:
                return None
            return CompletedTxn(h.producer_id, first, base_offset, control == CONTROL_ABORT)
        if h.is_transactional and h.producer_id not in self._ongoing:
            self._verifying.pop(h.producer_id, None)
            self._ongoing[h.producer_id] = base_offset
            self._txn_start_ms[h.producer_id] = now_ms
        if h.base_sequence != NO_SEQUENCE:
            entry.batches.append(
                CachedBatch(h.base_sequence, h.last_sequence, base_offset, base_offset + h.last_offset_delta)
            )
        return None

    def expire(self, now_ms: int, max_idle_ms: int) -> int:
        """Forget the producers whose last batch is `max_idle_ms` old or older and that have no open
        transaction (Kafka's producer.id.expiration.ms); returns how many. A producer whose time is
        unknown starts its clock now."""
        gone = []
        for pid, entry in self._producers.items():
            if entry.last_timestamp < 0:
                entry.last_timestamp = now_ms
            elif now_ms - entry.last_timestamp >= max_idle_ms and pid not in self._ongoing:
                gone.append(pid)
        for pid in gone:
            del self._producers[pid]
        return len(gone)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open transaction, None when there is none."""
        return min(self._ongoing.values()) if self._ongoing else None

    def ongoing(self) -> dict[int, int]:
        return dict(self._ongoing)

    def entries(self) -> dict[int, ProducerEntry]:
        return self._producers

    def txn_start_ms(self, producer_id: int) -> int:
        return self._txn_start_ms.get(producer_id, -1)

    def load(
        self, producers: dict[int, ProducerEntry], ongoing: dict[int, int], started: dict[int, int]
    ) -> None:
        """Take the state a snapshot held (brook.broker.producer_snapshot)."""
        self._producers = producers
        self._ongoing = ongoing
        self._txn_start_ms = started

    def clear(self) -> None:
        self._verifying.clear()
        self._producers.clear()
        self._ongoing.clear()
        self._txn_start_ms.clear()
