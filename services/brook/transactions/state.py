"""A transactional id's state and the rules of its state machine, as Kafka's TransactionMetadata and
TransactionCoordinator decide them (pure: no I/O, no clock).

    Empty ──AddPartitions──▶ Ongoing ──EndTxn──▶ PrepareCommit ──markers──▶ CompleteCommit
      ▲                        │  (timeout, fencing)  PrepareAbort  ──markers──▶ CompleteAbort
      └──────────InitProducerId (epoch bump)◀───────────────────────────────────┘

Each decision returns the metadata to write to `__transaction_state`; the caller applies it once the
write is committed, and marks the entry `pending` meanwhile (requests then get CONCURRENT_TRANSACTIONS).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum, IntEnum

from brook.protocol.errors import ErrorCode, KafkaError

EPOCH_MAX = 32767 - 1  # Kafka bumps to a new producer id before the epoch would overflow
NO_PRODUCER_ID = -1


class TxnState(IntEnum):
    """Kafka's TransactionState ids (the value stored in __transaction_state)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return "".join(w.capitalize() for w in self.name.split("_"))


Partition = tuple[str, int]


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[Partition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_epoch: int = -1  # the epoch before the last bump (a retried InitProducerId)
    pending: bool = False  # a write of this entry is in flight

    def copy(self, **changes: object) -> TxnMetadata:
        new = dataclasses.replace(self, **changes)  # type: ignore[arg-type]
        if "partitions" not in changes:
            new.partitions = set(self.partitions)
        return new


def fenced(v: ErrorCode) -> KafkaError:
    return KafkaError(v, "the producer's epoch is not the transaction's current one")


def check_producer(meta: TxnMetadata | None, producer_id: int, epoch: int) -> TxnMetadata:
    """The requester must be the current producer of the transactional id, in its current epoch."""
    if meta is None:
        raise KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING, "unknown transactional id")
    if meta.producer_id != producer_id:
        raise KafkaError(
            ErrorCode.INVALID_PRODUCER_ID_MAPPING,
            f"producer id {producer_id} does not own this transactional id ({meta.producer_id} does)",
        )
    if epoch != meta.producer_epoch:
        raise fenced(ErrorCode.PRODUCER_FENCED)
    if meta.pending:
        raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS, "a state change is being written")
    return meta


def verify(
    meta: TxnMetadata | None, producer_id: int, epoch: int, partitions: list[Partition]
) -> dict[Partition, ErrorCode]:
    """KIP-890: is each partition in the producer's transaction? (Kafka's
    handleVerifyPartitionsInTransaction; a pending write is not waited for: the leader checks again when
    it appends.)"""
    if meta is None or meta.producer_id != producer_id:
        code = ErrorCode.INVALID_PRODUCER_ID_MAPPING
    elif meta.producer_epoch != epoch:
        code = ErrorCode.PRODUCER_FENCED
    elif meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        code = ErrorCode.CONCURRENT_TRANSACTIONS
    else:
        out = ErrorCode.TRANSACTION_ABORTABLE
        return {p: ErrorCode.NONE if p in meta.partitions else out for p in partitions}
    return dict.fromkeys(partitions, code)


def bumped(meta: TxnMetadata, new_producer_id: int | None, timeout_ms: int, now_ms: int) -> TxnMetadata:
    """InitProducerId on a completed or empty transaction: the next epoch (or a new producer id when
    the epoch is exhausted), nothing in flight."""
    if new_producer_id is not None:
        return meta.copy(
            producer_id=new_producer_id, producer_epoch=0, last_producer_epoch=-1,
            timeout_ms=timeout_ms, state=TxnState.EMPTY, partitions=set(), start_ms=-1,
            last_update_ms=now_ms,
        )  # fmt: skip
    return meta.copy(
        producer_epoch=meta.producer_epoch + 1, last_producer_epoch=meta.producer_epoch,
        timeout_ms=timeout_ms, state=TxnState.EMPTY, partitions=set(), start_ms=-1, last_update_ms=now_ms,
    )  # fmt: skip


