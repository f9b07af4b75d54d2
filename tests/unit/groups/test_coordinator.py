"""The group coordinator's rules, driven directly (no network) over an in-memory offsets log."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest

from brook.groups.consumer_coordinator import Heartbeat
from brook.groups.coordinator import GroupCoordinator, GroupSettings
from brook.groups.group import GroupState, JoinRequest
from brook.groups.ports import OffsetCommit
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.primitives import java_string_hash


class MemoryOffsetsLog:
    def __init__(self, partitions: int) -> None:
        self.batches: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.fail = False

    async def ensure_topic(self, partitions: int, replication_factor: int) -> None:
        pass

    def is_local_leader(self, partition: int) -> bool:
        return True

    def topic_exists(self, topic: str) -> bool:
        return True

    async def append(self, partition: int, batch: bytes) -> None:
        if self.fail:
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS)
        self.batches[partition].append(batch)

    def read_batches(self, partition: int) -> Iterator[bytes]:
        yield from self.batches[partition]

    def topic_partitions(self) -> dict[str, tuple[bytes, int]]:
        return {}  # classic groups never resolve subscriptions


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def coordinator(log: MemoryOffsetsLog | None = None, clock: Clock | None = None) -> GroupCoordinator:
    # A short initial delay lets concurrent first joins form one generation, as real members would.
    settings = GroupSettings(
        offsets_topic_partitions=4, initial_rebalance_delay_ms=100, min_session_timeout_ms=10
    )
    c = GroupCoordinator(log or MemoryOffsetsLog(4), settings, clock or Clock())
    for p in range(4):
        c.load_partition(p)
    return c


async def join(
    c: GroupCoordinator,
    group: str,
    member: str = "",
    instance: str | None = None,
    protocols: list[tuple[str, bytes]] | None = None,
    timeout_ms: int = 10_000,
    require_known_member_id: bool = False,
) -> tuple[str, int, ErrorCode]:
    """A JoinGroup, with the same session and rebalance timeout; KIP-394 only when required."""
    r = await c.join(
        JoinRequest(
            group,
            member,
            instance,
            "consumer",
            protocols or [("range", b"\x00\x00\x00\x00\x00\x00")],
            timeout_ms,
            timeout_ms,
            "client",
            "/127.0.0.1",
            require_known_member_id=require_known_member_id,
        )
    )
    return r.member_id, r.generation, r.error


def test_java_string_hash_matches_kafka() -> None:
    # Values printed by Java 17's String.hashCode() on this machine.
    assert java_string_hash("") == 0
    assert java_string_hash("my-group") == -1906497762
    assert java_string_hash("consumer-group-ümlaut") == 1641023690
    assert abs(java_string_hash("my-group")) % 50 == 12


def test_commit_fetch_and_replay_from_the_log() -> None:
    async def run() -> None:
        log = MemoryOffsetsLog(4)
        c = coordinator(log)
        res = await c.commit_offsets(
            "g", -1, "", None, [OffsetCommit("t", 0, 42, 3, "meta")], lambda t, p: True
        )
        assert res == {("t", 0): ErrorCode.NONE}
        fresh = coordinator(log)  # a new coordinator (e.g. after a restart) reads the same log
        code, rows = fresh.fetch_offsets("g", [("t", [0, 1])])
        assert code == ErrorCode.NONE
        assert [(t, p, v.offset if v else None, v.metadata if v else None) for t, p, v in rows] == [
            ("t", 0, 42, "meta"),
            ("t", 1, None, None),
        ]

    asyncio.run(run())


def test_failed_append_is_not_acknowledged() -> None:
    async def run() -> None:
        log = MemoryOffsetsLog(4)
        c = coordinator(log)
        log.fail = True
        res = await c.commit_offsets("g", -1, "", None, [OffsetCommit("t", 0, 1, -1, "")], lambda t, p: True)
        assert res == {("t", 0): ErrorCode.NOT_ENOUGH_REPLICAS}
        assert c.fetch_offsets("g", None) == (ErrorCode.NONE, [])

    asyncio.run(run())


def test_offsets_of_empty_groups_expire() -> None:
    async def run() -> None:
        clock = Clock()
        log = MemoryOffsetsLog(4)
        c = coordinator(log, clock)
        await c.commit_offsets("old", -1, "", None, [OffsetCommit("t", 0, 1, -1, "")], lambda t, p: True)
        clock.now += 3600
        await c.commit_offsets("new", -1, "", None, [OffsetCommit("t", 0, 2, -1, "")], lambda t, p: True)
        clock.now += c.settings.offsets_retention_minutes * 60 - 1800
        assert await c.expire_offsets() == 1
        assert c.fetch_offsets("old", None)[1] == []
        assert len(c.fetch_offsets("new", None)[1]) == 1
        assert coordinator(log, clock).fetch_offsets("old", None)[1] == []  # the tombstone is in the log

    asyncio.run(run())


def test_offsets_of_an_active_group_do_not_expire() -> None:
    async def run() -> None:
        clock = Clock()
        c = coordinator(clock=clock)
        member, gen, err = await join(c, "live")
        assert err == ErrorCode.NONE
        await c.sync("live", gen, member, None, None, None, {member: b"x"})
        await c.commit_offsets(
            "live", gen, member, None, [OffsetCommit("t", 0, 5, -1, "")], lambda t, p: True
        )
        clock.now += c.settings.offsets_retention_minutes * 60 * 2
        assert await c.expire_offsets() == 0
        await c.stop()

    asyncio.run(run())


def test_protocol_chosen_by_votes_among_common_ones() -> None:
    async def run() -> None:
        c = coordinator()
        both = [("cooperative-sticky", b""), ("range", b"")]
        t1 = asyncio.create_task(join(c, "votes", protocols=both))
        t2 = asyncio.create_task(join(c, "votes", protocols=[("range", b""), ("cooperative-sticky", b"")]))
        t3 = asyncio.create_task(join(c, "votes", protocols=both))
        await asyncio.gather(t1, t2, t3)
        _, group = c.describe("votes")
        assert group is not None and group.protocol == "cooperative-sticky"
        await c.stop()

    asyncio.run(run())


def test_first_join_does_not_wait_for_ids_never_used() -> None:
    """KIP-394: a client handed an id (MEMBER_ID_REQUIRED) that never comes back with it does not
    hold a new group's first join: Kafka completes it when the initial delay ends, not when the
    id's session (60 s here) runs out."""

    async def run() -> None:
        c = coordinator()

        def first_join(member: str) -> Coroutine[Any, Any, tuple[str, int, ErrorCode]]:
            return join(c, "pending", member, timeout_ms=60_000, require_known_member_id=True)

        abandoned, _, code = await first_join("")
        used, _, code = await first_join("")
        assert code == ErrorCode.MEMBER_ID_REQUIRED and abandoned != used
        _, generation, code = await asyncio.wait_for(first_join(used), 5)
        assert (generation, code) == (1, ErrorCode.NONE)
        # The abandoned id stays valid until its session ends, as in Kafka: it joins the group.
        joined = asyncio.create_task(first_join(abandoned))
        await asyncio.sleep(0.05)
        _, group = c.describe("pending")
        assert group is not None and abandoned in group.members
        joined.cancel()
        await c.stop()

    asyncio.run(run())


