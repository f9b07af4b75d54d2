"""Replica placement: Kafka's published assignments, and the spreading properties."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brook.metadata.placement import PlacementError, assign_replicas, rack_alternated


def test_rack_unaware_matches_kafka() -> None:
    # Kafka's AdminTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3, start index 0.
    brokers = [(b, None) for b in range(5)]
    assert assign_replicas(brokers, 10, 3, start_index=0) == [
        [0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 0], [4, 0, 1],
        [0, 2, 3], [1, 3, 4], [2, 4, 0], [3, 0, 1], [4, 1, 2],
    ]  # fmt: skip


def test_rack_alternated_list_matches_kafka() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]
    del racks[5]
    assert rack_alternated(racks) == [0, 3, 1, 4, 2]


def test_rack_aware_matches_kafka() -> None:
    # Kafka's AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers.
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert assign_replicas(list(racks.items()), 7, 3, start_index=0) == [
        [0, 3, 1], [3, 1, 5], [1, 5, 4], [5, 4, 2], [4, 2, 0], [2, 0, 3], [0, 4, 2],
    ]  # fmt: skip


def test_leaders_and_replicas_spread_evenly() -> None:
    brokers = [(b, None) for b in (10, 11, 12, 13, 14, 15)]
    a = assign_replicas(brokers, 60, 3, rng=random.Random(1))
    assert Counter(r[0] for r in a) == {b: 10 for b, _ in brokers}
    assert Counter(b for r in a for b in r) == {b: 30 for b, _ in brokers}
    assert all(len(set(r)) == 3 for r in a)


def test_rack_aware_spans_all_racks_and_spreads_evenly() -> None:
    brokers = [(b, f"r{b % 3}") for b in range(9)]
    a = assign_replicas(brokers, 90, 3, rng=random.Random(7))
    racks = dict(brokers)
    assert all(len({racks[b] for b in r}) == 3 for r in a)
    assert Counter(r[0] for r in a) == {b: 10 for b in range(9)}
    assert Counter(b for r in a for b in r) == {b: 30 for b in range(9)}


def test_adding_partitions_continues_the_pattern() -> None:
    brokers = [(b, None) for b in range(4)]
    whole = assign_replicas(brokers, 10, 2, start_index=1)
    first = assign_replicas(brokers, 6, 2, start_index=1)
    more = assign_replicas(brokers, 4, 2, start_index=1, start_partition=6)
    assert first + more == whole


@pytest.mark.parametrize(
    ("brokers", "partitions", "rf", "message"),
    [
        ([(1, None), (2, None)], 3, 3, "larger than the 2 available brokers"),
        ([], 1, 1, "larger than the 0 available brokers"),
        ([(1, None)], 0, 1, "partitions must be positive"),
        ([(1, None)], 1, 0, "replication factor must be positive"),
        ([(1, "a"), (2, None)], 1, 1, "some brokers have a rack"),
        ([(1, None), (1, None)], 1, 1, "duplicate broker ids"),
    ],
)
def test_errors(brokers: list[tuple[int, str | None]], partitions: int, rf: int, message: str) -> None:
    with pytest.raises(PlacementError, match=message):
        assign_replicas(brokers, partitions, rf)


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 12),
    n_racks=st.integers(0, 5),
    partitions=st.integers(1, 50),
    data=st.data(),
)
def test_properties(n: int, n_racks: int, partitions: int, data: st.DataObject) -> None:
    rf = data.draw(st.integers(1, n))
    ids = data.draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n, unique=True))
    racks = [None if n_racks == 0 else f"rack{data.draw(st.integers(0, n_racks - 1))}" for _ in ids]
    brokers = list(zip(ids, racks, strict=True))
    start = data.draw(st.one_of(st.none(), st.integers(0, n - 1)))
    a = assign_replicas(brokers, partitions, rf, start, rng=random.Random(0))
    assert len(a) == partitions
    for replicas in a:
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(ids)
    leaders = Counter(r[0] for r in a)
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in ids) <= 1
    if n_racks:
        rack_of = dict(brokers)
        distinct = len(set(racks))
        assert all(len({rack_of[b] for b in r}) == min(rf, distinct) for r in a)
