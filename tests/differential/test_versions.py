"""Every version Brook advertises of the APIs below, the same request at each, compared with Kafka.
Part of the full run only (scripts/differential): BROOK_DIFFERENTIAL_FULL=1."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from brook.handlers import ADVERTISED
from brook.protocol.versions import ApiKey
from tests.support.differential import Wire, agree, differences

from .test_groups import coordinated
from .test_records import RECORDS, fetch, init_producer, led, list_offsets, produce
from .test_topics import create, topic

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("BROOK_DIFFERENTIAL_FULL"), reason="the full run: scripts/differential"
    ),
]

T = "v-topic"
Req = dict[str, Any] | Callable[[Wire, int], dict[str, Any]]


def per_version(v: int) -> str:
    return f"v-group-{v}"


# (API, request: a dict, or a function of (wire, version) for what differs per broker or version,
#  paths allowed to differ at every version)
CASES: list[tuple[int, Req, tuple[str, ...]]] = [
    (ApiKey.METADATA, {"topics": [{"name": T}], "allow_auto_topic_creation": False}, ()),
    (ApiKey.LIST_OFFSETS, list_offsets(T, -1), ()),
    (ApiKey.FETCH, lambda w, v: fetch(T, 0) if v < 13 else by_id(w, fetch(T, 0)), ()),
    (ApiKey.PRODUCE, produce(T, RECORDS), ()),
    (ApiKey.FIND_COORDINATOR, {"key": "v-group", "key_type": 0, "coordinator_keys": ["v-group"]}, ()),
    (ApiKey.HEARTBEAT, {"group_id": "v-none", "generation_id": 1, "member_id": "m"}, ()),
    (
        ApiKey.SYNC_GROUP,
        {
            "group_id": "v-none",
            "generation_id": 1,
            "member_id": "m",
            "assignments": [],
            "protocol_type": "consumer",
            "protocol_name": "range",
        },
        (),
    ),
    (ApiKey.LEAVE_GROUP, {"group_id": "v-none", "member_id": "m", "members": [{"member_id": "m"}]}, ()),
    (
        ApiKey.OFFSET_COMMIT,
        lambda w, v: {
            "group_id": per_version(v),
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "retention_time_ms": -1,
            "topics": [
                {
                    "name": T,
                    "partitions": [{"partition_index": 0, "committed_offset": 2, "committed_metadata": None}],
                }
            ],
        },
        (),
    ),
    (
        ApiKey.OFFSET_FETCH,
        lambda w, v: {
            "group_id": per_version(v),
            "topics": [{"name": T, "partition_indexes": [0]}],
            "groups": [{"group_id": per_version(v), "topics": [{"name": T, "partition_indexes": [0]}]}],
        },
        (),
    ),
    (ApiKey.DESCRIBE_GROUPS, lambda w, v: {"groups": [per_version(v), "v-none"]}, ()),
    (ApiKey.DELETE_GROUPS, {"groups_names": ["v-none"]}, ()),
    (ApiKey.CREATE_TOPICS, create(topic("v-bad", configs={"retention.ms": "soon"})), ()),
    (
        ApiKey.DELETE_TOPICS,
        {"topic_names": ["v-none"], "topics": [{"name": "v-none"}], "timeout_ms": 5000},
        (),
    ),
    (
        ApiKey.CREATE_PARTITIONS,
        {
            "topics": [{"name": "v-none", "count": 3, "assignments": None}],
            "timeout_ms": 5000,
            "validate_only": False,
        },
        (),
    ),
    (
        ApiKey.DELETE_RECORDS,
        {"topics": [{"name": T, "partitions": [{"partition_index": 0, "offset": 99}]}], "timeout_ms": 5000},
        (),
    ),
    (ApiKey.INIT_PRODUCER_ID, {"transactional_id": None, "transaction_timeout_ms": 60000}, ("producer_id",)),
    (
        ApiKey.DESCRIBE_CONFIGS,
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": T,
                    "configuration_keys": ["retention.ms", "cleanup.policy"],
                }
            ]
        },
        (),
    ),
    (
        ApiKey.ALTER_CONFIGS,
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": T,
                    "configs": [{"name": "retention.ms", "value": "soon"}],
                }
            ]
        },
        (),
    ),
    (
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": T,
                    "configs": [{"name": "retention.ms", "config_operation": 0, "value": "soon"}],
                }
            ]
        },
        (),
    ),
    (
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        {
            "replica_id": -1,
            "topics": [
                {"topic": T, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}
            ],
        },
        (),
    ),
    (
        ApiKey.DESCRIBE_ACLS,
        {
            "resource_type_filter": 2,
            "resource_name_filter": T,
            "pattern_type_filter": 3,
            "principal_filter": None,
            "host_filter": None,
            "operation": 1,
            "permission_type": 1,
        },
        (),
    ),
    (ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False, "endpoint_type": 1}, ()),
    (ApiKey.DESCRIBE_PRODUCERS, {"topics": [{"name": T, "partition_indexes": [0, 9]}]}, ()),
    (ApiKey.LIST_TRANSACTIONS, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}, ()),
    (
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        {"components": [{"entity_type": "user", "match_type": 1}], "strict": False},  # match "": refused
        (),
    ),
    (
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        {
            "components": [
                {"entity_type": "user", "match_type": 1, "match": None},
                {"entity_type": "client-id", "match_type": 2, "match": None},
            ],
            "strict": False,
        },
        (),
    ),
    (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": [{"name": "v-nobody"}]}, ()),
    (
        ApiKey.ELECT_LEADERS,
        {"election_type": 0, "topic_partitions": [{"topic": T, "partitions": [0]}], "timeout_ms": 5000},
        (),
    ),
    (
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        {"timeout_ms": 5000, "topics": [{"name": T, "partition_indexes": [0]}]},
        (),
    ),
]


def by_id(w: Wire, req: dict[str, Any]) -> dict[str, Any]:
    """A Fetch v13+ names its topic by this broker's id for it."""
    meta = w.send(ApiKey.METADATA, 12, {"topics": [{"name": T}]}, normalize=False)
    assert isinstance(meta, dict)
    req["topics"][0]["topic_id"] = meta["topics"][0]["topic_id"]
    return req


