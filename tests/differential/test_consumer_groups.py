"""The consumer group protocol (KIP-848) on the wire: heartbeat edge cases and a member's life give
Kafka's error codes and messages. Topic ids differ between the two brokers, so assignments (which
name topics by id) are compared by their partitions only."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from brook.protocol import consumer_group_records as rec
from brook.protocol import share_group_records as share_rec
from brook.protocol.group_records import decode_key
from brook.protocol.versions import ApiKey
from tests.support.differential import Wire, agree, differences

from .test_groups import coordinated, join
from .test_records import led
from .test_topics import create, topic

pytestmark = pytest.mark.slow

HB = ApiKey.CONSUMER_GROUP_HEARTBEAT


def heartbeat(group: str, member: str, epoch: int, **fields: Any) -> dict[str, Any]:
    return {"group_id": group, "member_id": member, "member_epoch": epoch, **fields}


def joining(group: str, member: str, **fields: Any) -> dict[str, Any]:
    return heartbeat(
        group,
        member,
        0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=["cg-topic"],
        topic_partitions=[],
        **fields,
    )


@pytest.fixture(scope="module")
def cg_topic(peers: tuple[str, str]) -> str:
    with Wire(peers[0]) as k, Wire(peers[1]) as b:
        agree(k, b, ApiKey.CREATE_TOPICS, 7, create(topic("cg-topic", 2)), ignore=["configs"])
        for w in (k, b):
            led(w, "cg-topic", 2)
            coordinated(w, "cg-life")
            coordinated(w, "cg-edge")
    return "cg-topic"


@pytest.mark.parametrize(
    "request_",
    [
        heartbeat("cg-edge", "m", 0, subscribed_topic_names=["cg-topic"], topic_partitions=[]),
        heartbeat("cg-edge", "m", 0, rebalance_timeout_ms=1000, subscribed_topic_names=["cg-topic"]),
        heartbeat("cg-edge", "m", 0, rebalance_timeout_ms=1000, topic_partitions=[]),
        joining("cg-edge", ""),
        joining("", "m"),
        joining("cg-edge", "m", instance_id=""),
        heartbeat("cg-edge", "m", -3),
        heartbeat("cg-edge", "m", -2),
        joining("cg-edge", "m", server_assignor="sticky"),
        heartbeat("cg-edge", "m", 5),
        heartbeat("cg-edge", "m", -1),
    ],
    ids=[
        "no-rebalance-timeout",
        "no-owned-partitions",
        "no-subscription",
        "no-member-id",
        "empty-group-id",
        "empty-instance-id",
        "epoch-minus-3",
        "static-leave-without-instance",
        "unknown-assignor",
        "unknown-group",
        "leave-unknown-group",
    ],
)
def test_heartbeat_refused(wires: tuple[Wire, Wire], cg_topic: str, request_: dict[str, Any]) -> None:
    k, b = wires
    answer = agree(k, b, HB, 1, request_)
    assert answer["error_code"] != "NONE(0)"


def test_a_join_subscribed_to_nothing(wires: tuple[Wire, Wire], cg_topic: str) -> None:
    """Kafka 4.4 asks a join for a non-null subscription: an empty list joins (and gets nothing)."""
    k, b = wires
    req = heartbeat(
        "cg-edge", "m-empty", 0, rebalance_timeout_ms=1000, subscribed_topic_names=[], topic_partitions=[]
    )
    joined = agree(k, b, HB, 1, req, ignore=["heartbeat_interval_ms", "member_epoch"])
    assert joined["error_code"] == "NONE(0)"
    agree(k, b, HB, 1, heartbeat("cg-edge", "m-empty", -1), ignore=["heartbeat_interval_ms"])


@pytest.mark.parametrize("regex", ["(", "cg-(?=topic)", "(cg)-\\1"], ids=["unclosed", "lookahead", "backref"])
def test_invalid_regex(wires: tuple[Wire, Wire], cg_topic: str, regex: str) -> None:
    """RE2/J and RE2 word their complaints differently; the code is Kafka's. Lookarounds and
    backreferences are valid in Python's `re` but not in RE2's syntax, which Kafka uses."""
    k, b = wires
    req = heartbeat(
        "cg-edge", "m", 0, rebalance_timeout_ms=1000, subscribed_topic_regex=regex, topic_partitions=[]
    )
    answer = agree(k, b, HB, 1, req, ignore=["error_message"])
    assert answer["error_code"] == "INVALID_REGULAR_EXPRESSION(128)"


def test_member_life(wires: tuple[Wire, Wire], cg_topic: str) -> None:
    """Join, heartbeat, fenced epochs, commits checked against the member epoch, a static member's
    instance in use, leave."""
    k, b = wires
    g = "cg-life"
    ignore = ["topic_id", "heartbeat_interval_ms"]
    joined = agree(k, b, HB, 1, joining(g, "m1"), ignore=ignore)
    assert joined["member_epoch"] == 2  # Kafka 4.4 starts a new group one epoch on
    assert joined["assignment"]["topic_partitions"][0]["partitions"] == [0, 1]
    agree(k, b, HB, 1, heartbeat(g, "m1", 7), ignore=ignore)  # FENCED_MEMBER_EPOCH, greater
    agree(k, b, HB, 1, heartbeat(g, "nobody", 1), ignore=ignore)  # UNKNOWN_MEMBER_ID
    # Kafka 4.4 computes a new target assignment off the request path: a second member's first
    # answer carries the old epoch or the new one, depending on timing.
    agree(k, b, HB, 1, joining(g, "s1", instance_id="i1"), ignore=[*ignore, "member_epoch", "assignment"])
    agree(k, b, HB, 1, joining(g, "s2", instance_id="i1"), ignore=ignore)  # UNRELEASED_INSTANCE_ID
    agree(k, b, HB, 1, heartbeat(g, "s2", 1, instance_id="i1"), ignore=ignore)  # FENCED_INSTANCE_ID

    def commit(member: str, epoch: int, version: int = 9) -> dict[str, Any]:
        return {
            "group_id": g,
            "generation_id_or_member_epoch": epoch,
            "member_id": member,
            "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [
                {
                    "name": "cg-topic",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 1,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        }

    agree(k, b, ApiKey.OFFSET_COMMIT, 9, commit("m1", 0))  # STALE_MEMBER_EPOCH
    agree(k, b, ApiKey.OFFSET_COMMIT, 9, commit("nobody", 1))  # UNKNOWN_MEMBER_ID
    agree(k, b, ApiKey.OFFSET_COMMIT, 9, commit("", -1))  # an admin commit to a group with members
    # The state is Assigning or Reconciling on Kafka depending on when its assignment ran.
    listed = {"states_filter": [], "types_filter": ["consumer"]}
    agree(k, b, ApiKey.LIST_GROUPS, 5, listed, ignore=["group_state"])
    agree(k, b, ApiKey.DESCRIBE_GROUPS, 5, {"groups": [g], "include_authorized_operations": False})
    for m, i in (("m1", None), ("s1", "i1")):
        agree(k, b, HB, 1, heartbeat(g, m, -1, instance_id=i), ignore=ignore)
    agree(k, b, HB, 1, heartbeat(g, "m1", -1), ignore=ignore)  # gone: UNKNOWN_MEMBER_ID
    d = [w.send(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [g, "cg-none"]}) for w in (k, b)]
    assert not differences(d[0], d[1], ignore=["group_epoch", "assignment_epoch", "authorized_operations"])


def group_records(
    bootstrap: str, group: str, kinds: frozenset[int] = rec.CONSUMER_RECORD_TYPES | {2}
) -> list[tuple[int, str | None, bytes | None]]:
    """(record type, member id, value) of the group's records in __consumer_offsets of `kinds` (2: the
    classic group, 3-8 and 16: the consumer group's, 10-15: the share group's), in log order."""
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "cg-records-reader", "enable.auto.commit": False}
    )
    try:
        parts = c.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"].partitions
        ends = {
            p: c.get_watermark_offsets(TopicPartition("__consumer_offsets", p), timeout=10)[1] for p in parts
        }
        c.assign([TopicPartition("__consumer_offsets", p, 0) for p, end in ends.items() if end > 0])
        out: list[tuple[int, str | None, bytes | None]] = []
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + 30
        while len(done) < len(ends) and time.monotonic() < deadline:
            m = c.poll(0.5)
            # By position, not by the last record's offset: a partition may end with a transaction
            # marker (another test's TxnOffsetCommit), which is never delivered.
            for tp in c.position([TopicPartition("__consumer_offsets", p) for p in ends if p not in done]):
                if tp.offset >= ends[tp.partition]:
                    done.add(tp.partition)
            if m is None or m.error() is not None:
                continue
            key = m.key()
            if key is None or rec.record_type(key) not in kinds:
                continue
            if rec.record_type(key) == 2:
                kind, gid, member = 2, str(decode_key(key).group), None
            elif rec.record_type(key) in share_rec.SHARE_RECORD_TYPES:
                kind, gid, member = share_rec.decode_share_key(key)
            else:
                kind, gid, member = rec.decode_consumer_key(key)
            if gid == group:
                out.append((kind, member, m.value()))
        assert len(done) == len(ends), "__consumer_offsets not read to its end"
        return out
    finally:
        c.close()


def reencoded(kind: int, value: bytes) -> bytes:
    """A record value decoded and encoded again by Brook's codec."""
    if kind == 3:
        return rec.encode_group_epoch(*rec.decode_group_epoch(value))
    if kind == 5:
        return rec.encode_member_metadata(rec.decode_member_metadata(value))
    if kind == 6:
        return rec.encode_target_epoch(*rec.decode_target_epoch(value))
    if kind == 8:
        return rec.encode_current_assignment(rec.decode_current_assignment(value))
    if kind == rec.REGULAR_EXPRESSION:
        return rec.encode_regex(rec.decode_regex(value))
    assert kind == 7
    return rec.encode_target_member(rec.decode_target_member(value))


