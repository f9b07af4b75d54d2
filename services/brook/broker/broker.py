"""The broker node: settings, metadata, hosted partitions, and their start/stop lifecycle."""

from __future__ import annotations

from brook.groups import GroupCoordinator

from .offsets_topic import OffsetsTopic
from .replica_manager import ReplicaManager
from .settings import BrokerSettings
from .topics import LocalMetadataStore, MetadataStore, TopicMeta


class Broker:
    def __init__(self, settings: BrokerSettings, store: MetadataStore | None = None) -> None:
        self.settings = settings
        self.store: MetadataStore = store or LocalMetadataStore(settings.data_dir, settings.cluster_id)
        self.replicas = ReplicaManager(settings, self.store)
        self.groups = GroupCoordinator(OffsetsTopic(self), settings.groups)

    @property
    def node_id(self) -> int:
        return self.settings.node_id

    @property
    def cluster_id(self) -> str:
        return self.store.cluster_id()

    @property
    def controller_id(self) -> int:
        return self.settings.node_id

    def brokers(self) -> list[tuple[int, str, int, str | None]]:
        """(node id, host, port, rack) of every live broker."""
        host, port = self.settings.advertised
        return [(self.settings.node_id, host, port, self.settings.rack)]

    def endpoint(self, node_id: int) -> tuple[str, int] | None:
        for n, host, port, _ in self.brokers():
            if n == node_id:
                return host, port
        return None

    def partition_state(self, topic: str, index: int) -> tuple[int, int, list[int], list[int]]:
        """(leader, leader epoch, replicas, ISR) of a partition as clients should see it."""
        role = self.replicas.partition(topic, index).role
        return role.leader, role.leader_epoch, list(role.replicas), list(role.isr)

    def leader_epoch(self, topic: str, index: int) -> int:
        return self.replicas.partition(topic, index).leader_epoch

    def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str | None] | None = None,
    ) -> TopicMeta:
        return self.replicas.create_topic(name, partitions, replication_factor, configs)

    async def append_committed(self, topic: str, index: int, records: memoryview) -> int:
        """Append as the leader and return once the write is committed (acks=all); the base offset."""
        p = self.replicas.partition(topic, index)
        outcome = p.append(records, acks=-1)
        await p.wait_committed(outcome.last_offset, 30.0)
        return outcome.base_offset

    async def start(self) -> None:
        self.replicas.open()
        self.replicas.start_timers()
        self.groups.start()

    async def stop(self) -> None:
        await self.groups.stop()
        await self.replicas.stop()
