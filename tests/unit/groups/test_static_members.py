"""Static membership (KIP-345, KIP-814): what a group.instance.id coming back with a new member id
does to the group, driven directly over an in-memory offsets log."""

from __future__ import annotations

import asyncio
import gc
import struct
from collections.abc import Awaitable, Callable, Sequence

from brook.groups.coordinator import GroupCoordinator
from brook.groups.group import Group, GroupState, JoinRequest, JoinResult, Member, StaticRejoin
from brook.protocol.errors import ErrorCode
from tests.unit.groups.test_coordinator import coordinator

G = "static-group"


def subscription(
    topics: list[str], owned: Sequence[tuple[str, list[int]]] = (), generation: int = -1
) -> bytes:
    """A ConsumerProtocolSubscription v3, as librdkafka sends it."""

    def s(x: str) -> bytes:
        return struct.pack(">h", len(x)) + x.encode()

    out = struct.pack(">hi", 3, len(topics)) + b"".join(s(t) for t in topics)
    out += struct.pack(">i", 0)  # user data: empty
    out += struct.pack(">i", len(owned))
    for t, ps in owned:
        out += s(t) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
    return out + struct.pack(">i", generation) + struct.pack(">h", -1)  # generation, no rack


SUB = subscription(["t"])


async def join(
    c: GroupCoordinator,
    instance: str | None,
    member: str = "",
    meta: bytes = SUB,
    v9: bool = False,
) -> JoinResult:
    return await c.join(
        JoinRequest(
            G,
            member,
            instance,
            "consumer",
            [("range", meta)],
            10_000,
            10_000,
            "client",
            "/127.0.0.1",
            require_known_member_id=False,
            skip_assignment_supported=v9,
        )
    )


async def stable_pair(c: GroupCoordinator) -> tuple[Group, dict[str, str]]:
    """Instances a and b in one Stable generation; the leader assigns b'A' and b'B'."""
    ra, rb = await asyncio.gather(join(c, "a"), join(c, "b"))
    ids = {"a": ra.member_id, "b": rb.member_id}
    _, group = c.describe(G)
    assert group is not None
    plan = {ids["a"]: b"A", ids["b"]: b"B"}
    results = await asyncio.gather(
        *(
            c.sync(G, ra.generation, mid, inst, None, None, plan if mid == group.leader else {})
            for inst, mid in ids.items()
        )
    )
    assert [r[:2] for r in results] == [(ErrorCode.NONE, b"A"), (ErrorCode.NONE, b"B")]
    assert group.state is GroupState.STABLE
    return group, ids


def run(body: Callable[[GroupCoordinator], Awaitable[None]]) -> None:
    async def main() -> None:
        c = coordinator()
        try:
            await body(c)
        finally:
            await c.stop()

    asyncio.run(main())


def test_restarted_leader_keeps_the_generation_and_does_not_assign_before_v9() -> None:
    async def body(c: GroupCoordinator) -> None:
        group, ids = await stable_pair(c)
        gen = group.generation
        leader_inst = next(i for i, m in ids.items() if m == group.leader)
        other_inst = "b" if leader_inst == "a" else "a"
        r = await join(c, leader_inst)
        assert r.error is ErrorCode.NONE and r.generation == gen and r.member_id != ids[leader_inst]
        # It is told the old id leads, so it acts as a follower and runs no assignor.
        assert r.leader == ids[leader_inst] and r.members == [] and not r.skip_assignment
        assert group.leader == r.member_id and group.state is GroupState.STABLE
        code, assignment, _, _ = await c.sync(G, gen, r.member_id, leader_inst, None, None, {})
        assert (code, assignment) == (ErrorCode.NONE, b"A" if leader_inst == "a" else b"B")
        # Nobody else noticed anything.
        assert c.heartbeat(G, gen, ids[other_inst], other_inst) is ErrorCode.NONE
        assert c.heartbeat(G, gen, ids[leader_inst], leader_inst) is ErrorCode.FENCED_INSTANCE_ID

    run(body)


