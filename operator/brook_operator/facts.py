"""Plain facts observed from a Brook cluster over the Kafka protocol (no client types leak out).

`kafka_admin` produces them; `status`, `rolling`, `scaledown` and `topics` decide from them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int  # -1: no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """One Metadata answer: brokers, controller and every partition's replicas and ISR."""

    cluster_id: str | None
    controller_id: int | None
    brokers: tuple[BrokerInfo, ...]
    partitions: tuple[PartitionInfo, ...] = ()

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return tuple(sorted(b.node_id for b in self.brokers))

    @property
    def under_replicated_partitions(self) -> int:
        return under_replicated(self.partitions)


@dataclass(frozen=True, slots=True)
class TopicState:
    """A topic as the cluster reports it: partitions, replication and its own config overrides."""

    name: str
    topic_id: str | None
    partitions: int
    replication_factor: int
    overrides: Mapping[str, str] = field(default_factory=dict)  # configs set on the topic itself


@dataclass(frozen=True, slots=True)
class Reassignment:
    """A partition move in progress (ListPartitionReassignments)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]  # the replica set now: the target's and the leaving ones
    adding: tuple[int, ...] = ()  # target replicas not in sync yet
    removing: tuple[int, ...] = ()  # replicas that leave when the move completes

    @property
    def target(self) -> tuple[int, ...]:
        """The replicas once the move completes."""
        kept = tuple(b for b in self.replicas if b not in self.removing)
        return kept + tuple(b for b in self.adding if b not in kept)


def under_replicated(partitions: Iterable[PartitionInfo]) -> int:
    """Partitions whose ISR is smaller than their replica set (Kafka's UnderReplicatedPartitions)."""
    return sum(1 for p in partitions if p.under_replicated)


def replicas_by_broker(partitions: Iterable[PartitionInfo]) -> dict[int, list[str]]:
    """broker id → the `topic-partition` replicas it holds, sorted."""
    out: dict[int, list[str]] = {}
    for p in partitions:
        for b in p.replicas:
            out.setdefault(b, []).append(f"{p.topic}-{p.partition}")
    return {b: sorted(v) for b, v in sorted(out.items())}


class AdminError(Exception):
    """A Kafka admin request failed. `unavailable`: the cluster could not be reached at all."""

    def __init__(self, message: str, *, code: str = "UNKNOWN", unavailable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.unavailable = unavailable
