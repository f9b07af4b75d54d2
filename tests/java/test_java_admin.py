"""Apache Kafka's Java AdminClient against a Brook broker: every call Brook's ApiVersions advertises,
checked by what the call returns and by what it changed (read back with other calls or clients).
Reassignments and leader elections need replicas on several brokers: test_java_cluster.py."""

from __future__ import annotations

import time

import pytest

from tests.support.broker import BrokerProcess
from tests.support.jvm import JavaClients

from .test_java_consumer import consumer, poll_until
from .test_java_producer import create

pytestmark = pytest.mark.slow


def admin(java: JavaClients, broker: BrokerProcess) -> None:
    java.call("admin", name="a", config={"bootstrap.servers": broker.bootstrap})


def test_topics(jbroker: BrokerProcess, java: JavaClients) -> None:
    admin(java, jbroker)
    made = java.call(
        "create_topics",
        name="a",
        topics=[
            {
                "name": "adm-a",
                "partitions": 2,
                "replication_factor": 1,
                "configs": {"cleanup.policy": "compact"},
            },
            {"name": "adm-b", "assignments": {"0": [0], "1": [0], "2": [0]}},
            {"name": "adm-bad", "partitions": 1, "configs": {"retention.ms": "soon"}},
            {"name": "adm-rf", "partitions": 1, "replication_factor": 3},
        ],
    )
    assert made["adm-a"] == made["adm-b"] == "ok", made
    assert made["adm-bad"]["error"] == "InvalidConfigurationException", made
    assert made["adm-rf"]["error"] == "InvalidReplicationFactorException", made
    again = java.call("create_topics", name="a", topics=[{"name": "adm-a", "partitions": 1}])
    assert again["adm-a"]["error"] == "TopicExistsException"
    dry = java.call(
        "create_topics", name="a", topics=[{"name": "adm-dry", "partitions": 1}], validate_only=True
    )
    assert dry == {"adm-dry": "ok"} and "adm-dry" not in java.call("list_topics", name="a")

    desc = java.call(
        "describe_topics", name="a", topics=["adm-a", "adm-b", "adm-none"], authorized_operations=True
    )
    assert [p["partition"] for p in desc["adm-b"]["partitions"]] == [0, 1, 2]
    assert desc["adm-a"]["partitions"][0]["leader"]["id"] == 0
    assert {"READ", "WRITE", "DELETE", "ALTER", "DESCRIBE"} <= set(desc["adm-a"]["authorizedOperations"])
    assert desc["adm-none"]["error"] == "UnknownTopicOrPartitionException"

    assert java.call("create_partitions", name="a", totals={"adm-a": 5}) == {"adm-a": "ok"}
    fewer = java.call("create_partitions", name="a", totals={"adm-a": 3})
    assert fewer["adm-a"]["error"] == "InvalidPartitionsException", fewer
    desc = java.call("describe_topics", name="a", topics=["adm-a"])
    assert len(desc["adm-a"]["partitions"]) == 5

    gone = java.call("delete_topics", name="a", topics=["adm-b", "adm-none"])
    assert gone["adm-b"] == "ok" and gone["adm-none"]["error"] == "UnknownTopicOrPartitionException"
    assert {"adm-a"} <= set(java.call("list_topics", name="a")) and "adm-b" not in java.call(
        "list_topics", name="a"
    )


