"""The seam between the broker and its cluster's metadata: one async surface for one broker or many.

Two implementations, chosen once by Broker at construction: `SingleNodeMetadata` (single_node.py:
meta.json in the data directory; this node is the whole cluster and leads every partition) and
`ClusterNode` (cluster.py: etcd, roles, fetchers, a controller). The broker, its rooms and the handlers
ask the seam and never which one it is; what only a cluster can do (moving partitions) a single node
answers as Kafka does for a one-broker cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

from brook.metadata import AclKey, Reassignment, ScramCredential
from brook.observability import BrokerMetrics
from brook.replication.replica import LeaderAndIsr
from brook.settings.broker import BrokerSettings

from .fetch_sessions import FetchSessionCache
from .replica_manager import ReplicaManager
from .topics import TopicMeta


class LiveBroker(NamedTuple):
    """A live broker as clients are told it: its id, the address of the listener asked about, its rack."""

    node_id: int
    host: str
    port: int
    rack: str | None


class BrokerHost(Protocol):
    """What either implementation needs of its broker (brook.broker.broker.Broker): its settings, logs,
    metrics and fetch sessions, and the hooks through which metadata changes reach the broker's rooms."""

    @property
    def settings(self) -> BrokerSettings: ...
    @property
    def partition_budget(self) -> int: ...
    @property
    def replicas(self) -> ReplicaManager: ...
    @property
    def metrics(self) -> BrokerMetrics: ...
    @property
    def fetch_sessions(self) -> FetchSessionCache: ...
    def apply_broker_configs(self) -> None: ...
    def quotas_changed(self) -> None: ...
    def acls_changed(self) -> None: ...
    def coordinator_partition_loaded(self, topic: str, index: int) -> None: ...
    def coordinator_partition_unloaded(self, topic: str, index: int) -> None: ...


class ClusterMetadata(Protocol):
    """The cluster as this broker sees and changes it. Reads are of the current view (callers do not
    mutate what they get); writes return once this broker's view shows them."""

    @property
    def cluster_id(self) -> str: ...
    @property
    def controller_id(self) -> int: ...
    @property
    def registered(self) -> bool:
        """Whether this broker is a live member (a single node always is)."""
        ...

    @property
    def entity_configs(self) -> Mapping[tuple[str, str], Mapping[str, str]]:
        """Dynamic configs by (kind, name): brokers, groups, client quotas."""
        ...

    @property
    def scram(self) -> Mapping[str, Mapping[str, ScramCredential]]: ...
    @property
    def acls(self) -> Mapping[AclKey, list[dict[str, Any]]]: ...
    @property
    def reassignments(self) -> Mapping[tuple[str, int], Reassignment]:
        """Partitions being moved, by (topic, index): never any on a single node."""
        ...

    def brokers(self, listener: str | None = None) -> list[LiveBroker]: ...
    def partition_state(self, topic: str, index: int) -> LeaderAndIsr: ...
    def offline_partitions(self) -> int:
        """How many partitions have no live leader."""
        ...

    async def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
        validate_only: bool,
        manual: list[list[int]] | None = None,
    ) -> TopicMeta: ...
    async def delete_topic(self, name: str) -> TopicMeta: ...
    async def add_partitions(
        self, name: str, count: int, validate_only: bool, manual: list[list[int]] | None = None
    ) -> None: ...
    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None: ...
    async def set_entity_configs(self, kind: str, name: str, configs: Mapping[str, str]) -> None: ...
    async def set_scram_credentials(self, user: str, credentials: Mapping[str, ScramCredential]) -> None: ...
    async def update_acls(
        self, keys: list[AclKey], change: Callable[[dict[AclKey, list[dict[str, Any]]]], None]
    ) -> None: ...
    async def allocate_producer_id(self) -> int: ...
    async def reassign(self, topic: str, partition: int, target: list[int] | None) -> None:
        """Start (or, with None, cancel) moving a partition to `target` replicas."""
        ...

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def leave(self) -> None:
        """The log directory went offline: stop taking part, so others lead what this broker led."""
        ...

    async def rejoin(self) -> None:
        """The log directory is back (its logs reopened): take part again."""
        ...
