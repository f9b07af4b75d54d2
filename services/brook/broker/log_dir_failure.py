"""What the broker does when its log directory goes offline, and how it comes back (Kafka's
ReplicaManager.handleLogDirFailure and LogDirFailureHandler).

A broker has one log directory (`--data-dir`, Kafka's log.dirs), so an offline directory (see
brook.log.dir_health) takes all of its partitions:

- At once, from inside the failed write: each partition fails its waiting acks=all produces with
  KAFKA_STORAGE_ERROR and wakes its waiting fetches; from then on every request for a partition hosted
  here is answered KAFKA_STORAGE_ERROR (ReplicaManager.partition); the group coordinator unloads the
  `__consumer_offsets` partitions led here (clients look for their coordinator again). /readyz says not
  ready and brook_offline_log_directory_count is 1.
- In a cluster, the broker then leaves as a controlled shutdown does (ClusterNode.leave): it resigns as
  controller and deregisters, so the controller elects an in-sync replica on another broker for every
  partition it led and drops it from every ISR; it stops replicating. It keeps watching the metadata,
  so its Metadata answers show the new leaders. (Kafka halts a broker whose last log directory failed;
  Brook stays up to answer, to report it, and to come back.)
- Every probe interval, retention runs (deleting expired segments frees space; deleted topics free
  theirs too) and the directory is probed (enough free space and a small write). Once the probe passes,
  every log is reopened from disk with recovery of its tail (ReplicaManager.reopen_logs): a single node
  leads its partitions again and reloads its groups; a cluster member registers again and follows the
  new leaders through the normal paths (truncation by leader epoch, catching up, back into the ISR).
- A restart does the same: the logs are recovered at start; if opening them fails, the broker starts
  with its directory offline and probes as above.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from brook.groups.coordinator import OFFSETS_TOPIC
from brook.log import LogDirHealth
from brook.metadata import EtcdUnavailableError, MetadataError
from brook.settings.broker import BrokerSettings
from brook.tasks import cancel_and_wait
from brook.transactions import TXN_STATE_TOPIC

from .cluster_metadata import ClusterMetadata
from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)

_REJOIN_BACKOFF_S = 1.0
_STILL_OFFLINE_LOG_S = 60.0  # how often the probe's verdict is logged while offline


class LogDirHost(Protocol):
    """What the handler needs of its broker (brook.broker.broker.Broker): the logs, the cluster
    membership to leave and rejoin, and the coordinators' partitions to unload and load again."""

    @property
    def settings(self) -> BrokerSettings: ...
    @property
    def replicas(self) -> ReplicaManager: ...
    @property
    def metadata(self) -> ClusterMetadata: ...
    def coordinator_partition_loaded(self, topic: str, index: int) -> None: ...
    def coordinator_partition_unloaded(self, topic: str, index: int) -> None: ...


class LogDirFailureHandler:
    def __init__(self, broker: LogDirHost) -> None:
        self._broker = broker
        self._started = False
        self._task: asyncio.Task[None] | None = None
        broker.replicas.log_dir.on_offline(self._failed)

    @property
    def _health(self) -> LogDirHealth:
        return self._broker.replicas.log_dir

    def start(self) -> None:
        """The broker serves: from now on a failure is handled (one that happened while starting, now)."""
        self._started = True
        if self._health.offline:
            self._unload_groups()
            self._spawn()

    async def stop(self) -> None:
        self._started = False
        task, self._task = self._task, None
        await cancel_and_wait(task)

    def _failed(self, health: LogDirHealth) -> None:
        if self._started:
            self._unload_groups()
            self._spawn()

    def _spawn(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._recover(), name="log-dir-recovery")
            self._task.add_done_callback(_report)

    def _coordinator_partitions(self) -> list[tuple[str, int]]:
        return [
            (p.topic, p.index)
            for p in self._broker.replicas.partitions()
            if p.topic in (OFFSETS_TOPIC, TXN_STATE_TOPIC)
        ]

    def _unload_groups(self) -> None:
        for topic, index in self._coordinator_partitions():
            self._broker.coordinator_partition_unloaded(topic, index)

    async def _recover(self) -> None:
        broker, health = self._broker, self._health
        while health.offline:  # it may fail again while coming back: then round again
            await broker.metadata.leave()
            if broker.settings.log_dir_probe_interval_ms < 0:
                log.warning("log directory %s stays offline until the broker restarts", health.path)
                return
            failure = await self._reopen()
            await self._rejoin()
            if health.failure is None:  # (not `offline`: mypy takes that for still True)
                log.warning("log directory %s is back online (it went offline on %s)", health.path, failure)

    async def _reopen(self) -> str | None:
        """Probe until the directory takes writes, then reopen its logs; returns why it was offline."""
        broker, health, settings = self._broker, self._health, self._broker.settings
        loop = asyncio.get_running_loop()
        logged = loop.time()
        while True:
            await asyncio.sleep(settings.log_dir_probe_interval_ms / 1000)
            broker.replicas.apply_retention()  # frees space by itself, offline or not
            why = health.probe(settings.log_dir_min_free_bytes)
            if why is not None:
                if loop.time() - logged >= _STILL_OFFLINE_LOG_S:
                    logged = loop.time()
                    log.warning("log directory %s is still offline: %s", health.path, why)
                continue
            failure = health.failure
            if broker.replicas.reopen_logs():
                return failure
            if loop.time() - logged >= _STILL_OFFLINE_LOG_S:
                logged = loop.time()
                log.warning(
                    "log directory %s is still offline: reopening failed: %s", health.path, health.failure
                )

    async def _rejoin(self) -> None:
        while not self._health.offline:
            try:
                await self._broker.metadata.rejoin()
                return
            except (EtcdUnavailableError, MetadataError) as e:
                log.warning("log directory back online, but registering again failed (%s); retrying", e)
                await asyncio.sleep(_REJOIN_BACKOFF_S)


def _report(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and (e := task.exception()) is not None:
        log.error("bringing the log directory back failed; it stays offline until a restart", exc_info=e)
