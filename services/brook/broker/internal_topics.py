"""The coordinators' internal topics (`__consumer_offsets` for groups, `__transaction_state` for
transactions) as each coordinator sees its topic: the partitions this broker leads."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from brook.protocol.batch import LOG_OVERHEAD, peek_offset_and_size
from brook.protocol.errors import ErrorCode, KafkaError
from brook.replication.replica import LeaderAndIsr

from .cluster_metadata import LiveBroker
from .replica_manager import ReplicaManager
from .topics import TopicMeta


class InternalTopicHost(Protocol):
    """What a coordinator's topic needs of its broker (brook.broker.broker.Broker)."""

    @property
    def node_id(self) -> int: ...
    @property
    def replicas(self) -> ReplicaManager: ...
    def brokers(self, listener: str | None = None) -> list[LiveBroker]: ...
    def partition_state(self, topic: str, index: int) -> LeaderAndIsr: ...
    async def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str | None]
    ) -> TopicMeta: ...
    async def append_committed(self, topic: str, index: int, records: memoryview) -> int: ...


_READ_CHUNK = 1024 * 1024


class InternalTopic:
    def __init__(self, broker: InternalTopicHost, name: str) -> None:
        self._broker = broker
        self.name = name

    async def ensure_topic(self, partitions: int, replication_factor: int) -> None:
        # Fewer brokers than the replication factor (a small cluster): use them all rather than leaving
        # groups or transactions without a coordinator.
        rf = max(1, min(replication_factor, len(self._broker.brokers())))
        try:
            await self._broker.create_topic(
                self.name,
                partitions,
                rf,
                {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)},
            )
        except KafkaError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise

    def topic_exists(self, topic: str) -> bool:
        return self._broker.replicas.topic(topic) is not None

    def topic_partitions(self) -> dict[str, tuple[bytes, int]]:
        return {t.name: (t.topic_id, t.partitions) for t in self._broker.replicas.topics().values()}

    def is_local_leader(self, partition: int) -> bool:
        if self._broker.replicas.log_dir.offline:
            return False  # nothing can be loaded from it or written to it
        try:
            return self._broker.partition_state(self.name, partition).leader == self._broker.node_id
        except KafkaError:
            return False

    def leader_epoch(self, partition: int) -> int:
        try:
            return self._broker.partition_state(self.name, partition).leader_epoch
        except KafkaError:
            return -1

    async def append(self, partition: int, batch: bytes) -> None:
        try:
            await self._broker.append_committed(self.name, partition, memoryview(batch))
        except KafkaError as e:
            if e.code != ErrorCode.KAFKA_STORAGE_ERROR:
                raise
            # As Kafka's coordinators: the log is gone from this broker, so is the coordinator.
            raise KafkaError(ErrorCode.NOT_COORDINATOR, e.message) from e

    def read_batches(self, partition: int) -> Iterator[bytes]:
        """Whole batches from the log start to its end, in chunks."""
        plog = self._broker.replicas.partition(self.name, partition).log
        offset = plog.log_start_offset
        while True:
            s = plog.read(offset, _READ_CHUNK)
            if s is None:
                return
            data = s.read()
            pos, end, next_offset = 0, 0, offset
            while pos + LOG_OVERHEAD <= len(data):
                base, size = peek_offset_and_size(data, pos)
                if pos + size > len(data):
                    break
                last_delta = int.from_bytes(data[pos + 23 : pos + 27], "big", signed=True)
                next_offset = base + last_delta + 1
                pos += size
                end = pos
            if end == 0:
                return  # cannot happen with min_one reads; never loop forever
            yield data[:end]
            offset = next_offset