@pytest.fixture(scope="module")
def versioned(peers: tuple[str, str]) -> str:
    with Wire(peers[0]) as k, Wire(peers[1]) as b:
        agree(k, b, ApiKey.CREATE_TOPICS, 7, create(topic(T)), ignore=["configs"])
        for w in (k, b):
            led(w, T, 1)
            coordinated(w, "v-group")
            init_producer(w)  # Kafka allocates producer ids once its controller has given it a block
        agree(k, b, ApiKey.PRODUCE, 9, produce(T, RECORDS))
    return T


@pytest.mark.parametrize(
    ("api_key", "request_", "ignore"),
    CASES,
    ids=[f"{ApiKey(c[0]).name.lower()}-{i}" for i, c in enumerate(CASES)],
)
def test_every_version(
    peers: tuple[str, str], versioned: str, api_key: int, request_: Req, ignore: tuple[str, ...]
) -> None:
    lo, hi = ADVERTISED[api_key]
    # Versions Kafka 4.4 no longer answers (it closes the connection): Produce v0-2 (message formats 0
    # and 1; UNSUPPORTED_VERSION in Brook), OffsetForLeaderEpoch v0-1 (test_protocol.DELIBERATE_MIN).
    floors: dict[int, int] = {ApiKey.PRODUCE: 3, ApiKey.OFFSET_FOR_LEADER_EPOCH: 2}
    lo = max(lo, floors.get(api_key, lo))
    wrong = []
    for v in range(lo, hi + 1):
        with Wire(peers[0]) as k, Wire(peers[1]) as b:  # fresh: a closed connection stays closed
            answers = [w.send(api_key, v, request_(w, v) if callable(request_) else request_) for w in (k, b)]
        wrong += [f"v{v} {d}" for d in differences(*answers, ignore=ignore)]
    assert not wrong, "\n".join(wrong)
