"""This broker's Iceberg writers: one task per partition it leads of a topic with brook.iceberg.enabled.

Once a second the set is reconciled with the partitions hosted here: a writer starts for a partition
that became led (or whose topic turned the table on), and stops when the leadership goes, the topic
turns it off or names another table, or the partition object is replaced (its log reopened). A writer
that stops mid-commit is harmless: the next one starts from what the table records.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from brook.config import TopicConfig
from brook.tasks import cancel_and_wait

from . import worker
from .chunks import COMMIT_BYTES, Chunk, read_batches
from .partition import WrittenPartition
from .ports import IcebergSettings, TableId

log = logging.getLogger(__name__)
T = TypeVar("T")

RECONCILE_S = 1.0
RETRY_S = 5.0  # after a failed commit (catalog unreachable, a schema that cannot evolve, ...)


@dataclass(slots=True)
class _Running:
    partition: WrittenPartition
    config: TopicConfig
    task: asyncio.Task[None]


class IcebergWriters:
    def __init__(
        self, settings: IcebergSettings, data_dir: Path, partitions: Callable[[], Iterable[WrittenPartition]]
    ) -> None:
        self.settings = settings
        self.data_dir = data_dir
        self._partitions = partitions
        self._running: dict[tuple[str, int], _Running] = {}
        self._pool: ProcessPoolExecutor | None = None  # the worker process, started with the first writer
        self._maintained: dict[TableId, float] = {}  # when each table's hygiene last ran (monotonic)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        tasks = [r.task for r in self._running.values()]
        self._running.clear()
        await cancel_and_wait(*([self._task] if self._task else []), *tasks)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)  # a commit under way finishes
            self._pool = None

    async def _loop(self) -> None:
        while True:
            try:
                self.reconcile()
            except Exception:
                log.exception("reconciling the Iceberg writers failed")
            await asyncio.sleep(RECONCILE_S)

    def reconcile(self) -> None:
        wanted = {
            (p.topic, p.index): p
            for p in self._partitions()
            if p.log.config.brook_iceberg_enabled and p.leads_now
        }
        for key, r in list(self._running.items()):
            p = wanted.get(key)
            if p is not r.partition or p.log.config != r.config or r.task.done():
                r.task.cancel()
                del self._running[key]
        for key, p in wanted.items():
            if key not in self._running:
                task = asyncio.create_task(self._write(p, p.log.config), name=f"iceberg {key[0]}-{key[1]}")
                self._running[key] = _Running(p, p.log.config, task)

    @property
    def writing(self) -> list[tuple[str, int]]:
        return sorted(self._running)

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """fn(*args) in the worker process (started on first use, again after it died)."""
        if self._pool is None:
            spawn = multiprocessing.get_context("spawn")  # nothing of this process's threads inherited
            self._pool = ProcessPoolExecutor(1, mp_context=spawn)
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
        except BrokenProcessPool:
            self._pool = None
            raise

    def _maintenance_due(self, table: TableId, config: TopicConfig) -> bool:
        """Whether this broker's turn of the table's hygiene has come (once per interval; the first an
        interval after the first writer of the table started)."""
        now = time.monotonic()
        last = self._maintained.setdefault(table, now)
        if now - last < config.brook_iceberg_maintenance_interval_ms / 1000:
            return False
        self._maintained[table] = now
        return True

    async def _write(self, p: WrittenPartition, config: TopicConfig) -> None:
        table = TableId.of(p.topic, config)
        level = logging.getLogger().getEffectiveLevel()
        job = worker.Job(self.settings, self.data_dir, table, p.index, config, os.getpid(), level)
        interval = config.brook_iceberg_commit_interval_ms / 1000
        next_offset: int | None = None
        while True:
            try:
                if next_offset is None:
                    recorded = await self._run(worker.next_offset, job)
                    next_offset = p.log.log_start_offset if recorded is None else recorded
                    log.info("%s-%d -> %s: writing from offset %d", p.topic, p.index, table, next_offset)
                chunk = await read_committed(p, next_offset)
                if chunk.end > next_offset:
                    if next_offset < p.log.log_start_offset:
                        log.warning(
                            "%s-%d: offsets %d to %d were deleted from the log before reaching %s",
                            p.topic, p.index, next_offset, p.log.log_start_offset - 1, table,
                        )  # fmt: skip
                    next_offset = await self._run(worker.commit, job, chunk)
                    if self._maintenance_due(table, config):
                        await self._run(worker.maintain, job)
                    if next_offset < p.last_stable_offset:
                        continue  # more than one snapshot's worth waiting: no pause
                await asyncio.sleep(interval)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(
                    "%s-%d: writing to %s failed; retrying in %.0f s", p.topic, p.index, table, RETRY_S
                )
                next_offset = None  # the commit may or may not have happened: the table says
                await asyncio.sleep(RETRY_S)


async def read_committed(p: WrittenPartition, start: int) -> Chunk:
    """The committed batches from `start` up to the last stable offset (at most COMMIT_BYTES), one
    read per turn of the event loop."""
    lso = p.last_stable_offset
    first = max(start, p.log.log_start_offset)  # below it, retention or DeleteRecords removed records
    pos, size, batches = first, 0, []
    while pos < lso and size < COMMIT_BYTES:
        got, pos, n = read_batches(p, pos, lso)
        if not got:
            break
        batches += got
        size += n
        await asyncio.sleep(0)
    return Chunk(start, pos, batches, p.log.aborted_transactions(first, pos) if pos > first else [])