def test_restarted_leader_is_told_to_skip_assignment_from_v9() -> None:
    async def body(c: GroupCoordinator) -> None:
        group, ids = await stable_pair(c)
        gen = group.generation
        leader_inst = next(i for i, m in ids.items() if m == group.leader)
        r = await join(c, leader_inst, v9=True)
        assert r.error is ErrorCode.NONE and r.generation == gen
        assert r.leader == r.member_id and r.skip_assignment
        assert {(m, i) for m, i, _ in r.members} == {
            (group.static_members[inst], inst) for inst in ("a", "b")
        }
        assert group.state is GroupState.STABLE

    run(body)


def test_restarted_follower_keeps_its_assignment() -> None:
    async def body(c: GroupCoordinator) -> None:
        group, ids = await stable_pair(c)
        gen = group.generation
        follower = next(i for i, m in ids.items() if m != group.leader)
        # Its new metadata differs in what a restart changes (owned partitions), not in topics.
        r = await join(c, follower, meta=subscription(["t"], owned=[("t", [1])]), v9=True)
        assert r.error is ErrorCode.NONE and r.generation == gen and not r.skip_assignment
        assert r.leader == group.leader and r.members == []
        code, assignment, _, _ = await c.sync(G, gen, r.member_id, follower, None, None, {})
        assert (code, assignment) == (ErrorCode.NONE, b"A" if follower == "a" else b"B")
        assert group.state is GroupState.STABLE and group.generation == gen

    run(body)


def test_restart_with_other_topics_rebalances() -> None:
    async def body(c: GroupCoordinator) -> None:
        group, ids = await stable_pair(c)
        gen = group.generation
        task = asyncio.create_task(join(c, "a", meta=subscription(["t", "u"])))
        await asyncio.sleep(0)
        assert group.state is GroupState.PREPARING_REBALANCE
        assert c.heartbeat(G, gen, ids["b"], "b") is ErrorCode.REBALANCE_IN_PROGRESS
        rb = await join(c, "b", member=ids["b"])
        ra = await task
        assert ra.error is ErrorCode.NONE and ra.generation == rb.generation == gen + 1

    run(body)


def test_restart_while_completing_rebalance_fences_the_old_sync_and_rebalances() -> None:
    async def body(c: GroupCoordinator) -> None:
        ra, rb = await asyncio.gather(join(c, "a"), join(c, "b"))
        _, group = c.describe(G)
        assert group is not None and group.state is GroupState.COMPLETING_REBALANCE
        follower, fid = ("b", rb.member_id) if group.leader == ra.member_id else ("a", ra.member_id)
        old_sync = asyncio.create_task(c.sync(G, ra.generation, fid, follower, None, None, {}))
        await asyncio.sleep(0)
        new = asyncio.create_task(join(c, follower))
        assert (await old_sync)[0] is ErrorCode.FENCED_INSTANCE_ID
        # The leader may already have assigned to the old id: a new generation is needed.
        assert group.state is GroupState.PREPARING_REBALANCE
        leader_inst = "a" if follower == "b" else "b"
        rl = await join(c, leader_inst, member=group.static_members[leader_inst])
        rn = await new
        assert rn.error is ErrorCode.NONE and rn.generation == rl.generation == ra.generation + 1

    run(body)


def test_restart_while_preparing_rebalance_joins_it() -> None:
    async def body(c: GroupCoordinator) -> None:
        group, ids = await stable_pair(c)
        gen = group.generation
        # b asks for a rebalance (new topics) and waits for a; then b restarts during it.
        b_first = asyncio.create_task(join(c, "b", member=ids["b"], meta=subscription(["t", "u"])))
        await asyncio.sleep(0)
        assert group.state is GroupState.PREPARING_REBALANCE
        b_new = asyncio.create_task(join(c, "b", meta=subscription(["t", "u"])))
        assert (await b_first).error is ErrorCode.FENCED_INSTANCE_ID
        assert group.state is GroupState.PREPARING_REBALANCE and not b_new.done()
        ra = await join(c, "a", member=ids["a"])
        rb = await b_new
        assert rb.error is ErrorCode.NONE and rb.generation == ra.generation == gen + 1
        assert set(group.members) == {ids["a"], rb.member_id}

    run(body)


