"""Background loops outlive a round that fails. A loop that died of one unexpected error stops its
work for good, silently: the leader's ISR changes (acks=all then fails), the view marks (the
broker's fence stays closed), share-group member and lock expiry, the controller election (the broker
could never be controller again)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from brook.broker.view_freshness import ViewMarker
from brook.metadata.election import ControllerElection
from brook.tasks import every


class Rounds:
    """A round that fails the first time and stops the loop (the broker stopping) the third."""

    def __init__(self) -> None:
        self.calls = 0
        self._node_id = self.broker_id = 1
        self._interval_s = 0.001

    async def round(self, *_: object) -> None:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("a bug in one round")
        if self.calls == 3:
            raise asyncio.CancelledError


def _election(r: Rounds) -> Coroutine[Any, Any, None]:
    async def campaign() -> tuple[bool, int]:
        await r.round()
        return False, 0

    async def follow(revision: int) -> None:
        pass

    r._campaign, r._follow = campaign, follow  # type: ignore[attr-defined]
    return ControllerElection._run(r)  # type: ignore[arg-type]


def _every(r: Rounds) -> Coroutine[Any, Any, None]:
    """brook.tasks.every, which the ISR loop, the view marks, the share-group sweep, the replica
    manager's timers (retention, flush, compaction, producer expiry) and the transaction
    coordinator's expiry run on."""
    return every(0.001, r.round, "a duty")


def _every_sync(r: Rounds) -> Coroutine[Any, Any, None]:
    def job() -> None:
        r.calls += 1
        if r.calls == 1:
            raise RuntimeError("a bug in one round")
        if r.calls == 3:
            raise asyncio.CancelledError

    return every(0.001, job, "a duty", first=True)


def _marks(r: Rounds) -> Coroutine[Any, Any, None]:
    r._mark = r.round  # type: ignore[attr-defined]
    return ViewMarker.run(r)  # type: ignore[arg-type]


LOOPS: dict[str, tuple[Callable[[Rounds], Coroutine[Any, Any, None]], str]] = {
    "every, a coroutine": (_every, "a duty failed"),
    "every, a function": (_every_sync, "a duty failed"),
    "view marks": (_marks, "view mark failed"),
    "controller election": (_election, "controller election failed"),
}


@pytest.mark.parametrize("loop", LOOPS)
def test_a_failed_round_does_not_end_the_loop(loop: str, caplog: pytest.LogCaptureFixture) -> None:
    start, logged = LOOPS[loop]
    rounds = Rounds()
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(start(rounds))
    assert rounds.calls == 3
    assert logged in caplog.text
