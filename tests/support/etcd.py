"""A real etcd for tests: one process per test module on free loopback ports, a fresh cluster name
(so key prefix) per test, and a runner for async scenarios (the suite has no asyncio plugin).

In a test module:

    @pytest.fixture(scope="module")
    def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdProcess]:
        yield from etcd_process(tmp_path_factory)

    def test_x(etcd: EtcdProcess) -> None:
        async def scenario() -> None:
            async with EtcdClient(etcd.endpoint) as client: ...
        run(scenario())
"""

from __future__ import annotations

import asyncio
import io
import itertools
import os
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from brook.dev.etcd import EtcdProcess

T = TypeVar("T")
_names = itertools.count()

# Raft timings that let etcd grant 1 s leases (its minimum TTL is 1.5 x the election timeout).
HEARTBEAT_MS = 50
ELECTION_MS = 500


def etcd_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdProcess]:
    root = tmp_path_factory.mktemp("etcd")
    proc = EtcdProcess(
        root / "data", unsafe_no_fsync=True, heartbeat_ms=HEARTBEAT_MS, election_ms=ELECTION_MS
    ).start()
    try:
        yield proc
    finally:
        proc.stop()


def cluster_name(prefix: str = "t") -> str:
    """A cluster name no other test uses (tests share one etcd per module)."""
    return f"{prefix}{os.getpid()}-{next(_names)}"


def run(coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
    """Run an async scenario; past `timeout` fail with the stacks of every task (where it hangs)."""

    async def limited() -> T:
        task = asyncio.create_task(coro)
        done, _ = await asyncio.wait([task], timeout=timeout)
        if not done:
            stacks = io.StringIO()
            for t in asyncio.all_tasks():
                if t is not asyncio.current_task():
                    print(f"{t!r}:", file=stacks)
                    for line in _awaiting(t):
                        print(f"    {line}", file=stacks)
            task.cancel()
            await asyncio.wait([task], timeout=5)
            raise AssertionError(f"scenario did not finish within {timeout}s; tasks:\n{stacks.getvalue()}")
        return task.result()

    return asyncio.run(limited())


_FRAMES = ("cr_frame", "ag_frame", "gi_frame")
_AWAITS = ("cr_await", "ag_await", "gi_yieldfrom")


def _awaiting(task: asyncio.Task[Any]) -> list[str]:
    """Where a task waits: its coroutine and every coroutine it awaits, innermost last (Task's own
    stack shows only the outermost frame of a suspended coroutine)."""
    out: list[str] = []
    obj: Any = task.get_coro()
    for _ in range(40):
        frame = next((getattr(obj, a) for a in _FRAMES if getattr(obj, a, None)), None)
        if frame is None:
            if obj is not None:
                out.append(repr(obj)[:200])
            break
        out.append(f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        obj = next((getattr(obj, a) for a in _AWAITS if getattr(obj, a, None)), None)
    return out


async def eventually(predicate: Any, timeout: float, interval: float = 0.05) -> None:
    """Wait until an (async or sync) predicate is true, or fail."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if loop.time() >= deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)
