"""Topics: Metadata, CreateTopics, DeleteTopics, CreatePartitions, configs, at their edges."""

from __future__ import annotations

import pytest

from brook.protocol.versions import ApiKey
from tests.support.cluster import eventually
from tests.support.differential import Wire, agree, differences

pytestmark = pytest.mark.slow


def topic(
    name: str, partitions: int = 1, rf: int = 1, configs: dict[str, str] | None = None
) -> dict[str, object]:
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": rf,
        "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
    }


def create(*topics: dict[str, object], validate_only: bool = False) -> dict[str, object]:
    return {"topics": list(topics), "timeout_ms": 10000, "validate_only": validate_only}


def metadata(*names: str, auto: bool = False) -> dict[str, object]:
    return {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": auto}


def listed(w: Wire, name: str) -> None:
    """Until the broker's Metadata lists a new topic: Kafka answers CreateTopics once its controller has
    committed the topic, and its broker learns it from the metadata log a little later (under load,
    Metadata said UNKNOWN_TOPIC_OR_PARTITION after the CreateTopics answer, 2026-11-28)."""
    def known() -> bool:
        answer = w.send(ApiKey.METADATA, 12, metadata(name), normalize=False)
        return isinstance(answer, dict) and answer["topics"][0]["error_code"] == 0

    eventually(known, what=f"{name} in the broker's Metadata")


def test_metadata_unknown_and_invalid_names(wires: tuple[Wire, Wire]) -> None:
    k, b = wires
    for v in (4, 9, 12):  # v1-3 create topics: see test_metadata_auto_create
        agree(k, b, ApiKey.METADATA, v, metadata("d-no-such-topic"))
    agree(k, b, ApiKey.METADATA, 12, metadata("bad name!", "a" * 250, "..", ""))


@pytest.mark.parametrize(
    "case",
    [
        topic("d-zero-partitions", partitions=0),
        topic("d-negative-rf", rf=-2),
        topic("d-rf-too-big", rf=3),
        topic("bad name!"),
        topic("."),
        topic("d-bad-config-name", configs={"no.such.config": "1"}),
        topic("d-bad-config-value", configs={"retention.ms": "soon"}),
        topic("d-bad-cleanup", configs={"cleanup.policy": "shred"}),
        topic("d-bad-min-isr", configs={"min.insync.replicas": "0"}),
        topic("d-big-message", configs={"max.message.bytes": "-5"}),
    ],
    ids=lambda t: str(t["name"]),
)
def test_create_topics_refused(wires: tuple[Wire, Wire], case: dict[str, object]) -> None:
    k, b = wires
    agree(k, b, ApiKey.CREATE_TOPICS, 7, create(case, validate_only=True))
    agree(k, b, ApiKey.CREATE_TOPICS, 7, create(case))
    agree(k, b, ApiKey.CREATE_TOPICS, 4, create(case))


def test_create_existing_and_duplicate(wires: tuple[Wire, Wire]) -> None:
    k, b = wires
    agree(k, b, ApiKey.CREATE_TOPICS, 7, create(topic("d-twice", 2)), ignore=["configs"])
    listed(k, "d-twice")
    agree(k, b, ApiKey.CREATE_TOPICS, 7, create(topic("d-twice", 2)))
    # A name twice in one request: refused once, neither created (Brook created the first, 2026-11-27).
    agree(k, b, ApiKey.CREATE_TOPICS, 7, create(topic("d-dup"), topic("d-dup")))
    agree(k, b, ApiKey.METADATA, 12, metadata("d-dup"))
    agree(k, b, ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": "d-twice"}] * 2, "timeout_ms": 5000})
    agree(k, b, ApiKey.DELETE_TOPICS, 3, {"topic_names": ["d-twice"] * 2, "timeout_ms": 5000})
    parts = {"name": "d-twice", "count": 4, "assignments": None}
    agree(
        k, b, ApiKey.CREATE_PARTITIONS, 3, {"topics": [parts] * 2, "timeout_ms": 5000, "validate_only": False}
    )
    agree(k, b, ApiKey.METADATA, 12, metadata("d-twice"), ignore=["topic_id"])


def test_delete_unknown(wires: tuple[Wire, Wire]) -> None:
    k, b = wires
    agree(k, b, ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": "d-nope"}], "timeout_ms": 5000})
    agree(k, b, ApiKey.DELETE_TOPICS, 3, {"topic_names": ["d-nope"], "timeout_ms": 5000})


def test_create_partitions_edges(wires: tuple[Wire, Wire]) -> None:
    k, b = wires
    agree(k, b, ApiKey.CREATE_TOPICS, 7, create(topic("d-parts", 3)), ignore=["configs"])
    for count in (3, 2, 0, 5000000):
        req = {
            "topics": [{"name": "d-parts", "count": count, "assignments": None}],
            "timeout_ms": 5000,
            "validate_only": False,
        }
        agree(k, b, ApiKey.CREATE_PARTITIONS, 3, req)
    req = {
        "topics": [{"name": "d-parts-nope", "count": 4, "assignments": None}],
        "timeout_ms": 5000,
        "validate_only": False,
    }
    agree(k, b, ApiKey.CREATE_PARTITIONS, 3, req)


def describe(rtype: int, name: str, keys: list[str] | None) -> dict[str, object]:
    return {
        "resources": [{"resource_type": rtype, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": False,
        "include_documentation": False,
    }


def test_configs_edges(wires: tuple[Wire, Wire]) -> None:
    k, b = wires
    agree(k, b, ApiKey.CREATE_TOPICS, 7, create(topic("d-conf")), ignore=["configs"])
    listed(k, "d-conf")
    agree(k, b, ApiKey.DESCRIBE_CONFIGS, 4, describe(2, "d-conf-nope", None))
    agree(k, b, ApiKey.DESCRIBE_CONFIGS, 4, describe(2, "d-conf", ["retention.ms", "cleanup.policy"]))
    agree(k, b, ApiKey.DESCRIBE_CONFIGS, 4, describe(2, "d-conf", ["no.such.config"]))
    agree(k, b, ApiKey.DESCRIBE_CONFIGS, 4, describe(3, "", ["retention.ms"]))
    agree(k, b, ApiKey.DESCRIBE_CONFIGS, 4, describe(9, "d-conf", None))
    for name, value in [
        ("retention.ms", "soon"),
        ("no.such.config", "1"),
        ("cleanup.policy", "shred"),
        ("retention.ms", "1000"),
    ]:
        alter = {
            "resources": [
                {"resource_type": 2, "resource_name": "d-conf", "configs": [{"name": name, "value": value}]}
            ],
            "validate_only": False,
        }
        agree(k, b, ApiKey.ALTER_CONFIGS, 2, alter)
        inc = {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "d-conf",
                    "configs": [{"name": name, "config_operation": 0, "value": value}],
                }
            ],
            "validate_only": False,
        }
        agree(k, b, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, inc)
    for op in (1, 2, 3, 7):  # DELETE, APPEND, SUBTRACT, and no such operation
        # Deliberate: an unknown operation is INVALID_CONFIG in Brook; Kafka 4.4 fails on it with
        # UNKNOWN_SERVER_ERROR (no Kafka client sends one). docs/compatibility.md.
        ignore = ["responses[0].error_code"] if op == 7 else []
        inc = {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "d-conf",
                    "configs": [{"name": "cleanup.policy", "config_operation": op, "value": "compact"}],
                }
            ],
            "validate_only": False,
        }
        agree(k, b, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, inc, ignore)
    inc = {
        "resources": [
            {
                "resource_type": 2,
                "resource_name": "d-conf-nope",
                "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1"}],
            }
        ],
        "validate_only": False,
    }
    agree(k, b, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, inc)
    agree(k, b, ApiKey.DESCRIBE_CONFIGS, 4, describe(2, "d-conf", ["retention.ms", "cleanup.policy"]))


def test_metadata_auto_create(wires: tuple[Wire, Wire]) -> None:
    """Metadata v1-3 (and v4+ asking for it) auto-creates a topic in both. Deliberate difference: Kafka's
    controller creates it after answering UNKNOWN_TOPIC_OR_PARTITION, Brook before answering with it
    (the client's next Metadata finds it either way). docs/compatibility.md."""
    k, b = wires
    ask = {"topics": [{"name": "d-auto"}]}
    assert k.send(ApiKey.METADATA, 1, ask)["topics"][0]["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION(3)"  # type: ignore[index]
    assert b.send(ApiKey.METADATA, 1, ask)["topics"][0]["error_code"] == "NONE(0)"  # type: ignore[index]
    eventually(lambda: not differences(*(w.send(ApiKey.METADATA, 12, metadata("d-auto")) for w in (k, b))))
