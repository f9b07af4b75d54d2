"""The rebalance planner (pure): onto new brokers, off departing ones, balanced, with few moves."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from brook_operator.autoscaling.planner import (
    Assignment,
    Move,
    is_balanced,
    leader_counts,
    plan,
    replica_counts,
)


def apply(assignments: Sequence[Assignment], moves: Sequence[Move]) -> list[Assignment]:
    by_key = {m.key: m.target for m in moves}
    return [Assignment(a.topic, a.partition, by_key.get(a.key, a.replicas)) for a in assignments]


def round_robin(topic: str, partitions: int, rf: int, brokers: int) -> list[Assignment]:
    return [Assignment(topic, p, tuple((p + i) % brokers for i in range(rf))) for p in range(partitions)]


def test_scale_out_moves_a_fair_share_onto_the_new_broker_and_leads_some() -> None:
    before = round_robin("t", 12, 2, 3)  # 24 replicas, 8 per broker, 4 leaders each
    p = plan(before, range(4))
    after = apply(before, p.moves)
    assert replica_counts(after, range(4)) == {0: 6, 1: 6, 2: 6, 3: 6}
    assert len(p.moves) == 6  # exactly the new broker's share
    for m in p.moves:  # one replica replaced in place, by the new broker
        changed = [(a, b) for a, b in zip(m.current, m.target, strict=True) if a != b]
        assert len(changed) == 1 and changed[0][1] == 3
    assert leader_counts(after, range(4)) == {0: 3, 1: 3, 2: 3, 3: 3}
    assert plan(after, range(4)).done


def test_scale_in_empties_the_highest_ordinal_and_balances_the_rest() -> None:
    before = round_robin("t", 8, 3, 4)  # 24 replicas, 6 per broker
    p = plan(before, range(3))
    after = apply(before, p.moves)
    counts = replica_counts(after, range(3))
    assert counts == {0: 8, 1: 8, 2: 8}
    assert len(p.moves) == 6  # only broker 3's replicas move
    assert all(3 not in a.replicas and len(set(a.replicas)) == 3 for a in after)
    assert is_balanced(after, range(3))


def test_moves_in_progress_are_counted_as_targets_and_left_alone() -> None:
    before = round_robin("t", 6, 1, 2)  # t-0..5 on 0,1,0,1,0,1
    # t-0 is already moving to broker 2
    now = [Assignment("t", 0, (2,)), *before[1:]]
    p = plan(now, range(3), fixed={("t", 0)})
    assert all(m.key != ("t", 0) for m in p.moves)
    after = apply(now, p.moves)
    assert replica_counts(after, range(3)) == {0: 2, 1: 2, 2: 2}
    assert len(p.moves) == 1


def test_a_partition_with_more_replicas_than_brokers_is_unplaceable() -> None:
    p = plan([Assignment("t", 0, (0, 1, 2))], range(2))
    assert p.unplaceable == (("t", 0),) and p.done


def test_balanced_input_needs_no_moves_and_the_plan_is_deterministic() -> None:
    before = round_robin("a", 7, 2, 3) + round_robin("b", 5, 3, 3)
    assert plan(before, range(3)).done
    assert plan(before, range(4)) == plan(list(reversed(before)), [3, 2, 1, 0])


def test_move_text() -> None:
    assert str(Move("t", 1, (0, 1), (3, 1))) == "t-1 [0, 1] → [3, 1]"


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Assignment], list[int]]:
    brokers_before = draw(st.integers(1, 7))
    assignments = []
    for t in range(draw(st.integers(1, 3))):
        rf = draw(st.integers(1, min(3, brokers_before)))
        for p in range(draw(st.integers(1, 12))):
            reps = draw(st.permutations(range(brokers_before)))[:rf]
            assignments.append(Assignment(f"t{t}", p, tuple(reps)))
    largest = max(len(a.replicas) for a in assignments)
    target = draw(st.integers(largest, 8))
    return assignments, list(range(target))


def lower_bound(assignments: Sequence[Assignment], brokers: Sequence[int]) -> int:
    """Each replica outside the set moves; each broker above its share gives up its excess (the share
    being one more for the fullest brokers when the total does not divide)."""
    inside = set(brokers)
    outside = sum(1 for a in assignments for b in a.replicas if b not in inside)
    counts = replica_counts(assignments, brokers)
    total = sum(len(a.replicas) for a in assignments)
    q, r = divmod(total, len(brokers))
    ordered = sorted((counts[b] for b in brokers), reverse=True)
    excess = sum(max(0, c - (q + 1 if i < r else q)) for i, c in enumerate(ordered))
    return outside + excess


@settings(max_examples=400, deadline=None)
@given(clusters())
def test_the_plan_balances_keeps_replication_and_uses_the_fewest_moves(
    case: tuple[list[Assignment], list[int]],
) -> None:
    assignments, brokers = case
    p = plan(assignments, brokers)
    assert not p.unplaceable
    after = apply(assignments, p.moves)
    for before, a in zip(assignments, after, strict=True):
        assert len(a.replicas) == len(before.replicas)  # replication factor kept
        assert len(set(a.replicas)) == len(a.replicas)  # never twice on a broker
        assert set(a.replicas) <= set(brokers)
    assert is_balanced(after, brokers)
    replaced = replacements(p.moves)
    outside = sum(1 for a in assignments for b in a.replicas if b not in brokers)
    if outside == 0:  # scale-out / rebalance: exactly the minimum
        assert replaced == lower_bound(assignments, brokers)
    else:  # a leaving replica can only go where its partition is not: at most one more move each
        assert lower_bound(assignments, brokers) <= replaced <= lower_bound(assignments, brokers) + outside
    assert plan(after, brokers).done  # planning again finds nothing to do


@settings(max_examples=200, deadline=None)
@given(clusters(), st.integers(1, 4))
def test_a_few_moves_at_a_time_converge(case: tuple[list[Assignment], list[int]], batch: int) -> None:
    """Run the plan `batch` moves at a time, each batch in flight (fixed) for one planning round."""
    assignments, brokers = case
    first = replacements(plan(assignments, brokers).moves)
    current = list(assignments)
    in_flight: list[Move] = []
    total = 0
    while True:
        view = apply(current, in_flight)
        p = plan(view, brokers, fixed={m.key for m in in_flight})
        current = view  # the moves in flight complete
        in_flight = list(p.moves[:batch])
        total += replacements(in_flight)
        assert total <= first + 4, "batches cost (nearly) what the whole plan costs"
        if not in_flight:
            break
    assert is_balanced(current, brokers)


def replacements(moves: Sequence[Move]) -> int:
    return sum(sum(1 for x, y in zip(m.current, m.target, strict=True) if x != y) for m in moves)
