"""Task helpers."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger(__name__)


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    """Cancel a task and wait until it has finished. Unlike `suppress(CancelledError)` around
    `await task`, a cancellation of the caller while it waits is not swallowed."""
    if task is None:
        return
    task.cancel()
    await asyncio.wait([task])
    if not task.cancelled() and task.exception() is not None:
        log.error("background task %s failed", task.get_name(), exc_info=task.exception())


def raise_if_cancelling() -> None:
    """Re-raise a cancellation that a callee swallowed. Python 3.11's asyncio.wait_for (which aetcd
    uses, e.g. while creating a watch) returns the result and drops the CancelledError when both arrive
    in the same loop iteration; a loop that goes on after such a call would wait forever for a cancel
    that already happened (a controller that never finished stepping down)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
