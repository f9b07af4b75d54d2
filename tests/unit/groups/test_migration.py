"""KIP-848's online migration, driven on the coordinator over an in-memory offsets log: a live
classic group upgraded by a consumer-protocol member and downgraded when it leaves, classic members
served inside the consumer group meanwhile, and the policy that forbids either way."""

from __future__ import annotations

import asyncio

from brook.groups.consumer_coordinator import Heartbeat
from brook.groups.coordinator import GroupCoordinator, GroupSettings
from brook.groups.group import GroupState, JoinRequest, JoinResult
from brook.protocol.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from brook.protocol.errors import ErrorCode

from .test_coordinator import MemoryOffsetsLog

TOPIC_ID = bytes(range(16))
G = "migrating"


class TopicsLog(MemoryOffsetsLog):
    def topic_partitions(self) -> dict[str, tuple[bytes, int]]:
        return {"t": (TOPIC_ID, 4)}


def coordinator(
    log: MemoryOffsetsLog | None = None, policy: str = "bidirectional", classic_max_size: int = 2**31 - 1
) -> GroupCoordinator:
    settings = GroupSettings(
        offsets_topic_partitions=4,
        initial_rebalance_delay_ms=50,
        min_session_timeout_ms=10,
        consumer_migration_policy=policy,
        classic_max_size=classic_max_size,
    )
    c = GroupCoordinator(log or TopicsLog(4), settings)
    for p in range(4):
        c.load_partition(p)
    return c


def protocols(owned: dict[str, list[int]] | None = None) -> list[tuple[str, bytes]]:
    return [("range", encode_subscription(Subscription(["t"], owned=owned or {})))]


async def classic_join(c: GroupCoordinator, member: str = "") -> JoinResult:
    return await c.join(
        JoinRequest(G, member, None, "consumer", protocols(), 10_000, 10_000, "classic", "/h", False)
    )


async def stable_classic_group(c: GroupCoordinator) -> tuple[str, str, int]:
    """Two classic members, the leader giving each two partitions."""
    a, b = await asyncio.gather(classic_join(c), classic_join(c))
    leader = a if a.member_id == a.leader else b
    plan = {a.member_id: {"t": [0, 1]}, b.member_id: {"t": [2, 3]}}
    encoded = {m: encode_assignment(Assignment(ps), 3) for m, ps in plan.items()}
    synced = await asyncio.gather(
        *(
            c.sync(G, r.generation, r.member_id, None, "consumer", "range", encoded if r is leader else {})
            for r in (a, b)
        )
    )
    assert [s[0] for s in synced] == [ErrorCode.NONE, ErrorCode.NONE]
    return a.member_id, b.member_id, a.generation


def consumer_join(member: str) -> Heartbeat:
    return Heartbeat(G, member, 0, rebalance_timeout_ms=10_000, subscribed_topic_names=["t"], owned={})


def test_a_live_classic_group_is_upgraded_and_its_members_keep_their_partitions() -> None:
    async def run() -> None:
        c = coordinator()
        a, b, generation = await stable_classic_group(c)
        joined = await c.consumer_heartbeat(consumer_join("m"))
        assert joined.error is ErrorCode.NONE, joined
        group = c.consumer.groups[G]
        assert G not in c._groups
        assert group.members[a].assigned == {TOPIC_ID: {0, 1}} and group.members[a].classic is not None
        assert joined.member_epoch == group.group_epoch == generation + 1
        # Nothing is free yet: the new member waits for partitions the classic members hold.
        assert not joined.assignment
        # The classic members are asked to rejoin; their rejoin gives partitions up (eager: owns none).
        assert c.heartbeat(G, generation, a, None) is ErrorCode.REBALANCE_IN_PROGRESS
        owned_by: dict[str, list[int]] = {}
        for member in (a, b):
            # As a client does: join, sync, heartbeat; again while told to rejoin. The first rejoin
            # only gives partitions up (the member keeps its epoch), the second takes the new epoch.
            for _ in range(3):
                r = await classic_join(c, member)
                assert (r.error, r.leader, r.members) == (ErrorCode.NONE, "", []), r
                code, data, _, _ = await c.sync(G, r.generation, member, None, "consumer", "range", {})
                assert code is ErrorCode.NONE
                owned_by[member] = decode_assignment(data).partitions.get("t", [])
                if c.heartbeat(G, r.generation, member, None) is ErrorCode.NONE:
                    break
            assert r.generation == group.group_epoch
        again = await c.consumer_heartbeat(Heartbeat(G, "m", joined.member_epoch, owned={}))
        mine = sorted(again.assignment.get(TOPIC_ID, set()) if again.assignment else [])
        everyone = sorted([*owned_by[a], *owned_by[b], *mine])
        assert everyone == [0, 1, 2, 3], (owned_by, mine)  # each partition once
        assert mine and owned_by[a] and owned_by[b]

    asyncio.run(run())


