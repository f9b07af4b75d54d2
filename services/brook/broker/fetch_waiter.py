"""A long-polling Fetch waiting for its partitions to change.

It is registered once with every partition it watches, for the whole wait; a partition that changes
notes itself in `woken` and wakes the request, which then reads again only the partitions noted there,
not all of them. A follower's fetch cares about new records (and role changes), not about the high
watermark: a leader's high watermark moves with every follower fetch, and waking every other follower's
fetch for it would re-read their partitions for nothing (Kafka's follower fetches also complete on bytes
only).
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

P = TypeVar("P", bound=Hashable)
P_contra = TypeVar("P_contra", contravariant=True)


class ChangeListener(Protocol[P_contra]):
    """What a partition tells of its changes: a waiting fetch, a fetch session, a replica fetcher."""

    def wake(self, p: P_contra, data: bool) -> None: ...


class FetchWaiter(Generic[P]):
    __slots__ = ("_waiting", "follower", "woken")

    def __init__(self, follower: bool) -> None:
        self.follower = follower
        self.woken: set[P] = set()
        self._waiting: asyncio.Future[None] | None = None

    def wake(self, p: P, data: bool) -> None:
        """`p` changed: new records or a new role (`data`), or only its high watermark."""
        if data or not self.follower:
            self.woken.add(p)
            waiting = self._waiting
            if waiting is not None and not waiting.done():
                waiting.set_result(None)

    async def wait(self, timeout: float) -> set[P]:
        """The partitions that changed since the last call, waiting up to `timeout` s for one (empty when
        none did). A future and a timer, not wait_for(Event.wait()): that is a task per long poll on 3.11."""
        if not self.woken:
            loop = asyncio.get_running_loop()
            self._waiting = waiting = loop.create_future()
            timer = loop.call_later(timeout, _expire, waiting)
            try:
                await waiting
            finally:
                timer.cancel()
                self._waiting = None
        woken, self.woken = self.woken, set()
        return woken


def _expire(waiting: asyncio.Future[None]) -> None:
    if not waiting.done():
        waiting.set_result(None)
