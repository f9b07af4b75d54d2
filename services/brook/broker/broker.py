"""The broker node: settings, metadata, hosted partitions, groups, and their start/stop lifecycle.

Metadata (topics, partition states, configs, credentials, ACLs, producer ids) is `metadata`, the seam
of cluster_metadata.py, chosen here once: SingleNodeMetadata (meta.json) or ClusterNode (etcd).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from brook.config import topic_defaults_of
from brook.groups import GroupCoordinator
from brook.groups.coordinator import OFFSETS_TOPIC
from brook.iceberg.writers import IcebergWriters
from brook.metadata import AclKey, ScramCredential
from brook.observability import BrokerMetrics
from brook.protocol.errors import ErrorCode, KafkaError
from brook.replication.replica import LeaderAndIsr
from brook.security.acls import table_from_stored
from brook.security.authorizer import Authorizer
from brook.security.connection_limits import raise_open_file_limit
from brook.security.oauthbearer import TokenValidator
from brook.security.quotas import ClientQuotas
from brook.settings.broker import BrokerSettings
from brook.share import ShareCoordinator
from brook.transactions import TXN_STATE_TOPIC, TransactionCoordinator

from .cluster import ClusterNode
from .cluster_metadata import ClusterMetadata, LiveBroker
from .fetch_sessions import FetchSessionCache
from .internal_topics import InternalTopic
from .log_dir_failure import LogDirFailureHandler
from .partition_budget import partition_budget
from .replica_manager import ReplicaManager
from .share_offsets import ShareOffsets
from .share_state import SHARE_STATE_TOPIC, ShareStateTopic, share_settings, share_timings
from .single_node import SingleNodeMetadata
from .topics import MetadataStore, TopicMeta, assignment_error
from .txn_markers import TxnMarkerWriter
from .txn_verification import TxnVerifier


class Broker:
    def __init__(self, settings: BrokerSettings, store: MetadataStore | None = None) -> None:
        self.settings = settings
        self.metrics = BrokerMetrics()
        # Raised here already (the listener does it too) so the budget reflects the limit in force.
        self.partition_budget = partition_budget(settings.max_broker_partitions, raise_open_file_limit())
        self.replicas: ReplicaManager = ReplicaManager(settings)
        self.metadata: ClusterMetadata = (
            ClusterNode(self) if settings.etcd_endpoints else SingleNodeMetadata(self, store)
        )
        self.groups = GroupCoordinator(InternalTopic(self, OFFSETS_TOPIC), settings.groups)
        self.transactions = TransactionCoordinator(
            InternalTopic(self, TXN_STATE_TOPIC),
            TxnMarkerWriter(self),
            self.allocate_producer_id,
            settings.transactions,
        )
        self.txn_verifier = TxnVerifier(self)  # KIP-890, for the partitions this broker leads
        state_topic = InternalTopic(self, SHARE_STATE_TOPIC)
        self._share_state = ShareStateTopic(self, state_topic)
        self.share = ShareCoordinator(
            self._share_state,
            lambda group_id: share_settings(self.entity_configs("group", group_id)),
            state_topic.topic_partitions,
            lambda group_id: share_timings(self.entity_configs("group", group_id)),
        )
        # Share groups are records in __consumer_offsets: written and replayed by its coordinator.
        self.share.groups.write = self.groups.write_records
        self.groups.share_groups = self.share.groups
        self.share_offsets = ShareOffsets(self)  # the coordinator's reach to other leaders' share state
        self.log_dir_failure = LogDirFailureHandler(self)
        self.iceberg = IcebergWriters(settings.iceberg, settings.data_dir, self.replicas.partitions)
        self.authorizer = Authorizer(settings.authorizer)
        self.quotas = ClientQuotas(settings.quotas)
        # OAUTHBEARER's token validator (its JWKS refreshed in the background), when the mechanism is on.
        self.tokens = (
            TokenValidator(settings.sasl.oauth) if "OAUTHBEARER" in settings.sasl.enabled_mechanisms else None
        )
        self.fetch_sessions = FetchSessionCache()

    @property
    def node_id(self) -> int:
        return self.settings.node_id

    @property
    def cluster_id(self) -> str:
        return self.metadata.cluster_id

    @property
    def controller_id(self) -> int:
        return self.metadata.controller_id

    def brokers(self, listener: str | None = None) -> list[LiveBroker]:
        """(node id, host, port, rack) of every live broker, as advertised on `listener` (clients are
        answered with the addresses of the listener they came in on); None: the inter-broker one."""
        return self.metadata.brokers(listener)

    def endpoint(self, node_id: int, listener: str | None = None) -> tuple[str, int] | None:
        for n, host, port, _ in self.brokers(listener):
            if n == node_id:
                return host, port
        return None

    def partition_state(self, topic: str, index: int) -> LeaderAndIsr:
        """(leader, leader epoch, replicas, ISR) of a partition as clients should see it."""
        return self.metadata.partition_state(topic, index)

    def leader_epoch(self, topic: str, index: int) -> int:
        return self.partition_state(topic, index).leader_epoch

    # -- admin -------------------------------------------------------------------------------------
    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
        validate_only: bool = False,
        assignment: list[list[int]] | None = None,
    ) -> TopicMeta:
        """Create a topic; `assignment` (replicas of each partition) replaces the counts when given."""
        if assignment is not None:
            self._check_assignment(assignment)
            partitions, replication_factor = len(assignment), len(assignment[0])
        return await self.metadata.create_topic(
            name, partitions, replication_factor, configs or {}, validate_only, assignment
        )

    async def delete_topic(self, name: str) -> TopicMeta:
        meta = await self.metadata.delete_topic(name)
        self.metrics.forget_topic(name)
        return meta

    async def add_partitions(
        self, name: str, count: int, validate_only: bool = False, assignment: list[list[int]] | None = None
    ) -> None:
        """Grow a topic to `count` partitions; `assignment`: the new partitions' replicas."""
        if assignment is not None:
            meta = self.replicas.check_new_partition_count(name, count)
            if len(assignment) != count - meta.partitions:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"{count - meta.partitions} partitions are added but {len(assignment)} assignments given",
                )
            self._check_assignment(assignment, meta.replication_factor)
        await self.metadata.add_partitions(name, count, validate_only, assignment)

    def _check_assignment(self, assignment: list[list[int]], replication_factor: int = -1) -> None:
        live = {n for n, *_ in self.brokers()}
        if not assignment or (err := assignment_error(assignment, live, replication_factor)) is not None:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, err or "the manual assignment is empty")

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        await self.metadata.set_topic_configs(name, configs)

    def entity_configs(self, kind: str, name: str) -> dict[str, str]:
        """The dynamic configs of a broker (name: its id, "" for the cluster-wide ones) or a group."""
        return dict(self.metadata.entity_configs.get((kind, name), {}))

    async def set_entity_configs(self, kind: str, name: str, configs: Mapping[str, str]) -> None:
        """Replace an entity's dynamic configs (already validated); this broker applies its own."""
        await self.metadata.set_entity_configs(kind, name, configs)

    def apply_broker_configs(self) -> None:
        """Topic defaults from the dynamic broker configs: this broker's over the cluster-wide ones."""
        everyone, mine = self.entity_configs("broker", ""), self.entity_configs("broker", str(self.node_id))
        self.replicas.set_dynamic_topic_defaults(topic_defaults_of(everyone, mine))

    def scram_credentials(self) -> dict[str, dict[str, ScramCredential]]:
        """SCRAM credentials by user, then mechanism name."""
        return {u: dict(c) for u, c in self.metadata.scram.items()}

    async def set_scram_credentials(self, user: str, credentials: Mapping[str, ScramCredential]) -> None:
        await self.metadata.set_scram_credentials(user, credentials)

    def all_entity_configs(self) -> dict[tuple[str, str], dict[str, str]]:
        """Every entity's dynamic configs by (kind, name): brokers, groups, client quotas."""
        return {k: dict(c) for k, c in self.metadata.entity_configs.items()}

    def quotas_changed(self) -> None:
        """The stored client quotas changed (or were loaded): enforce the new ones."""
        stored = self.all_entity_configs()
        self.quotas.set_configs({name: c for (kind, name), c in stored.items() if kind == "quota"})

    def acls_changed(self) -> None:
        """The stored ACLs changed (or were loaded): the authorizer decides by the new ones."""
        self.authorizer.set_acls(table_from_stored(self.metadata.acls))

    async def update_acls(
        self, keys: list[AclKey], change: Callable[[dict[AclKey, list[dict[str, Any]]]], None]
    ) -> None:
        """Edit the stored ACL entries of `keys` (resource patterns) in place with `change`."""
        await self.metadata.update_acls(keys, change)

    async def allocate_producer_id(self) -> int:
        return await self.metadata.allocate_producer_id()

    async def append_committed(self, topic: str, index: int, records: memoryview) -> int:
        """Append as the leader and return once the write is committed (acks=all); the base offset."""
        p = self.replicas.partition(topic, index)
        outcome = p.append(records, acks=-1)
        await p.wait_committed(outcome.last_offset, p.leader_epoch, 30.0)
        return outcome.base_offset

    def coordinator_partition_loaded(self, topic: str, index: int) -> None:
        """This broker now leads a partition of a coordinator's topic: the coordinator loads it."""
        if topic == OFFSETS_TOPIC:
            self.groups.load_partition(index)
        elif topic == TXN_STATE_TOPIC:
            self.transactions.load_partition(index)

    def coordinator_partition_unloaded(self, topic: str, index: int) -> None:
        if topic == OFFSETS_TOPIC:
            self.groups.unload_partition(index)
        elif topic == TXN_STATE_TOPIC:
            self.transactions.unload_partition(index)

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        await self.metadata.start()
        self.replicas.start_timers()
        self.groups.start()
        self.share.start()
        self.transactions.start()
        self.log_dir_failure.start()
        self.iceberg.start()
        if self.tokens is not None:
            await self.tokens.start()

    async def stop(self) -> None:
        await self.iceberg.stop()
        if self.tokens is not None:
            await self.tokens.stop()
        await self.log_dir_failure.stop()
        await self.metadata.stop()  # in a cluster, a controlled shutdown: leaderships move first
        await self.transactions.stop()
        self.txn_verifier.close()
        await self.share.stop()
        self._share_state.close()
        self.share_offsets.close()
        await self.groups.stop()
        await self.replicas.stop()