def test_the_group_is_classic_again_when_its_last_consumer_member_leaves() -> None:
    async def run() -> None:
        log = TopicsLog(4)
        c = coordinator(log)
        a, b, _ = await stable_classic_group(c)
        joined = await c.consumer_heartbeat(consumer_join("m"))
        epoch = c.consumer.groups[G].group_epoch
        left = await c.consumer_heartbeat(Heartbeat(G, "m", -1))
        assert left.error is ErrorCode.NONE
        assert G not in c.consumer.groups
        classic = c._groups[G]
        assert classic.is_(GroupState.PREPARING_REBALANCE) and classic.generation == epoch
        assert set(classic.members) == {a, b} and joined.member_id == "m"
        # Both rejoin under the classic protocol and form the next generation.
        a2, _ = await asyncio.gather(classic_join(c, a), classic_join(c, b))
        assert a2.error is ErrorCode.NONE and a2.generation == epoch + 1
        # The log says so too: a new coordinator reads a classic group, no consumer group.
        fresh = coordinator(log)
        assert G in fresh._groups and G not in fresh.consumer.groups

    asyncio.run(run())


def test_a_group_larger_than_a_classic_group_may_be_stays_a_consumer_group() -> None:
    """Kafka's validateOnlineDowngradeWithFencedMembers: two classic members remain, group.max.size
    is 1."""

    async def run() -> None:
        c = coordinator(classic_max_size=2)
        await stable_classic_group(c)
        c.settings.classic_max_size = 1  # lowered after the classic group formed (as a restart would)
        await c.consumer_heartbeat(consumer_join("m"))
        left = await c.consumer_heartbeat(Heartbeat(G, "m", -1))
        assert left.error is ErrorCode.NONE
        assert G in c.consumer.groups and G not in c._groups
        assert set(c.consumer.groups[G].members) and "m" not in c.consumer.groups[G].members

    asyncio.run(run())


def test_the_policy_may_forbid_an_upgrade() -> None:
    async def run() -> None:
        c = coordinator(policy="downgrade")
        await stable_classic_group(c)
        refused = await c.consumer_heartbeat(consumer_join("m"))
        assert refused.error is ErrorCode.GROUP_ID_NOT_FOUND
        assert G in c._groups and G not in c.consumer.groups

    asyncio.run(run())


def test_classic_members_survive_a_coordinator_failover_as_classic_members() -> None:
    async def run() -> None:
        log = TopicsLog(4)
        c = coordinator(log)
        a, _, _ = await stable_classic_group(c)
        await c.consumer_heartbeat(consumer_join("m"))
        fresh = coordinator(log)
        member = fresh.consumer.groups[G].members[a]
        assert member.classic is not None and member.classic.session_timeout_ms == 10_000
        assert member.classic.protocols == tuple(protocols())

    asyncio.run(run())


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades_the_group() -> None:
    """Kafka's downgrade on a replaced static member: the group is classic again, Stable (nobody
    rebalances), and the newcomer holds its predecessor's partitions."""

    async def run() -> None:
        c = coordinator()
        a, b, _ = await stable_classic_group(c)
        static = Heartbeat(
            G, "s", 0, instance_id="i1", rebalance_timeout_ms=10_000, subscribed_topic_names=["t"]
        )
        static.owned = {}
        assert (await c.consumer_heartbeat(static)).error is ErrorCode.NONE
        group = c.consumer.groups[G]
        held_by_s = group.target["s"]
        assert held_by_s  # the uniform assignor gave the static member a share
        r = await c.join(
            JoinRequest(G, "", "i1", "consumer", protocols(), 10_000, 10_000, "classic", "/h", True)
        )
        assert r.error is ErrorCode.NONE and r.member_id != "s"
        assert G not in c.consumer.groups
        classic = c._groups[G]
        assert classic.is_(GroupState.STABLE) and set(classic.members) == {a, b, r.member_id}
        assert classic.static_members == {"i1": r.member_id}
        code, data, _, _ = await c.sync(G, classic.generation, r.member_id, "i1", "consumer", "range", {})
        assert code is ErrorCode.NONE
        mine = decode_assignment(data).partitions.get("t", [])
        assert {TOPIC_ID: set(mine)} == held_by_s

    asyncio.run(run())
