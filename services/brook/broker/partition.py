"""One partition on this broker: its log, its role (leader or follower), producer state, ISR and high
watermark, and the requests waiting on it (long-polling fetches, acks=all produces).

The leader stamps its epoch on every batch and tracks each follower's log end offset from the offsets
they fetch at; the high watermark is the smallest log end offset in the ISR. ISR changes are decided
here and written to the cluster's metadata by the replica manager (this class does no I/O but its log).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field

from brook.log import PartitionLog
from brook.log.txn_index import AbortedTxn
from brook.protocol.batch import iter_headers
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.txn_records import build_control_batch, control_marker
from brook.replication import isr as isr_rules
from brook.replication.acks import AckWaiters
from brook.replication.epochs import LeaderEpochCache
from brook.replication.follower_progress import FetchClock, FollowerProgress

from .fetch_waiter import ChangeListener
from .leader_fence import LeaderFence
from .producer_snapshot import decode_snapshot, encode_snapshot
from .producer_state import CompletedTxn, ProducerStateTable

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ProduceOutcome:
    base_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int


TIMED_OUT = "the in-sync replicas did not confirm in time"


@dataclass(slots=True)
class PartitionRole:
    """What the cluster's metadata says about this partition."""

    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    version: int = -1  # the metadata version the role was read at (for compare-and-swap writes)
    adding: list[int] = field(default_factory=list)  # replicas being added by a reassignment


def _now_ms() -> float:
    return time.monotonic() * 1000


def now_ms() -> float:
    """The clock of the replication decisions (monotonic ms; tests replace `_now_ms`)."""
    return _now_ms()