def test_group_records_in_kafkas_format(
    peers: tuple[str, str], wires: tuple[Wire, Wire], cg_topic: str
) -> None:
    """A member joins, settles and leaves: both brokers write the same consumer group records to
    __consumer_offsets (types, members, tombstones, in order), and Brook's codec reads Kafka's
    values and writes them back byte for byte."""
    k, b = wires
    g = "cg-records"
    for w in (k, b):
        coordinated(w, g)
        joined = w.send(HB, 1, joining(g, "m1"), normalize=False)
        assert isinstance(joined, dict) and joined["error_code"] == 0, joined
        owned = joined["assignment"]["topic_partitions"]  # the broker's own topic id
        for epoch in (joined["member_epoch"], -1):  # it owns its partitions, then leaves
            answer = w.send(HB, 1, heartbeat(g, "m1", epoch, topic_partitions=owned), normalize=False)
            assert isinstance(answer, dict) and answer["error_code"] == 0, answer
    kafka, brook = (group_records(bootstrap, g) for bootstrap in peers)
    shape = [[(kind, member, value is None) for kind, member, value in records] for records in (kafka, brook)]
    assert shape[0] == shape[1], f"Kafka wrote {shape[0]}, Brook {shape[1]}"
    # The leave: the member's tombstones, the next group epoch, its (empty) target assignment.
    left = [(8, "m1", True), (7, "m1", True), (5, "m1", True), (3, None, False), (6, None, False)]
    assert shape[1][-5:] == left
    for kind, _, value in kafka:
        if value is not None:
            assert reencoded(kind, value) == value, f"type {kind}: {value.hex()}"
    # Each partition's assignment epoch (Kafka 4.4's tagged field), written by both.
    for records in (kafka, brook):
        current = [rec.decode_current_assignment(v) for kind, _, v in records if kind == 8 and v]
        assert any(c.assigned and set(c.epochs) == {(t, p) for t, ps in c.assigned.items() for p in ps}
                   for c in current), current  # fmt: skip


