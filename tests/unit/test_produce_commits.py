"""acks=all in the Produce handler: every partition's commit awaited together with one timer and no
task per partition; a failure or the timeout answers for that partition only, and a request that goes
away leaves no waiter behind."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from brook.handlers.produce import _all_committed
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.produce import PartitionProduceResult


class _Metrics:
    def __init__(self) -> None:
        self.errors: list[int] = []

    def on_error(self, api: Any, _topic: Any, code: int) -> None:
        self.errors.append(code)


class _Broker:
    def __init__(self) -> None:
        self.metrics = _Metrics()


def _results(n: int) -> list[PartitionProduceResult]:
    return [PartitionProduceResult(i, 0, 10 * i, -1, 0) for i in range(n)]


def test_each_partition_answers_for_itself() -> None:
    async def main() -> tuple[list[PartitionProduceResult], _Broker, list[asyncio.Future[None]]]:
        loop = asyncio.get_running_loop()
        futs: list[asyncio.Future[None]] = [loop.create_future() for _ in range(3)]
        out, broker = _results(3), _Broker()
        loop.call_later(0.01, futs[0].set_result, None)
        loop.call_later(
            0.01, futs[1].set_exception, KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, "isr")
        )
        # futs[2] is never resolved: the request's timeout answers for it
        await _all_committed(broker, [(f, out, i) for i, f in enumerate(futs)], 0.2)  # type: ignore[arg-type]
        return out, broker, futs

    out, broker, futs = asyncio.run(main())
    assert [r.error_code for r in out] == [
        0,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ]
    assert out[0].base_offset == 0 and out[1].base_offset == -1 and out[2].base_offset == -1
    assert broker.metrics.errors == [ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT]
    assert futs[2].cancelled()  # forgotten by its partition (its done callback)


def test_a_request_that_goes_away_cancels_its_waiters() -> None:
    async def main() -> list[asyncio.Future[None]]:
        loop = asyncio.get_running_loop()
        futs: list[asyncio.Future[None]] = [loop.create_future() for _ in range(2)]
        futs[0].set_exception(KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "moved"))
        task = loop.create_task(
            _all_committed(_Broker(), [(f, _results(2), i) for i, f in enumerate(futs)], 30)  # type: ignore[arg-type]
        )
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return futs

    futs = asyncio.run(main())
    assert futs[1].cancelled() and futs[0].done()
