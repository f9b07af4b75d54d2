"""Ending asyncio tasks without swallowing the caller's own cancellation.

`with suppress(CancelledError): await task` also swallows a cancellation of the caller that arrives
while it waits (the stop goes on as if nothing happened, and whoever cancelled it waits forever);
these helpers wait with asyncio.wait instead, which lets the caller's cancellation through.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger(__name__)


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


def raise_if_cancelling() -> None:
    """Re-raise a cancellation that a callee swallowed. Python 3.11's asyncio.wait_for (which aetcd
    uses, e.g. while creating a watch) returns the result and drops the CancelledError when both arrive
    in the same loop iteration; a loop that goes on after such a call would wait forever for a cancel
    that already happened (a controller that never finished stepping down)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
