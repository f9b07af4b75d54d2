"""Pure status computation: observed facts → conditions (type, status, reason, message).

Cluster conditions: Ready (all desired brokers serve and are registered), Progressing (the cluster is
moving towards its spec: creating, scaling, rolling, starting brokers), Degraded (something needs
attention). Topic: Ready only. Every reason a condition can carry is a constant here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .facts import ClusterSnapshot

TRUE, FALSE = "True", "False"

# Cluster reasons
READY = "Ready"  # Ready=True: every desired broker is ready and registered
CREATING = "Creating"  # the brokers have not all been ready yet since the Cluster was created
BROKERS_NOT_READY = "BrokersNotReady"  # fewer ready brokers than desired (after having been ready)
BROKERS_NOT_REGISTERED = "BrokersNotRegistered"  # pods ready, but the cluster's Metadata lacks some
KAFKA_UNAVAILABLE = "KafkaUnavailable"  # the operator cannot reach the cluster over the Kafka protocol
SCALE_DOWN_BLOCKED = "ScaleDownBlocked"  # departing brokers still hold partition replicas
INVALID_SPEC = "InvalidSpec"  # the spec cannot be applied (also used for Topics)
RECONCILE_FAILED = "ReconcileFailed"  # writing the Kubernetes objects failed
SCALING_UP = "ScalingUp"
SCALING_DOWN = "ScalingDown"
ROLLING_UPDATE = "RollingUpdate"  # pods run an outdated template and are being restarted one by one
WAITING_FOR_BROKERS = "WaitingForBrokers"  # pods exist and are up to date but not all ready yet
RECONCILED = "Reconciled"  # Progressing=False: nothing left to do; also Topic Ready=True
UNDER_REPLICATED = "UnderReplicatedPartitions"
HEALTHY = "Healthy"  # Degraded=False

# Topic reasons (besides RECONCILED and INVALID_SPEC)
NOT_SUPPORTED = "NotSupported"  # e.g. fewer partitions, another replication factor, a new name
RESOURCE_CONFLICT = "ResourceConflict"  # an older Topic resource manages the same topic
CLUSTER_NOT_FOUND = "ClusterNotFound"  # spec.cluster names no Cluster in the namespace
KAFKA_ERROR = "KafkaError"  # an admin request failed

CLUSTER_REASONS = frozenset(
    {
        READY,
        CREATING,
        BROKERS_NOT_READY,
        BROKERS_NOT_REGISTERED,
        KAFKA_UNAVAILABLE,
        SCALE_DOWN_BLOCKED,
        INVALID_SPEC,
        RECONCILE_FAILED,
        SCALING_UP,
        SCALING_DOWN,
        ROLLING_UPDATE,
        WAITING_FOR_BROKERS,
        RECONCILED,
        UNDER_REPLICATED,
        HEALTHY,
    }
)
TOPIC_REASONS = frozenset(
    {
        RECONCILED,
        INVALID_SPEC,
        NOT_SUPPORTED,
        RESOURCE_CONFLICT,
        CLUSTER_NOT_FOUND,
        KAFKA_UNAVAILABLE,
        KAFKA_ERROR,
    }
)


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str  # "True" | "False"
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What the operator observed about one Cluster in one reconcile."""

    desired_replicas: int
    current_replicas: int = 0  # broker pods that exist (StatefulSet status.replicas)
    ready_brokers: int = 0
    updated_brokers: int = 0  # pods running the current template
    statefulset_replicas: int | None = None  # what the StatefulSet asks for (None: no StatefulSet yet)
    kafka: ClusterSnapshot | None = None
    kafka_error: str | None = None
    spec_errors: tuple[str, ...] = ()
    reconcile_error: str | None = None
    scale_down_blocked: str | None = None
    roll_waiting: str | None = None  # why the next restart of a rolling update waits
    was_ready: bool = False  # the Cluster has been Ready since it was created


def cluster_conditions(f: ClusterFacts) -> list[Condition]:
    return [_ready(f), _progressing(f), _degraded(f)]


def _missing_brokers(f: ClusterFacts) -> list[int]:
    if f.kafka is None:
        return []
    ids = set(f.kafka.broker_ids)
    return [i for i in range(f.desired_replicas) if i not in ids]


def _ready(f: ClusterFacts) -> Condition:
    def no(reason: str, message: str) -> Condition:
        return Condition("Ready", FALSE, reason, message)

    if f.spec_errors:
        return no(INVALID_SPEC, "; ".join(f.spec_errors))
    if f.reconcile_error:
        return no(RECONCILE_FAILED, f.reconcile_error)
    counts = f"{f.ready_brokers}/{f.desired_replicas} brokers ready"
    if f.ready_brokers < f.desired_replicas:
        return no(BROKERS_NOT_READY if f.was_ready else CREATING, counts)
    if f.kafka is None:
        return no(KAFKA_UNAVAILABLE, f.kafka_error or "no Metadata from the cluster yet")
    if missing := _missing_brokers(f):
        return no(BROKERS_NOT_REGISTERED, f"brokers {_ids(missing)} are missing from the cluster's Metadata")
    if f.scale_down_blocked:
        return no(SCALE_DOWN_BLOCKED, f.scale_down_blocked)
    return Condition("Ready", TRUE, READY, counts)


