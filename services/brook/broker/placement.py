"""Where a cluster's new replicas go: a new topic's, new partitions' and a reassignment's target, over the
live brokers. Kafka's rack-aware placement (brook.metadata.placement) unless the request names the
replicas, then the partition budget (partition_budget.py). Pure: the cluster's view is passed in."""

from __future__ import annotations

from collections.abc import Mapping

from brook.metadata import BrokerInfo, PlacementError, Reassignment, TopicRecord, assign_replicas
from brook.protocol.errors import ErrorCode, KafkaError

from .partition_budget import check_cluster_budget


class ClusterPlacement:
    """Placement decisions against one view of the cluster (its live brokers, topics, reassignments)."""

    def __init__(
        self,
        live: Mapping[int, BrokerInfo],
        topics: Mapping[str, TopicRecord],
        reassignments: Mapping[tuple[str, int], Reassignment],
    ) -> None:
        self.live, self.topics, self.reassignments = live, topics, reassignments

    def new_topic(
        self, name: str, partitions: int, rf: int, manual: list[list[int]] | None
    ) -> list[list[int]]:
        """Replicas of a new topic's partitions: rack-aware when every live broker has a rack."""
        racks = [(b.broker_id, b.rack) for b in self._brokers()]
        if any(r is None for _, r in racks):
            racks = [(i, None) for i, _ in racks]
        try:
            assignment = manual if manual is not None else assign_replicas(racks, partitions, rf)
        except PlacementError as e:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, str(e)) from None
        check_cluster_budget(name, assignment, self.topics, self.reassignments, self.live)
        return assignment

    def new_partitions(self, rec: TopicRecord, count: int, manual: list[list[int]] | None) -> list[list[int]]:
        """Replicas of the partitions CreatePartitions adds to `rec` (up to `count` in all)."""
        racks = [(b.broker_id, None) for b in self._brokers()]
        try:
            extra = manual or assign_replicas(racks, count, rec.replication_factor)[rec.partitions :]
        except PlacementError as e:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, str(e)) from None
        check_cluster_budget(rec.name, extra, self.topics, self.reassignments, self.live)
        return extra

    def check_reassignment(self, rec: TopicRecord, partition: int, target: list[int]) -> None:
        """A reassignment's target: distinct live brokers with room for the replicas it adds."""
        if not target or len(set(target)) != len(target):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"replicas {target} are empty or repeat a broker"
            )
        unknown = [b for b in target if b not in self.live]
        if unknown:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"brokers {unknown} are not live")
        adding = [[b for b in target if b not in rec.assignment[partition]]]
        check_cluster_budget(rec.name, adding, self.topics, self.reassignments, self.live)

    def _brokers(self) -> list[BrokerInfo]:
        return sorted(self.live.values(), key=lambda b: b.broker_id)
