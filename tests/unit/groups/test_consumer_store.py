"""A consumer-protocol group written as Kafka's records and replayed by a coordinator that never saw
it: epochs, members, target and current assignments survive, and the members go on where they were."""

from __future__ import annotations

from brook.groups.consumer_coordinator import ConsumerGroups
from brook.groups.consumer_group import MemberState
from brook.groups.consumer_store import Record
from brook.groups.settings import GroupSettings
from brook.protocol import consumer_group_records as rec
from brook.protocol.errors import ErrorCode

from .test_consumer_group import T1, T2, Clock, _unwritten, coordinator, hb, join


def written(c: ConsumerGroups, log: list[Record], *members: str) -> None:
    log.extend(c.store.records(c.groups["g"], members))


def replayed(log: list[Record]) -> ConsumerGroups:
    c, _ = coordinator()
    for key, value in log:
        c.store.replay(c.groups, key, value)
    c.loaded(list(c.groups))
    return c


def test_a_group_in_the_middle_of_a_rebalance_survives_its_coordinator() -> None:
    c, _ = coordinator()
    log: list[Record] = []
    a = join(c, "A", instance_id="ia", rack_id="r1")
    written(c, log, "A")
    hb(c, "A", a.member_epoch, owned={T1: {0, 1, 2, 3}})
    written(c, log, "A")
    b = join(c, "B", server_assignor="range")
    written(c, log, "B")
    a2 = hb(c, "A", a.member_epoch, owned={T1: {0, 1, 2, 3}})  # A is asked to revoke two
    written(c, log, "A")
    assert a2.assignment is not None
    kinds = [rec.record_type(k) for k, _ in log]
    assert kinds[:5] == [5, 3, 7, 6, 8], "not Kafka's order for a first join"

    d = replayed(log)
    g, old = d.groups["g"], c.groups["g"]
    assert (g.group_epoch, g.assignment_epoch) == (old.group_epoch, old.assignment_epoch)
    assert g.target == old.target
    for mid, m in old.members.items():
        n = g.members[mid]
        assert (n.member_epoch, n.previous_member_epoch, n.state) == (
            m.member_epoch,
            m.previous_member_epoch,
            m.state,
        )
        assert (n.assigned, n.pending_revocation) == (m.assigned, m.pending_revocation)
        assert (n.instance_id, n.rack_id, n.subscribed_names, n.subscribed_regex) == (
            m.instance_id,
            m.rack_id,
            m.subscribed_names,
            m.subscribed_regex,
        )
    assert g.static_members == {"ia": "A"}
    assert g.assignor == old.assignor == "range"
    assert g.members["A"].state is MemberState.UNREVOKED_PARTITIONS
    assert g.members["A"].rebalance_deadline is not None
    assert d.store.records(g, g.members) == [], "the replayed group rewrote what the log holds"
    # The members go on: A acknowledges the revocation, B then gets the partitions it gave up.
    kept = a2.assignment[T1]
    a3 = hb(d, "A", a.member_epoch, owned={T1: kept})
    assert a3.error is ErrorCode.NONE and a3.member_epoch == b.member_epoch
    b2 = hb(d, "B", b.member_epoch, owned={})
    assert b2.error is ErrorCode.NONE and b2.assignment == {T1: {0, 1, 2, 3} - kept}
    assert g.group_epoch == old.group_epoch, "the loaded group's epoch moved without a change"


def test_a_member_that_left_is_gone_after_the_replay() -> None:
    c, _ = coordinator()
    log: list[Record] = []
    a = join(c, "A")
    written(c, log, "A")
    join(c, "B")
    written(c, log, "B")
    hb(c, "A", -1)
    written(c, log)
    tombstones = [rec.record_type(k) for k, v in log if v is None]
    assert tombstones == [8, 7, 5], "a leaving member's tombstones, in Kafka's order"
    d = replayed(log)
    assert set(d.groups["g"].members) == {"B"}
    assert d.groups["g"].group_epoch == c.groups["g"].group_epoch > a.member_epoch
    # Deleting the (then empty) group leaves nothing behind.
    hb(c, "B", -1)
    written(c, log)
    log += c.store.tombstones(c.groups["g"])
    assert "g" not in replayed(log).groups


def test_a_resolved_regex_is_a_record_and_survives_the_replay() -> None:
    """Kafka's ConsumerGroupRegularExpression (type 16): written when a regex is first matched and
    when what it matches changes, replayed by the next coordinator, a tombstone once no member uses
    it."""
    c, _ = coordinator()
    log: list[Record] = []
    a = join(c, "A", subscribed_topic_names=None, subscribed_topic_regex="t.*")
    written(c, log, "A")
    a2 = hb(c, "A", a.member_epoch, owned={})
    written(c, log, "A")
    regex_records = [(k, v) for k, v in log if rec.record_type(k) == rec.REGULAR_EXPRESSION]
    assert len(regex_records) == 1, "one record for the regex, not one per heartbeat"
    key, value = regex_records[0]
    assert rec.decode_consumer_key(key) == (rec.REGULAR_EXPRESSION, "g", "t.*")
    assert value is not None and sorted(rec.decode_regex(value).topics) == ["t1", "t2"]
    d = replayed(log)
    assert d.groups["g"].regex_topics == {"t.*": frozenset({"t1", "t2"})}
    assert d.store.records(d.groups["g"], ["A"]) == [], "the replayed regex rewrote what the log holds"
    hb(c, "A", a2.member_epoch, owned=a2.assignment, subscribed_topic_regex="")  # drops the regex
    written(c, log, "A")
    assert log[-1] is not None and [(rec.record_type(k), v) for k, v in log if v is None] == [(16, None)]
    assert replayed(log).groups["g"].regex_topics == {}


def test_the_records_round_trip() -> None:
    v = rec.CurrentAssignmentValue(7, 6, 1, {T1: {0, 3}}, {T1: {1}})
    assert rec.decode_current_assignment(rec.encode_current_assignment(v)) == v
    assert rec.decode_group_epoch(rec.encode_group_epoch(9, -5)) == (9, -5)
    assert rec.decode_group_epoch(rec.encode_group_epoch(9, 0)) == (9, 0)
    m = rec.MemberMetadataValue(None, "r", "c", "/h", ["a", "b"], "t.*", 300, "uniform")
    assert rec.decode_member_metadata(rec.encode_member_metadata(m)) == m
    r = rec.ResolvedRegex(["a", "b"], 3, 1_700_000_000_000)
    assert rec.decode_regex(rec.encode_regex(r)) == r


def test_topics_that_changed_while_no_one_coordinated_bump_the_epoch() -> None:
    c, _ = coordinator()
    log: list[Record] = []
    a = join(c, "A")
    written(c, log, "A")
    grown = {"t1": (T1, 6), "t2": (T2, 2)}  # t1 gained two partitions meanwhile
    d = ConsumerGroups(GroupSettings(), lambda: grown, lambda g: None, _unwritten, Clock())
    for key, value in log:
        d.store.replay(d.groups, key, value)
    d.loaded(list(d.groups))
    again = hb(d, "A", a.member_epoch, owned={T1: {0, 1, 2, 3}})
    assert again.member_epoch == a.member_epoch + 1
    assert again.assignment == {T1: {0, 1, 2, 3, 4, 5}}
