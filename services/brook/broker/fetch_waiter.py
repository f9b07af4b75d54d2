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
import contextlib
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .partition import Partition


class ChangeListener(Protocol):
    """What a partition tells of its changes: a waiting fetch, a fetch session, a replica fetcher."""

    def wake(self, p: Partition, data: bool) -> None: ...


class FetchWaiter:
    __slots__ = ("_event", "follower", "woken")

    def __init__(self, follower: bool) -> None:
        self.follower = follower
        self.woken: set[Partition] = set()
        self._event = asyncio.Event()

    def wake(self, p: Partition, data: bool) -> None:
        """`p` changed: new records or a new role (`data`), or only its high watermark."""
        if data or not self.follower:
            self.woken.add(p)
            self._event.set()

    async def wait(self, timeout: float) -> set[Partition]:
        """The partitions that changed since the last call, waiting up to `timeout` s for one (empty when
        none did)."""
        if not self.woken:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._event.wait(), timeout)
        self._event.clear()
        woken, self.woken = self.woken, set()
        return woken
