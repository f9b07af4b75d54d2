"""A cancellation swallowed by a callee (Python 3.11's asyncio.wait_for, inside aetcd) is raised again
by the metadata room's loops instead of leaving them waiting forever; stopping a task lets the
caller's own cancellation through (brook/tasks.py)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from brook.tasks import cancel_and_wait, raise_if_cancelling


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


def test_stopping_a_task_lets_the_callers_own_cancel_through() -> None:
    """`suppress(CancelledError)` around `await task` would swallow the stopper's cancellation too."""

    async def scenario() -> None:
        unwinding = asyncio.Event()

        async def slow_to_stop() -> None:
            try:
                await asyncio.sleep(10)
            finally:
                unwinding.set()
                await asyncio.sleep(10)

        task = asyncio.create_task(slow_to_stop())
        await asyncio.sleep(0)
        stopper = asyncio.create_task(cancel_and_wait(task))
        await unwinding.wait()
        stopper.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(stopper, 5)
        task.cancel()
        await asyncio.wait([task])

    asyncio.run(scenario())