def _progressing(f: ClusterFacts) -> Condition:
    def yes(reason: str, message: str) -> Condition:
        return Condition("Progressing", TRUE, reason, message)

    if f.spec_errors:
        return Condition("Progressing", FALSE, INVALID_SPEC, "the spec cannot be applied")
    if f.scale_down_blocked:
        return Condition("Progressing", FALSE, SCALE_DOWN_BLOCKED, f.scale_down_blocked)
    if not f.was_ready and f.ready_brokers < f.desired_replicas:
        return yes(CREATING, f"{f.ready_brokers}/{f.desired_replicas} brokers ready")
    if f.updated_brokers < f.current_replicas:
        msg = f"{f.updated_brokers}/{f.current_replicas} brokers updated"
        return yes(ROLLING_UPDATE, f"{msg}; {f.roll_waiting}" if f.roll_waiting else msg)
    if f.current_replicas < f.desired_replicas:
        return yes(SCALING_UP, f"{f.current_replicas} → {f.desired_replicas} brokers")
    if f.current_replicas > f.desired_replicas:
        return yes(SCALING_DOWN, f"{f.current_replicas} → {f.desired_replicas} brokers")
    if f.ready_brokers < f.desired_replicas:
        return yes(WAITING_FOR_BROKERS, f"{f.ready_brokers}/{f.desired_replicas} brokers ready")
    return Condition("Progressing", FALSE, RECONCILED, "the cluster matches its spec")


def _degraded(f: ClusterFacts) -> Condition:
    def yes(reason: str, message: str) -> Condition:
        return Condition("Degraded", TRUE, reason, message)

    if f.spec_errors:
        return yes(INVALID_SPEC, "; ".join(f.spec_errors))
    if f.reconcile_error:
        return yes(RECONCILE_FAILED, f.reconcile_error)
    if f.kafka is None and f.ready_brokers > 0 and (f.was_ready or f.ready_brokers >= f.desired_replicas):
        return yes(KAFKA_UNAVAILABLE, f.kafka_error or "no Metadata from the cluster")
    if f.kafka is not None and (urp := f.kafka.under_replicated_partitions) > 0:
        return yes(UNDER_REPLICATED, f"{urp} partitions are under-replicated")
    if f.scale_down_blocked:
        return yes(SCALE_DOWN_BLOCKED, f.scale_down_blocked)
    rolling = f.updated_brokers < f.current_replicas
    if f.was_ready and not rolling and f.ready_brokers < min(f.current_replicas, f.desired_replicas):
        return yes(BROKERS_NOT_READY, f"{f.ready_brokers}/{f.desired_replicas} brokers ready")
    return Condition("Degraded", FALSE, HEALTHY, "")


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(str(i) for i in ids)


def was_ready(previous_conditions: Sequence[Mapping[str, Any]] | None) -> bool:
    """True once every broker has been ready: Ready no longer reads Creating after that.

    Read back from the previous Ready condition: True, or a reason only given once all brokers were ready.
    """
    after_ready = {BROKERS_NOT_READY, KAFKA_UNAVAILABLE, BROKERS_NOT_REGISTERED, SCALE_DOWN_BLOCKED}
    for c in previous_conditions or ():
        if c.get("type") == "Ready":
            return c.get("status") == TRUE or c.get("reason") in after_ready
    return False


def merge_conditions(
    previous: Sequence[Mapping[str, Any]] | None,
    current: Sequence[Condition],
    *,
    now: str,
    generation: int | None,
) -> list[dict[str, Any]]:
    """Conditions as stored in status; lastTransitionTime only moves when a condition's status changes."""
    before = {c.get("type"): c for c in previous or ()}
    out: list[dict[str, Any]] = []
    for c in current:
        old = before.get(c.type)
        changed = old is None or old.get("status") != c.status
        entry: dict[str, Any] = {
            "type": c.type,
            "status": c.status,
            "reason": c.reason,
            "message": c.message,
            "lastTransitionTime": now if changed or old is None else old.get("lastTransitionTime", now),
        }
        if generation is not None:
            entry["observedGeneration"] = generation
        out.append(entry)
    return out


def topic_condition(ready: bool, reason: str, message: str) -> Condition:
    return Condition("Ready", TRUE if ready else FALSE, reason, message)
