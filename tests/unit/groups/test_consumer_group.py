"""The consumer group protocol's coordinator logic (KIP-848) without a broker: revocation before
assignment, epochs, static members, the broker's session timeout, the assignors."""

from __future__ import annotations

from typing import Any

import pytest

from brook.groups.assignors import assign_range, assign_uniform
from brook.groups.consumer_coordinator import ConsumerGroups, Heartbeat, HeartbeatResult
from brook.groups.consumer_store import Record
from brook.groups.settings import GroupSettings
from brook.protocol.errors import ErrorCode, KafkaError

T1 = b"\x01" * 16
T2 = b"\x02" * 16
T3 = b"\x03" * 16


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def coordinator(**settings: Any) -> tuple[ConsumerGroups, Clock]:
    clock = Clock()
    topics = {"t1": (T1, 4), "t2": (T2, 2)}
    return ConsumerGroups(GroupSettings(**settings), lambda: topics, lambda g: None, _unwritten, clock), clock


async def _unwritten(group_id: str, records: list[Record]) -> ErrorCode:
    raise AssertionError("these tests take the records from the store themselves")


def hb(c: ConsumerGroups, member: str, epoch: int, **fields: Any) -> HeartbeatResult:
    return c.heartbeat(Heartbeat("g", member, epoch, **fields))


def join(c: ConsumerGroups, member: str, **fields: Any) -> HeartbeatResult:
    fields.setdefault("subscribed_topic_names", ["t1"])
    return hb(c, member, 0, rebalance_timeout_ms=10_000, owned={}, **fields)


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    c, _ = coordinator()
    a = join(c, "A")
    assert a.assignment == {T1: {0, 1, 2, 3}}
    hb(c, "A", a.member_epoch, owned={T1: {0, 1, 2, 3}})
    b = join(c, "B")
    assert b.assignment == {}, "B got partitions A still owns"
    # A is told to keep two: its epoch stays until it acknowledges the revocation.
    a2 = hb(c, "A", a.member_epoch, owned={T1: {0, 1, 2, 3}})
    assert a2.member_epoch == a.member_epoch
    assert a2.assignment is not None and len(a2.assignment[T1]) == 2
    kept = a2.assignment[T1]
    assert hb(c, "B", b.member_epoch, owned={}).assignment is None  # still nothing for B
    a3 = hb(c, "A", a.member_epoch, owned={T1: kept})  # revoked: now A moves to the new epoch
    assert a3.member_epoch == b.member_epoch
    b2 = hb(c, "B", b.member_epoch, owned={})
    assert b2.assignment == {T1: {0, 1, 2, 3} - kept}


def test_epochs_fence_a_member_ahead_or_behind() -> None:
    c, _ = coordinator()
    a = join(c, "A")
    ahead = hb(c, "A", a.member_epoch + 1)
    assert ahead.error == ErrorCode.FENCED_MEMBER_EPOCH
    # A new subscription moves A to the next epoch; a heartbeat from the previous one (its answer
    # lost) is accepted while it owns no more than its assignment.
    a2 = hb(c, "A", a.member_epoch, owned=a.assignment, subscribed_topic_names=["t1", "t2"])
    assert a2.member_epoch == a.member_epoch + 1
    assert hb(c, "A", a.member_epoch, owned={T1: {0}}).error == ErrorCode.NONE
    assert hb(c, "A", a.member_epoch, owned={T1: {9}}).error == ErrorCode.FENCED_MEMBER_EPOCH
    assert hb(c, "nobody", 1).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_invalid_requests() -> None:
    c, _ = coordinator(consumer_max_size=1)
    assert hb(c, "A", 0, owned={}, subscribed_topic_names=["t1"]).message == (
        "RebalanceTimeoutMs must be provided in first request."
    )
    assert join(c, "A", server_assignor="sticky").error == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert join(c, "A", subscribed_topic_regex="(").error == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert hb(c, "A", -3).error == ErrorCode.INVALID_REQUEST
    assert join(c, "A").error == ErrorCode.NONE
    assert join(c, "B").error == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_static_member_leaves_for_now_and_rejoins_with_its_partitions() -> None:
    c, _ = coordinator()
    a = join(c, "A", instance_id="ia")
    hb(c, "A", a.member_epoch, owned=a.assignment)
    b = join(c, "B", instance_id="ib")
    a2 = hb(c, "A", a.member_epoch, owned=a.assignment)
    a3 = hb(c, "A", a2.member_epoch, owned=a2.assignment)
    mine = a2.assignment
    assert join(c, "A2", instance_id="ia").error == ErrorCode.UNRELEASED_INSTANCE_ID
    assert hb(c, "A", -2, instance_id="ia").member_epoch == -2
    b2 = hb(c, "B", b.member_epoch, owned={})
    assert b2.assignment == {T1: {0, 1, 2, 3} - mine[T1]}, "B took the absent member's partitions"
    back = join(c, "A2", instance_id="ia")
    assert back.assignment == mine
    assert back.member_epoch == a3.member_epoch


def test_session_timeout_fences_and_frees_partitions() -> None:
    c, clock = coordinator(consumer_session_timeout_ms=5000)
    a = join(c, "A")
    hb(c, "A", a.member_epoch, owned=a.assignment)
    b = join(c, "B")
    clock.now += 4.9
    c.expire()
    assert "A" in c.groups["g"].members
    hb(c, "B", b.member_epoch, owned={})
    clock.now += 0.2
    c.expire()
    assert "A" not in c.groups["g"].members
    b2 = hb(c, "B", b.member_epoch, owned={})
    assert b2.assignment == {T1: {0, 1, 2, 3}}