def test_a_regex_subscription_in_kafkas_records(
    peers: tuple[str, str], wires: tuple[Wire, Wire], cg_topic: str
) -> None:
    """A member subscribed by regex: both brokers keep what the regex matched as a
    ConsumerGroupRegularExpression record (type 16), Brook's codec writes Kafka's value back byte for
    byte, and the member's leave ends it with a tombstone on both."""
    k, b = wires
    g, regex = "cg-regex", "cg-top.*"
    for w in (k, b):
        coordinated(w, g)
        first = {**joining(g, "m1"), "subscribed_topic_names": None, "subscribed_topic_regex": regex}
        joined = w.send(HB, 1, first, normalize=False)
        assert isinstance(joined, dict) and joined["error_code"] == 0, joined
        epoch, owned = joined["member_epoch"], []
        deadline = time.monotonic() + 30
        while not owned:  # both resolve a new regex after the heartbeat that brought it
            assert time.monotonic() < deadline, "the regex never assigned cg-topic's partitions"
            time.sleep(0.2)
            answer = w.send(HB, 1, heartbeat(g, "m1", epoch, topic_partitions=[]), normalize=False)
            assert isinstance(answer, dict) and answer["error_code"] == 0, answer
            epoch = answer["member_epoch"]
            owned = (answer["assignment"] or {}).get("topic_partitions") or []
        left = w.send(HB, 1, heartbeat(g, "m1", -1), normalize=False)
        assert isinstance(left, dict) and left["error_code"] == 0, left
    kafka, brook = (group_records(bootstrap, g) for bootstrap in peers)
    regex_records = [
        [(member, value) for kind, member, value in records if kind == rec.REGULAR_EXPRESSION]
        for records in (kafka, brook)
    ]
    for name, records in zip(("Kafka", "Brook"), regex_records, strict=True):
        assert [m for m, _ in records] == [regex] * len(records) and len(records) >= 2, (name, records)
        assert records[-1][1] is None, f"{name} wrote no tombstone for the regex at the leave"
        values = [v for _, v in records if v is not None]
        assert all(rec.decode_regex(v).topics == ["cg-topic"] for v in values), (name, values)
    for _, value in regex_records[0]:
        if value is not None:
            assert reencoded(rec.REGULAR_EXPRESSION, value) == value, value.hex()


