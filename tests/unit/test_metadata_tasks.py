"""A cancellation swallowed by a callee (Python 3.11's asyncio.wait_for, inside aetcd) is raised again
by the metadata room's loops instead of leaving them waiting forever."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from brook.metadata._tasks import raise_if_cancelling


def test_a_swallowed_cancel_is_raised_again() -> None:
    async def scenario() -> None:
        reached = asyncio.Event()

        async def loop() -> None:
            with contextlib.suppress(asyncio.CancelledError):  # what wait_for may do
                reached.set()
                await asyncio.sleep(10)
            raise_if_cancelling()
            await asyncio.sleep(10)  # without the check, the loop would wait here forever

        task = asyncio.create_task(loop())
        await reached.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)

    asyncio.run(scenario())


def test_no_cancel_no_raise() -> None:
    async def scenario() -> None:
        raise_if_cancelling()

    asyncio.run(scenario())
