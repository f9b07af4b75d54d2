"""Share groups as Kafka 4.4's ShareGroup* records (brook.share.store): what a coordinator writes
after each change is what the next one replays, so members keep their epochs and assignments
across a failover; a member that left, and a deleted group, stay gone."""

from __future__ import annotations

import asyncio

from brook.protocol import share_group_records as rec
from brook.protocol.errors import ErrorCode
from brook.share.group import ShareGroups, ShareHeartbeat
from brook.share.store import Record

from .test_group import T, join

Log = list[Record]


def groups(log: Log, partitions: int = 4) -> ShareGroups:
    g = ShareGroups(lambda: {"t": (T, partitions)}, lambda _g: (45000, 5000))

    async def write(group_id: str, records: list[Record]) -> ErrorCode:
        log.extend(records)
        return ErrorCode.NONE

    g.write = write
    return g


def replayed(log: Log) -> ShareGroups:
    g = groups([])
    for key, value in log:
        g.replay(key, value)
    g.loaded(g.group_ids())
    return g


def test_a_group_survives_its_coordinator() -> None:
    log: Log = []
    g = groups(log)
    for m in ("a", "b"):
        join(g, m)
        asyncio.run(g.persist("g", [m]))
    before = g.groups["g"]
    after = replayed(log).groups["g"]
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    for mid, m in before.members.items():
        n = after.members[mid]
        assert (n.member_epoch, n.subscribed, n.client_id) == (m.member_epoch, m.subscribed, m.client_id)
        assert {t: sorted(ps) for t, ps in n.assigned.items()} == {
            t: sorted(ps) for t, ps in m.assigned.items()
        }
    # "a" heartbeats on with the epoch it last had (it has not heartbeated since "b" joined): it
    # moves to the group's epoch and is told its share; the unchanged topics bump nothing.
    again = replayed(log)
    r = again.heartbeat(ShareHeartbeat("g", "a", before.members["a"].member_epoch))
    assert (r.error, r.member_epoch) == (ErrorCode.NONE, before.assignment_epoch)
    assert r.assignment == {T: [0, 2]}
    assert again.groups["g"].group_epoch == before.group_epoch


def test_a_member_that_left_and_a_deleted_group_stay_gone() -> None:
    log: Log = []
    g = groups(log)
    for m in ("a", "b"):
        join(g, m)
        asyncio.run(g.persist("g", [m]))
    g.heartbeat(ShareHeartbeat("g", "b", -1))
    asyncio.run(g.persist("g", ["b"]))
    assert set(replayed(log).groups["g"].members) == {"a"}
    assert sum(1 for key, value in log if value is None and rec.decode_share_key(key)[2] == "b") == 3
    g.heartbeat(ShareHeartbeat("g", "a", -1))
    asyncio.run(g.persist("g", ["a"]))
    asyncio.run(g.delete("g"))
    assert "g" not in replayed(log).groups


def test_the_records_round_trip() -> None:
    member = rec.ShareMemberValue("r1", "client", "/10.0.0.1", ["a", "b"])
    assert rec.decode_share_member(rec.encode_share_member(member)) == member
    current = rec.ShareCurrentAssignment(5, 4, 0, {T: {0, 2}})
    assert rec.decode_share_current(rec.encode_share_current(current)) == current
    assert rec.decode_share_epoch(rec.encode_share_epoch(7, -3)) == (7, -3)


def test_members_read_back_are_not_expired_before_their_partition_is_loaded() -> None:
    """Members replayed from the log get their session when the whole partition is loaded; the
    expiry sweep runs between the slices of a long replay and must not see them before."""
    log: Log = []
    g = groups(log)
    join(g, "a")
    asyncio.run(g.persist("g", ["a"]))
    again = groups([])
    for key, value in log:
        again.replay(key, value)
    assert again.expire() == []
    again.loaded(again.group_ids())
    assert again.expire() == [] and list(again.groups["g"].members) == ["a"]
