"""The classic group protocol and offsets: a whole member's life, then the edges."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from brook.protocol.versions import ApiKey
from tests.support.cluster import eventually
from tests.support.differential import Wire, agree, differences

from .conftest import GROUP_MAX_SIZE
from .test_records import led
from .test_topics import create, topic

pytestmark = pytest.mark.slow


def coordinated(w: Wire, group: str) -> None:
    """Until the broker coordinates `group`: Kafka creates __consumer_offsets on the first
    FindCoordinator and answers COORDINATOR_NOT_AVAILABLE meanwhile."""

    def ready() -> bool:
        a = w.send(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
        if not isinstance(a, dict) or a["coordinators"][0]["error_code"] != "NONE(0)":
            return False
        # Kafka's coordinator loads its partitions after it answers FindCoordinator (NOT_COORDINATOR).
        d = w.send(ApiKey.DESCRIBE_GROUPS, 5, describe(group))
        return isinstance(d, dict) and d["groups"][0]["error_code"] == "NONE(0)"

    eventually(ready, 60, f"a coordinator for {group}")


def join(group: str, member: str = "", session_ms: int = 10000, protocols: Any = None) -> dict[str, Any]:
    return {
        "group_id": group,
        "session_timeout_ms": session_ms,
        "rebalance_timeout_ms": 10000,
        "member_id": member,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"\x00\x01"}] if protocols is None else protocols,
        "reason": None,
    }


def commit(
    group: str, generation: int, member: str, name: str = "g-topic", partition: int = 0
) -> dict[str, Any]:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member,
        "group_instance_id": None,
        "retention_time_ms": -1,
        "topics": [
            {
                "name": name,
                "partitions": [
                    {
                        "partition_index": partition,
                        "committed_offset": 1,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "m",
                    }
                ],
            }
        ],
    }


def fetch_offsets(group: str) -> dict[str, Any]:
    return {
        "group_id": group,
        "topics": [{"name": "g-topic", "partition_indexes": [0, 1]}],
        "require_stable": False,
    }


def describe(*groups: str) -> dict[str, Any]:
    return {"groups": list(groups), "include_authorized_operations": False}


@pytest.fixture(scope="module")
def groups_topic(peers: tuple[str, str]) -> str:
    with Wire(peers[0]) as k, Wire(peers[1]) as b:
        agree(k, b, ApiKey.CREATE_TOPICS, 7, create(topic("g-topic", 2)), ignore=["configs"])
        for w in (k, b):
            led(w, "g-topic", 2)
            coordinated(w, "g-life")
    return "g-topic"


def test_member_life(wires: tuple[Wire, Wire], groups_topic: str) -> None:
    """Join (MEMBER_ID_REQUIRED, then with the id), sync, heartbeat, commit, fetch, describe, leave,
    delete: each broker with the member id it gave."""
    k, b = wires
    g = "g-life"
    first = agree(k, b, ApiKey.JOIN_GROUP, 7, join(g))
    assert first["error_code"] == "MEMBER_ID_REQUIRED(79)"
    ids = {}
    for w in (k, b):
        a = w.send(ApiKey.JOIN_GROUP, 7, join(g), normalize=False)
        assert isinstance(a, dict)
        ids[w] = a["member_id"]

    def each(api: int, version: int, make: Any, ignore: tuple[str, ...] = ()) -> dict[str, Any]:
        ka, ba = k.send(api, version, make(ids[k])), b.send(api, version, make(ids[b]))
        diff = differences(ka, ba, ignore=ignore)
        assert not diff, f"{ApiKey(api).name}: {diff}"
        assert isinstance(ka, dict)
        return ka

    joined = each(ApiKey.JOIN_GROUP, 7, lambda m: join(g, m))
    assert joined["generation_id"] == 1
    sync = {
        "group_id": g,
        "generation_id": 1,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocol_name": "range",
    }
    each(
        ApiKey.SYNC_GROUP,
        5,
        lambda m: {**sync, "member_id": m, "assignments": [{"member_id": m, "assignment": b"a"}]},
    )
    each(
        ApiKey.HEARTBEAT,
        4,
        lambda m: {"group_id": g, "generation_id": 1, "member_id": m, "group_instance_id": None},
    )
    each(
        ApiKey.HEARTBEAT,
        4,
        lambda m: {"group_id": g, "generation_id": 7, "member_id": m, "group_instance_id": None},
    )
    each(
        ApiKey.HEARTBEAT,
        4,
        lambda m: {"group_id": g, "generation_id": 1, "member_id": "x", "group_instance_id": None},
    )
    each(ApiKey.OFFSET_COMMIT, 8, lambda m: commit(g, 1, m))
    each(ApiKey.OFFSET_COMMIT, 8, lambda m: commit(g, 2, m))  # ILLEGAL_GENERATION
    each(ApiKey.OFFSET_COMMIT, 8, lambda m: commit(g, 1, "nobody"))  # UNKNOWN_MEMBER_ID
    each(ApiKey.OFFSET_COMMIT, 8, lambda m: commit(g, 1, m, partition=9))
    each(ApiKey.OFFSET_COMMIT, 8, lambda m: commit(g, 1, m, name="g-no-such-topic"))
    agree(k, b, ApiKey.OFFSET_FETCH, 7, fetch_offsets(g))
    agree(k, b, ApiKey.DESCRIBE_GROUPS, 5, describe(g))
    agree(k, b, ApiKey.DELETE_GROUPS, 2, {"groups_names": [g]})  # NON_EMPTY_GROUP
    leave = {"group_id": g}
    each(
        ApiKey.LEAVE_GROUP,
        4,
        lambda m: {**leave, "members": [{"member_id": m, "group_instance_id": None, "reason": None}]},
    )
    each(
        ApiKey.LEAVE_GROUP,
        4,
        lambda m: {**leave, "members": [{"member_id": m, "group_instance_id": None, "reason": None}]},
    )
    agree(k, b, ApiKey.DESCRIBE_GROUPS, 5, describe(g))
    agree(
        k,
        b,
        ApiKey.OFFSET_DELETE,
        0,
        {
            "group_id": g,
            "topics": [{"name": "g-topic", "partitions": [{"partition_index": 0}, {"partition_index": 1}]}],
        },
    )
    agree(k, b, ApiKey.OFFSET_FETCH, 7, fetch_offsets(g))
    agree(k, b, ApiKey.DELETE_GROUPS, 2, {"groups_names": [g, g]})
    agree(k, b, ApiKey.DESCRIBE_GROUPS, 5, describe(g))


@pytest.mark.parametrize(
    "request_",
    [
        join("g-edge", session_ms=1),
        join("g-edge", session_ms=10_000_000),
        join(""),
        join("g-edge", protocols=[]),
        {**join("g-edge"), "protocol_type": ""},
    ],
    ids=["session-too-short", "session-too-long", "empty-group-id", "no-protocols", "no-protocol-type"],
)
def test_join_refused(wires: tuple[Wire, Wire], groups_topic: str, request_: dict[str, Any]) -> None:
    k, b = wires
    agree(k, b, ApiKey.JOIN_GROUP, 7, request_)
    agree(k, b, ApiKey.JOIN_GROUP, 7, {**request_, "member_id": "made-up"})


def full_group(bootstrap: str, group: str, size: int) -> tuple[list[Wire], list[str], int]:
    """`size` members in one generation over their own connections, joined one by one as clients do:
    each newcomer's JoinGroup starts a rebalance, which the members rejoin once DescribeGroups shows
    it; their ids and the generation."""
    wires: list[Wire] = []
    ids: list[str] = []
    answers: list[Any] = []

    def state() -> str:
        d = watcher.send(ApiKey.DESCRIBE_GROUPS, 5, describe(group))
        return d["groups"][0]["group_state"] if isinstance(d, dict) else ""

    with ThreadPoolExecutor(size) as pool, Wire(bootstrap) as watcher:
        for _ in range(size):
            wires.append(Wire(bootstrap))
            required = wires[-1].send(ApiKey.JOIN_GROUP, 7, join(group), normalize=False)
            assert isinstance(required, dict)
            ids.append(required["member_id"])
            joining = [pool.submit(wires[-1].send, ApiKey.JOIN_GROUP, 7, join(group, ids[-1]))]
            if len(ids) > 1:
                eventually(lambda: state() == "PreparingRebalance", 10, "a rebalance")
                joining += [
                    pool.submit(w.send, ApiKey.JOIN_GROUP, 7, join(group, m))
                    for w, m in zip(wires[:-1], ids[:-1], strict=True)
                ]
            answers = [f.result() for f in joining]
            assert all(isinstance(a, dict) and a["error_code"] == "NONE(0)" for a in answers), answers
    return wires, ids, answers[0]["generation_id"]


def test_group_max_size(peers: tuple[str, str], groups_topic: str) -> None:
    """group.max.size (GROUP_MAX_SIZE in conftest) members fill a classic group: a newcomer is
    refused with GROUP_MAX_SIZE_REACHED and no member id, while the group completes its rebalance and
    once it is Stable; its members still sync."""
    g = "g-max"
    for bootstrap in peers:
        with Wire(bootstrap) as w:
            coordinated(w, g)
    members = [full_group(bootstrap, g, GROUP_MAX_SIZE) for bootstrap in peers]
    try:
        with Wire(peers[0]) as k, Wire(peers[1]) as b:
            refused = agree(k, b, ApiKey.JOIN_GROUP, 7, join(g))
            assert refused["error_code"] == "GROUP_MAX_SIZE_REACHED(81)" and refused["member_id"] == ""
            sync = {
                "group_id": g,
                "group_instance_id": None,
                "protocol_type": "consumer",
                "protocol_name": "range",
                "assignments": [],
            }
            for ws, ids, generation in members:
                requests = [{**sync, "generation_id": generation, "member_id": m} for m in ids]
                with ThreadPoolExecutor(len(ws)) as pool:
                    synced = list(pool.map(lambda w, r: w.send(ApiKey.SYNC_GROUP, 5, r), ws, requests))
                assert all(isinstance(a, dict) and a["error_code"] == "NONE(0)" for a in synced), synced
            agree(k, b, ApiKey.JOIN_GROUP, 7, join(g))
            agree(k, b, ApiKey.DESCRIBE_GROUPS, 5, describe(g), ignore=["members"])
    finally:
        for ws, _, _ in members:
            for w in ws:
                w.close()


def test_unknown_group_and_members(wires: tuple[Wire, Wire], groups_topic: str) -> None:
    k, b = wires
    g = "g-none"
    agree(
        k,
        b,
        ApiKey.HEARTBEAT,
        4,
        {"group_id": g, "generation_id": 1, "member_id": "m", "group_instance_id": None},
    )
    agree(
        k,
        b,
        ApiKey.SYNC_GROUP,
        5,
        {
            "group_id": g,
            "generation_id": 1,
            "member_id": "m",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [],
        },
    )
    agree(
        k,
        b,
        ApiKey.LEAVE_GROUP,
        4,
        {"group_id": g, "members": [{"member_id": "m", "group_instance_id": None}]},
    )
    agree(k, b, ApiKey.OFFSET_FETCH, 7, fetch_offsets(g))
    agree(k, b, ApiKey.DESCRIBE_GROUPS, 5, describe(g, ""))
    agree(k, b, ApiKey.DELETE_GROUPS, 2, {"groups_names": [g]})
    agree(k, b, ApiKey.OFFSET_DELETE, 0, {"group_id": g, "topics": []})
    agree(k, b, ApiKey.OFFSET_COMMIT, 8, commit(g, 5, "m"))
    agree(k, b, ApiKey.OFFSET_COMMIT, 8, commit("g-simple", -1, ""))  # a simple (standalone) commit
    agree(k, b, ApiKey.OFFSET_FETCH, 7, fetch_offsets("g-simple"))
    agree(k, b, ApiKey.LIST_GROUPS, 4, {"states_filter": ["NoSuchState"]})