def test_known_member_id_checks_against_the_instance() -> None:
    async def body(c: GroupCoordinator) -> None:
        group, ids = await stable_pair(c)
        r = await join(c, "a")  # a restarts: ids["a"] is now stale
        assert (await join(c, "a", member=ids["a"])).error is ErrorCode.FENCED_INSTANCE_ID
        assert (await join(c, "zz", member=r.member_id)).error is ErrorCode.UNKNOWN_MEMBER_ID
        assert group.state is GroupState.STABLE

    run(body)


def test_leader_rejoining_with_the_same_metadata_while_completing_gets_the_generation_again() -> None:
    async def body(c: GroupCoordinator) -> None:
        ra, _ = await asyncio.gather(join(c, "a"), join(c, "b"))
        _, group = c.describe(G)
        assert group is not None and group.state is GroupState.COMPLETING_REBALANCE
        inst = "a" if group.leader == ra.member_id else "b"
        again = await join(c, inst, member=group.leader)
        assert again.generation == ra.generation and len(again.members) == 2
        assert group.state is GroupState.COMPLETING_REBALANCE

    run(body)


def member(mid: str, inst: str, meta: bytes, protocol: str = "range") -> Member:
    return Member(mid, inst, "c", "h", 10_000, 10_000, "consumer", [(protocol, meta)])


def decide(state: GroupState, old: Member, new: Member, others: Sequence[Member] = ()) -> StaticRejoin:
    g = Group("g", state=state, protocol_type="consumer", protocol="range")
    for m in [old, *others]:
        g.members[m.member_id] = m
    assert new.group_instance_id is not None
    g.static_members[new.group_instance_id] = old.member_id
    g.replace_static_member(old.member_id, new)
    return g.static_rejoin(old, new)


def test_static_rejoin_decisions() -> None:
    old, other = member("old", "i", SUB), member("o", "j", SUB)
    assert decide(GroupState.STABLE, old, member("new", "i", SUB), [other]) is StaticRejoin.KEEP
    owned = subscription(["t"], owned=[("t", [0, 1])], generation=4)
    assert decide(GroupState.STABLE, old, member("new", "i", owned), [other]) is StaticRejoin.KEEP
    more = subscription(["t", "u"])
    assert decide(GroupState.STABLE, old, member("new", "i", more), [other]) is StaticRejoin.REBALANCE
    # Unreadable metadata: Kafka's rule (only the selected protocol matters).
    assert decide(GroupState.STABLE, old, member("new", "i", b"\x00"), [other]) is StaticRejoin.KEEP
    # All would now vote for another protocol.
    sticky = member("new", "i", SUB, "cooperative-sticky")
    sticky.protocols.append(("range", SUB))
    o2 = member("o", "j", SUB, "cooperative-sticky")
    o2.protocols.append(("range", SUB))
    assert decide(GroupState.STABLE, old, sticky, [o2]) is StaticRejoin.REBALANCE
    assert decide(GroupState.COMPLETING_REBALANCE, old, member("new", "i", SUB)) is StaticRejoin.REBALANCE
    assert decide(GroupState.PREPARING_REBALANCE, old, member("new", "i", SUB)) is StaticRejoin.JOIN


def test_replacement_takes_assignment_and_leadership() -> None:
    g = Group("g", state=GroupState.STABLE, protocol_type="consumer", protocol="range", leader="old")
    old = member("old", "i", SUB)
    old.assignment = b"mine"
    g.members["old"] = old
    g.static_members["i"] = "old"
    new = member("new", "i", SUB)
    assert g.replace_static_member("old", new) is old
    assert (g.leader, g.static_members, new.assignment) == ("new", {"i": "new"}, b"mine")
    assert list(g.members) == ["new"]


def test_a_member_removed_while_its_join_request_is_gone_leaves_no_unretrieved_error() -> None:
    """A JoinGroup whose client hung up leaves a waiter nobody awaits; failing it must not make asyncio
    log 'Future exception was never retrieved' (the soak's broker logs had one per expired session)."""
    loop = asyncio.new_event_loop()
    unretrieved: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, ctx: unretrieved.append(ctx))
    try:
        m = Member("m-1", None, "c", "/127.0.0.1", 10_000, 30_000, "consumer", [])
        m.join_waiter = loop.create_future()
        m.fail_waiters(ErrorCode.UNKNOWN_MEMBER_ID)
        m.join_waiter = None
        gc.collect()
        assert unretrieved == []
    finally:
        loop.close()
