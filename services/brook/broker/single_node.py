"""A broker that is its whole cluster: its metadata in `<data_dir>/meta.json` (topics.LocalMetadataStore),
every partition hosted and led here. One implementation of the seam (cluster_metadata.ClusterMetadata);
cluster.py is the other.

meta.json lives in the log directory: its writes run under the directory's guard (refused while it is
offline, and a failed write takes it offline), except where noted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from brook.metadata import AclKey, Reassignment, ScramCredential
from brook.protocol.errors import ErrorCode, KafkaError
from brook.replication.replica import LeaderAndIsr

from .cluster_metadata import BrokerHost, LiveBroker
from .partition_budget import check_budget
from .replica_manager import ReplicaManager
from .topics import LocalMetadataStore, MetadataStore, TopicMeta, new_topic_id

log = logging.getLogger(__name__)


class SingleNodeMetadata:
    def __init__(self, broker: BrokerHost, store: MetadataStore | None = None) -> None:
        self.broker = broker
        self.settings = broker.settings
        self.store = store or LocalMetadataStore(self.settings.data_dir, self.settings.cluster_id)

    @property
    def _replicas(self) -> ReplicaManager:
        return self.broker.replicas

    # -- reads -------------------------------------------------------------------------------------
    @property
    def cluster_id(self) -> str:
        return self.store.cluster_id()

    @property
    def controller_id(self) -> int:
        return self.settings.node_id

    @property
    def registered(self) -> bool:
        return True

    @property
    def entity_configs(self) -> dict[tuple[str, str], dict[str, str]]:
        return self.store.entity_configs()

    @property
    def scram(self) -> dict[str, dict[str, ScramCredential]]:
        return self.store.scram()

    @property
    def acls(self) -> dict[AclKey, list[dict[str, Any]]]:
        return self.store.acls()

    @property
    def reassignments(self) -> dict[tuple[str, int], Reassignment]:
        return {}

    def brokers(self, listener: str | None = None) -> list[LiveBroker]:
        host, port = self.settings.advertised
        for li in self.settings.effective_listeners():
            if li.name == listener:
                host, port = li.advertised_host, li.advertised_port
        return [LiveBroker(self.settings.node_id, host, port, self.settings.rack)]

    def partition_state(self, topic: str, index: int) -> LeaderAndIsr:
        p = self._replicas.local_partition(topic, index)
        if p is None:
            if not self._replicas.hosts(topic, index):
                self._replicas.partition(topic, index)  # raises the right error
            # Not opened: its log directory is offline. This node still leads it (and says
            # KAFKA_STORAGE_ERROR to its requests, which is clearer to clients than no leader).
            node = self.settings.node_id
            return LeaderAndIsr(node, -1, [node], [node])
        role = p.role
        return LeaderAndIsr(role.leader, role.leader_epoch, list(role.replicas), list(role.isr))

    def offline_partitions(self) -> int:
        return 0  # this node leads every partition it has

    # -- topics ------------------------------------------------------------------------------------
    async def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
        validate_only: bool,
        manual: list[list[int]] | None = None,
    ) -> TopicMeta:
        # `manual` was checked by the broker: on one broker it can only say what the counts say.
        n, rf = self._replicas.validate_new_topic(name, partitions, replication_factor, configs)
        self._check_budget(name, n)
        overrides = {k: v for k, v in configs.items() if v is not None}
        if validate_only:
            return TopicMeta(name, bytes(16), n, rf, overrides)
        meta = TopicMeta(name, new_topic_id(), n, rf, overrides)
        self._put_topic(meta)
        self._replicas.apply_topic(meta)
        log.info("created topic %s with %d partitions", name, n)
        return meta

    async def delete_topic(self, name: str) -> TopicMeta:
        # The data first: on a full disk, removing it is what makes room for the metadata write (a crash
        # in between leaves the topic listed, empty).
        if self._replicas.topic(name) is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{name}' does not exist")
        meta = self._replicas.remove_topic(name)
        assert meta is not None
        with self._replicas.log_dir.guard("writing topic metadata for", name, while_offline=True):
            self.store.delete_topic(name)
        log.info("deleted topic %s", name)
        return meta

    async def add_partitions(
        self, name: str, count: int, validate_only: bool, manual: list[list[int]] | None = None
    ) -> None:
        meta = self._replicas.check_new_partition_count(name, count)
        self._check_budget(name, count - meta.partitions)
        if validate_only:
            return
        meta = TopicMeta(meta.name, meta.topic_id, count, meta.replication_factor, dict(meta.configs))
        self._put_topic(meta)
        self._replicas.apply_topic(meta)

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace a topic's config overrides (already validated) and apply them to open logs."""
        meta = self._replicas.topic(name)
        if meta is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{name}' does not exist")
        meta = TopicMeta(meta.name, meta.topic_id, meta.partitions, meta.replication_factor, dict(configs))
        self._put_topic(meta)
        self._replicas.apply_topic(meta)

    def _put_topic(self, meta: TopicMeta) -> None:
        with self._replicas.log_dir.guard("writing topic metadata for", meta.name):
            self.store.put_topic(meta)

    def _check_budget(self, topic: str, adding: int) -> None:
        """This node hosts every partition: the same limit as a cluster's brokers."""
        hosted = sum(meta.partitions for meta in self._replicas.topics().values())
        node = self.settings.node_id
        check_budget(topic, {node: hosted}, [[node]] * adding, {node: self.broker.partition_budget})

    async def reassign(self, topic: str, partition: int, target: list[int] | None) -> None:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "a single broker has nowhere to move partitions")

    # -- configs, credentials, ACLs, producer ids --------------------------------------------------
    async def set_entity_configs(self, kind: str, name: str, configs: Mapping[str, str]) -> None:
        self.store.put_entity_configs(kind, name, dict(configs))
        self.broker.apply_broker_configs()
        self.broker.quotas_changed()

    async def set_scram_credentials(self, user: str, credentials: Mapping[str, ScramCredential]) -> None:
        self.store.put_scram(user, dict(credentials))

    async def update_acls(
        self, keys: list[AclKey], change: Callable[[dict[AclKey, list[dict[str, Any]]]], None]
    ) -> None:
        stored = self.store.acls()
        part = {k: stored.get(k, []) for k in keys}
        change(part)
        with self._replicas.log_dir.guard("writing ACLs to", "meta.json"):
            self.store.put_acls({**stored, **part})
        self.broker.acls_changed()

    async def allocate_producer_id(self) -> int:
        try:
            # From the block in memory; meta.json is written only when a new block is reserved.
            with self._replicas.log_dir.guard("reserving producer ids in", "meta.json", while_offline=True):
                return self.store.allocate_producer_id()
        except KafkaError as e:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, e.message) from e

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        self.broker.apply_broker_configs()
        self.broker.acls_changed()
        self.broker.quotas_changed()
        self._replicas.open(self.store.topics().values())

    async def stop(self) -> None:
        pass

    async def leave(self) -> None:
        pass  # nobody else could lead its partitions

    async def rejoin(self) -> None:
        """The reopened partitions are led here again: the coordinators load theirs."""
        try:
            for p in list(self._replicas.partitions()):
                self.broker.coordinator_partition_loaded(p.topic, p.index)
        except KafkaError as e:  # KAFKA_STORAGE_ERROR: the directory failed again meanwhile
            log.warning("reloading consumer groups failed: %s", e)
