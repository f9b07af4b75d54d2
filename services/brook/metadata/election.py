"""Controller election: exactly one controller, holding `controller` under its lease, fenced by an
epoch that grows by one at every election.

Winning is one transaction: if `controller` is absent and `controller_epoch` is still the value
read, write `controller` = {broker_id, epoch: e+1} under the candidate's lease and
`controller_epoch` = e+1. Losers watch `controller` and campaign again when it is deleted (its
lease expired or was revoked), so failover takes at most the TTL plus etcd's expiry check.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable

from brook.tasks import cancel_and_wait, raise_if_cancelling

from .client import EtcdClient
from .errors import FencedError, MetadataError
from .keys import KeyLayout
from .kv import Compare, EventType, Get, KeyValue, Put
from .lease import KeptLease
from .models import ControllerInfo
from .watch import PrefixWatch, watch_key

log = logging.getLogger(__name__)

DEFAULT_TTL = 2  # seconds; etcd grants no less with its default 1 s election timeout
Callback = Callable[[ControllerInfo], Awaitable[None] | None]


def _controller(kv: KeyValue | None) -> ControllerInfo | None:
    if kv is None:
        return None
    try:
        return ControllerInfo.from_json(kv.value)
    except (ValueError, KeyError, TypeError):
        log.warning("unreadable controller key %r", kv.value)
        return None


def _epoch(kv: KeyValue | None) -> int:
    return int(kv.value) if kv is not None else 0


class ControllerElection:
    """One broker's candidacy. `start()` campaigns in the background until `stop()`.

    `on_elected(info)` runs when this broker becomes the controller (info.epoch is its epoch, to pass
    to every controller-only write); `on_resigned(info)` when it stops being it (lease lost, key
    deleted or replaced, or stop()). Both run in the election's task: keep them short.
    """

    def __init__(
        self,
        client: EtcdClient,
        layout: KeyLayout,
        broker_id: int,
        *,
        ttl: int = DEFAULT_TTL,
        on_elected: Callback | None = None,
        on_resigned: Callback | None = None,
    ) -> None:
        self._client = client
        self._layout = layout
        self.broker_id = broker_id
        self.ttl = ttl
        self._on_elected = on_elected
        self._on_resigned = on_resigned
        self._current: ControllerInfo | None = None
        self._mine: ControllerInfo | None = None
        self._lease: KeptLease | None = None
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Condition()
        self._crashing = False
        self.elections_won = 0

    # ---- what is known ----

    @property
    def is_controller(self) -> bool:
        return self._mine is not None and self._lease is not None and self._lease.alive

    @property
    def controller(self) -> ControllerInfo | None:
        """The controller as last seen in etcd (None while there is none)."""
        return self._current

    @property
    def controller_id(self) -> int | None:
        return self._current.broker_id if self._current is not None else None

    @property
    def epoch(self) -> int | None:
        """This broker's controller epoch while it is the controller, else None."""
        return self._mine.epoch if self.is_controller and self._mine is not None else None

    async def wait_for(self, predicate: Callable[[ControllerElection], bool], timeout: float) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: predicate(self))

    async def wait_elected(self, timeout: float) -> int:
        """Wait until this broker is the controller; returns its epoch."""
        await self.wait_for(lambda e: e.is_controller, timeout)
        assert self._mine is not None
        return self._mine.epoch

    async def wait_for_controller(self, timeout: float) -> ControllerInfo:
        """Wait until some broker is known to be the controller."""
        await self.wait_for(lambda e: e.controller is not None, timeout)
        assert self._current is not None
        return self._current

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # ---- lifecycle ----

    async def start(self) -> None:
        self._crashing = False
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"controller-election-{self.broker_id}")

    async def stop(self) -> None:
        """Stop campaigning; if this broker is the controller, resign now (revoke the lease, so
        another broker is elected at once instead of after the TTL)."""
        await self._cancel()
        lease, self._lease = self._lease, None
        was = self._mine
        self._mine = None
        if lease is not None:
            await lease.revoke()
        if was is not None:
            self._current = None
            await self._resigned(was)
        await self._notify()

    async def abandon(self) -> None:
        """Stop without resigning, as a crash would: the controller key stays until the lease
        expires (tests)."""
        self._crashing = True
        await self._cancel()
        if self._lease is not None:
            self._lease.stop_keepalive()
            self._lease = None
        self._mine = None
        await self._notify()

    async def _cancel(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _run(self) -> None:
        delay = 0.1
        while True:
            raise_if_cancelling()  # a stop() must end the campaign even if a callee swallowed it
            try:
                won, revision = await self._campaign()
                if won:
                    await self._lead(revision)
                else:
                    await self._follow(revision)
                delay = 0.1
            except MetadataError as e:
                if self._client.closed:
                    log.info("broker %d: controller election ends: the etcd client is closed", self.broker_id)
                    return
                log.info("broker %d: controller election: %s; retrying", self.broker_id, e)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
            except Exception:  # a broker that stopped campaigning could never be controller again
                log.exception("broker %d: controller election failed; campaigning again", self.broker_id)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def _campaign(self) -> tuple[bool, int]:
        """One attempt. Returns (won, revision at which the outcome was observed)."""
        ctrl, epoch_key = self._layout.controller, self._layout.controller_epoch
        epoch_kv = await self._client.get(epoch_key)
        holder = await self._client.get(ctrl)
        if holder is not None:
            await self._observe(_controller(holder))
            return False, holder.mod_revision
        lease = await KeptLease.grant(self._client, self.ttl)
        try:
            while True:
                epoch = _epoch(epoch_kv) + 1
                mine = ControllerInfo(self.broker_id, epoch)
                r = await self._client.txn(
                    [
                        Compare.absent(ctrl),
                        Compare.mod_revision(epoch_key, epoch_kv.mod_revision if epoch_kv else 0),
                    ],
                    [Put(ctrl, mine.to_json(), lease.id), Put(epoch_key, str(epoch).encode())],
                    [Get(ctrl), Get(epoch_key)],
                )
                if r.succeeded:
                    self._lease, self._mine = lease, mine
                    self.elections_won += 1
                    await self._observe(mine)
                    log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
                    return True, r.revision
                holder = r.gets[0][0] if r.gets[0] else None
                if holder is not None:
                    await lease.revoke()
                    await self._observe(_controller(holder))
                    return False, r.revision
                epoch_kv = r.gets[1][0] if r.gets[1] else None  # another won and already lost
        except BaseException:
            if self._lease is not lease:
                await lease.revoke()
            raise

    async def _lead(self, revision: int) -> None:
        lease, mine = self._lease, self._mine
        assert lease is not None and mine is not None
        await self._elected(mine)
        watch = watch_key(self._client, self._layout.controller, revision + 1)
        watcher = asyncio.create_task(self._until_changed(watch, mine))
        lost = asyncio.create_task(lease.lost.wait())
        try:
            await asyncio.wait([watcher, lost], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (watcher, lost):
                await cancel_and_wait(t)
            await watch.aclose()
            self._mine = None
            self._lease = None
            if self._current == mine:
                self._current = None
            if self._crashing:
                lease.stop_keepalive()
            else:
                await lease.revoke()
            await self._resigned(mine)
            await self._notify()
        log.warning("broker %d is no longer the controller (epoch %d)", self.broker_id, mine.epoch)

    async def _until_changed(self, watch: PrefixWatch, mine: ControllerInfo) -> None:
        async for ev in watch:
            info = _controller_event(ev.type, ev.value)
            if info != mine:
                await self._observe(info)
                return

    async def _follow(self, revision: int) -> None:
        """Track the controller until its key is deleted."""
        async with watch_key(self._client, self._layout.controller, revision + 1) as watch:
            async for ev in watch:
                info = _controller_event(ev.type, ev.value)
                await self._observe(info)
                if info is None:
                    return

    async def _observe(self, info: ControllerInfo | None) -> None:
        if info != self._current:
            self._current = info
            await self._notify()

    async def _elected(self, info: ControllerInfo) -> None:
        await self._call(self._on_elected, info)

    async def _resigned(self, info: ControllerInfo) -> None:
        await self._call(self._on_resigned, info)

    async def _call(self, cb: Callback | None, info: ControllerInfo) -> None:
        if cb is None:
            return
        try:
            result = cb(info)
            if inspect.isawaitable(result):
                await result
        except FencedError as e:
            # The role was lost while the callback ran (its lease expired: a starved event loop, etcd
            # away); the watch ends this term and the next election follows. Not a bug: no traceback.
            log.warning("broker %d: controller epoch %d ended as it began: %s", self.broker_id, info.epoch, e)
        except Exception:
            log.exception("controller election callback failed")


def _controller_event(kind: EventType, value: bytes) -> ControllerInfo | None:
    if kind is EventType.DELETE:
        return None
    try:
        return ControllerInfo.from_json(value)
    except (ValueError, KeyError, TypeError):
        return None