class Partition:
    def __init__(
        self,
        topic: str,
        index: int,
        log: PartitionLog,
        node_id: int = 0,
        leads: bool = True,
        isr_due: set[Partition] | None = None,
        fence: LeaderFence | None = None,
        *,
        log_first_role: bool = False,
    ) -> None:
        """`log_first_role`: log the role etcd gives it first too (a replica reopened after its log
        directory failed, whose roles before and after are what a failover's reading needs)."""
        self.topic = topic
        self.index = index
        self.log = log
        self.node_id = node_id
        self.producers = ProducerStateTable()
        self.epochs = LeaderEpochCache()
        self._load_state(epochs=True)
        self.log.on_roll = self.snapshot
        # A single-node partition leads itself; in a cluster it waits for its state from etcd.
        epoch = max(self.epochs.latest_epoch, 0)
        self.role = (
            PartitionRole(node_id, epoch, [node_id], [node_id]) if leads else PartitionRole(-1, epoch, [], [])
        )
        if (
            leads
        ):  # its epoch starts at the log end, as become_leader records (ListOffsets, OffsetForLeaderEpoch)
            self.epochs.assign(epoch, log.log_end_offset)
        self._role_seen = leads or log_first_role  # else its first role, from etcd, is not a change
        self._hw = log.log_end_offset
        # A follower serves consumers (KIP-392) only once its current leader has told it the high
        # watermark: until then its own value may be stale, above records about to be truncated.
        self._hw_from_leader = False
        self.followers: dict[int, FollowerProgress] = {}
        self._proposed_isr: tuple[int, list[int]] | None = None  # (role version, ISR being written)
        self._waiters: set[ChangeListener[Partition]] = set()
        # The led partitions whose ISR the ISR loop must look at (shared by the broker's partitions): this
        # one adds itself when its followers' state may call for a change; see isr_settled.
        self._isr_due: set[Partition] = set() if isr_due is None else isr_due
        self._fence = fence or LeaderFence()  # shared by the broker's partitions
        self._acks = AckWaiters()  # acks=all produces waiting for the high watermark
        self._deletes: list[tuple[int, asyncio.Future[None]]] = []  # DeleteRecords awaiting the replicas

    # -- role --------------------------------------------------------------------------------------
    @property
    def leader_epoch(self) -> int:
        return self.role.leader_epoch

    @property
    def is_leader(self) -> bool:
        return self.role.leader == self.node_id

    @property
    def leads_now(self) -> bool:
        """Leader, and not fenced: may append and acknowledge as the leader (brook.broker.leader_fence)."""
        return self.is_leader and self._fence.holds()

    @property
    def isr(self) -> list[int]:
        return self.role.isr

    def become_leader(self, role: PartitionRole) -> None:
        new_epoch = role.leader_epoch != self.role.leader_epoch or not self.is_leader
        if new_epoch:
            self._log_role_change(role)
        self.role = role
        if new_epoch:
            self.epochs.assign(role.leader_epoch, self.log.log_end_offset)
            now = _now_ms()
            # Followers get a full lag window to show up before they can be dropped from the ISR.
            self.followers = {
                r: FollowerProgress(last_caught_up_ms=now) for r in role.replicas if r != self.node_id
            }
        else:
            for r in role.replicas:
                if r != self.node_id and r not in self.followers:
                    self.followers[r] = FollowerProgress(last_caught_up_ms=_now_ms())
        now = _now_ms()
        for r, state in self.followers.items():
            if r in role.isr:
                state.out_of_isr_since_ms = 0.0
            elif not state.out_of_isr_since_ms:
                state.out_of_isr_since_ms = now
        self._advance_hw()
        self._release_deletes()
        self._isr_due.add(self)
        self.wake_fetchers()  # fetch sessions answer the new role (and walk the partition again)

    def become_follower(self, role: PartitionRole) -> None:
        if (role.leader, role.leader_epoch) != (self.role.leader, self.role.leader_epoch):
            self._hw_from_leader = False
            self._log_role_change(role)
        self.role = role
        self.followers = {}
        self._acks.fail(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self._fail_deletes(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self.wake_fetchers()

    def _log_role_change(self, role: PartitionRole) -> None:
        """A replica's change of leader or epoch, as Kafka logs it: who answered what in a failover is
        read from these lines. A replica's first role (start-up, a new topic) is not logged."""
        if not self._role_seen:
            self._role_seen = True
            return
        what = "leader" if role.leader == self.node_id else f"follower of broker {role.leader}"
        logger.info(
            "%s-%d: %s at epoch %d (was epoch %d, leader %d), log end %d",
            self.topic, self.index, what, role.leader_epoch, self.role.leader_epoch, self.role.leader,
            self.log.log_end_offset,
        )  # fmt: skip

    # -- high watermark ----------------------------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        return min(self._hw, self.log.log_end_offset)

    @property
    def consumer_high_watermark(self) -> int:
        """Where consumers' reads end here: the high watermark, on a follower once the leader sent it
        (until then the log start: nothing is served)."""
        if self.is_leader or self._hw_from_leader:
            return self.high_watermark
        return self.log.log_start_offset

    def set_follower_high_watermark(self, leader_hw: int) -> None:
        first = not self._hw_from_leader  # consumers may read here from now on
        self._hw_from_leader = True
        hw = min(leader_hw, self.log.log_end_offset)
        if hw != self._hw or first:  # a follower mirrors the leader's value
            self._hw = hw
            self.wake_fetchers(data=False)

    def _advance_hw(self) -> None:
        if not self.is_leader:
            return
        leo = self.log.log_end_offset
        end = isr_rules.committed_end(self.node_id, leo, self._maximal_isr(), self.followers)
        hw = max(self._hw, end)
        if hw != self._hw:
            self._hw = hw
            self._release_acks()
            self.wake_fetchers(data=False)

    def record_follower_fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        log_start_offset: int = -1,
        clock: FetchClock | None = None,
    ) -> None:
        """A follower fetched at `fetch_offset`: everything before it is on the follower's log. With
        `clock` (its fetch session's), the session's later fetches count as fetches at this offset until
        the partition is walked again (replication/follower_progress.py)."""
        state = self.followers.get(replica_id)
        if state is None:
            return
        state.settle()  # what the session's fetches since the last walk said, before this one
        if log_start_offset != state.log_start_offset:
            state.log_start_offset = log_start_offset
            self._release_deletes()
        leo = self.log.log_end_offset
        moved = isr_rules.record_fetch(state, fetch_offset, leo, _now_ms(), clock)
        if clock is None or fetch_offset < leo or replica_id not in self.role.isr:
            self._isr_due.add(self)
        if moved:  # the high watermark can only move with a member's log end (or the ISR: become_leader)
            self._advance_hw()

    def detach_clock(self, replica_id: int, clock: FetchClock) -> None:
        """The follower's session no longer fetches this partition (forgotten, closed, refused)."""
        state = self.followers.get(replica_id)
        if state is not None and state.clock is clock:
            state.settle()
            state.clock = None
            self._isr_due.add(self)

    def propose_isr(self, isr: list[int]) -> None:
        """An ISR change is being written to the metadata. Until this partition's role moves past the
        version it was based on, the high watermark also waits for the members it adds (Kafka's maximal
        ISR): the controller may make such a member leader as soon as the write lands, so nothing may be
        acknowledged without it meanwhile. Members it removes keep counting until the write is seen."""
        self._proposed_isr = (self.role.version, list(isr))

    def _maximal_isr(self) -> list[int]:
        return isr_rules.maximal_isr(self.role.isr, self.role.version, self._proposed_isr)

    def isr_change(self, lag_max_ms: int) -> list[int] | None:
        """The ISR this leader should record now (followers lagging too long out, caught-up ones in),
        or None when it is right as it is."""
        if not self.is_leader or self.log.offline:
            return None  # an offline log's followers stop fetching: that is no reason to drop them
        role = self.role
        return isr_rules.isr_change(
            self.node_id,
            role.replicas,
            role.isr,
            self.followers,
            now_ms=_now_ms(),
            lag_max_ms=lag_max_ms,
            high_watermark=self.high_watermark,
            epoch_start=self._epoch_start(),
        )

    def isr_settled(self, lag_max_ms: int) -> bool:
        """No ISR change can be due before one of this partition's methods runs or a follower's fetch
        session stops ticking: every replica is in the ISR, caught up at its last walk, and counted as
        fetching by a session that fetched within the lag time. The ISR loop then stops looking here."""
        if not self.is_leader:
            return True
        if self.log.offline:
            return False
        role = self.role
        return isr_rules.isr_settled(
            self.node_id, role.replicas, role.isr, self.followers, now_ms=_now_ms(), lag_max_ms=lag_max_ms
        )

    def _epoch_start(self) -> int:
        entries = self.epochs.entries()
        return entries[-1][1] if entries else 0

    @property
    def hw_lags_epoch_start(self) -> bool:
        """A new leader whose high watermark has not reached its epoch's start offset yet: the committed
        end is unknown, so ListOffsets answers OFFSET_NOT_AVAILABLE for it (KIP-392)."""
        return self.is_leader and self._epoch_start() > self.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """Where read_committed consumers stop: the earliest open transaction's first offset, at most
        the high watermark they may read to."""
        hw = self.consumer_high_watermark
        first = self.producers.first_unstable_offset()
        return hw if first is None else min(first, hw)

    # -- transactions ------------------------------------------------------------------------------
    def _load_state(self, epochs: bool) -> None:
        """Producer state (and open transactions), with `epochs` the leader-epoch cache too: from the
        newest readable snapshot, then the batch headers after it (all of them when there is none)."""
        start = 0
        for offset in self.log.snapshot_offsets():
            body = self.log.read_snapshot(offset)
            state = decode_snapshot(body) if body is not None else None
            if state is not None:
                self.producers = state[0]
                if epochs:
                    self.epochs = state[1]
                start = offset
                break
            logger.warning(
                "%s-%d: snapshot at %d is damaged; trying an older one", self.topic, self.index, offset
            )
        self._replay(start, epochs)

    def _replay(self, start: int, epochs: bool) -> None:
        """Apply the batch headers from `start` on; markers are read (a few bytes each) for their type,
        and aborts missing from the txn index (a crash between the marker and its index entry) are
        indexed again."""
        for h in self.log.iter_batch_headers(start):
            kind = coordinator_epoch = -1
            if h.is_control:
                s = self.log.read(h.base_offset, h.size)
                if s is not None:
                    kind, coordinator_epoch = control_marker(s.read(), 0, h)
            self._completed(
                self.producers.record(h, h.base_offset, kind, coordinator_epoch=coordinator_epoch)
            )
            if epochs:
                self.epochs.assign(h.partition_leader_epoch, h.base_offset)

    def snapshot(self, offset: int | None = None) -> None:
        """Write the producer state and leader epochs as of `offset` (the log end when None): called by
        the log when it rolls (before the batch that rolled it is applied) and at clean shutdown."""
        offset = self.log.log_end_offset if offset is None else offset
        self.log.write_snapshot(offset, encode_snapshot(self.producers, self.epochs))

    def close(self) -> None:
        """Clean shutdown: a snapshot at the log end (the next start reads no header), then the log."""
        if not self.log.offline:
            with contextlib.suppress(KafkaError):  # the log closed or its directory failed: no snapshot
                self.snapshot()
        self.log.close()

    def _completed(self, done: CompletedTxn | None) -> None:
        if done is None or not done.aborted or done.last_offset <= self.log.last_indexed_abort:
            return
        first = self.producers.first_unstable_offset()
        lso = done.last_offset + 1 if first is None else first
        self.log.record_aborted(AbortedTxn(done.producer_id, done.first_offset, done.last_offset, lso))

    def append_marker(self, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int) -> int:
        """As the leader, write a transaction's COMMIT/ABORT marker; its offset. An older epoch than the
        producer's is fenced (a stale coordinator's or producer's), and so is an older coordinator epoch
        than the producer's last marker had (a deposed coordinator's)."""
        if not self.leads_now:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.node_id} does not lead {self.topic}-{self.index}",
            )
        self.producers.check_epoch(producer_id, epoch)
        self.producers.check_coordinator_epoch(producer_id, coordinator_epoch)
        batch = build_control_batch(producer_id, epoch, commit, coordinator_epoch, int(time.time() * 1000))
        result = self.log.append(memoryview(batch), leader_epoch=self.leader_epoch)
        h = iter_headers(batch)[0][1]
        kind = 1 if commit else 0
        self._completed(
            self.producers.record(h, result.base_offset, kind, coordinator_epoch=coordinator_epoch)
        )
        self._advance_hw()
        self.wake_fetchers()
        return result.base_offset

    # -- appends -----------------------------------------------------------------------------------
    def append(self, records: memoryview, acks: int = 1, *, in_place: bool = False) -> ProduceOutcome:
        """Append a Produce request's records as the leader, deduplicating idempotent retries.
        `in_place`: `records` is the caller's own buffer, rewritten (offsets, epoch) instead of copied."""
        if not self.leads_now:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.node_id} does not lead {self.topic}-{self.index}",
            )
        if acks == -1 and len(self.role.isr) < self.log.config.min_insync_replicas:
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"{self.topic}-{self.index} has {len(self.role.isr)} in-sync replicas; "
                f"min.insync.replicas is {self.log.config.min_insync_replicas}",
            )
        if len(records) == 0:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "empty record set")
        parsed = iter_headers(records)
        headers = [h for _, h in parsed]
        if any(h.is_control for h in headers):
            raise KafkaError(ErrorCode.INVALID_RECORD, "clients cannot append control batches")
        duplicates = [self.producers.check(h) for h in headers]
        if duplicates[0] is not None:
            if not all(duplicates):
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, "request mixes retried and new batches"
                )
            first, last = duplicates[0], duplicates[-1]
            assert last is not None
            return ProduceOutcome(first.base_offset, last.last_offset, -1, self.log.log_start_offset)
        result = self.log.append(records, leader_epoch=self.leader_epoch, headers=parsed, in_place=in_place)
        offset = result.base_offset
        now = int(time.time() * 1000)
        stamped = result.log_append_time if result.log_append_time >= 0 else None
        for h in headers:
            self.producers.record(h, offset, now_ms=now, timestamp=stamped)
            offset += h.last_offset_delta + 1
        self._advance_hw()
        self.wake_fetchers()
        return ProduceOutcome(
            result.base_offset, result.last_offset, result.log_append_time, self.log.log_start_offset
        )

    def append_replicated(self, records: memoryview) -> None:
        """A follower appends what it fetched from the leader, offsets and epochs as they are."""
        headers = iter_headers(records)
        self.log.append(records, assign_offsets=False, headers=headers)
        for pos, h in headers:
            kind, coordinator_epoch = control_marker(records, pos, h) if h.is_control else (-1, -1)
            self._completed(
                self.producers.record(h, h.base_offset, kind, coordinator_epoch=coordinator_epoch)
            )
            self.epochs.assign(h.partition_leader_epoch, h.base_offset)
        self.wake_fetchers()

    def reset_to(self, offset: int) -> None:
        """Drop the whole log and go on, empty, at `offset` (a follower behind the leader's log start).
        Producer state and epochs described the dropped records; they restart from what is fetched."""
        self.log.reset_to(offset)
        self.epochs = LeaderEpochCache()
        self.producers.clear()
        self.wake_fetchers()

    def truncate_to(self, offset: int) -> None:
        """Drop records at and after `offset` (divergent records of a deposed leader)."""
        self.log.truncate_to(offset)  # and drops the snapshots past its new end
        self.epochs.truncate_from_end(offset)
        self._hw = min(self._hw, self.log.log_end_offset)
        self.producers = ProducerStateTable()
        self._load_state(epochs=False)
        self.wake_fetchers()

    # -- DeleteRecords -----------------------------------------------------------------------------
    def delete_records(self, offset: int) -> int:
        """As the leader, make the log start at `offset` (-1: the high watermark); returns that offset.
        The followers follow on their next fetches (see low_watermark)."""
        if not self.leads_now:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.node_id} does not lead {self.topic}-{self.index}",
            )
        if not self.log.config.deletes:
            raise KafkaError(
                ErrorCode.POLICY_VIOLATION,
                f"records of {self.topic}-{self.index} cannot be deleted: cleanup.policy has no delete",
            )
        hw = self.high_watermark
        if offset == -1:
            offset = hw
        if not 0 <= offset <= hw:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"cannot delete records of {self.topic}-{self.index} below {offset}: "
                f"the high watermark is {hw}",
            )
        self.log.advance_log_start_offset(offset)
        self._release_deletes()
        self.wake_fetchers(data=False)
        return offset

    @property
    def low_watermark(self) -> int:
        """The smallest log start offset of the leader and its in-sync followers (Kafka's low watermark,
        which DeleteRecords waits on)."""
        low = self.log.log_start_offset
        for r in self.role.isr:
            state = self.followers.get(r)
            if r != self.node_id and state is not None:
                low = min(low, state.log_start_offset)
        return low

    async def wait_low_watermark(self, offset: int, timeout_s: float) -> int:
        """Until every in-sync replica's log starts at `offset` or later; the low watermark then.
        REQUEST_TIMED_OUT when they do not within the timeout."""
        if self.low_watermark < offset:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._deletes.append((offset, fut))
            try:
                await asyncio.wait_for(fut, timeout_s)
            except TimeoutError:
                raise KafkaError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"the replicas of {self.topic}-{self.index} did not delete up to {offset} in time",
                ) from None
            finally:
                self._deletes = [(o, f) for o, f in self._deletes if f is not fut]
        return self.low_watermark

    def set_follower_log_start_offset(self, leader_log_start: int) -> None:
        """A follower's log starts where its leader's does (DeleteRecords, retention), at most at its end."""
        if leader_log_start > self.log.log_start_offset:
            self.log.advance_log_start_offset(min(leader_log_start, self.log.log_end_offset))
            self.wake_fetchers(data=False)

    def apply_retention(self) -> int:
        """Delete the log's expired segments; how many. Fetch sessions learn of a new log start."""
        start = self.log.log_start_offset
        deleted = self.log.apply_retention()
        if self.log.log_start_offset != start:
            self.wake_fetchers(data=False)
        return deleted

    def _release_deletes(self) -> None:
        if not self._deletes:
            return
        low = self.low_watermark if self.is_leader else -1
        for offset, fut in self._deletes:
            if offset <= low and not fut.done():
                fut.set_result(None)

    def _fail_deletes(self, code: ErrorCode) -> None:
        for _, fut in self._deletes:
            if not fut.done():
                fut.set_exception(KafkaError(code))

    # -- waiting -----------------------------------------------------------------------------------
    async def wait_committed(self, last_offset: int, leader_epoch: int, timeout_s: float) -> None:
        """acks=all: wait until the high watermark passes `last_offset`, with min.insync.replicas in the
        ISR at that moment (an ISR that shrank meanwhile gives NOT_ENOUGH_REPLICAS_AFTER_APPEND).
        `leader_epoch` is the one the records were appended in: a caller may only get here after other
        tasks ran, and if leadership moved meanwhile the records may be truncated (and the waiter would
        never be released on a follower), so that answers NOT_LEADER_OR_FOLLOWER at once."""
        fut = self.commit_future(last_offset, leader_epoch)
        if fut is None:
            return
        try:
            await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, TIMED_OUT) from None

    def commit_future(self, last_offset: int, leader_epoch: int) -> asyncio.Future[None] | None:
        """wait_committed without a task: None when committed already, else a future the high watermark
        resolves (or a role change or ISR check fails); cancelling it forgets it. Raises as committed()."""
        if self.committed(last_offset, leader_epoch):
            return None
        return self._acks.wait_for(last_offset)

    def committed(self, last_offset: int, leader_epoch: int) -> bool:
        """acks=all without waiting: True when `last_offset` is committed already (a leader without
        followers commits on append), False when the caller must wait_committed. Raises as it does."""
        if not self.leads_now or self.role.leader_epoch != leader_epoch:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.node_id} no longer leads {self.topic}-{self.index} in epoch {leader_epoch}",
            )
        if self.high_watermark > last_offset:
            self._check_isr_after_append()
            return True
        return False

    def _check_isr_after_append(self) -> None:
        if len(self.role.isr) < self.log.config.min_insync_replicas:
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                f"{self.topic}-{self.index}: written, but the ISR shrank to {len(self.role.isr)} replicas "
                f"(min.insync.replicas {self.log.config.min_insync_replicas})",
            )

    def _release_acks(self) -> None:
        if not self._fence.holds():
            self._acks.fail(ErrorCode.NOT_LEADER_OR_FOLLOWER)  # deposed, maybe: acknowledge nothing
            return
        self._acks.release(self.high_watermark, self._check_isr_after_append)

    def log_dir_failed(self) -> None:
        """The log's directory went offline: waiting acks=all produces fail with KAFKA_STORAGE_ERROR
        (not acknowledged: the new leader may not have them), waiting fetches wake (to that error)."""
        self._acks.fail(ErrorCode.KAFKA_STORAGE_ERROR)
        self.wake_fetchers()

    def wake_fetchers(self, data: bool = True) -> None:
        """Tell the waiting fetches, the fetch sessions and the replica fetcher holding this partition
        that it changed: new records, role or log (`data`), or only its high watermark or log start."""
        for w in self._waiters:
            w.wake(self, data)

    def add_waiter(self, w: ChangeListener[Partition]) -> None:
        self._waiters.add(w)

    def remove_waiter(self, w: ChangeListener[Partition]) -> None:
        self._waiters.discard(w)
