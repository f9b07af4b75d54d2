"""One share-partition (a share group's view of one topic partition): Kafka's SharePartition, pure.

Records between the share-partition start offset (SPSO) and the end offset (SPEO: the next offset
never fetched) are in flight, each AVAILABLE, ACQUIRED (by one member, until its lock expires),
ACKNOWLEDGED or ARCHIVED. Below the start offset everything is done; at and past the end nothing was
delivered yet. Acquiring bumps a record's delivery count; a record released or whose lock expires
with the delivery count at the limit is archived instead of made available again (a poison record
stops being redelivered). The start offset moves past every leading ACKNOWLEDGED or ARCHIVED record.

No I/O and no clock of its own: callers pass `now` (monotonic ms) and read batch headers for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from brook.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "AckType",
    "Acquired",
    "Counts",
    "FetchedBatch",
    "RecordState",
    "SharePartition",
    "ShareSettings",
]


class RecordState(IntEnum):
    """Kafka's RecordState numbers (also what the state records store)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(IntEnum):
    """AcknowledgeTypes on the wire: 0 a gap (no record there), RENEW from v2 (KIP-1222)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """A share group's settings in force (group configs over the broker's group.share.* values)."""

    lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2000  # in-flight records per share-partition
    auto_offset_reset: str = "latest"
    read_committed: bool = False


@dataclass(frozen=True, slots=True)
class FetchedBatch:
    """A whole batch read from the log: its offsets, and whether it may be delivered (control batches
    and, under read_committed, aborted transactions' batches may not: they are archived at once)."""

    base_offset: int
    last_offset: int
    deliverable: bool = True


@dataclass(frozen=True, slots=True)
class Acquired:
    """A run of acquired records with one delivery count (AcquiredRecords on the wire)."""

    first_offset: int
    last_offset: int
    delivery_count: int


class _Rec:
    __slots__ = ("count", "deadline", "member", "state")

    def __init__(self, state: RecordState, count: int = 0) -> None:
        self.state = state
        self.count = count
        self.member = ""
        self.deadline = 0


_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_NEVER = 2**63 - 1


@dataclass(slots=True)
class Counts:
    """What happened to records, for the metrics (cumulative)."""

    acquired: int = 0
    acknowledged: int = 0
    released: int = 0
    archived: int = 0
    lock_expiries: int = 0


class SharePartition:
    def __init__(self, start_offset: int, state_epoch: int = 0) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.state_epoch = state_epoch
        self.leader_epoch = -1  # of the partition when this state was loaded (the caller's to keep)
        self._recs: dict[int, _Rec] = {}
        self._available = 0  # AVAILABLE records below end_offset (redeliveries waiting)
        self._earliest = _NEVER  # no acquisition lock runs out before this (a lower bound)
        self.counts = Counts()

    # -- reading the state ---------------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        return self.end_offset - self.start_offset

    def state_of(self, offset: int) -> tuple[RecordState, int] | None:
        """(state, delivery count) of an in-flight record, None outside [start, end)."""
        r = self._recs.get(offset)
        return None if r is None else (r.state, r.count)

    def done_count(self) -> int:
        """In-flight records acknowledged or archived (the start offset has not passed them yet)."""
        return sum(1 for r in self._recs.values() if r.state in _DONE)

    def acquired_count(self) -> int:
        return sum(1 for r in self._recs.values() if r.state is RecordState.ACQUIRED)

    def fetch_offset(self) -> int:
        """Where the next read of the log starts: the first AVAILABLE in-flight record, else the end."""
        if self._available:
            for off in range(self.start_offset, self.end_offset):
                r = self._recs.get(off)
                if r is not None and r.state is RecordState.AVAILABLE:
                    return off
        return self.end_offset

    def has_work(self, upper: int) -> bool:
        """Whether an acquire could give something: a redelivery, or new records below `upper`
        within the in-flight limit (the caller's settings decide the limit; checked there)."""
        return self._available > 0 or self.end_offset < upper

    # -- moving the start (share.auto.offset.reset, retention, AlterShareGroupOffsets) ------------------
    def reset(self, offset: int) -> None:
        """Start over at `offset`: nothing in flight (AlterShareGroupOffsets bumps the state epoch)."""
        self._recs.clear()
        self._available = 0
        self.start_offset = self.end_offset = offset

    def advance_to_log_start(self, log_start: int) -> None:
        """Records deleted from the log (retention, DeleteRecords) can no longer be delivered."""
        if log_start <= self.start_offset:
            return
        if log_start >= self.end_offset:
            self.reset(log_start)
            return
        for off in range(self.start_offset, log_start):
            r = self._recs.pop(off, None)
            if r is not None and r.state is RecordState.AVAILABLE:
                self._available -= 1
        self.start_offset = log_start
        self._advance_start()

    # -- acquiring -----------------------------------------------------------------------------------
    def acquire(
        self,
        member: str,
        batches: Sequence[FetchedBatch],
        now: int,
        settings: ShareSettings,
        max_records: int,
        strict: bool = False,
    ) -> list[Acquired]:
        """Acquire the AVAILABLE records of `batches` (redeliveries) and the new ones past the end, up
        to `max_records` (whole batches unless `strict`, as Kafka's batch-optimized acquire mode) and
        the in-flight limit. Batches must be in offset order and whole."""
        out: list[Acquired] = []
        taken = 0
        deadline = now + settings.lock_duration_ms
        self._earliest = min(self._earliest, deadline)
        for b in batches:
            if taken >= max_records:
                break
            first = max(b.base_offset, self.start_offset)
            if b.last_offset < first:
                continue
            if first >= self.end_offset and self.in_flight >= settings.max_record_locks:
                break
            for off in range(first, b.last_offset + 1):
                if strict and taken >= max_records:
                    break
                r = self._recs.get(off)
                if r is None:
                    if off < self.end_offset:
                        continue  # below the end and not in flight: cannot happen, but never re-add
                    if off > self.end_offset:
                        # A hole between batches (compacted away): nothing to deliver there.
                        for gap in range(self.end_offset, off):
                            self._recs[gap] = _Rec(RecordState.ARCHIVED)
                    self.end_offset = off + 1
                    if not b.deliverable:
                        self._recs[off] = _Rec(RecordState.ARCHIVED)
                        continue
                    r = self._recs[off] = _Rec(RecordState.AVAILABLE)
                    self._available += 1
                elif r.state is not RecordState.AVAILABLE:
                    continue
                r.state = RecordState.ACQUIRED
                r.count += 1
                r.member = member
                r.deadline = deadline
                self._available -= 1
                taken += 1
                if out and out[-1].last_offset == off - 1 and out[-1].delivery_count == r.count:
                    out[-1] = Acquired(out[-1].first_offset, off, r.count)
                else:
                    out.append(Acquired(off, off, r.count))
        self.counts.acquired += taken
        self._advance_start()
        return out

    # -- acknowledging -------------------------------------------------------------------------------
    def acknowledge(
        self,
        member: str,
        batches: Iterable[tuple[int, int, Sequence[int]]],
        now: int,
        settings: ShareSettings,
    ) -> None:
        """Apply (first, last, types) acknowledgements of `member`, all or none: INVALID_RECORD_STATE
        when a record is not acquired by it (a gap may name a record already done or never there)."""
        plan: list[tuple[int, _Rec | None, AckType]] = []
        for first, last, types in batches:
            if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"invalid acknowledgement batch {first}-{last}")
            for off in range(first, last + 1):
                raw = types[0] if len(types) == 1 else types[off - first]
                try:
                    t = AckType(raw)
                except ValueError:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown acknowledge type {raw}") from None
                r = self._recs.get(off)
                if t is AckType.GAP and (r is None or r.state in _DONE):
                    plan.append((off, None, t))
                    continue
                if r is None or r.state is not RecordState.ACQUIRED or r.member != member:
                    raise KafkaError(
                        ErrorCode.INVALID_RECORD_STATE,
                        f"record {off} is not acquired by member {member}",
                    )
                plan.append((off, r, t))
        for _off, r, t in plan:
            if r is None:
                continue
            if t is AckType.RENEW:
                r.deadline = now + settings.lock_duration_ms
            elif t is AckType.ACCEPT:
                r.state = RecordState.ACKNOWLEDGED
                self.counts.acknowledged += 1
            elif t is AckType.RELEASE:
                self.counts.released += 1
                self._release(r, settings)
            else:  # REJECT, or GAP on an acquired offset: never to be delivered
                self._archive(r)
        self._advance_start()

    def release_member(self, member: str, settings: ShareSettings) -> int:
        """Make every record `member` holds available again (its share session closed)."""
        n = 0
        for r in self._recs.values():
            if r.state is RecordState.ACQUIRED and r.member == member:
                self._release(r, settings)
                n += 1
        self.counts.released += n
        self._advance_start()
        return n

    def expire_locks(self, now: int, settings: ShareSettings) -> int:
        """Records whose acquisition lock ran out go back (or are archived at the delivery limit)."""
        if self._earliest > now:
            return 0  # the usual case: a look at one number, not at every record in flight
        n, earliest = 0, _NEVER
        for r in self._recs.values():
            if r.state is RecordState.ACQUIRED:
                if r.deadline <= now:
                    self._release(r, settings)
                    n += 1
                else:
                    earliest = min(earliest, r.deadline)
        self._earliest = earliest
        if n:
            self.counts.lock_expiries += n
            self._advance_start()
        return n

    def next_deadline(self) -> int | None:
        return min((r.deadline for r in self._recs.values() if r.state is RecordState.ACQUIRED), default=None)

    def _release(self, r: _Rec, settings: ShareSettings) -> None:
        r.member = ""
        if r.count >= settings.delivery_count_limit:
            self._archive(r)
        else:
            r.state = RecordState.AVAILABLE
            self._available += 1

    def _archive(self, r: _Rec) -> None:
        r.state = RecordState.ARCHIVED
        r.member = ""
        self.counts.archived += 1

    def _advance_start(self) -> None:
        recs, off = self._recs, self.start_offset
        while off < self.end_offset:
            r = recs.get(off)
            if r is not None and r.state not in _DONE:
                break
            recs.pop(off, None)
            off += 1
        self.start_offset = off

    # -- persistence ---------------------------------------------------------------------------------
    def snapshot(self) -> tuple[int, int, list[tuple[int, int, int, int]]]:
        """(start, end, runs of (first, last, state, delivery count)): what survives a restart. ACQUIRED
        is stored as AVAILABLE (locks do not survive) with its delivery count, so a redelivery after a
        failover counts as one."""
        runs: list[tuple[int, int, int, int]] = []
        for off in range(self.start_offset, self.end_offset):
            r = self._recs.get(off)
            state = RecordState.ARCHIVED if r is None else r.state
            if state is RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            count = 0 if r is None else r.count
            if runs and runs[-1][1] == off - 1 and runs[-1][2] == state and runs[-1][3] == count:
                runs[-1] = (runs[-1][0], off, state, count)
            else:
                runs.append((off, off, int(state), count))
        return self.start_offset, self.end_offset, runs

    @classmethod
    def restore(
        cls, start: int, end: int, runs: Iterable[tuple[int, int, int, int]], state_epoch: int
    ) -> SharePartition:
        sp = cls(start, state_epoch)
        sp.end_offset = max(start, end)
        for first, last, state, count in runs:
            for off in range(max(first, start), min(last, end - 1) + 1):
                r = _Rec(RecordState(state), count)
                if r.state is RecordState.ACQUIRED:
                    r.state = RecordState.AVAILABLE
                if r.state is RecordState.AVAILABLE:
                    sp._available += 1
                sp._recs[off] = r
        # Offsets inside [start, end) with no run were never deliverable.
        for off in range(start, sp.end_offset):
            if off not in sp._recs:
                sp._recs[off] = _Rec(RecordState.ARCHIVED)
        sp._advance_start()
        return sp