def test_static_member_restart_keeps_its_assignment_without_rebalance() -> None:
    async def run() -> None:
        c = coordinator()
        a = asyncio.create_task(join(c, "static", instance="a"))
        b = asyncio.create_task(join(c, "static", instance="b"))
        (ma, gen, _), (mb, _, _) = await asyncio.gather(a, b)
        _, group = c.describe("static")
        assert group is not None
        leader = group.leader
        await asyncio.gather(
            c.sync("static", gen, ma, "a", None, None, {ma: b"A", mb: b"B"} if leader == ma else {}),
            c.sync("static", gen, mb, "b", None, None, {ma: b"A", mb: b"B"} if leader == mb else {}),
        )
        follower, instance, old_id = ("b", "b", mb) if leader == ma else ("a", "a", ma)
        # The follower restarts with the same group.instance.id and no member id.
        new_id, new_gen, err = await join(c, "static", instance=instance)
        assert err == ErrorCode.NONE and new_gen == gen and new_id != old_id
        assert group.state is GroupState.STABLE
        code, assignment, _, _ = await c.sync("static", gen, new_id, instance, None, None, {})
        assert (code, assignment) == (ErrorCode.NONE, b"B" if follower == "b" else b"A")
        # The old incarnation is fenced.
        assert c.heartbeat("static", gen, old_id, instance) == ErrorCode.FENCED_INSTANCE_ID
        await c.stop()

    asyncio.run(run())


def test_delete_groups_only_when_empty() -> None:
    async def run() -> None:
        c = coordinator()
        member, _, _ = await join(c, "busy")
        await c.commit_offsets("idle", -1, "", None, [OffsetCommit("t", 0, 1, -1, "")], lambda t, p: True)
        res = await c.delete_groups(["busy", "idle", "missing"])
        assert res == {
            "busy": ErrorCode.NON_EMPTY_GROUP,
            "idle": ErrorCode.NONE,
            "missing": ErrorCode.GROUP_ID_NOT_FOUND,
        }
        assert c.fetch_offsets("idle", None)[1] == []
        _, per_member = await c.leave("busy", [(member, None)])
        assert per_member == [ErrorCode.NONE]
        assert (await c.delete_groups(["busy"])) == {"busy": ErrorCode.NONE}
        await c.stop()

    asyncio.run(run())


