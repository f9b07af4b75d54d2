"""Background tasks: ending them, running a duty every few seconds, and long work in slices.

`with suppress(CancelledError): await task` also swallows a cancellation of the caller that arrives
while it waits (the stop goes on as if nothing happened, and whoever cancelled it waits forever);
these helpers wait with asyncio.wait instead, which lets the caller's cancellation through.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

# The longest a replay run by run_in_slices holds the event loop at a time. A coordinator partition
# replayed in one go (101,319 records of __transaction_state) held a soak broker's loop 3.4 s, past
# its 2 s etcd lease, and the brokers took turns losing their leases.
SLICE_S = 0.02


async def cancel_and_wait(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel tasks (None: none) and wait until they have finished; a task that failed is logged."""
    live = [t for t in tasks if t is not None]
    for t in live:
        t.cancel()
    await wait_finished(*live)


async def wait_finished(*tasks: asyncio.Task[Any]) -> None:
    """Wait until tasks have finished (their own cancellation is no error); a task that failed is
    logged."""
    if not tasks:
        return
    await asyncio.wait(tasks)
    for t in tasks:
        if not t.cancelled() and t.exception() is not None:
            log.error("background task %s failed", t.get_name(), exc_info=t.exception())


async def every(interval_s: float, job: Callable[[], object], what: str, *, first: bool = False) -> None:
    """Run `job` (a function, or one that returns an awaitable) every `interval_s` seconds until
    cancelled; `first`: once at once, before the first wait. A round that raises is logged and the
    next one runs: a background duty (ISR checks, expiry, the view marks that keep the fence open) that
    ended with its first error would fail the broker for good without a word."""
    if not first:
        await asyncio.sleep(interval_s)
    while True:
        try:
            result = job()
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("%s failed; trying again in %.3g s", what, interval_s)
        await asyncio.sleep(interval_s)


def raise_if_cancelling() -> None:
    """Re-raise a cancellation that a callee swallowed. Python 3.11's asyncio.wait_for (which aetcd
    uses, e.g. while creating a watch) returns the result and drops the CancelledError when both arrive
    in the same loop iteration; a loop that goes on after such a call would wait forever for a cancel
    that already happened (a controller that never finished stepping down)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def run_to_end(coro: Coroutine[Any, Any, T]) -> T:
    """Await `coro` in a task of its own that the caller's cancellation does not stop: a coordinator's
    state write must finish, and its in-memory state follow the log, whatever became of the request
    that began it (its connection closed and the request's task was cancelled)."""
    task = asyncio.ensure_future(coro)
    task.add_done_callback(_retrieve)
    return await asyncio.shield(task)


def _retrieve(task: asyncio.Future[Any]) -> None:
    """The outcome of a write whose request went away is nobody's to read: no warning for it."""
    if not task.cancelled():
        task.exception()


def run_in_slices(start: Callable[[], Iterator[None]], what: str) -> asyncio.Task[None] | None:
    """Run the steps `start()` gives: at once when they end within SLICE_S (None), else the rest on a
    task, SLICE_S at a time, other tasks running between slices. Steps that raise are started again
    from a fresh `start()` a second later (e.g. a segment the cleaner replaced under a replay)."""
    first = start()
    steps: Iterator[None] | None = first
    try:
        if _run_for(first):
            return None
    except Exception:
        log.exception("%s failed; starting it again", what)
        steps = None
    return asyncio.get_running_loop().create_task(_run_rest(steps, start, what), name=what)


async def _run_rest(steps: Iterator[None] | None, start: Callable[[], Iterator[None]], what: str) -> None:
    while True:
        if steps is None:
            await asyncio.sleep(1)
            steps = start()
        try:
            while not _run_for(steps):
                await asyncio.sleep(0)
            return
        except Exception:
            log.exception("%s failed; starting it again", what)
            steps = None


def _run_for(steps: Iterator[None]) -> bool:
    """Drive `steps` for up to SLICE_S; True when they have ended."""
    until = time.monotonic() + SLICE_S
    return all(time.monotonic() < until for _ in steps)
