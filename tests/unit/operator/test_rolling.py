"""Rolling-restart planner: one pod at a time, never below min.insync.replicas."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from brook_operator.facts import PartitionInfo
from brook_operator.rolling import PodState, blocking_partitions, plan_roll


def pods(
    n: int, *, outdated: Sequence[int] = (), unready: Sequence[int] = (), terminating: Sequence[int] = ()
) -> list[PodState]:
    return [
        PodState(
            f"demo-broker-{i}",
            i,
            ready=i not in unready,
            up_to_date=i not in outdated,
            terminating=i in terminating,
        )
        for i in range(n)
    ]


def full(topic: str, n: int, replicas: tuple[int, ...]) -> list[PartitionInfo]:
    return [PartitionInfo(topic, p, replicas[0], replicas, replicas) for p in range(n)]


def min2(_: str) -> int:
    return 2


def test_nothing_outdated_is_done() -> None:
    plan = plan_roll(pods(3), partitions=[], min_isr=min2)
    assert plan.done and plan.restart is None and not plan.outdated


def test_restarts_one_outdated_broker_highest_ordinal_first() -> None:
    plan = plan_roll(pods(3, outdated=[0, 1, 2]), partitions=full("t", 3, (0, 1, 2)), min_isr=min2)
    assert plan.restart == "demo-broker-2"


def test_controller_is_restarted_last() -> None:
    plan = plan_roll(
        pods(3, outdated=[0, 2]), partitions=full("t", 1, (0, 1, 2)), min_isr=min2, controller_id=2
    )
    assert plan.restart == "demo-broker-0"
    plan = plan_roll(pods(3, outdated=[2]), partitions=full("t", 1, (0, 1, 2)), min_isr=min2, controller_id=2)
    assert plan.restart == "demo-broker-2"


def test_waits_for_a_terminating_pod() -> None:
    plan = plan_roll(pods(3, outdated=[0, 1], terminating=[2]), partitions=[], min_isr=min2)
    assert plan.restart is None and plan.waiting == "waiting for pod demo-broker-2 to terminate"


def test_waits_for_a_missing_pod_to_be_recreated() -> None:
    plan = plan_roll(pods(3, outdated=[0, 1])[:2], partitions=[], min_isr=min2, expected_pods=3)
    assert plan.restart is None and plan.waiting == "waiting for 1 pods to be created"


def test_waits_until_the_restarted_broker_is_ready() -> None:
    plan = plan_roll(pods(3, outdated=[0, 1], unready=[2]), partitions=full("t", 1, (0, 1, 2)), min_isr=min2)
    assert plan.restart is None and plan.waiting == "waiting for pod demo-broker-2 to become ready"


def test_an_outdated_broker_that_is_down_is_restarted_first() -> None:
    # it serves nothing: restarting it costs no availability (and fixes a crash loop on a bad config)
    plan = plan_roll(pods(3, outdated=[0, 1], unready=[0]), partitions=None, min_isr=min2)
    assert plan.restart == "demo-broker-0"


def test_waits_for_metadata() -> None:
    plan = plan_roll(pods(3, outdated=[0]), partitions=None, min_isr=min2)
    assert plan.restart is None and "Metadata" in (plan.waiting or "")


def test_waits_while_partitions_are_under_replicated() -> None:
    parts = [*full("t", 2, (0, 1, 2)), PartitionInfo("t", 2, 0, (0, 1, 2), (0, 1))]
    plan = plan_roll(pods(3, outdated=[0, 1, 2]), partitions=parts, min_isr=min2)
    assert plan.restart is None
    assert plan.waiting == "waiting for 1 under-replicated partitions to catch up"


def test_never_below_min_insync_replicas() -> None:
    # replication factor 2 and min.insync.replicas 2 can never lose a replica: such partitions
    # (replicas <= min ISR) do not block, there is no safe order for them
    parts = full("t", 1, (0, 1))
    assert blocking_partitions(0, parts, min2) == []
    # rf 3, min ISR 2, but the ISR is already down to 2 without broker 2: 0 and 1 cannot go
    shrunk = [PartitionInfo("t", 0, 0, (0, 1, 2), (0, 1))]
    assert [p.partition for p in blocking_partitions(0, shrunk, min2)] == [0]
    assert blocking_partitions(2, shrunk, min2) == []


def test_partitions_that_cannot_survive_any_restart_do_not_block_the_roll() -> None:
    # replicas <= min.insync.replicas: no restart order keeps them writable with acks=all
    parts = [PartitionInfo("strict", 0, 0, (0, 1, 2), (0, 1, 2))]
    plan = plan_roll(pods(3, outdated=[0, 1, 2]), partitions=parts, min_isr=lambda _: 3)
    assert plan.restart == "demo-broker-2"
    single = [PartitionInfo("rf1", 0, 1, (1,), (1,))]
    assert plan_roll(pods(2, outdated=[1]), partitions=single, min_isr=lambda _: 1).restart == "demo-broker-1"


def test_min_isr_check_per_topic() -> None:
    # with every partition in sync, a restart keeps ISR >= min ISR whenever replicas > min ISR; the
    # check still guards each candidate (defense in depth against a stale under-replication count)
    parts = [PartitionInfo("a", 0, 1, (1, 2, 3), (1, 2, 3)), PartitionInfo("b", 0, 1, (0, 1, 2), (0, 1, 2))]
    plan = plan_roll(pods(4, outdated=[0, 2]), partitions=parts, min_isr=lambda t: 2 if t == "a" else 1)
    assert plan.restart == "demo-broker-2"
    assert blocking_partitions(2, [PartitionInfo("a", 0, 1, (1, 2, 3), (1, 2))], lambda _: 2) == [
        PartitionInfo("a", 0, 1, (1, 2, 3), (1, 2))
    ]


@st.composite
def clusters(draw: st.DrawFn) -> tuple[int, list[PartitionInfo], dict[str, int], list[int]]:
    n = draw(st.integers(1, 6))
    topics = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4, unique=True))
    min_isr = {t: draw(st.integers(1, 4)) for t in topics}
    parts = []
    for t in topics:
        for p in range(draw(st.integers(1, 4))):
            replicas = tuple(draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True)))
            isr = tuple(b for b in replicas if draw(st.booleans()) or b == replicas[0])
            parts.append(PartitionInfo(t, p, replicas[0], replicas, isr))
    outdated = draw(st.lists(st.integers(0, n - 1), unique=True))
    return n, parts, min_isr, outdated


@settings(max_examples=400, deadline=None)
@given(clusters())
def test_property_a_restart_never_takes_an_available_partition_below_min_isr(
    c: tuple[int, list[PartitionInfo], dict[str, int], list[int]],
) -> None:
    n, parts, min_isr, outdated = c
    plan = plan_roll(pods(n, outdated=outdated), partitions=parts, min_isr=lambda t: min_isr[t])
    if plan.restart is None:
        return
    broker = int(plan.restart.rsplit("-", 1)[1])
    assert broker in outdated
    assert not any(p.under_replicated for p in parts)  # never rolls while partitions are behind
    for p in parts:
        m = min_isr[p.topic]
        if len(p.replicas) > m and broker in p.isr:
            assert len(p.isr) - 1 >= m
