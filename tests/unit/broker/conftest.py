"""A fake clock for the replication decisions (broker/partition.py's `_now_ms`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import brook.broker.partition as partition_mod


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000.0

    def __call__(self) -> float:
        return self.ms

    def advance(self, ms: float) -> None:
        self.ms += ms


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    c = Clock()
    monkeypatch.setattr(partition_mod, "_now_ms", c)
    yield c
