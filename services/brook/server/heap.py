"""The broker's garbage-collection policy: keep CPython's full collections off the event loop's path.

Start-up leaves ~80,000 objects that live as long as the process (modules, classes, functions,
protocol tables). CPython's automatic full collection visits every one of them: at 20 MB/s into 100
partitions one ran every ~9 s on each broker and held its event loop 40-90 ms, a stall that every
acks=all produce in flight waits out (docs/benchmarks.md, the OMB section's "Garbage collection").

After start-up those objects are frozen out of the collector's reach (`gc.freeze`), so the automatic
passes visit only what the broker made since (1-4 ms). When that set grows large (topics created
later), it is collected and frozen too. A frozen object that later dies in a reference cycle (a
deleted topic's, a removed segment's) is only freed by a pass over everything, so every `full_every_s`
all is unfrozen, collected and frozen again: one full pause then instead of one every few seconds.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

log = logging.getLogger(__name__)

FULL_EVERY_S = 600.0  # a pass over everything, which frees cycles among frozen objects
CHECK_EVERY_S = 30.0
# Unfrozen long-lived objects above this are frozen too (a full pass over 20,000 takes ~10 ms here).
GROWN_OBJECTS = 20_000


def settle(full: bool) -> tuple[int, float]:
    """Collect, then freeze every survivor; `full` first unfreezes, so that the collection sees all.
    Returns the number of frozen objects and the seconds it took."""
    start = time.perf_counter()
    if full:
        gc.unfreeze()
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count(), time.perf_counter() - start


class HeapKeeper:
    """Freezes start-up's objects, then keeps the collector's full passes short for the process's life."""

    def __init__(
        self,
        full_every_s: float = FULL_EVERY_S,
        check_every_s: float = CHECK_EVERY_S,
        grown_objects: int = GROWN_OBJECTS,
    ) -> None:
        self.full_every_s = full_every_s
        self.check_every_s = check_every_s
        self.grown_objects = grown_objects
        self._last_full = time.monotonic()

    def started(self) -> None:
        frozen, took = settle(full=True)
        self._last_full = time.monotonic()
        log.info("froze %d objects left by start-up out of the garbage collector's passes (%.0f ms)",
                 frozen, took * 1000)  # fmt: skip

    def tick(self) -> None:
        """One check: a full pass when it is due, else freeze the long-lived objects made since, if many."""
        if time.monotonic() - self._last_full >= self.full_every_s:
            frozen, took = settle(full=True)
            self._last_full = time.monotonic()
        elif len(gc.get_objects(generation=2)) > self.grown_objects:
            frozen, took = settle(full=False)
        else:
            return
        log.debug("garbage collector: %d objects frozen (%.1f ms)", frozen, took * 1000)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.check_every_s)
            self.tick()