def test_offline_migration_and_delete(
    peers: tuple[str, str], wires: tuple[Wire, Wire], cg_topic: str
) -> None:
    """An empty classic group becomes a consumer group when a consumer-protocol member joins, and
    back when a classic member joins the emptied group (Kafka's offline upgrade and downgrade); an
    empty consumer group is deleted. Same answers, and the same records, on both brokers."""
    k, b = wires
    g = "cg-migrate"
    for w in (k, b):
        coordinated(w, g)
    ignore = ["topic_id", "heartbeat_interval_ms"]
    types = {"states_filter": [], "types_filter": []}

    def listed(kafka_may_lag: bool = False) -> dict[str, Any]:
        answers = [w.send(ApiKey.LIST_GROUPS, 5, types) for w in (k, b)]
        mine = [[x for x in a["groups"] if x["group_id"] == g] for a in answers if isinstance(a, dict)]
        # Kafka lists groups as of its offsets partition's last committed write: a group a JoinGroup
        # made without writing a record shows only once a later write to that partition commits.
        if not (kafka_may_lag and mine[0] == []):
            assert mine[0] == mine[1], f"Kafka lists {mine[0]}, Brook {mine[1]}"
        return mine[1][0] if mine[1] else {}

    agree(k, b, ApiKey.JOIN_GROUP, 7, join(g))  # MEMBER_ID_REQUIRED: an empty classic group
    assert listed(kafka_may_lag=True)["group_type"] == "classic"
    agree(k, b, HB, 1, joining(g, "m1"), ignore=ignore)  # upgraded
    assert listed()["group_type"] == "consumer"
    agree(k, b, ApiKey.DELETE_GROUPS, 2, {"groups_names": [g]})  # NON_EMPTY_GROUP
    agree(k, b, HB, 1, heartbeat(g, "m1", -1), ignore=ignore)
    agree(k, b, ApiKey.JOIN_GROUP, 7, join(g))  # MEMBER_ID_REQUIRED, to a downgraded group
    assert listed()["group_type"] == "classic"
    agree(k, b, HB, 1, joining(g, "m2"), ignore=ignore)  # and up again
    agree(k, b, HB, 1, heartbeat(g, "m2", -1), ignore=ignore)
    deleted = agree(k, b, ApiKey.DELETE_GROUPS, 2, {"groups_names": [g]})
    assert deleted["results"][0]["error_code"] == "NONE(0)"
    gone = agree(k, b, ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [g]})
    assert gone["groups"][0]["error_code"] == "GROUP_ID_NOT_FOUND(69)"
    assert listed() == {}
    kafka, brook = (group_records(bootstrap, g) for bootstrap in peers)
    shape = [[(kind, member, value is None) for kind, member, value in records] for records in (kafka, brook)]
    assert shape[0] == shape[1], f"Kafka wrote {shape[0]}, Brook {shape[1]}"


