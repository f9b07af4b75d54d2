"""BusyTime counts a handler's own running time, not the time it waits (brook.server.busy_time)."""

from __future__ import annotations

import asyncio
import time

import pytest

from brook.server.busy_time import BusyTime


def test_counts_running_not_waiting() -> None:
    async def handler() -> str:
        end = time.perf_counter() + 0.05
        while time.perf_counter() < end:  # 50 ms of work
            pass
        await asyncio.sleep(0.3)  # 300 ms of waiting
        return "done"

    async def main() -> tuple[str, float]:
        timed = BusyTime(handler())
        return await timed, timed.seconds

    result, seconds = asyncio.run(main())
    assert result == "done"
    assert 0.04 <= seconds < 0.2


def test_errors_and_cancellation_reach_the_caller() -> None:
    async def failing() -> None:
        await asyncio.sleep(0)
        raise ValueError("bad input")

    async def waiting() -> None:
        await asyncio.sleep(10)

    async def main() -> None:
        with pytest.raises(ValueError):
            await BusyTime(failing())
        task = asyncio.ensure_future(_await(BusyTime(waiting())))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


async def _await(aw: BusyTime[None]) -> None:
    await aw
