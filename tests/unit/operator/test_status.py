"""Conditions from facts: one test per reason the operator can report."""

from __future__ import annotations

from typing import Any

from brook_operator import status
from brook_operator.facts import BrokerInfo, ClusterSnapshot, PartitionInfo
from brook_operator.status import ClusterFacts, cluster_conditions

BROKERS = tuple(BrokerInfo(i, f"b{i}", 9092) for i in range(3))
HEALTHY = ClusterSnapshot("cid", 0, BROKERS, (PartitionInfo("t", 0, 0, (0, 1, 2), (0, 1, 2)),))


def by_type(f: ClusterFacts) -> dict[str, tuple[str, str, str]]:
    return {c.type: (c.status, c.reason, c.message) for c in cluster_conditions(f)}


def steady(**kw: Any) -> ClusterFacts:
    base: dict[str, Any] = dict(
        desired_replicas=3,
        current_replicas=3,
        ready_brokers=3,
        updated_brokers=3,
        kafka=HEALTHY,
        was_ready=True,
    )
    base.update(kw)
    return ClusterFacts(**base)


def test_ready_when_every_broker_serves() -> None:
    c = by_type(steady())
    assert c["Ready"] == ("True", status.READY, "3/3 brokers ready")
    assert c["Progressing"][:2] == ("False", status.RECONCILED)
    assert c["Degraded"][:2] == ("False", status.HEALTHY)


def test_invalid_spec() -> None:
    c = by_type(ClusterFacts(desired_replicas=0, spec_errors=("spec.replicas must be >= 1",)))
    assert c["Ready"] == ("False", status.INVALID_SPEC, "spec.replicas must be >= 1")
    assert c["Progressing"][:2] == ("False", status.INVALID_SPEC)
    assert c["Degraded"][:2] == ("True", status.INVALID_SPEC)


def test_creating_until_first_ready() -> None:
    c = by_type(ClusterFacts(desired_replicas=3, current_replicas=3, ready_brokers=1, updated_brokers=3))
    assert c["Ready"][:2] == ("False", status.CREATING)
    assert c["Progressing"][:2] == ("True", status.CREATING)
    assert c["Degraded"][:2] == ("False", status.HEALTHY)  # starting up is not degraded


def test_brokers_not_ready_after_having_been_ready() -> None:
    c = by_type(steady(ready_brokers=2, kafka=None, kafka_error=None))
    assert c["Ready"] == ("False", status.BROKERS_NOT_READY, "2/3 brokers ready")
    assert c["Progressing"][:2] == ("True", status.WAITING_FOR_BROKERS)


def test_degraded_when_a_broker_is_down_outside_a_roll() -> None:
    c = by_type(steady(ready_brokers=2))
    assert c["Degraded"][:2] == ("True", status.BROKERS_NOT_READY)


def test_kafka_unavailable() -> None:
    c = by_type(steady(kafka=None, kafka_error="Metadata: timed out"))
    assert c["Ready"] == ("False", status.KAFKA_UNAVAILABLE, "Metadata: timed out")
    assert c["Degraded"] == ("True", status.KAFKA_UNAVAILABLE, "Metadata: timed out")


def test_brokers_not_registered() -> None:
    two = ClusterSnapshot("cid", 0, BROKERS[:2])
    c = by_type(steady(kafka=two))
    assert c["Ready"][:2] == ("False", status.BROKERS_NOT_REGISTERED)
    assert "brokers 2 are missing" in c["Ready"][2]


def test_under_replicated_partitions() -> None:
    urp = ClusterSnapshot("cid", 0, BROKERS, (PartitionInfo("t", 0, 0, (0, 1, 2), (0, 1)),))
    c = by_type(steady(kafka=urp))
    assert c["Degraded"] == ("True", status.UNDER_REPLICATED, "1 partitions are under-replicated")
    assert c["Ready"][0] == "True"  # still serving


def test_scale_down_blocked() -> None:
    msg = "scale-down to 2 refused: broker 2 holds 1 partition replicas (t-0); reassign them first"
    c = by_type(steady(desired_replicas=2, scale_down_blocked=msg))
    assert c["Ready"] == ("False", status.SCALE_DOWN_BLOCKED, msg)
    assert c["Progressing"] == ("False", status.SCALE_DOWN_BLOCKED, msg)
    assert c["Degraded"] == ("True", status.SCALE_DOWN_BLOCKED, msg)


