"""A controller whose epoch a newer controller took stops its loop quietly: being deposed is part of
the design (an INFO line), not a failed task with a traceback at ERROR."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from brook.broker.controller import Controller
from brook.metadata import FencedError


class Deposed(Controller):
    rounds = 0

    async def reconcile(self) -> None:
        self.rounds += 1
        raise FencedError(self.epoch, self.epoch + 1, 2)

    async def _compact_history(self, every_s: float = 0) -> None:
        await asyncio.Event().wait()


def test_a_fenced_controller_stops_without_an_error(caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> Deposed:
        c = Deposed(view, epoch=7)
        c.start()
        assert c._task is not None
        await asyncio.wait_for(asyncio.shield(c._task), 5)  # the loop ends by itself
        await c.stop()
        return c

    view: Any = object()
    with caplog.at_level(logging.INFO):
        c = asyncio.run(run())
    assert c.rounds == 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert "controller epoch 7 is fenced" in caplog.text
