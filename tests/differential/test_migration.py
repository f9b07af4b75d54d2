"""KIP-848's online migration on the wire, against Kafka 4.4: a live classic group is upgraded when
a consumer-protocol member joins, its classic member goes on under the classic protocol inside the
consumer group (told to rejoin, given its share by the broker), and the group is classic again when
the consumer-protocol member leaves. Each broker runs the same clients; their answers and their
records in __consumer_offsets are compared."""

from __future__ import annotations

import codecs
import time
from typing import Any

import pytest

from brook.protocol import consumer_group_records as rec
from brook.protocol.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from brook.protocol.versions import ApiKey
from tests.support.differential import Wire, agree, differences

from .test_consumer_groups import HB, cg_topic, group_records, heartbeat, joining, reencoded
from .test_groups import commit, coordinated, join

pytestmark = pytest.mark.slow

__all__ = ["cg_topic"]  # the module's fixture, shared

G = "cg-online"
PROTOCOLS = [{"name": "range", "metadata": encode_subscription(Subscription(["cg-topic"]))}]
IGNORE = ["topic_id", "heartbeat_interval_ms"]


class Pair:
    """The same classic member on each broker, each with the member id its broker gave."""

    def __init__(self, k: Wire, b: Wire) -> None:
        self.wires = (k, b)
        self.ids: dict[Wire, str] = {}

    def each(self, api: int, version: int, make: Any, ignore: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        answers = [w.send(api, version, make(w, self.ids.get(w, ""))) for w in self.wires]
        diff = differences(answers[0], answers[1], ignore=list(ignore))
        assert not diff, f"{ApiKey(api).name}: {diff}"
        assert all(isinstance(a, dict) for a in answers)
        return answers  # type: ignore[return-value]

    def raw(self, api: int, version: int, make: Any) -> list[dict[str, Any]]:
        answers = [w.send(api, version, make(w, self.ids.get(w, "")), normalize=False) for w in self.wires]
        assert all(isinstance(a, dict) for a in answers), answers
        return answers  # type: ignore[return-value]


def sync(member: str, generation: int, assignments: dict[str, bytes] | None = None) -> dict[str, Any]:
    return {
        "group_id": G,
        "generation_id": generation,
        "member_id": member,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()],
    }


def beat(member: str, generation: int) -> dict[str, Any]:
    return {"group_id": G, "generation_id": generation, "member_id": member, "group_instance_id": None}


def _bytes(value: bytes | str) -> bytes:
    """A bytes field of a decoded answer, which the decoder makes text (bytes past ASCII escaped)."""
    if isinstance(value, bytes):
        return value
    return bytes(codecs.escape_decode(value.encode("latin-1"))[0])


