"""acks=all produces waiting for their records to commit (Kafka's DelayedProduce): each waits until
the high watermark passes its last offset. The leader releases them as the high watermark moves, with
the min.insync.replicas check at that moment, and fails them all when it stops leading."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from brook.protocol.errors import ErrorCode, KafkaError


class AckWaiters:
    __slots__ = ("_waiting",)

    def __init__(self) -> None:
        self._waiting: dict[asyncio.Future[None], int] = {}  # waiter -> the offset it needs committed

    def wait_for(self, last_offset: int) -> asyncio.Future[None]:
        """A future resolved once the high watermark passes `last_offset`; cancelling it forgets it."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting[fut] = last_offset
        fut.add_done_callback(self._forget)
        return fut

    def _forget(self, fut: asyncio.Future[None]) -> None:
        self._waiting.pop(fut, None)

    def release(self, high_watermark: int, check: Callable[[], None]) -> None:
        """Resolve the waiters `high_watermark` passed; `check` raises the KafkaError they get instead
        (an ISR that shrank below min.insync.replicas)."""
        for fut, offset in list(self._waiting.items()):
            if offset < high_watermark and not fut.done():
                try:
                    check()
                except KafkaError as e:
                    fut.set_exception(e)
                else:
                    fut.set_result(None)

    def fail(self, code: ErrorCode) -> None:
        for fut in list(self._waiting):
            if not fut.done():
                fut.set_exception(KafkaError(code))
