"""This broker's Iceberg writers: one task per partition it leads of a topic with brook.iceberg.enabled.

Once a second the set is reconciled with the partitions hosted here: a writer starts for a partition
that became led (or whose topic turned the table on), and stops when the leadership goes, the topic
turns it off or names another table, or the partition object is replaced (its log reopened). A writer
that stops mid-commit is harmless: the next one starts from what the table records.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from brook.config import TopicConfig
from brook.tasks import cancel_and_wait

from .partition import WrittenPartition
from .ports import IcebergSettings, TableId

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from .avro_values import SchemaLookup
    from .writer import TableWriter

log = logging.getLogger(__name__)

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
        self._catalog: Catalog | None = None
        self._opening = asyncio.Lock()
        self._registry_client: SchemaLookup | None = None
        self._locks: dict[TableId, threading.Lock] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        tasks = [r.task for r in self._running.values()]
        self._running.clear()
        await cancel_and_wait(*([self._task] if self._task else []), *tasks)

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

    async def _open(self) -> Catalog:
        from .catalog import open_catalog  # pyiceberg and pyarrow: ~1.5 s to import, only when used

        async with self._opening:  # once: two SQL catalogs opening at once race to create its tables
            if self._catalog is None:
                self._catalog = await asyncio.to_thread(open_catalog, self.settings, self.data_dir)
            return self._catalog

    def _registry(self) -> SchemaLookup | None:
        from .avro_values import RegistryClient

        url = self.settings.schema_registry_url
        if url is not None and self._registry_client is None:
            self._registry_client = RegistryClient(url)
        return self._registry_client

    async def _write(self, p: WrittenPartition, config: TopicConfig) -> None:
        from .writer import TableWriter, read_committed

        table = TableId.of(p.topic, config)
        interval = config.brook_iceberg_commit_interval_ms / 1000
        writer: TableWriter | None = None
        next_offset: int | None = None
        while True:
            try:
                if writer is None:
                    lock = self._locks.setdefault(table, threading.Lock())
                    writer = TableWriter(await self._open(), table, p.index, config, lock, self._registry())
                if next_offset is None:
                    recorded = await asyncio.to_thread(writer.next_offset)
                    next_offset = p.log.log_start_offset if recorded is None else recorded
                    log.info("%s-%d -> %s: writing from offset %d", p.topic, p.index, table, next_offset)
                chunk = read_committed(p, next_offset)
                if chunk.end > next_offset:
                    if next_offset < p.log.log_start_offset:
                        log.warning(
                            "%s-%d: offsets %d to %d were deleted from the log before reaching %s",
                            p.topic, p.index, next_offset, p.log.log_start_offset - 1, table,
                        )  # fmt: skip
                    next_offset = await asyncio.to_thread(writer.commit, chunk)
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