def test_configs(jbroker: BrokerProcess, java: JavaClients) -> None:
    admin(java, jbroker)
    create(java, jbroker.bootstrap, "cfg", partitions=1, **{"retention.ms": "3600000"})
    cfg = java.call("describe_configs", name="a", resources=[["TOPIC", "cfg"]])["TOPIC:cfg"]
    assert (
        cfg["retention.ms"]["value"] == "3600000" and cfg["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    )
    assert cfg["segment.bytes"]["source"] == "DEFAULT_CONFIG" and cfg["segment.bytes"]["default"]
    ops = [
        ["retention.ms", None, "DELETE"],
        ["cleanup.policy", "compact", "APPEND"],
        ["max.message.bytes", "123456", "SET"],
    ]
    assert java.call("incremental_alter_configs", name="a", resource=["TOPIC", "cfg"], ops=ops) == {
        "TOPIC:cfg": "ok"
    }
    cfg = java.call("describe_configs", name="a", resources=[["TOPIC", "cfg"]])["TOPIC:cfg"]
    assert cfg["retention.ms"]["source"] == "DEFAULT_CONFIG"
    assert cfg["cleanup.policy"]["value"] == "delete,compact"
    assert cfg["max.message.bytes"]["value"] == "123456"
    bad = java.call(
        "incremental_alter_configs", name="a", resource=["TOPIC", "cfg"], ops=[["retention.ms", "-5", "SET"]]
    )
    assert bad["TOPIC:cfg"]["error"] == "InvalidConfigurationException", bad
    unknown = java.call(
        "incremental_alter_configs", name="a", resource=["TOPIC", "cfg"], ops=[["no.such.config", "1", "SET"]]
    )
    assert unknown["TOPIC:cfg"]["error"] == "InvalidConfigurationException", unknown
    broker_cfg = java.call("describe_configs", name="a", resources=[["BROKER", "0"]], synonyms=True)[
        "BROKER:0"
    ]
    assert broker_cfg["log.retention.ms"]["value"] is not None or broker_cfg["log.retention.hours"]["value"]
    set_dyn = java.call(
        "incremental_alter_configs",
        name="a",
        resource=["BROKER", "0"],
        ops=[["log.retention.ms", "7200000", "SET"]],
    )
    assert set_dyn == {"BROKER:0": "ok"}
    broker_cfg = java.call("describe_configs", name="a", resources=[["BROKER", "0"]])["BROKER:0"]
    assert broker_cfg["log.retention.ms"] == {**broker_cfg["log.retention.ms"], "value": "7200000",
                                              "source": "DYNAMIC_BROKER_CONFIG"}  # fmt: skip
    java.call(
        "incremental_alter_configs",
        name="a",
        resource=["BROKER", "0"],
        ops=[["log.retention.ms", None, "DELETE"]],
    )


def test_records_and_offsets(jbroker: BrokerProcess, java: JavaClients) -> None:
    admin(java, jbroker)
    create(java, jbroker.bootstrap, "recs", partitions=1)
    java.call("producer", name="p", config={"bootstrap.servers": jbroker.bootstrap})
    base = int(time.time() * 1000) - 60_000
    java.call(
        "send", name="p", topic="recs", records=[{"value": str(i), "timestamp": base + i} for i in range(10)]
    )
    tp = [["recs", 0]]
    assert java.call("list_offsets", name="a", partitions=tp, spec="earliest")["recs-0"]["offset"] == 0
    assert java.call("list_offsets", name="a", partitions=tp, spec="latest")["recs-0"]["offset"] == 10
    newest = java.call("list_offsets", name="a", partitions=tp, spec="max_timestamp")["recs-0"]
    assert (newest["offset"], newest["timestamp"]) == (9, base + 9)
    at = java.call("list_offsets", name="a", partitions=tp, spec=str(base + 4))["recs-0"]
    assert (at["offset"], at["timestamp"]) == (4, base + 4)
    assert java.call("delete_records", name="a", offsets={"recs": {"0": 6}}) == {
        "recs-0": {"lowWatermark": 6}
    }
    assert java.call("list_offsets", name="a", partitions=tp, spec="earliest")["recs-0"]["offset"] == 6
    past = java.call("delete_records", name="a", offsets={"recs": {"0": 50}})
    assert past["recs-0"]["error"] == "OffsetOutOfRangeException", past


def test_consumer_groups(jbroker: BrokerProcess, java: JavaClients) -> None:
    admin(java, jbroker)
    create(java, jbroker.bootstrap, "grp", partitions=2)
    java.call("producer", name="p", config={"bootstrap.servers": jbroker.bootstrap})
    java.call(
        "send", name="p", topic="grp", records=[{"value": str(i), "partition": i % 2} for i in range(10)]
    )
    consumer(java, "c", jbroker.bootstrap, "adm-g")
    java.call("subscribe", name="c", topics=["grp"])
    poll_until(java, ["c"], lambda: len(java.call("assignment", name="c")) == 2)
    java.call("commit_sync", name="c", offsets={"grp": {"0": 5, "1": 4}})
    listed = {g["groupId"]: g for g in java.call("list_groups", name="a")}
    assert listed["adm-g"]["groupState"] == "STABLE" and listed["adm-g"]["type"] == "CLASSIC"
    desc = java.call("describe_groups", name="a", groups=["adm-g", "adm-none"])
    assert desc["adm-g"]["members"][0]["assignment"]["topicPartitions"]
    assert desc["adm-none"]["groupState"] == "DEAD"
    assert java.call("list_group_offsets", name="a", group="adm-g") == {"grp-0": 5, "grp-1": 4}
    # Offsets of a group with members: Kafka refuses changing them (UNKNOWN_MEMBER_ID → the admin's
    # UnknownMemberIdException) and deleting the offsets of a subscribed topic.
    busy = java.call("alter_group_offsets", name="a", group="adm-g", offsets={"grp": {"0": 1}})
    assert busy["grp-0"]["error"] == "UnknownMemberIdException", busy
    busy = java.call("delete_group_offsets", name="a", group="adm-g", partitions=[["grp", 0]])
    assert busy["grp-0"]["error"] == "GroupSubscribedToTopicException", busy
    refused = java.call("delete_groups", name="a", groups=["adm-g"])
    assert refused["adm-g"]["error"] == "GroupNotEmptyException", refused
    java.call("close", name="c")
    assert java.call("alter_group_offsets", name="a", group="adm-g", offsets={"grp": {"0": 1}}) == {
        "grp-0": "ok"
    }
    assert java.call("delete_group_offsets", name="a", group="adm-g", partitions=[["grp", 1]]) == {
        "grp-1": "ok"
    }
    assert java.call("list_group_offsets", name="a", group="adm-g") == {"grp-0": 1}
    assert java.call("delete_groups", name="a", groups=["adm-g"]) == {"adm-g": "ok"}
    assert "adm-g" not in {g["groupId"] for g in java.call("list_groups", name="a")}


def test_transactions_and_producers(jbroker: BrokerProcess, java: JavaClients) -> None:
    admin(java, jbroker)
    create(java, jbroker.bootstrap, "hang", partitions=1)
    java.call(
        "producer", name="tx", config={"bootstrap.servers": jbroker.bootstrap, "transactional.id": "adm-tx"}
    )
    java.call("init_transactions", name="tx")
    java.call("begin_transaction", name="tx")
    java.call("send", name="tx", topic="hang", records=[{"value": "open"}])
    listed = {t["transactionalId"]: t for t in java.call("list_transactions", name="a")}
    assert listed["adm-tx"]["state"] == "ONGOING"
    desc = java.call("describe_transactions", name="a", ids=["adm-tx"])["adm-tx"]
    assert desc["state"] == "ONGOING" and desc["topicPartitions"] == [{"partition": 0, "topic": "hang"}]
    producers = java.call("describe_producers", name="a", partitions=[["hang", 0]])["hang-0"][
        "activeProducers"
    ]
    [p] = [p for p in producers if p["producerId"] == desc["producerId"]]
    assert p["currentTransactionStartOffset"] == 0
    # kafka-transactions.sh's abort of a hanging transaction: markers written straight to the partition.
    java.call(
        "abort_transaction",
        name="a",
        partition=["hang", 0],
        producer_id=p["producerId"],
        producer_epoch=p["producerEpoch"],
        coordinator_epoch=p["coordinatorEpoch"] or 0,
    )
    latest = java.call(
        "list_offsets", name="a", partitions=[["hang", 0]], spec="latest", isolation="READ_COMMITTED"
    )
    assert latest["hang-0"]["offset"] == 2  # the record and the abort marker: the LSO moved past both
    producers = java.call("describe_producers", name="a", partitions=[["hang", 0]])["hang-0"][
        "activeProducers"
    ]
    assert all(p["currentTransactionStartOffset"] is None for p in producers), producers


def test_cluster_log_dirs_features_quotas_scram(jbroker: BrokerProcess, java: JavaClients) -> None:
    admin(java, jbroker)
    cluster = java.call("describe_cluster", name="a")
    assert [n["id"] for n in cluster["nodes"]] == [0] and cluster["controller"]["id"] == 0
    assert cluster["cluster_id"] and "ALTER" in cluster["authorized_operations"]

    create(java, jbroker.bootstrap, "sized", partitions=1)
    java.call("producer", name="p", config={"bootstrap.servers": jbroker.bootstrap})
    java.call("send", name="p", topic="sized", records=[{"value_size": 1000}] * 20)
    [(path, d)] = java.call("describe_log_dirs", name="a", brokers=[0])["0"].items()
    assert path == str(jbroker.data_dir.resolve()) and d["error"] is None
    assert d["replicaInfos"]["sized-0"]["size"] > 20_000 and d["replicaInfos"]["sized-0"]["offsetLag"] == 0
    assert 0 < d["usableBytes"] <= d["totalBytes"]

    features = java.call("describe_features", name="a")
    assert features is not None

    java.call(
        "alter_client_quotas",
        name="a",
        entries=[{"entity": {"user": "q"}, "ops": {"producer_byte_rate": 2048}}],
    )
    assert java.call("describe_client_quotas", name="a")["{user=q}"] == {"producer_byte_rate": 2048.0}
    java.call(
        "alter_client_quotas",
        name="a",
        entries=[{"entity": {"user": "q"}, "ops": {"producer_byte_rate": None}}],
    )
    assert "{user=q}" not in java.call("describe_client_quotas", name="a")

    assert java.call("alter_scram", name="a", upserts=[["carol", "SCRAM-SHA-512", "pw", 8192]]) == {
        "carol": "ok"
    }
    info = java.call("describe_scram", name="a", users=["carol"])["carol"]["credentialInfos"]
    assert info == [{"iterations": 8192, "mechanism": "SCRAM_SHA_512"}]
    low = java.call("alter_scram", name="a", upserts=[["dave", "SCRAM-SHA-256", "pw", 100]])
    assert low["dave"]["error"] == "UnacceptableCredentialException", low
    assert java.call("alter_scram", name="a", deletions=[["carol", "SCRAM-SHA-512"]]) == {"carol": "ok"}
    gone = java.call("describe_scram", name="a", users=["carol"])
    assert gone["carol"]["error"] == "ResourceNotFoundException", gone
