"""FetchWaiter: a long poll woken by its partitions' changes, or by its timeout."""

from __future__ import annotations

import asyncio

from brook.broker.fetch_waiter import FetchWaiter


def test_a_change_before_the_wait_is_returned_at_once() -> None:
    async def main() -> None:
        w: FetchWaiter[str] = FetchWaiter(follower=False)
        w.wake("p0", data=True)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        assert await w.wait(5.0) == {"p0"}
        assert loop.time() - t0 < 0.5
        assert await w.wait(0.01) == set()  # reported once

    asyncio.run(main())


def test_a_change_during_the_wait_ends_it_with_every_partition_woken_meanwhile() -> None:
    async def main() -> None:
        w: FetchWaiter[str] = FetchWaiter(follower=False)
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, w.wake, "p1", True)
        loop.call_later(0.05, w.wake, "p2", False)  # a high watermark move wakes a consumer's fetch
        t0 = loop.time()
        assert await w.wait(5.0) == {"p1", "p2"}
        assert loop.time() - t0 < 1.0

    asyncio.run(main())


def test_a_followers_fetch_is_not_woken_by_a_high_watermark_move() -> None:
    async def main() -> None:
        w: FetchWaiter[str] = FetchWaiter(follower=True)
        w.wake("p0", data=False)
        assert await w.wait(0.05) == set()  # timed out
        w.wake("p0", data=True)
        assert await w.wait(5.0) == {"p0"}

    asyncio.run(main())


def test_a_cancelled_wait_leaves_no_timer_and_the_waiter_usable() -> None:
    async def main() -> None:
        w: FetchWaiter[str] = FetchWaiter(follower=False)
        task = asyncio.ensure_future(w.wait(5.0))
        await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert task.cancelled()
        w.wake("p3", data=True)  # no waiting future: noted for the next wait
        assert await w.wait(0.01) == {"p3"}

    asyncio.run(main())