def test_a_live_group_refuses_the_other_protocol(wires: tuple[Wire, Wire], cg_topic: str) -> None:
    """A group with members keeps its protocol: a consumer-protocol member cannot join a live classic
    group of another protocol type (GROUP_ID_NOT_FOUND), nor such a classic member a live consumer
    group (INCONSISTENT_GROUP_PROTOCOL)."""
    k, b = wires
    classic, consumer = "cg-live-classic", "cg-live-consumer"
    connect = {"protocol_type": "connect", "protocols": [{"name": "sessioned", "metadata": b"\x00"}]}
    for w in (k, b):
        coordinated(w, classic)
        coordinated(w, consumer)
        first = w.send(ApiKey.JOIN_GROUP, 7, {**join(classic), **connect}, normalize=False)
        assert isinstance(first, dict)
        again = w.send(ApiKey.JOIN_GROUP, 7, {**join(classic, first["member_id"]), **connect})
        assert isinstance(again, dict) and again["error_code"] == "NONE(0)", again
    ignore = ["topic_id", "heartbeat_interval_ms"]
    refused = agree(k, b, HB, 1, joining(classic, "m1"), ignore=ignore)
    assert refused["error_code"] == "GROUP_ID_NOT_FOUND(69)"
    agree(k, b, HB, 1, joining(consumer, "m1"), ignore=ignore)
    refused = agree(k, b, ApiKey.JOIN_GROUP, 7, {**join(consumer), **connect})
    assert refused["error_code"] == "INCONSISTENT_GROUP_PROTOCOL(23)"


def test_a_subscribed_topic_that_may_not_be_described(wires: tuple[Wire, Wire], cg_topic: str) -> None:
    """One subscribed topic the member may not describe refuses the whole heartbeat (librdkafka's
    0109 with the consumer protocol waits for that error)."""
    k, b = wires
    deny = {
        "resource_type": 2, "resource_name": "cg-denied", "resource_pattern_type": 3,
        "principal": "User:*", "host": "*", "operation": 8, "permission_type": 2,
    }  # fmt: skip
    agree(k, b, ApiKey.CREATE_ACLS, 3, {"creations": [deny]})
    req = joining("cg-edge", "m-denied")
    req["subscribed_topic_names"] = ["cg-topic", "cg-denied"]
    try:
        deadline = time.monotonic() + 20  # Kafka's authorizer learns the ACL from its metadata log
        probe = {"topics": [{"name": "cg-denied"}], "allow_auto_topic_creation": False}
        denied = "TOPIC_AUTHORIZATION_FAILED(29)"
        while k.send(ApiKey.METADATA, 12, probe)["topics"][0]["error_code"] != denied:
            assert time.monotonic() < deadline, "Kafka never applied the ACL"
            time.sleep(0.2)
        answer = agree(k, b, HB, 1, req)
        assert answer["error_code"] == denied
    finally:
        flt = {
            "resource_type_filter": 2, "resource_name_filter": "cg-denied", "pattern_type_filter": 3,
            "principal_filter": "User:*", "host_filter": "*", "operation": 8, "permission_type": 2,
        }  # fmt: skip
        for w in (k, b):
            w.send(ApiKey.DELETE_ACLS, 3, {"filters": [flt]})
