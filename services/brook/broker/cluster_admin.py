"""Admin changes in a cluster (ClusterNode's part of the ClusterMetadata seam): each is a write to
etcd, answered once this broker's view, fed by its watch, shows the change."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from brook.metadata import (
    AclKey,
    BrokerInfo,
    ConflictError,
    EtcdMetadataStore,
    EtcdUnavailableError,
    PartitionState,
    Reassignment,
    ScramCredential,
    TopicExistsError,
    TopicRecord,
)
from brook.protocol.errors import ErrorCode, KafkaError

from .cluster_metadata import BrokerHost
from .placement import ClusterPlacement
from .topics import TopicMeta

log = logging.getLogger("brook.broker.cluster")

_PID_BLOCK = 1000


def topic_meta(rec: TopicRecord) -> TopicMeta:
    return TopicMeta(rec.name, rec.topic_id, rec.partitions, rec.replication_factor, dict(rec.configs))


class ClusterAdmin:
    """The admin methods of brook.broker.cluster.ClusterNode, over the view it keeps."""

    broker: BrokerHost
    store: EtcdMetadataStore
    live: dict[int, BrokerInfo]
    topics: dict[str, TopicRecord]
    states: dict[tuple[str, int], PartitionState]
    reassignments: dict[tuple[str, int], Reassignment]
    revision: int
    _changed: asyncio.Condition
    _pids: list[int]

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        """Until the view (fed by the watch) satisfies `predicate`."""
        async with self._changed, asyncio.timeout(timeout):
            await self._changed.wait_for(predicate)

    async def wait_revision(self, revision: int, timeout: float = 10.0) -> None:
        """Until the view has seen a write made at `revision` (its first event at least; 0: nothing
        was written)."""
        if revision > 0:
            await self.wait_until(lambda: self.revision >= revision, timeout)

    async def _seen(self, revision: int) -> None:
        """An admin request's write seen here (see _seen_when)."""
        if revision > 0:
            await self._seen_when(lambda: self.revision >= revision)

    async def _seen_when(self, predicate: Callable[[], bool]) -> None:
        """Until the view shows an admin request's write: REQUEST_TIMED_OUT, not a closed connection,
        when the watch lags too long."""
        try:
            await self.wait_until(predicate)
        except TimeoutError:
            raise KafkaError(
                ErrorCode.REQUEST_TIMED_OUT, "the change is written but not yet seen here"
            ) from None

    # -- admin -------------------------------------------------------------------------------------
    async def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
        validate_only: bool,
        manual: list[list[int]] | None = None,
    ) -> TopicMeta:
        n, rf = self.broker.replicas.validate_new_topic(
            name, partitions, replication_factor, configs, brokers=len(self.live)
        )
        assignment = self._placement().new_topic(name, n, rf, manual)
        rec = TopicRecord.new(name, assignment, {k: v for k, v in configs.items() if v is not None})
        if validate_only:
            return topic_meta(rec)
        live = list(self.live)
        states = {i: PartitionState.initial(reps, live) for i, reps in enumerate(rec.assignment)}
        try:
            created = await self.store.create_topic(rec, initial_states=states)
        except TopicExistsError:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic '{name}' already exists") from None
        except EtcdUnavailableError as e:
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"etcd is unavailable: {e}") from None
        # A transaction's events arrive one by one: wait for the partition states, not just the topic.
        await self._seen_when(lambda: all((name, i) in self.states for i in range(n)))
        log.info("created topic %s: %d partitions, replication factor %d", name, n, rf)
        return topic_meta(created)

    async def delete_topic(self, name: str) -> TopicMeta:
        rec = self.topics.get(name)
        if rec is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{name}' does not exist")
        await self.store.delete_topic(name)
        await self._seen_when(lambda: name not in self.topics)
        return topic_meta(rec)

    async def add_partitions(
        self, name: str, count: int, validate_only: bool, manual: list[list[int]] | None = None
    ) -> None:
        self.broker.replicas.check_new_partition_count(name, count)
        rec = self.topics[name]
        extra = self._placement().new_partitions(rec, count, manual)
        if validate_only:
            return
        updated = replace(rec, assignment=rec.assignment + tuple(tuple(r) for r in extra))
        try:
            await self.store.update_topic(updated)
        except ConflictError:
            raise KafkaError(
                ErrorCode.CONCURRENT_TRANSACTIONS, f"topic '{name}' changed meanwhile; retry"
            ) from None
        # The controller writes the new partitions' first states.
        await self._seen_when(lambda: all((name, i) in self.states for i in range(count)))

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        rec = self.topics.get(name)
        if rec is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{name}' does not exist")
        try:
            written = await self.store.update_topic(replace(rec, configs=dict(configs)))
        except ConflictError:
            raise KafkaError(
                ErrorCode.CONCURRENT_TRANSACTIONS, f"topic '{name}' changed meanwhile; retry"
            ) from None
        await self._seen(written.version)

    async def set_entity_configs(self, kind: str, name: str, configs: Mapping[str, str]) -> None:
        try:
            revision = await self.store.put_entity_configs(kind, name, configs)
        except EtcdUnavailableError as e:
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"etcd is unavailable: {e}") from None
        await self._seen(revision)

    async def set_scram_credentials(self, user: str, credentials: Mapping[str, ScramCredential]) -> None:
        try:
            revision = await self.store.put_scram(user, credentials)
        except EtcdUnavailableError as e:
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"etcd is unavailable: {e}") from None
        await self._seen(revision)

    async def update_acls(
        self, keys: list[AclKey], change: Callable[[dict[AclKey, list[dict[str, Any]]]], None]
    ) -> None:
        """Edit the ACLs of `keys` with `change`, applied to what etcd holds (again if they moved)."""
        for _ in range(20):
            try:
                revision = await self.store.update_acls(change, keys)
            except ConflictError:
                continue
            except EtcdUnavailableError as e:
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"etcd is unavailable: {e}") from None
            if revision:
                await self._seen(revision)
            return
        raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, "the ACLs kept changing meanwhile; retry")

    async def allocate_producer_id(self) -> int:
        if not self._pids:
            block = await self.store.allocate_producer_id_block(_PID_BLOCK)
            self._pids = list(range(block.last, block.first - 1, -1))
        return self._pids.pop()

    async def reassign(self, topic: str, partition: int, target: list[int] | None) -> None:
        """Start (or, with None, cancel) moving a partition to `target` replicas."""
        rec = self.topics.get(topic)
        if rec is None or not 0 <= partition < rec.partitions:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} does not exist")
        if target is None:
            if (topic, partition) not in self.reassignments:
                raise KafkaError(
                    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"{topic}-{partition} is not being moved"
                )
            await self.store.delete_reassignment(topic, partition)
            return
        self._placement().check_reassignment(rec, partition, target)
        await self.store.put_reassignment(topic, partition, target)

    def _placement(self) -> ClusterPlacement:
        return ClusterPlacement(self.live, self.topics, self.reassignments)
