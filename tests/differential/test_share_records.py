"""A share group's records in __consumer_offsets against Kafka 4.4: the same member's join and
leave write the same kinds of record on both brokers, and Kafka's values read and written back by
Brook's codec are byte for byte Kafka's (a Brook coordinator replays a log Kafka's could have
written)."""

from __future__ import annotations

import pytest

from brook.protocol import share_group_records as rec
from brook.protocol.versions import ApiKey
from tests.support.differential import Wire, agree

from .test_consumer_groups import group_records
from .test_groups import coordinated
from .test_records import led
from .test_topics import create, topic

pytestmark = pytest.mark.slow

SG = ApiKey.SHARE_GROUP_HEARTBEAT
G = "sg-records"
KINDS = frozenset(rec.SHARE_RECORD_TYPES - {rec.STATE_PARTITION_METADATA})


def reencoded(kind: int, value: bytes) -> bytes:
    if kind == rec.MEMBER_METADATA:
        return rec.encode_share_member(rec.decode_share_member(value))
    if kind == rec.GROUP_METADATA:
        return rec.encode_share_epoch(*rec.decode_share_epoch(value))
    if kind == rec.TARGET_ASSIGNMENT_METADATA:
        return rec.encode_target_epoch(*rec.decode_target_epoch(value))
    if kind == rec.TARGET_ASSIGNMENT_MEMBER:
        return rec.encode_target_member(rec.decode_target_member(value))
    assert kind == rec.CURRENT_MEMBER_ASSIGNMENT
    return rec.encode_share_current(rec.decode_share_current(value))


def test_a_share_members_records_in_kafkas_format(peers: tuple[str, str], wires: tuple[Wire, Wire]) -> None:
    k, b = wires
    agree(k, b, ApiKey.CREATE_TOPICS, 7, create(topic("sg-topic", 2)), ignore=["configs"])
    for w in wires:
        led(w, "sg-topic", 2)
        coordinated(w, G)
    ignore = ["topic_id", "heartbeat_interval_ms", "member_epoch", "assignment"]
    join = {"group_id": G, "member_id": "s1", "member_epoch": 0, "subscribed_topic_names": ["sg-topic"]}
    joined = agree(k, b, SG, 1, join, ignore=ignore)
    assert joined["error_code"] == "NONE(0)"
    epochs = [w.send(SG, 1, {**join, "member_epoch": 0}, normalize=False) for w in wires]
    for w, answer in zip(wires, epochs, strict=True):
        assert isinstance(answer, dict)
        left = w.send(SG, 1, {"group_id": G, "member_id": "s1", "member_epoch": -1}, normalize=False)
        assert isinstance(left, dict) and left["error_code"] == 0, left
    kafka, brook = (group_records(bootstrap, G, KINDS) for bootstrap in peers)
    shape = [sorted({(kind, member, value is None) for kind, member, value in r}) for r in (kafka, brook)]
    assert shape[0] == shape[1], f"Kafka wrote {shape[0]}, Brook {shape[1]}"
    assert {kind for kind, _, _ in kafka} == KINDS, kafka
    for kind, _, value in kafka:
        if value is not None:
            assert reencoded(kind, value) == value, (kind, value.hex())
