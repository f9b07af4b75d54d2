"""The transaction coordinator (KIP-98): producer ids and epochs per transactional id, the partitions of
each open transaction, and the two-phase end (Prepare written, markers to every partition, Complete
written).

The coordinator of a transactional id is the leader of `__transaction_state` partition
abs(javaHashCode(id)) % transaction.state.log.num.partitions, as in Kafka. Every state change is a
record there, appended (acks=all) before it is acknowledged; a new leader replays the partition and
finishes the transactions it finds in PrepareCommit/PrepareAbort. The room reaches logs and other
brokers only through the ports below, which the broker implements.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Protocol

from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.group_records import build_batch, iter_records
from brook.protocol.primitives import java_string_hash
from brook.protocol.txn_records import (
    TxnLogValue,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
)
from brook.tasks import cancel_and_wait, every, run_in_slices, run_to_end

from . import state as sm
from .state import Partition, TxnMetadata, TxnState

log = logging.getLogger(__name__)

TXN_STATE_TOPIC = "__transaction_state"
_MARKER_RETRY_S = 0.2


@dataclass(slots=True)
class TxnSettings:
    state_log_partitions: int = 50  # transaction.state.log.num.partitions
    state_log_replication_factor: int = 1  # transaction.state.log.replication.factor
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    abort_check_interval_ms: int = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    remove_expired_interval_ms: int = 3_600_000  # transaction.remove.expired.transaction.cleanup.interval.ms


class TxnStateLog(Protocol):
    """The `__transaction_state` partitions, as the broker gives them."""

    async def ensure_topic(self, partitions: int, replication_factor: int) -> None: ...
    def is_local_leader(self, partition: int) -> bool: ...
    def leader_epoch(self, partition: int) -> int: ...
    def topic_exists(self, topic: str) -> bool: ...
    async def append(self, partition: int, batch: bytes) -> None: ...
    def read_batches(self, partition: int) -> Iterator[bytes]: ...


class MarkerWriter(Protocol):
    """Writes COMMIT/ABORT markers to the leaders of the given partitions (this broker or others)."""

    async def write_markers(
        self, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int, partitions: list[Partition]
    ) -> dict[Partition, ErrorCode]: ...


# Errors after which a marker is not retried: the partition is gone.
# (INVALID_PRODUCER_EPOCH: the producer moved past this epoch there already, the transaction with it.)
_MARKER_GIVE_UP = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.INVALID_PRODUCER_EPOCH,
}


class TransactionCoordinator:
    def __init__(
        self,
        log_: TxnStateLog,
        markers: MarkerWriter,
        allocate_producer_id: Callable[[], Awaitable[int]],
        settings: TxnSettings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._log = log_
        self._markers = markers
        self._allocate = allocate_producer_id
        self.settings = settings
        self._clock = clock
        self._txns: dict[str, TxnMetadata] = {}
        # Transactions begun here: their start_ms and the monotonic time then. They time out by the
        # monotonic clock, so a wall-clock jump aborts none; ones loaded from the log go by start_ms.
        self._began: dict[str, tuple[int, float]] = {}
        self._loaded: dict[int, int] = {}  # partition -> coordinator epoch (its leader epoch at load)
        # Partitions being replayed in the background: partition -> (leader epoch, task).
        self._loading: dict[int, tuple[int, asyncio.Task[None]]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._completing: dict[str, asyncio.Task[None]] = {}

    # -- lifecycle -----------------------------------------------------------------------------------
    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def start(self) -> None:
        if self._log.topic_exists(TXN_STATE_TOPIC):
            for p in range(self.settings.state_log_partitions):
                if self._log.is_local_leader(p):
                    self.load_partition(p)
        s = self.settings
        for interval_ms, job, what in (
            (s.abort_check_interval_ms, self.abort_expired, "aborting expired transactions"),
            (s.remove_expired_interval_ms, self.remove_expired_ids, "removing expired transactional ids"),
        ):
            self._tasks.append(asyncio.create_task(every(interval_ms / 1000, job, what)))

    async def stop(self) -> None:
        loading = [task for _, task in self._loading.values()]
        self._loading.clear()
        await cancel_and_wait(*self._tasks, *self._completing.values(), *loading)
        self._tasks.clear()
        self._completing.clear()

    def partition_for(self, transactional_id: str) -> int:
        return abs(java_string_hash(transactional_id)) % self.settings.state_log_partitions

    async def ensure_topic(self) -> None:
        if not self._log.topic_exists(TXN_STATE_TOPIC):
            await self._log.ensure_topic(
                self.settings.state_log_partitions, self.settings.state_log_replication_factor
            )
            for p in range(self.settings.state_log_partitions):
                if self._log.is_local_leader(p):
                    self._loaded[p] = self._log.leader_epoch(p)

    def load_partition(self, partition: int) -> None:
        """Replay one partition (this broker now leads it) and finish what was being ended. A long
        log is replayed in slices on a task of its own (brook.tasks.run_in_slices), its ids answered
        COORDINATOR_LOAD_IN_PROGRESS meanwhile, as Kafka does."""
        epoch = self._log.leader_epoch(partition)
        loading = self._loading.get(partition)
        if self._loaded.get(partition) == epoch or (loading is not None and loading[0] == epoch):
            return
        if partition in self._loaded or loading is not None:
            self.unload_partition(partition)  # from an earlier leadership whose end went unseen
        task = run_in_slices(lambda: self._replay(partition, epoch), f"{TXN_STATE_TOPIC}-{partition} replay")
        if task is not None:
            self._loading[partition] = (epoch, task)

    def _replay(self, partition: int, epoch: int) -> Iterator[None]:
        """The partition's records, one batch per step; the last state of each id is kept once all
        are read."""
        found: dict[str, TxnMetadata | None] = {}
        for chunk in self._log.read_batches(partition):
            for _, key, value in iter_records(chunk):
                if key is None:
                    continue
                try:
                    tid = decode_txn_key(key)
                    found[tid] = None if value is None else _from_value(tid, decode_txn_value(value))
                except ValueError as e:  # a record we cannot read must not stop the coordinator
                    log.warning("skipping unreadable %s record: %s", TXN_STATE_TOPIC, e)
            yield
        self._loading.pop(partition, None)
        self._loaded_state(partition, epoch, found)

    def _loaded_state(self, partition: int, epoch: int, found: dict[str, TxnMetadata | None]) -> None:
        self._loaded[partition] = epoch
        for tid, meta in found.items():
            if meta is None:
                self._txns.pop(tid, None)
                continue
            self._txns[tid] = meta
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                self._complete_later(meta)

    def unload_partition(self, partition: int) -> None:
        self._loaded.pop(partition, None)
        loading = self._loading.pop(partition, None)
        if loading is not None:
            loading[1].cancel()
        for tid in [t for t in self._txns if self.partition_for(t) == partition]:
            del self._txns[tid]
            self._began.pop(tid, None)
            task = self._completing.pop(tid, None)
            if task is not None:
                task.cancel()

    def _check_coordinator(self, transactional_id: str) -> int:
        """The coordinator epoch of the id's partition; NOT_COORDINATOR when this broker is not it."""
        if not transactional_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "the transactional id is empty")
        p = self.partition_for(transactional_id)
        if p in self._loading and self._log.is_local_leader(p):
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, f"loading {transactional_id!r}")
        epoch = self._loaded.get(p)
        if epoch is None or not self._log.is_local_leader(p):
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"not the coordinator of {transactional_id!r}")
        return epoch

    # -- persistence ---------------------------------------------------------------------------------
    async def _write(self, current: TxnMetadata | None, new: TxnMetadata) -> TxnMetadata:
        """Append the new state (acks=all), then make it current; CONCURRENT_TRANSACTIONS meanwhile.
        The write runs to its end when the request goes away (its connection closed and its task was
        cancelled): cut short, the entry stayed pending, refusing every producer of the id and never
        expiring, until the partition moved (a writer killed during an AddPartitionsToTxn)."""
        return await run_to_end(self._append_state(current, new))

    async def _append_state(self, current: TxnMetadata | None, new: TxnMetadata) -> TxnMetadata:
        if current is not None:
            current.pending = True
        value = TxnLogValue(
            new.producer_id, new.producer_epoch, new.timeout_ms, int(new.state),
            tuple(sorted(new.partitions)), new.last_update_ms, new.start_ms,
        )  # fmt: skip
        batch = build_batch([(encode_txn_key(new.transactional_id), encode_txn_value(value))], self.now_ms())
        partition = self.partition_for(new.transactional_id)
        loaded = self._loaded.get(partition)
        try:
            await self._log.append(partition, batch)
        except KafkaError as e:
            if current is not None:
                current.pending = False
            code = e.code
            if code not in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                # Kafka's mapping of a failed state-log append: the client finds the coordinator again.
                code = (
                    ErrorCode.NOT_COORDINATOR
                    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR)
                    else ErrorCode.COORDINATOR_NOT_AVAILABLE
                )
            raise KafkaError(code, e.message) from e
        new.pending = False
        # Unloaded (or loaded again) while the append waited: the state is no longer this write's to set.
        moved = self._loaded.get(partition) != loaded
        if moved or (current is not None and self._txns.get(new.transactional_id) is not current):
            raise KafkaError(ErrorCode.NOT_COORDINATOR, "the coordinator moved during the write")
        self._txns[new.transactional_id] = new
        return new

    # -- InitProducerId ------------------------------------------------------------------------------
    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected_pid: int = -1, expected_epoch: int = -1
    ) -> tuple[int, int]:
        """(producer id, epoch) for a transactional producer; raises KafkaError with Kafka's codes."""
        if timeout_ms <= 0 or timeout_ms > self.settings.max_timeout_ms:
            raise KafkaError(
                ErrorCode.INVALID_TRANSACTION_TIMEOUT,
                f"transaction.timeout.ms {timeout_ms} must be in 1..{self.settings.max_timeout_ms} "
                "(transaction.max.timeout.ms)",
            )
        self._check_coordinator(transactional_id)
        now = self.now_ms()
        meta = self._txns.get(transactional_id)
        if meta is None:
            if expected_pid >= 0:
                raise KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING, "unknown transactional id")
            pid = await self._allocate()
            meta = self._txns.get(transactional_id)  # another init may have raced the allocation
            if meta is None:
                new = TxnMetadata(transactional_id, pid, 0, timeout_ms, last_update_ms=now)
                new = await self._write(None, new)
                return new.producer_id, new.producer_epoch
        decision = sm.init_decision(meta, expected_pid, expected_epoch)
        if decision is sm.InitDecision.RETURN:
            return meta.producer_id, meta.producer_epoch
        if decision is sm.InitDecision.FENCE_ABORT:
            await self._begin_end(meta, sm.fence_and_abort(meta, now))
            raise KafkaError(
                ErrorCode.CONCURRENT_TRANSACTIONS, "aborting the previous producer's transaction"
            )
        new_pid = await self._allocate() if sm.needs_new_producer_id(meta) else None
        new = await self._write(meta, sm.bumped(meta, new_pid, timeout_ms, now))
        return new.producer_id, new.producer_epoch

    # -- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------------
    async def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[Partition]
    ) -> None:
        self._check_coordinator(transactional_id)
        meta = sm.check_producer(self._txns.get(transactional_id), producer_id, epoch)
        new = sm.add_partitions(meta, set(partitions), self.now_ms())
        if new is not None:
            await self._write(meta, new)
            if self._began.get(transactional_id, (None,))[0] != new.start_ms:
                self._began[transactional_id] = (new.start_ms, time.monotonic())

    def verify(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: list[Partition]
    ) -> dict[Partition, ErrorCode]:
        """KIP-890: whether the partitions are in the transaction (AddPartitionsToTxn v4, verify only)."""
        self._check_coordinator(transactional_id)
        return sm.verify(self._txns.get(transactional_id), producer_id, epoch, partitions)

    # -- EndTxn --------------------------------------------------------------------------------------
    async def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> None:
        """Answered once the Prepare state is written; the markers follow in the background."""
        self._check_coordinator(transactional_id)
        meta = self._txns.get(transactional_id)
        if meta is not None and meta.producer_id == producer_id and epoch == meta.last_producer_epoch:
            # A retry from before a bump this producer made itself (KIP-360) is fenced as Kafka does.
            raise sm.fenced(ErrorCode.PRODUCER_FENCED)
        meta = sm.check_producer(meta, producer_id, epoch)
        new = sm.end_decision(meta, commit, self.now_ms())
        if new is not None:
            await self._begin_end(meta, new)

    async def _begin_end(self, meta: TxnMetadata, prepare: TxnMetadata) -> None:
        written = await self._write(meta, prepare)
        self._complete_later(written)

    def _complete_later(self, meta: TxnMetadata) -> None:
        tid = meta.transactional_id
        task = asyncio.get_running_loop().create_task(self._complete(meta))
        self._completing[tid] = task
        task.add_done_callback(
            lambda t: self._completing.pop(tid, None) if self._completing.get(tid) is t else None
        )

    async def _complete(self, meta: TxnMetadata) -> None:
        """Markers to every partition (retried until each is written or gone), then Complete."""
        commit = meta.state is TxnState.PREPARE_COMMIT
        tid = meta.transactional_id
        remaining = sorted(meta.partitions)
        while remaining:
            coordinator_epoch = self._loaded.get(self.partition_for(tid))
            if coordinator_epoch is None:
                return  # no longer the coordinator: the new one finishes it
            results = await self._markers.write_markers(
                meta.producer_id, meta.producer_epoch, commit, coordinator_epoch, remaining
            )
            if ErrorCode.TRANSACTION_COORDINATOR_FENCED in results.values():
                # A newer coordinator has written this producer's markers: it finishes the transaction.
                log.info(
                    "txn %s: coordinator epoch %d is fenced; leaving it to the new one",
                    tid,
                    coordinator_epoch,
                )
                return
            failed = [
                p
                for p in remaining
                if results.get(p, ErrorCode.NONE) not in (ErrorCode.NONE, *_MARKER_GIVE_UP)
            ]
            for p in failed:
                log.debug("txn %s: marker for %s-%d not written: %s", tid, p[0], p[1], results[p].name)
            remaining = failed
            if remaining:
                await asyncio.sleep(_MARKER_RETRY_S)
        while self._txns.get(tid) is meta:
            try:
                await self._write(meta, sm.completed(meta, self.now_ms()))
                return
            except KafkaError as e:
                if e.code == ErrorCode.NOT_COORDINATOR:
                    return
                log.warning("txn %s: could not record its completion: %s", tid, e)
                await asyncio.sleep(_MARKER_RETRY_S)

    # -- timeouts ------------------------------------------------------------------------------------
    async def abort_expired(self) -> int:
        """Abort (with a bumped epoch: the silent producer is fenced) transactions open too long."""
        now = self.now_ms()
        n = 0
        for meta in list(self._txns.values()):
            if self._expired(meta, now) and self.partition_for(meta.transactional_id) in self._loaded:
                log.info(
                    "aborting transaction %s: open longer than %d ms", meta.transactional_id, meta.timeout_ms
                )
                try:
                    await self._begin_end(meta, sm.fence_and_abort(meta, now))
                    n += 1
                except KafkaError as e:
                    log.warning("could not abort expired transaction %s: %s", meta.transactional_id, e)
        return n

    def _expired(self, meta: TxnMetadata, now_ms: int) -> bool:
        began = self._began.get(meta.transactional_id)
        if began is None or began[0] != meta.start_ms:
            return sm.expired(meta, now_ms)
        elapsed_ms = (time.monotonic() - began[1]) * 1000
        return sm.expired(replace(meta, start_ms=0), int(elapsed_ms))

    async def remove_expired_ids(self) -> int:
        """Forget the transactional ids unused for transactional.id.expiration.ms with no transaction in
        progress (Empty, CompleteCommit, CompleteAbort), as Kafka does: a tombstone in
        `__transaction_state`, then out of memory. Their next InitProducerId starts afresh."""
        cutoff = self.now_ms() - self.settings.id_expiration_ms
        n = 0
        for meta in list(self._txns.values()):
            tid = meta.transactional_id
            if (
                sm.expirable(meta, cutoff)
                and self._txns.get(tid) is meta  # not replaced while an earlier removal was written
                and tid not in self._completing
                and self.partition_for(tid) in self._loaded
            ):
                try:
                    await self._remove(meta)
                    n += 1
                except KafkaError as e:
                    log.warning("could not remove expired transactional id %s: %s", tid, e)
        if n:
            log.info("removed %d transactional ids unused for %d ms", n, self.settings.id_expiration_ms)
        return n

    async def _remove(self, meta: TxnMetadata) -> None:
        tid = meta.transactional_id
        meta.pending = True  # requests for it meanwhile: CONCURRENT_TRANSACTIONS, retried
        try:
            await self._log.append(
                self.partition_for(tid), build_batch([(encode_txn_key(tid), None)], self.now_ms())
            )
        finally:
            meta.pending = False
        if self._txns.get(tid) is meta:
            del self._txns[tid]
            self._began.pop(tid, None)

    # -- introspection -------------------------------------------------------------------------------
    def describe(self, transactional_id: str) -> TxnMetadata:
        self._check_coordinator(transactional_id)
        meta = self._txns.get(transactional_id)
        if meta is None:
            raise KafkaError(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, f"no transaction {transactional_id!r}")
        return meta

    def list(self) -> list[TxnMetadata]:
        return [m for t, m in sorted(self._txns.items()) if self.partition_for(t) in self._loaded]


def _from_value(tid: str, v: TxnLogValue) -> TxnMetadata:
    return TxnMetadata(
        tid, v.producer_id, v.producer_epoch, v.timeout_ms, TxnState(v.state), set(v.partitions),
        v.start_ms, v.last_update_ms,
    )  # fmt: skip
