"""This broker's share groups: their membership (as group coordinator), and, as partition leader, the
share-partitions of the partitions it leads with their share sessions, lock expiry and persistence.

A share-partition is loaded from the ShareStateStore the first time a member fetches it here, or
created at the group's share.auto.offset.reset position and stored at once (so "latest" is where
the group started, also after a restart). Every change of a share-partition is stored before the
request that made it is answered: a leader that fails over loses no acknowledgement, and its
successor redelivers only what was not acknowledged (acquired records come back AVAILABLE with their
delivery counts).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from brook.protocol.errors import ErrorCode, KafkaError
from brook.tasks import cancel_and_wait, every

from .group import ShareGroups, TimingsOf, TopicsView
from .partition import Counts, SharePartition, ShareSettings
from .state_records import ShareKey, ShareSnapshot

log = logging.getLogger(__name__)

__all__ = ["ShareCoordinator", "ShareSession", "ShareStateStore", "WakeListener"]

FINAL_EPOCH = -1
INITIAL_EPOCH = 0
_SWEEP_S = 0.1  # how often acquisition locks and member sessions are checked


class ShareStateStore(Protocol):
    """Where share-partition states live (the broker's `__share_group_state` topic)."""

    async def load(self, key: ShareKey) -> ShareSnapshot | None: ...

    async def save(self, key: ShareKey, snapshot: Callable[[], ShareSnapshot | None]) -> None:
        """Store what `snapshot()` gives, called right before the write: writes of one key land in the
        order of their calls' writes, each the state at its write."""
        ...


class WakeListener(Protocol):
    def wake(self, p: object, data: bool) -> None: ...


@dataclass(slots=True)
class ShareSession:
    """A member's share session (KIP-932): the partitions it fetches and the epoch of its next request."""

    group_id: str
    member_id: str
    epoch: int = 1
    partitions: dict[tuple[bytes, int], None] = field(default_factory=dict)
    connection: object | None = None  # the one its last request came on


class ShareCoordinator:
    def __init__(
        self,
        store: ShareStateStore,
        settings_of: Callable[[str], ShareSettings],
        topics: TopicsView,
        timings: TimingsOf,
        clock_ms: Callable[[], int] = lambda: int(time.monotonic() * 1000),
    ) -> None:
        self._store = store
        self.settings_of = settings_of
        self._clock_ms = clock_ms
        self.groups = ShareGroups(topics, timings)
        self.partitions: dict[ShareKey, SharePartition] = {}
        self._loading: dict[ShareKey, asyncio.Future[SharePartition]] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        # each connection's sessions: a closed connection ends its own without a scan of all of them
        self._by_connection: dict[object, set[tuple[str, str]]] = {}
        self._listeners: set[WakeListener] = set()
        self.retired = Counts()  # counts of share-partitions no longer here
        self._task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[object]] = set()

    def now_ms(self) -> int:
        return self._clock_ms()

    def start(self) -> None:
        # One failed sweep must not end member and lock expiry for good.
        self._task = asyncio.create_task(every(_SWEEP_S, self._sweep, "share group sweep"))

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        for t in list(self._background):
            await cancel_and_wait(t)

    # -- share-partitions ----------------------------------------------------------------------------
    async def partition(
        self, key: ShareKey, initial: Callable[[ShareSettings], int], leader_epoch: int = -1
    ) -> SharePartition:
        """The share-partition of `key`, loaded or created (at `initial(settings)`) the first time, and
        loaded again when the partition's leader epoch moved since (another leader may have changed
        it in between)."""
        sp = self.partitions.get(key)
        if sp is not None and sp.leader_epoch != leader_epoch and key not in self._loading:
            self._retire(self.partitions.pop(key))
            sp = None
        if sp is not None:
            return sp
        pending = self._loading.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[SharePartition] = asyncio.get_running_loop().create_future()
        self._loading[key] = fut
        try:
            snap = await self._store.load(key)
            if snap is not None:
                sp = SharePartition.restore(snap.start_offset, snap.end_offset, snap.runs, snap.state_epoch)
            else:
                sp = SharePartition(initial(self.settings_of(key.group_id)))
            sp.leader_epoch = leader_epoch
            self.partitions[key] = sp
            if snap is None:
                await self.persist([key])
            fut.set_result(sp)
            return sp
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # retrieved: waiters re-raise it themselves
            raise
        finally:
            del self._loading[key]

    def preload(self, key: ShareKey, initial: Callable[[ShareSettings], int], leader_epoch: int) -> None:
        """Load the share-partition of `key` in the background: a fetch that already has records does
        not wait for it, and the next fetch must find it loaded, or a partition listed after one that
        always has records (released ones come back at once) would never be served."""
        if key in self.partitions or key in self._loading:
            return
        self._in_background(self.partition(key, initial, leader_epoch), "load a share-partition")

    def _in_background(self, work: Coroutine[object, object, object], what: str) -> None:
        task: asyncio.Task[object] = asyncio.create_task(work)
        self._background.add(task)

        def done(t: asyncio.Task[object]) -> None:
            self._background.discard(t)
            if not t.cancelled() and t.exception() is not None:
                # A load is tried again by the next fetch; a lost write by the next change's.
                log.info("could not %s: %s", what, t.exception())
            else:
                self.wake()

        task.add_done_callback(done)

    async def lookup(self, key: ShareKey) -> SharePartition | None:
        """The share-partition of `key` if it has state (here or stored), without creating one."""
        sp = self.partitions.get(key)
        if sp is not None or key in self._loading:
            return sp
        snap = await self._store.load(key)
        if snap is None or key in self.partitions:
            return self.partitions.get(key)
        sp = self.partitions[key] = SharePartition.restore(
            snap.start_offset, snap.end_offset, snap.runs, snap.state_epoch
        )
        return sp

    async def persist(self, keys: Iterable[ShareKey]) -> None:
        """Store the share-partitions of `keys`. A store that cannot be written (its partition without
        a leader) is logged, and the state served from memory meanwhile: the next change writes it all."""
        for key in keys:
            try:
                await self._store.save(key, lambda k=key: self._snapshot(k))  # type: ignore[misc]
            except KafkaError as e:
                log.warning("share: state of %s not stored: %s", key, e.message)

    def _snapshot(self, key: ShareKey) -> ShareSnapshot | None:
        sp = self.partitions.get(key)
        if sp is None:
            return None
        start, end, runs = sp.snapshot()
        return ShareSnapshot(sp.state_epoch, start, end, tuple(runs))

    def unload(self, topic_id: bytes, partition: int) -> None:
        """This broker no longer leads the partition: its share-partitions go (their state is stored)."""
        for key in [k for k in self.partitions if k.topic_id == topic_id and k.partition == partition]:
            self._retire(self.partitions.pop(key))

    def _retire(self, sp: SharePartition) -> None:
        c, r = sp.counts, self.retired
        r.acquired += c.acquired
        r.acknowledged += c.acknowledged
        r.released += c.released
        r.archived += c.archived
        r.lock_expiries += c.lock_expiries

    def totals(self) -> Counts:
        """Counts of every share-partition this broker has had (for the metrics)."""
        out = Counts(**{f: getattr(self.retired, f) for f in Counts.__dataclass_fields__})
        for sp in self.partitions.values():
            c = sp.counts
            out.acquired += c.acquired
            out.acknowledged += c.acknowledged
            out.released += c.released
            out.archived += c.archived
            out.lock_expiries += c.lock_expiries
        return out

    def states_of(self, group_id: str) -> dict[tuple[bytes, int], SharePartition]:
        """The group's share-partitions held here, by (topic id, partition)."""
        return {(k.topic_id, k.partition): sp for k, sp in self.partitions.items() if k.group_id == group_id}

    async def reset(self, key: ShareKey, offset: int) -> None:
        """AlterShareGroupOffsets: the share-partition starts over at `offset` (stored)."""
        held = self.partitions.get(key)
        sp = await self.partition(key, lambda _s: offset, held.leader_epoch if held is not None else -1)
        sp.reset(offset)
        sp.state_epoch += 1
        await self.persist([key])

    async def forget(self, key: ShareKey) -> None:
        """DeleteShareGroupOffsets: the state goes; the next fetch starts at share.auto.offset.reset."""
        sp = self.partitions.pop(key, None)
        if sp is not None:
            self._retire(sp)
        await self._store.save(key, lambda: None)

    async def delete_group(self, group_id: str) -> None:
        """DeleteGroups: the group and every share-partition state it has here."""
        await self.groups.delete(group_id)
        for key in [k for k in self.partitions if k.group_id == group_id]:
            await self.forget(key)

    # -- share sessions ------------------------------------------------------------------------------
    def session(
        self, group_id: str, member_id: str, epoch: int, connection: object | None = None
    ) -> ShareSession:
        """The member's session for a request of `epoch` that came on `connection`: a new one at epoch
        0 (replacing an old one), the existing one otherwise, its epoch moved on.
        SHARE_SESSION_NOT_FOUND or INVALID_SHARE_SESSION_EPOCH as Kafka's ShareSessionCache answers."""
        s = self._session(group_id, member_id, epoch)
        if s.connection is not connection:
            self._detach(s)
            s.connection = connection
            if connection is not None:
                self._by_connection.setdefault(connection, set()).add((group_id, member_id))
        return s

    def _session(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            old = self.sessions.get(key)
            if old is not None:
                self._detach(old)
            new = self.sessions[key] = ShareSession(group_id, member_id)
            return new
        s = self.sessions.get(key)
        if s is None:
            raise KafkaError(
                ErrorCode.SHARE_SESSION_NOT_FOUND, f"No share session for member {member_id} of {group_id}."
            )
        if epoch == FINAL_EPOCH:
            return s
        if epoch != s.epoch:
            raise KafkaError(
                ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                f"Share session epoch {epoch} of member {member_id} is not the expected {s.epoch}.",
            )
        s.epoch = s.epoch + 1 if s.epoch < 2**31 - 1 else 1
        return s

    def close_session(self, session: ShareSession) -> list[ShareKey]:
        """Release what the member holds in its session's partitions; the keys that changed."""
        self.sessions.pop((session.group_id, session.member_id), None)
        self._detach(session)
        settings = self.settings_of(session.group_id)
        changed = []
        for topic_id, index in session.partitions:
            key = ShareKey(session.group_id, topic_id, index)
            sp = self.partitions.get(key)
            if sp is not None and sp.release_member(session.member_id, settings):
                changed.append(key)
        if changed:
            self.wake()
        return changed

    def connection_closed(self, connection: object) -> None:
        """A client connection ended: its share sessions end as a final-epoch request would, their
        members' acquired records released for others at once instead of when their locks expire."""
        keys = self._by_connection.pop(connection, set())
        sessions = [s for k in keys if (s := self.sessions.get(k)) is not None and s.connection is connection]
        changed = [key for s in sessions for key in self.close_session(s)]
        if changed:
            self._in_background(self.persist(changed), "store released share records")

    def _detach(self, session: ShareSession) -> None:
        keys = self._by_connection.get(session.connection) if session.connection is not None else None
        if keys is not None:
            keys.discard((session.group_id, session.member_id))
            if not keys:
                del self._by_connection[session.connection]
        session.connection = None

    # -- waiting fetches -----------------------------------------------------------------------------
    def listen(self, w: WakeListener) -> None:
        self._listeners.add(w)

    def unlisten(self, w: WakeListener) -> None:
        self._listeners.discard(w)

    def wake(self) -> None:
        """Records became available again (released, or their lock expired): waiting fetches look."""
        for w in list(self._listeners):
            w.wake(self, True)

    async def _sweep(self) -> None:
        expired = self.groups.expire()
        for group_id, member_id in expired:
            log.info("share group %s: member %s expired", group_id, member_id)
        for group_id in {g for g, _ in expired}:
            await self.groups.persist(group_id)
        now = self.now_ms()
        changed = [
            key
            for key, sp in list(self.partitions.items())
            if sp.expire_locks(now, self.settings_of(key.group_id))
        ]
        if changed:
            self.wake()
            await self.persist(changed)
