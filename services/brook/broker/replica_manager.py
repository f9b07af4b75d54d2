"""The partitions this broker hosts: opening their logs, topic lifecycle, retention and flush timers.

All of them live in one log directory (`data_dir`), whose health (brook.log.dir_health) is `log_dir`:
while it is offline, every request for a partition hosted here is answered KAFKA_STORAGE_ERROR, and
`reopen_logs` brings the partitions back (see log_dir_failure.py).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

from brook.config import TopicConfig, validate_topic_config
from brook.log import LogDirHealth, PartitionLog
from brook.log.checkpoint import fsync_dir
from brook.protocol.errors import ErrorCode, KafkaError
from brook.settings.broker import BrokerSettings
from brook.tasks import cancel_and_wait, every

from .leader_fence import LeaderFence
from .partition import Partition
from .topics import TopicMeta, topic_name_error

log = logging.getLogger(__name__)


class ReplicaManager:
    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._topics: dict[str, TopicMeta] = {}
        self._by_id: dict[bytes, TopicMeta] = {}
        self._tasks: list[asyncio.Task[None]] = []
        # Per topic, the partitions hosted here (None: all of them, a single node's own topics).
        self._local: dict[str, frozenset[int] | None] = {}
        self.log_dir = LogDirHealth(settings.data_dir)
        self.log_dir.on_offline(self._log_dir_failed)
        self._dynamic_defaults: dict[str, str] = {}  # topic defaults set by dynamic broker configs
        # Led partitions the ISR loop must look at (see Partition.isr_settled), and a count of changes to
        # the set of topics and partitions hosted here (fetch sessions walk all theirs again after one).
        self.isr_due: set[Partition] = set()
        self.fence = LeaderFence()  # bound to the etcd lease in a cluster (ClusterNode)
        self.generation = 0

    # -- lifecycle ---------------------------------------------------------------------------------
    def open(self, topics: Iterable[TopicMeta]) -> None:
        """Open the whole of every topic: a single node's (a cluster opens what etcd assigns it instead)."""
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        for meta in topics:
            self.apply_topic(meta)
        self._remove_deleted_dirs()

    def start_timers(self) -> None:
        s = self.settings
        for interval_ms, fn in (
            (s.retention_check_interval_ms, self.apply_retention),
            (s.flush_check_interval_ms, self.flush_due),
            (s.cleaner_backoff_ms, self.compact_due),
            (s.producer_id_expiration_check_interval_ms, self.expire_producers),
        ):
            self._tasks.append(asyncio.create_task(every(interval_ms / 1000, fn, fn.__name__)))

    async def stop(self) -> None:
        await cancel_and_wait(*self._tasks)
        self._tasks.clear()
        for p in self._partitions.values():
            p.wake_fetchers()
            p.close()  # with a producer-state snapshot at its log end
        self._partitions.clear()

    def expire_producers(self) -> None:
        """Forget, in every partition hosted here, the producers idle for producer.id.expiration.ms."""
        now = int(time.time() * 1000)
        max_idle = self.settings.producer_id_expiration_ms
        gone = sum(p.producers.expire(now, max_idle) for p in self._partitions.values())
        if gone:
            log.info(
                "forgot %d producer ids idle for %d ms or more (producer.id.expiration.ms)",
                gone,
                max_idle,
            )

    # -- lookups -----------------------------------------------------------------------------------
    def topics(self) -> dict[str, TopicMeta]:
        return dict(self._topics)

    def topic(self, name: str) -> TopicMeta | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: bytes) -> TopicMeta | None:
        return self._by_id.get(topic_id)

    def partition(self, topic: str, index: int) -> Partition:
        p = self._partitions.get((topic, index))
        if self.log_dir.offline and (p is not None or self.hosts(topic, index)):
            self.log_dir.check()
        if p is None:
            meta = self._topics.get(topic)
            if meta is not None and 0 <= index < meta.partitions:
                raise KafkaError(
                    ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic}-{index} has no replica on this broker"
                )
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{index} does not exist")
        return p

    def hosts(self, topic: str, index: int) -> bool:
        """Whether a replica of the partition belongs here (open or not: its directory may be offline)."""
        meta = self._topics.get(topic)
        if meta is None or not 0 <= index < meta.partitions:
            return False
        local = self._local.get(topic)
        return local is None or index in local

    def local_partition(self, topic: str, index: int) -> Partition | None:
        return self._partitions.get((topic, index))

    def partitions(self) -> Iterable[Partition]:
        return self._partitions.values()

    @property
    def topic_defaults(self) -> dict[str, str]:
        """Broker-wide topic config defaults: dynamic ones over --topic-default ones."""
        return {**self.settings.topic_defaults, **self._dynamic_defaults}

    def topic_config(self, meta: TopicMeta) -> TopicConfig:
        return TopicConfig.from_strings(meta.configs, self.topic_defaults)

    def set_dynamic_topic_defaults(self, defaults: Mapping[str, str]) -> None:
        """Topic defaults from dynamic broker configs; open logs take the new effective configs."""
        if dict(defaults) == self._dynamic_defaults:
            return
        self._dynamic_defaults = dict(defaults)
        for p in self._partitions.values():
            meta = self._topics.get(p.topic)
            if meta is not None:
                p.log.update_config(self.topic_config(meta))

    # -- topic lifecycle ---------------------------------------------------------------------------
    def validate_new_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
        brokers: int = 1,
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
        if rf > brokers:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {rf} is larger than the number of brokers ({brokers})",
            )
        for key, value in configs.items():
            if (err := validate_topic_config(key, value)) is not None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, err)
        return n, rf

    def apply_topic(
        self,
        meta: TopicMeta,
        local: Iterable[int] | None = None,
        max_open: int | None = None,
        sync: bool = True,
    ) -> list[Partition]:
        """Make this broker's copy of a topic match `meta`: the partitions in `local` (all when None) are
        open here, others are closed and their data removed. Returns the partitions opened now: at most
        `max_open` (opening a log takes milliseconds; the caller repeats until fewer were opened).
        sync=False leaves the fsync of new directories to the caller (`sync_dirs`, off the loop)."""
        self._topics[meta.name] = meta
        self._by_id[meta.topic_id] = meta
        self._local[meta.name] = None if local is None else frozenset(local)
        config = self.topic_config(meta)
        wanted = set(range(meta.partitions) if local is None else local)
        opened: list[Partition] = []
        for i in sorted(wanted):
            existing = self._partitions.get((meta.name, i))
            if existing is not None:
                existing.log.update_config(config)
                continue
            if max_open is not None and len(opened) >= max_open:
                continue
            plog = self._open_log(meta.name, i, config, sync)
            if plog is None:
                continue  # opened by reopen_logs once the log directory takes writes again
            p = Partition(meta.name, i, plog, self.settings.node_id, local is None, self.isr_due, self.fence)
            self._partitions[(meta.name, i)] = p
            opened.append(p)
        for topic, i in [k for k in self._partitions if k[0] == meta.name and k[1] not in wanted]:
            self._drop(topic, i)
        self.generation += 1
        return opened

    def _open_log(self, topic: str, index: int, config: TopicConfig, sync: bool) -> PartitionLog | None:
        """The partition's log, or None while the log directory is offline (opening may fail it)."""
        directory = self._partition_dir(topic, index)
        try:
            return PartitionLog.open(directory, config, health=self.log_dir, sync=sync)
        except KafkaError:
            if self.log_dir.offline:
                return None
            raise

    def sync_dirs(self, partitions: Iterable[Partition]) -> None:
        """fsync the directories of partitions opened with sync=False, and the log directory that holds
        their names. File system calls only, for a worker thread: the caller hands an OSError to
        `log_dir.fail` on the loop."""
        dirs = [p.log.directory for p in partitions]
        for d in [*dirs, self.settings.data_dir] if dirs else []:
            fsync_dir(d)

    def remove_topic(self, name: str) -> TopicMeta | None:
        meta = self._topics.pop(name, None)
        self._local.pop(name, None)
        if meta is not None:
            self._by_id.pop(meta.topic_id, None)
        for topic, i in [k for k in self._partitions if k[0] == name]:
            self._drop(topic, i)
        self._remove_deleted_dirs()
        self.generation += 1
        return meta

    def _drop(self, topic: str, index: int) -> None:
        p = self._partitions.pop((topic, index))
        p.become_follower(p.role)  # fails waiting produces
        p.log.close()
        # Rename first so a topic re-created with the same name never sees the old files.
        tomb = p.log.directory.with_name(f"{p.log.directory.name}.{uuid.uuid4().hex}-delete")
        try:
            p.log.directory.rename(tomb)
        except OSError as e:  # e.g. a full disk with no room for a longer name: remove it in place
            log.warning("%s: renaming for deletion failed (%s); removing it in place", p.log.directory, e)
            shutil.rmtree(p.log.directory, ignore_errors=True)
        self._remove_deleted_dirs()

    def check_new_partition_count(self, name: str, count: int) -> TopicMeta:
        meta = self._topics.get(name)
        if meta is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{name}' does not exist")
        if count <= meta.partitions:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"topic '{name}' has {meta.partitions} partitions; the new count must be larger, got {count}",
            )
        return meta

    def _partition_dir(self, topic: str, index: int) -> Path:
        return self.settings.data_dir / f"{topic}-{index}"

    def _remove_deleted_dirs(self) -> None:
        for d in self.settings.data_dir.glob("*-delete"):
            shutil.rmtree(d, ignore_errors=True)

    # -- housekeeping ------------------------------------------------------------------------------
    def apply_retention(self) -> int:
        """Delete expired segments (also while the log directory is offline: that frees space)."""
        deleted = 0
        for p in list(self._partitions.values()):
            try:
                deleted += p.apply_retention()
            except KafkaError:
                continue  # KAFKA_STORAGE_ERROR: the directory failed, and said so once
        return deleted

    def compact_due(self) -> int:
        """One cleaner pass over compacted partitions whose dirty ratio (or a tombstone) is due."""
        cleaned = 0
        for p in list(self._partitions.values()):
            if p.log.config.compacted and p.log.compaction_due():
                try:
                    stats = p.log.compact(max_offset=p.last_stable_offset)
                except KafkaError:
                    if self.log_dir.offline:
                        return cleaned  # the directory failed, and said so once
                    raise
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
            if self.log_dir.offline:
                return  # nothing is written there any more
            try:
                p.log.flush_if_due()
            except KafkaError:
                return  # KAFKA_STORAGE_ERROR: the directory failed, and said so once

    # -- log directory failure ---------------------------------------------------------------------
    def _log_dir_failed(self, health: LogDirHealth) -> None:
        for p in self._partitions.values():
            p.log_dir_failed()

    def reopen_logs(self) -> bool:
        """The log directory takes writes again: open every hosted log afresh from disk (recovery
        re-validates its tail; producer state and leader epochs are rebuilt from it) and replace the
        partitions with new ones, each in its initial role (a single node leads them; in a cluster,
        roles are applied next). False when opening failed (the directory is offline again)."""
        fresh: dict[tuple[str, int], Partition] = {}
        try:
            with self.log_dir.reopening():
                for name, meta in self._topics.items():
                    local = self._local.get(name)
                    config = self.topic_config(meta)
                    for i in range(meta.partitions) if local is None else sorted(local):
                        plog = PartitionLog.open(self._partition_dir(name, i), config, health=self.log_dir)
                        p = Partition(
                            name, i, plog, self.settings.node_id, local is None, self.isr_due, self.fence,
                            log_first_role=True,
                        )  # fmt: skip
                        fresh[(name, i)] = p
        except BaseException as e:
            for p in fresh.values():
                p.log.release()
            if isinstance(e, KafkaError) and e.code == ErrorCode.KAFKA_STORAGE_ERROR:
                return False  # offline again
            raise
        # The old logs' state is stale: let go of their files without writing anything.
        for p in self._partitions.values():
            p.log_dir_failed()
            p.log.release()
        self._partitions = fresh
        self.generation += 1
        return True