def needs_new_producer_id(meta: TxnMetadata) -> bool:
    return meta.producer_epoch >= EPOCH_MAX


class InitDecision(Enum):
    """What InitProducerId does with an existing transactional id."""

    BUMP = "bump"  # a new epoch (and a new producer id when the epoch is exhausted)
    RETURN = "return"  # a retried init that already bumped: answer the current id and epoch
    FENCE_ABORT = "fence-abort"  # abort the open transaction with a bumped epoch first


def init_decision(meta: TxnMetadata, expected_pid: int, expected_epoch: int) -> InitDecision:
    """What InitProducerId does with an existing transactional id, or raises."""
    if meta.pending or meta.state in (
        TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD,
    ):  # fmt: skip
        raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS, f"transaction is {meta.state.kafka_name}")
    if expected_pid >= 0:  # KIP-360: the producer names the id and epoch it had
        if expected_pid == meta.producer_id and expected_epoch == meta.last_producer_epoch:
            if meta.state is not TxnState.ONGOING:
                return InitDecision.RETURN
        elif expected_pid != meta.producer_id or expected_epoch != meta.producer_epoch:
            raise fenced(ErrorCode.PRODUCER_FENCED)
    if meta.state is TxnState.ONGOING:
        return InitDecision.FENCE_ABORT
    return InitDecision.BUMP


def add_partitions(meta: TxnMetadata, partitions: set[Partition], now_ms: int) -> TxnMetadata | None:
    """AddPartitionsToTxn / AddOffsetsToTxn after check_producer; None: nothing to write."""
    if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS, f"transaction is {meta.state.kafka_name}")
    if meta.state in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE):
        raise KafkaError(ErrorCode.INVALID_TXN_STATE, f"transaction is {meta.state.kafka_name}")
    if meta.state is TxnState.ONGOING and partitions <= meta.partitions:
        return None
    start = meta.start_ms if meta.state is TxnState.ONGOING else now_ms
    return meta.copy(
        state=TxnState.ONGOING, partitions=meta.partitions | partitions, start_ms=start, last_update_ms=now_ms
    )


def end_decision(meta: TxnMetadata, commit: bool, now_ms: int) -> TxnMetadata | None:
    """EndTxn after check_producer: the Prepare state to write, None for a retry of a completed end."""
    prepare = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    complete = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    if meta.state is TxnState.ONGOING:
        return meta.copy(state=prepare, last_update_ms=now_ms)
    if meta.state is complete:
        return None
    if meta.state is prepare:
        raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS, f"transaction is {meta.state.kafka_name}")
    raise KafkaError(
        ErrorCode.INVALID_TXN_STATE,
        f"cannot {'commit' if commit else 'abort'}: transaction is {meta.state.kafka_name}",
    )


def completed(meta: TxnMetadata, now_ms: int) -> TxnMetadata:
    """Every marker is written: CompleteCommit / CompleteAbort, no partitions."""
    state = TxnState.COMPLETE_COMMIT if meta.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
    return meta.copy(state=state, partitions=set(), last_update_ms=now_ms)


def expired(meta: TxnMetadata, now_ms: int) -> bool:
    return meta.state is TxnState.ONGOING and not meta.pending and meta.start_ms + meta.timeout_ms < now_ms


def expirable(meta: TxnMetadata, cutoff_ms: int) -> bool:
    """Whether an id last changed at or before `cutoff_ms` may be forgotten: nothing in progress."""
    return (
        meta.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        and not meta.pending
        and meta.last_update_ms <= cutoff_ms
    )


def fence_and_abort(meta: TxnMetadata, now_ms: int) -> TxnMetadata:
    """Abort an open transaction with the next epoch, so its producer is fenced (re-init, timeout)."""
    return meta.copy(
        producer_epoch=meta.producer_epoch + 1, last_producer_epoch=meta.producer_epoch,
        state=TxnState.PREPARE_ABORT, last_update_ms=now_ms,
    )  # fmt: skip
