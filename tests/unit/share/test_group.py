"""Share group membership (brook.share.group): joins, epochs, Kafka's SimpleAssignor, leaving."""

from __future__ import annotations

from brook.protocol.errors import ErrorCode
from brook.share.group import ShareGroups, ShareHeartbeat

T = b"\x01" * 16


def groups(partitions: int) -> ShareGroups:
    return ShareGroups(lambda: {"t": (T, partitions)}, lambda _g: (45000, 5000))


def join(g: ShareGroups, member: str) -> int:
    r = g.heartbeat(ShareHeartbeat("g", member, 0, subscribed_topic_names=["t"]))
    assert r.error == ErrorCode.NONE
    return r.member_epoch


def assigned(g: ShareGroups) -> dict[str, list[int]]:
    return {m.member_id: sorted(m.assigned.get(T, [])) for m in g.describe("g").members.values()}


def test_fewer_members_than_partitions_split_them() -> None:
    g = groups(4)
    join(g, "a")
    assert assigned(g) == {"a": [0, 1, 2, 3]}
    join(g, "b")
    assert assigned(g) == {"a": [0, 2], "b": [1, 3]}


def test_more_members_than_partitions_share_them() -> None:
    g = groups(2)
    for m in "abcdefgh":
        join(g, m)
    got = assigned(g)
    assert sorted(p for ps in got.values() for p in ps) == [0] * 4 + [1] * 4
    assert all(len(ps) == 1 for ps in got.values())


def test_epochs_fencing_and_leave() -> None:
    g = groups(1)
    epoch = join(g, "a")
    r = g.heartbeat(ShareHeartbeat("g", "a", epoch + 5))
    assert r.error == ErrorCode.FENCED_MEMBER_EPOCH
    r = g.heartbeat(ShareHeartbeat("g", "x", 3))
    assert r.error == ErrorCode.UNKNOWN_MEMBER_ID
    r = g.heartbeat(ShareHeartbeat("g", "a", epoch))
    assert r.error == ErrorCode.NONE and r.assignment is None  # unchanged: not sent again
    r = g.heartbeat(ShareHeartbeat("g", "a", -1))
    assert (r.error, r.member_epoch) == (ErrorCode.NONE, -1)
    assert g.describe("g").state == "Empty"
    r = g.heartbeat(ShareHeartbeat("g", "b", 0))
    assert r.error == ErrorCode.INVALID_REQUEST  # a first heartbeat names its topics