def test_commit_checks_the_member_epoch_as_kafka_4_4() -> None:
    c, _ = coordinator()
    a = join(c, "A")
    errors = []
    for member, epoch, version in (("A", a.member_epoch + 1, 9), ("B", a.member_epoch, 9), ("A", 1, 8)):
        try:
            c.validate_commit("g", member, epoch, version)
        except KafkaError as e:
            errors.append(e.code)
    assert errors == [
        ErrorCode.STALE_MEMBER_EPOCH,  # newer than the member's
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.UNSUPPORTED_VERSION,
    ]
    assert c.validate_commit("g", "A", a.member_epoch, 9) is None  # the current epoch: every partition


def test_an_older_epoch_commits_the_partitions_held_since_then() -> None:
    """Kafka 4.4's assignment epochs: a commit sent before a rebalance moved the member's epoch on is
    taken for the partitions it held at that epoch (also those being revoked), refused for the
    partitions it got later and for those it no longer holds."""
    c, _ = coordinator()
    a = join(c, "A")
    first = a.member_epoch
    hb(c, "A", first, owned={T1: {0, 1, 2, 3}})
    b = join(c, "B")
    a2 = hb(c, "A", first, owned={T1: {0, 1, 2, 3}})  # told to give two up: A revokes them
    assert a2.assignment is not None
    kept = a2.assignment[T1]
    revoked = {0, 1, 2, 3} - kept
    a3 = hb(c, "A", first, owned={T1: kept})
    assert a3.member_epoch > first
    check = c.validate_commit("g", "A", first, 9)
    assert check is not None
    for p in kept:
        check("t1", p)  # held since `first`: taken
    for p in revoked:  # moved to B: refused
        with pytest.raises(KafkaError) as e:
            check("t1", p)
        assert e.value.code == ErrorCode.STALE_MEMBER_EPOCH
    # B's partitions were assigned at its current epoch: an older one is refused for them
    b2 = hb(c, "B", b.member_epoch, owned={})
    assert b2.assignment == {T1: revoked}
    check_b = c.validate_commit("g", "B", b2.member_epoch - 1, 9)
    assert check_b is not None
    with pytest.raises(KafkaError) as e:
        check_b("t1", min(revoked))
    assert "older than assignment epoch" in e.value.message


def test_regex_subscription_follows_new_topics_at_most_every_10_seconds() -> None:
    """As Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS: topics created one after another within 10 s
    of the last resolution reach the member in one assignment."""
    c, clock = coordinator()
    topics = {"t1": (T1, 4)}
    c._topics = lambda: topics
    a = join(c, "A", subscribed_topic_names=None, subscribed_topic_regex="t.*")
    assert a.assignment == {}  # a new regex is resolved after the heartbeat that brought it
    a2 = hb(c, "A", a.member_epoch, owned={})
    assert a2.assignment == {T1: {0, 1, 2, 3}}
    topics["t2"] = (T2, 2)  # created later
    clock.now += 5
    a3 = hb(c, "A", a2.member_epoch, owned=a2.assignment)
    topics["t3"] = (T3, 1)
    clock.now += 4.9
    a4 = hb(c, "A", a3.member_epoch, owned=a2.assignment)
    assert a3.assignment is None and a4.assignment is None  # 9.9 s: not matched again yet
    clock.now += 0.2
    hb(c, "A", a4.member_epoch, owned=a2.assignment)  # matched again here, used from the next one
    a5 = hb(c, "A", a4.member_epoch, owned=a2.assignment)
    assert a5.assignment == {T1: {0, 1, 2, 3}, T2: {0, 1}, T3: {0}}


def test_uniform_is_balanced_and_sticky() -> None:
    subs = {m: {T1, T2} for m in ("a", "b", "c")}
    first = assign_uniform(subs, {T1: 4, T2: 2}, {})
    assert sorted(sum(len(ps) for ps in a.values()) for a in first.values()) == [2, 2, 2]
    subs["d"] = {T1, T2}
    second = assign_uniform(subs, {T1: 4, T2: 2}, first)
    moved = sum(len(first[m].get(t, set()) - second[m].get(t, set())) for m in first for t in first[m])
    assert moved == 1  # only what the new member needs
    assert sorted(sum(len(ps) for ps in a.values()) for a in second.values()) == [1, 1, 2, 2]


def test_uniform_moves_only_the_share_of_a_member_that_joins_or_leaves() -> None:
    """50 members over 1,000 partitions: a 51st takes its 19 from the others and the others trade
    nothing among themselves (a partition handed between two old members costs both a revocation
    round); when one leaves, only its partitions move."""
    subs = {f"m{i:02}": {T1} for i in range(50)}
    first = assign_uniform(subs, {T1: 1000}, {})
    second = assign_uniform({**subs, "new": {T1}}, {T1: 1000}, first)
    assert sum(len(second[m][T1] - first[m][T1]) for m in subs) == 0
    assert len(second["new"][T1]) == 19
    del subs["m07"]
    third = assign_uniform({**subs, "new": {T1}}, {T1: 1000}, second)
    gained = set().union(*(third[m][T1] - second[m][T1] for m in [*subs, "new"]))
    assert gained == second["m07"][T1]
    assert sorted({len(a[T1]) for a in third.values()}) == [20]


def test_range_gives_contiguous_ranges() -> None:
    got = assign_range({"b": {T1}, "a": {T1}, "c": {T1}}, {T1: 4}, {})
    assert got == {"a": {T1: {0, 1}}, "b": {T1: {2}}, "c": {T1: {3}}}
