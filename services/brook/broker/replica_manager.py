"""The partitions this broker hosts: opening their logs, topic lifecycle, retention and flush timers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from brook.config import TopicConfig, validate_topic_config
from brook.log import PartitionLog
from brook.protocol.errors import ErrorCode, KafkaError

from .partition import Partition
from .settings import BrokerSettings
from .topics import MetadataStore, TopicMeta, new_topic_id, topic_name_error

log = logging.getLogger(__name__)


class ReplicaManager:
    def __init__(self, settings: BrokerSettings, store: MetadataStore) -> None:
        self.settings = settings
        self.store = store
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._topics: dict[str, TopicMeta] = {}
        self._by_id: dict[bytes, TopicMeta] = {}
        self._tasks: list[asyncio.Task[None]] = []

    # -- lifecycle ---------------------------------------------------------------------------------
    def open(self) -> None:
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        for meta in self.store.topics().values():
            self._open_topic(meta)
        self._remove_deleted_dirs()

    def start_timers(self) -> None:
        s = self.settings
        for interval_ms, fn in (
            (s.retention_check_interval_ms, self.apply_retention),
            (s.flush_check_interval_ms, self.flush_due),
            (s.cleaner_backoff_ms, self.compact_due),
        ):
            self._tasks.append(asyncio.create_task(self._every(interval_ms, fn)))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks.clear()
        for p in self._partitions.values():
            p.wake_fetchers()
            p.log.close()
        self._partitions.clear()

    async def _every(self, interval_ms: int, fn: Callable[[], object]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                fn()
            except Exception:
                log.exception("periodic task %s failed", getattr(fn, "__name__", fn))

    # -- lookups -----------------------------------------------------------------------------------
    def topics(self) -> dict[str, TopicMeta]:
        return dict(self._topics)

    def topic(self, name: str) -> TopicMeta | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: bytes) -> TopicMeta | None:
        return self._by_id.get(topic_id)

    def partition(self, topic: str, index: int) -> Partition:
        p = self._partitions.get((topic, index))
        if p is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{index} is not hosted here")
        return p

    def partitions(self) -> Iterable[Partition]:
        return self._partitions.values()

    def topic_config(self, meta: TopicMeta) -> TopicConfig:
        return TopicConfig.from_strings(meta.configs, self.settings.topic_defaults)

    # -- topic lifecycle ---------------------------------------------------------------------------
    def validate_new_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str | None]
    ) -> tuple[int, int]:
        """Check a CreateTopics entry; returns (partitions, replication factor) with defaults applied."""
        if (err := topic_name_error(name)) is not None:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, err)
        if name in self._topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic '{name}' already exists")
        n = self.settings.num_partitions if partitions == -1 else partitions
        rf = self.settings.default_replication_factor if replication_factor == -1 else replication_factor
        if n <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"number of partitions must be positive, got {n}")
        if rf <= 0:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR, f"replication factor must be positive, got {rf}"
            )
        if rf > 1:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {rf} is larger than the number of brokers (1)",
            )
        for key, value in configs.items():
            if (err := validate_topic_config(key, value)) is not None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, err)
        return n, rf

    def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
    ) -> TopicMeta:
        configs = dict(configs or {})
        n, rf = self.validate_new_topic(name, partitions, replication_factor, configs)
        meta = TopicMeta(name, new_topic_id(), n, rf, {k: v for k, v in configs.items() if v is not None})
        self.store.put_topic(meta)
        self._open_topic(meta)
        log.info("created topic %s with %d partitions", name, n)
        return meta

    def delete_topic(self, name: str) -> TopicMeta:
        meta = self._topics.get(name)
        if meta is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{name}' does not exist")
        self.store.delete_topic(name)
        del self._topics[name]
        self._by_id.pop(meta.topic_id, None)
        for i in range(meta.partitions):
            p = self._partitions.pop((name, i), None)
            if p is not None:
                p.wake_fetchers()
                p.log.close()
                # Rename first so a topic re-created with the same name never sees the old files.
                tomb = p.log.directory.with_name(f"{p.log.directory.name}.{uuid.uuid4().hex}-delete")
                p.log.directory.rename(tomb)
        self._remove_deleted_dirs()
        log.info("deleted topic %s", name)
        return meta

    def add_partitions(self, name: str, count: int, validate_only: bool = False) -> None:
        meta = self._topics.get(name)
        if meta is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{name}' does not exist")
        if count <= meta.partitions:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"topic '{name}' has {meta.partitions} partitions; the new count must be larger, got {count}",
            )
        if validate_only:
            return
        meta = TopicMeta(meta.name, meta.topic_id, count, meta.replication_factor, dict(meta.configs))
        self.store.put_topic(meta)
        self._open_topic(meta)

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace a topic's config overrides (already validated) and apply them to open logs."""
        meta = self._topics.get(name)
        if meta is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{name}' does not exist")
        meta = TopicMeta(meta.name, meta.topic_id, meta.partitions, meta.replication_factor, dict(configs))
        self.store.put_topic(meta)
        self._open_topic(meta)

    def _open_topic(self, meta: TopicMeta) -> None:
        self._topics[meta.name] = meta
        self._by_id[meta.topic_id] = meta
        config = self.topic_config(meta)
        for i in range(meta.partitions):
            existing = self._partitions.get((meta.name, i))
            if existing is not None:
                existing.log.update_config(config)
                continue
            plog = PartitionLog.open(self._partition_dir(meta.name, i), config)
            self._partitions[(meta.name, i)] = Partition(meta.name, i, plog, self.settings.node_id)

    def _partition_dir(self, topic: str, index: int) -> Path:
        return self.settings.data_dir / f"{topic}-{index}"

    def _remove_deleted_dirs(self) -> None:
        for d in self.settings.data_dir.glob("*-delete"):
            shutil.rmtree(d, ignore_errors=True)

    # -- housekeeping ------------------------------------------------------------------------------
    def apply_retention(self) -> int:
        deleted = 0
        for p in list(self._partitions.values()):
            deleted += p.log.apply_retention()
        return deleted

    def compact_due(self) -> int:
        """One cleaner pass over compacted partitions whose dirty ratio (or a tombstone) is due."""
        cleaned = 0
        for p in list(self._partitions.values()):
            if p.log.config.compacted and p.log.compaction_due():
                stats = p.log.compact()
                cleaned += stats.segments_cleaned
                if stats.records_removed:
                    log.info(
                        "compacted %s-%d: %d records removed, %d -> %d bytes",
                        p.topic,
                        p.index,
                        stats.records_removed,
                        stats.bytes_before,
                        stats.bytes_after,
                    )
        return cleaned

    def flush_due(self) -> None:
        # Appends check flush.messages and flush.ms themselves; this catches partitions that went quiet.
        for p in self._partitions.values():
            p.log.flush_if_due()
