from __future__ import annotations

from brook_operator.facts import BrokerInfo, ClusterSnapshot, PartitionInfo
from brook_operator.scaledown import plan_replicas

BROKERS = tuple(BrokerInfo(i, f"b{i}", 9092) for i in range(4))


def snap(*parts: PartitionInfo) -> ClusterSnapshot:
    return ClusterSnapshot("c", 0, BROKERS, parts)


def test_first_creation_and_scale_up_apply_at_once() -> None:
    assert plan_replicas(3, None, None).replicas == 3
    assert plan_replicas(5, 3, None).replicas == 5
    assert plan_replicas(3, 3, None).blocked is None


def test_scale_down_of_empty_brokers_proceeds() -> None:
    d = plan_replicas(2, 4, snap(PartitionInfo("t", 0, 0, (0, 1), (0, 1))))
    assert (d.replicas, d.blocked) == (2, None)


def test_scale_down_is_refused_while_a_departing_broker_holds_replicas() -> None:
    parts = [PartitionInfo("t", i, 0, (0, 3), (0, 3)) for i in range(5)]
    d = plan_replicas(2, 4, snap(*parts))
    assert d.replicas == 4
    assert d.blocked == (
        "scale-down to 2 refused: broker 3 holds 5 partition replicas (t-0, t-1, t-2, ...); "
        "reassign them first"
    )


def test_scale_down_waits_without_metadata() -> None:
    d = plan_replicas(2, 4, None)
    assert d.replicas == 4 and "Metadata is unavailable" in (d.blocked or "")