def test_delete_groups_sees_an_expired_session_at_once() -> None:
    """A member whose session deadline has passed is gone for DeleteGroups even before the expiry loop's
    next tick, and the group's tombstone is its last record (it does not come back on reload)."""

    async def run() -> None:
        log = MemoryOffsetsLog(4)
        c = coordinator(log)  # not started: no expiry loop runs
        r = await c.join(JoinRequest(
            "gone", "", "instance-1", "consumer", [("range", b"")], 50, 50, "client", "/127.0.0.1",
            require_known_member_id=False,
        ))  # fmt: skip
        await c.sync("gone", r.generation, r.member_id, "instance-1", None, None, {r.member_id: b"A"})
        await c.commit_offsets(
            "gone", r.generation, r.member_id, "instance-1", [OffsetCommit("t", 0, 5, -1, "")],
            lambda t, p: True,
        )  # fmt: skip
        await asyncio.sleep(0.1)  # past the 50 ms session
        assert await c.delete_groups(["gone"]) == {"gone": ErrorCode.NONE}
        await asyncio.sleep(0.05)  # background writes, if any, land now
        await c.stop()
        reloaded = coordinator(log)
        assert reloaded.describe("gone")[1] is None
        assert reloaded.fetch_offsets("gone", None)[1] == []

    asyncio.run(run())


def test_offsets_of_an_active_consumer_protocol_group_do_not_expire() -> None:
    async def run() -> None:
        clock = Clock()
        c = coordinator(clock=clock)
        joined = await c.consumer_heartbeat(
            Heartbeat("kip848", "m1", 0, rebalance_timeout_ms=10_000, subscribed_topic_names=["t"], owned={})
        )
        assert joined.error == ErrorCode.NONE
        commit = [OffsetCommit("t", 0, 5, -1, "")]
        assert await c.commit_offsets(
            "kip848", joined.member_epoch, "m1", None, commit, lambda t, p: True
        ) == {("t", 0): ErrorCode.NONE}
        clock.now += c.settings.offsets_retention_minutes * 60 * 2
        assert await c.expire_offsets() == 0
        assert len(c.fetch_offsets("kip848", None)[1]) == 1

    asyncio.run(run())


class HeldLog(MemoryOffsetsLog):
    """Appends, then waits for `hold` (acks=all waiting for followers) when `holding`."""

    def __init__(self) -> None:
        super().__init__(4)
        self.hold = asyncio.Event()
        self.holding = False

    async def append(self, partition: int, batch: bytes) -> None:
        await super().append(partition, batch)
        if self.holding:
            await self.hold.wait()


def _commit(c: GroupCoordinator, offset: int) -> Coroutine[Any, Any, object]:
    return c.commit_offsets("g", -1, "", None, [OffsetCommit("t", 0, offset, -1, "")], lambda t, p: True)


def _offset(c: GroupCoordinator) -> int | None:
    code, rows = c.fetch_offsets("g", [("t", [0])])
    assert code is ErrorCode.NONE
    ((_, _, value),) = rows
    return None if value is None else value.offset


def _txn_commit(c: GroupCoordinator, offset: int) -> Coroutine[Any, Any, object]:
    commits = [OffsetCommit("t", 0, offset, -1, "")]
    return c.commit_txn_offsets("g", 9, 0, -1, "", None, commits, lambda t, p: True)


# A coordinator write whose request goes away (its connection closes while the write waits for
# acks=all): the records are in the log, so memory must say what the log says, as after loading it.
Write = Callable[[GroupCoordinator], Coroutine[Any, Any, object]]
Applied = Callable[[GroupCoordinator], bool]
WRITES: dict[str, tuple[Write, Applied]] = {
    "offset commit": (lambda c: _commit(c, 42), lambda c: _offset(c) == 42),
    "transactional offset commit, then its COMMIT marker": (
        lambda c: _txn_commit(c, 43),
        lambda c: (c.complete_txn(c.partition_for("g"), 9, True), _offset(c))[1] == 43,
    ),
    "offset delete": (lambda c: c.delete_offsets("g", [("t", 0)]), lambda c: _offset(c) is None),
    "group delete": (
        lambda c: c.delete_groups(["g"]),
        lambda c: "g" not in {g.group_id for g in c.list_groups()},
    ),
}


@pytest.mark.parametrize("write", WRITES)
def test_a_write_whose_request_went_away_is_applied(write: str) -> None:
    start, applied = WRITES[write]

    async def run() -> None:
        log = HeldLog()
        c = coordinator(log)
        await _commit(c, 41)  # the group has an offset
        log.holding = True
        task = asyncio.create_task(start(c))
        await asyncio.sleep(0.01)
        task.cancel()  # the client's connection closed
        with pytest.raises(asyncio.CancelledError):
            await task
        log.hold.set()
        await asyncio.sleep(0.01)
        assert applied(c)

    asyncio.run(run())
