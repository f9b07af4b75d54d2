"""The leader's ISR loop outlives a round that fails: a loop that died with one unexpected error
would stop shrinking and expanding the ISRs of every partition the broker leads, for good."""

from __future__ import annotations

import asyncio

import pytest

from brook.broker import cluster
from brook.broker.cluster import ClusterNode


class Rounds:
    def __init__(self) -> None:
        self.calls = 0

    async def _isr_round(self) -> None:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("a bug in one round")
        if self.calls == 3:
            raise asyncio.CancelledError  # the broker stops


def test_a_failed_round_does_not_end_the_loop(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(cluster, "_ISR_CHECK_S", 0.001)
    rounds = Rounds()
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(ClusterNode._isr_loop(rounds))  # type: ignore[arg-type]
    assert rounds.calls == 3
    assert "ISR round failed" in caplog.text