def test_reconcile_failed() -> None:
    c = by_type(steady(reconcile_error="403 Forbidden: no"))
    assert c["Ready"] == ("False", status.RECONCILE_FAILED, "403 Forbidden: no")
    assert c["Degraded"][:2] == ("True", status.RECONCILE_FAILED)


def test_scaling_up_and_down() -> None:
    up = by_type(steady(desired_replicas=5))
    assert up["Progressing"] == ("True", status.SCALING_UP, "3 → 5 brokers")
    assert up["Ready"][:2] == ("False", status.BROKERS_NOT_READY)
    down = by_type(steady(desired_replicas=2))
    assert down["Progressing"] == ("True", status.SCALING_DOWN, "3 → 2 brokers")
    assert down["Ready"][0] == "True"


def test_rolling_update() -> None:
    c = by_type(
        steady(updated_brokers=1, roll_waiting="waiting for 2 under-replicated partitions to catch up")
    )
    assert c["Progressing"] == (
        "True",
        status.ROLLING_UPDATE,
        "1/3 brokers updated; waiting for 2 under-replicated partitions to catch up",
    )
    assert c["Degraded"][0] == "False"
    # a broker restarting during the roll is expected, not degraded
    assert by_type(steady(updated_brokers=1, ready_brokers=2))["Degraded"][0] == "False"


def test_every_cluster_reason_is_reachable() -> None:
    seen: set[str] = set()
    cases = [
        steady(),
        ClusterFacts(desired_replicas=0, spec_errors=("x",)),
        ClusterFacts(desired_replicas=3, current_replicas=3, ready_brokers=1, updated_brokers=3),
        steady(ready_brokers=2),
        steady(kafka=None, kafka_error="x"),
        steady(kafka=ClusterSnapshot(None, None, ())),
        steady(kafka=ClusterSnapshot("c", 0, BROKERS, (PartitionInfo("t", 0, 0, (0, 1), (0,)),))),
        steady(scale_down_blocked="x"),
        steady(reconcile_error="x"),
        steady(desired_replicas=5),
        steady(desired_replicas=2),
        steady(updated_brokers=1),
        ClusterFacts(
            desired_replicas=3, current_replicas=3, ready_brokers=2, updated_brokers=3, was_ready=True
        ),
    ]
    for f in cases:
        seen |= {c.reason for c in cluster_conditions(f)}
    assert seen == status.CLUSTER_REASONS


def test_was_ready_reads_the_previous_ready_condition() -> None:
    assert not status.was_ready(None)
    assert not status.was_ready([{"type": "Ready", "status": "False", "reason": status.CREATING}])
    assert status.was_ready([{"type": "Ready", "status": "True", "reason": status.READY}])
    assert status.was_ready([{"type": "Ready", "status": "False", "reason": status.BROKERS_NOT_READY}])
    assert not status.was_ready([{"type": "Ready", "status": "False", "reason": status.INVALID_SPEC}])


def test_merge_keeps_the_transition_time_of_unchanged_conditions() -> None:
    first = status.merge_conditions(None, cluster_conditions(steady()), now="T1", generation=4)
    assert all(c["lastTransitionTime"] == "T1" and c["observedGeneration"] == 4 for c in first)
    second = status.merge_conditions(
        first, cluster_conditions(steady(ready_brokers=2)), now="T2", generation=5
    )
    times = {c["type"]: c["lastTransitionTime"] for c in second}
    assert times == {"Ready": "T2", "Progressing": "T2", "Degraded": "T2"}
    third = status.merge_conditions(
        second, cluster_conditions(steady(ready_brokers=2)), now="T3", generation=5
    )
    assert {c["type"]: c["lastTransitionTime"] for c in third} == times


def test_topic_condition() -> None:
    c = status.topic_condition(False, status.NOT_SUPPORTED, "no")
    assert (c.type, c.status, c.reason, c.message) == ("Ready", "False", "NotSupported", "no")
