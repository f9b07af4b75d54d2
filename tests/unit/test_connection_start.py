"""Connection's eager start of pipelined requests: a handler runs at once as far as it can without
waiting, and a task carries it on from its first wait, with results, errors, cancellation and context
variables as a task from the start would have them."""

from __future__ import annotations

import asyncio
import contextvars
import inspect

import pytest

from brook.server.connection import Answer, start_eagerly

VAR: contextvars.ContextVar[int] = contextvars.ContextVar("test_var", default=0)


async def _sync(n: int) -> Answer:
    VAR.set(n)
    return [b"x" * n], VAR.get()


async def _waits(gate: asyncio.Future[int], steps: list[str]) -> Answer:
    VAR.set(7)
    steps.append("started")
    got = await gate
    await asyncio.sleep(0)  # a bare yield to the loop, too
    steps.append("resumed")
    return [b"%d" % got], VAR.get()


async def _fails() -> Answer:
    raise ValueError("bad request")


def test_a_handler_that_never_waits_is_done_at_once_without_a_task() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        tasks = len(asyncio.all_tasks())
        fut = start_eagerly(loop, _sync(3))
        assert fut.done() and fut.result() == ([b"xxx"], 3)
        assert len(asyncio.all_tasks()) == tasks
        assert VAR.get() == 0  # the handler's context is its own

    asyncio.run(main())


def test_a_handler_that_waits_is_carried_on_by_a_task() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        gate: asyncio.Future[int] = loop.create_future()
        steps: list[str] = []
        fut = start_eagerly(loop, _waits(gate, steps))
        assert steps == ["started"] and not fut.done()
        # A native coroutine drives the task: Python 3.12's create_task refuses generator-based ones.
        assert isinstance(fut, asyncio.Task) and inspect.iscoroutine(fut.get_coro())
        await asyncio.sleep(0.01)
        assert not fut.done()
        gate.set_result(42)
        assert await fut == ([b"42"], 7)
        assert steps == ["started", "resumed"]
        assert VAR.get() == 0

    asyncio.run(main())


def test_errors_and_cancellation_reach_the_handler_and_its_caller() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        failed = start_eagerly(loop, _fails())
        assert failed.done()
        with pytest.raises(ValueError, match="bad request"):
            failed.result()
        gate: asyncio.Future[int] = loop.create_future()
        fut = start_eagerly(loop, _waits(gate, []))
        gate.set_exception(KeyError("gone"))
        with pytest.raises(KeyError):
            await fut
        gate2: asyncio.Future[int] = loop.create_future()
        fut2 = start_eagerly(loop, _waits(gate2, []))
        await asyncio.sleep(0)
        fut2.cancel()
        with pytest.raises(asyncio.CancelledError):
            await fut2
        assert gate2.cancelled()  # the wait inside the handler was cancelled with it

    asyncio.run(main())
