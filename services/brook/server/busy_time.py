"""How long a request's handler itself ran: the time spent inside its coroutine between suspensions,
not the time it waited (long polls, acks=all, other connections' work). On one event-loop thread
that is the request's share of the broker's request-handling time, what Kafka's request quota
(request_percentage) measures on its handler threads."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Generator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class BusyTime(Generic[T]):
    """`await BusyTime(aw)` runs `aw` and adds the seconds spent in its steps to `.seconds`."""

    __slots__ = ("_aw", "seconds")

    def __init__(self, aw: Awaitable[T]) -> None:
        self._aw = aw
        self.seconds = 0.0

    def __await__(self) -> Generator[Any, Any, T]:
        coro = self._aw.__await__()
        send: Any = None
        error: BaseException | None = None
        while True:
            start = time.perf_counter()
            try:
                yielded = coro.send(send) if error is None else coro.throw(error)
            except StopIteration as done:
                self.seconds += time.perf_counter() - start
                return done.value  # type: ignore[no-any-return]
            except BaseException:
                self.seconds += time.perf_counter() - start
                raise
            self.seconds += time.perf_counter() - start
            try:
                send, error = (yield yielded), None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as e:  # CancelledError and friends go into the handler
                send, error = None, e