def group_type(w: Wire) -> str:
    listed = w.send(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert isinstance(listed, dict)
    return next((g["group_type"] for g in listed["groups"] if g["group_id"] == G), "")


def settle(pair: Pair, generation: int) -> tuple[list[int], list[int]]:
    """Drive each broker's classic member and consumer member as clients would until both hold
    their share: the classic one rejoins while its heartbeat says REBALANCE_IN_PROGRESS, the other
    heartbeats with what it owns. Returns, per broker, the classic member's generation and the
    partitions it holds (checked equal on both brokers by the caller)."""
    gens, parts = [], []
    for w in pair.wires:
        mid, gen, epoch, owned_c, owned_m = pair.ids[w], generation, 2, [0, 1], []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            hb = w.send(HB, 1, heartbeat(G, "m1", epoch, topic_partitions=[]), normalize=False)
            assert isinstance(hb, dict) and hb["error_code"] == 0, hb
            epoch = hb["member_epoch"]
            if hb["assignment"] is not None:
                owned_m = sorted(p for t in hb["assignment"]["topic_partitions"] for p in t["partitions"])
            answer = w.send(ApiKey.HEARTBEAT, 4, beat(mid, gen), normalize=False)
            assert isinstance(answer, dict)
            if answer["error_code"] == 0 and owned_m and len(owned_c) + len(owned_m) == 2:
                break
            joined = w.send(ApiKey.JOIN_GROUP, 7, join(G, mid, protocols=PROTOCOLS), normalize=False)
            assert isinstance(joined, dict) and joined["error_code"] == 0, joined
            assert (joined["leader"], joined["members"]) == ("", []), joined  # the broker assigns
            gen = joined["generation_id"]
            synced = w.send(ApiKey.SYNC_GROUP, 5, sync(mid, gen), normalize=False)
            assert isinstance(synced, dict) and synced["error_code"] == 0, synced
            owned_c = decode_assignment(_bytes(synced["assignment"])).partitions.get("cg-topic", [])
            time.sleep(0.3)
        else:
            raise AssertionError(f"the group did not settle: classic {owned_c}, consumer {owned_m}")
        assert sorted(owned_c + owned_m) == [0, 1], (owned_c, owned_m)  # each partition once
        gens.append(gen)
        parts.append(owned_c)
    return gens, parts


def test_online_upgrade_and_downgrade(
    peers: tuple[str, str], wires: tuple[Wire, Wire], cg_topic: str
) -> None:
    k, b = wires
    for w in wires:
        coordinated(w, G)
    pair = Pair(k, b)
    # A classic group: one member, the leader, holding both partitions.
    for w, first in zip(
        wires, pair.raw(ApiKey.JOIN_GROUP, 7, lambda w, m: join(G, protocols=PROTOCOLS)), strict=True
    ):
        pair.ids[w] = first["member_id"]
    joined = pair.each(ApiKey.JOIN_GROUP, 7, lambda w, m: join(G, m, protocols=PROTOCOLS))[0]
    assert joined["generation_id"] == 1
    both = encode_assignment(Assignment({"cg-topic": [0, 1]}), 3)
    pair.each(ApiKey.SYNC_GROUP, 5, lambda w, m: sync(m, 1, {m: both}))
    assert [group_type(w) for w in wires] == ["classic", "classic"]

    # A consumer-protocol member joins: the group is upgraded, the classic member keeps its partitions
    # until it rejoins. (Kafka 4.4 computes the new target off the request path: the first answer's
    # epoch and assignment depend on timing.)
    upgraded = agree(k, b, HB, 1, joining(G, "m1"), ignore=[*IGNORE, "member_epoch", "assignment"])
    assert upgraded["error_code"] == "NONE(0)"
    assert [group_type(w) for w in wires] == ["consumer", "consumer"]
    told = pair.each(ApiKey.HEARTBEAT, 4, lambda w, m: beat(m, 1))[0]
    assert told["error_code"] == "REBALANCE_IN_PROGRESS(27)"
    pair.each(ApiKey.OFFSET_COMMIT, 8, lambda w, m: commit(G, 1, m, name="cg-topic"))  # its generation
    pair.each(ApiKey.OFFSET_COMMIT, 8, lambda w, m: commit(G, 5, m, name="cg-topic"))  # ILLEGAL_GENERATION
    pair.each(ApiKey.SYNC_GROUP, 5, lambda w, m: {**sync(m, 1), "protocol_name": "roundrobin"})
    gens, parts = settle(pair, 1)
    assert gens[0] == gens[1] and parts[0] == parts[1] and len(parts[0]) == 1, (gens, parts)
    pair.each(
        ApiKey.LEAVE_GROUP,
        4,
        lambda w, m: {
            "group_id": G,
            "members": [{"member_id": "nobody", "group_instance_id": None, "reason": None}],
        },
    )
    # Members are listed by member id, which differ between the brokers: who holds what was
    # compared above.
    ignore = [
        "member_id",
        "authorized_operations",
        "topic_id",
        "client_host",
        "assignment",
        "target_assignment",
    ]
    described = agree(k, b, ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [G]}, ignore=ignore)
    assert len(described["groups"][0]["members"]) == 2
    for w in wires:  # KIP-1099's member types: one classic (0), one of the consumer protocol (1)
        v1 = w.send(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": [G]}, normalize=False)
        assert isinstance(v1, dict)
        assert sorted(m["member_type"] for m in v1["groups"][0]["members"]) == [0, 1], v1

    # Its last consumer-protocol member leaves: a classic group again, rebalancing at once.
    agree(k, b, HB, 1, heartbeat(G, "m1", -1), ignore=IGNORE)
    assert [group_type(w) for w in wires] == ["classic", "classic"]
    told = pair.each(ApiKey.HEARTBEAT, 4, lambda w, m: beat(m, gens[0]))[0]
    assert told["error_code"] == "REBALANCE_IN_PROGRESS(27)"
    rejoined = pair.each(ApiKey.JOIN_GROUP, 7, lambda w, m: join(G, m, protocols=PROTOCOLS))[0]
    assert rejoined["generation_id"] == gens[0] + 1
    pair.each(
        ApiKey.LEAVE_GROUP,
        4,
        lambda w, m: {
            "group_id": G,
            "members": [{"member_id": m, "group_instance_id": None, "reason": None}],
        },
    )

    # The same records, and Kafka's classic member metadata read and written back byte for byte.
    kafka, brook = (group_records(bootstrap, G) for bootstrap in peers)
    for records in (kafka, brook):
        kinds = [kind for kind, _, _ in records]
        assert kinds.count(2) >= 2 and rec.GROUP_METADATA in kinds, kinds
    shape = [sorted({(kind, value is None) for kind, _, value in records}) for records in (kafka, brook)]
    assert shape[0] == shape[1], f"Kafka wrote {shape[0]}, Brook {shape[1]}"
    classic_members = [v for kind, _, v in kafka if kind == rec.MEMBER_METADATA and v is not None]
    assert any(rec.decode_member_metadata(v).classic is not None for v in classic_members)
    for value in classic_members:
        assert reencoded(rec.MEMBER_METADATA, value) == value, value.hex()


def test_a_classic_static_member_replacing_the_consumer_one_downgrades(
    wires: tuple[Wire, Wire], cg_topic: str
) -> None:
    """Kafka's downgrade when a classic static member takes the place of the last consumer-protocol
    member (the same group.instance.id): the group is classic again at once, without a rebalance."""
    k, b = wires
    g = "cg-replace"
    for w in wires:
        coordinated(w, g)
    pair = Pair(k, b)
    for w, first in zip(
        wires, pair.raw(ApiKey.JOIN_GROUP, 7, lambda w, m: {**join(g, protocols=PROTOCOLS)}), strict=True
    ):
        pair.ids[w] = first["member_id"]
    pair.each(ApiKey.JOIN_GROUP, 7, lambda w, m: join(g, m, protocols=PROTOCOLS))
    both = encode_assignment(Assignment({"cg-topic": [0, 1]}), 3)
    pair.each(ApiKey.SYNC_GROUP, 5, lambda w, m: {**sync(m, 1, {m: both}), "group_id": g})
    static = joining(g, "s1", instance_id="i1")
    agree(k, b, HB, 1, static, ignore=[*IGNORE, "member_epoch", "assignment"])
    assert [group_type_of(w, g) for w in wires] == ["consumer", "consumer"]
    replacing = {**join(g, protocols=PROTOCOLS), "group_instance_id": "i1"}
    replaced = agree(k, b, ApiKey.JOIN_GROUP, 7, replacing, ignore=["generation_id"])
    assert replaced["error_code"] == "NONE(0)"
    assert [group_type_of(w, g) for w in wires] == ["classic", "classic"]
    states = [describe_state(w, g) for w in wires]
    assert states == ["Stable", "Stable"], states


def group_type_of(w: Wire, group: str) -> str:
    listed = w.send(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert isinstance(listed, dict)
    return next((x["group_type"] for x in listed["groups"] if x["group_id"] == group), "")


def describe_state(w: Wire, group: str) -> str:
    d = w.send(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False})
    assert isinstance(d, dict)
    return str(d["groups"][0]["group_state"])
