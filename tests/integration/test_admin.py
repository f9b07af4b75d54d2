"""Admin APIs through real clients: topics, partitions, configs, cluster description, ListOffsets."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from tests.integration.test_clients import create_topic
from tests.support.broker import BrokerProcess

pytestmark = pytest.mark.slow


def admin(b: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap})


def test_create_describe_alter_configs(broker: BrokerProcess) -> None:
    a = admin(broker)
    create_topic(broker.bootstrap, "cfg", 2, {"retention.ms": "60000"})
    res = ConfigResource(ConfigResource.Type.TOPIC, "cfg")
    configs = a.describe_configs([res])[res].result(10)
    assert configs["retention.ms"].value == "60000"
    assert not configs["retention.ms"].is_default
    assert configs["cleanup.policy"].value == "delete" and configs["cleanup.policy"].is_default

    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        "cfg",
        incremental_configs=[
            ConfigEntry("retention.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    a.incremental_alter_configs([res])[res].result(10)
    configs = a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "cfg")])
    got = next(iter(configs.values())).result(10)
    assert got["retention.bytes"].value == "1048576"
    assert got["retention.ms"].is_default

    bad = ConfigResource(
        ConfigResource.Type.TOPIC,
        "cfg",
        incremental_configs=[
            ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(KafkaException, match=r"retention\.ms must be an integer"):
        a.incremental_alter_configs([bad])[bad].result(10)


def test_create_invalid_config_is_rejected_with_a_message(broker: BrokerProcess) -> None:
    a = admin(broker)
    fut = a.create_topics([NewTopic("badcfg", 1, 1, config={"cleanup.policy": "sometimes"})])
    with pytest.raises(KafkaException, match=r"cleanup\.policy"):
        fut["badcfg"].result(10)
    fut = a.create_topics([NewTopic("rf3", 1, 3)])
    with pytest.raises(KafkaException, match="replication factor"):
        fut["rf3"].result(10)


def test_create_partitions_and_delete_topic(broker: BrokerProcess) -> None:
    a = admin(broker)
    create_topic(broker.bootstrap, "grow", 1)
    a.create_partitions([NewPartitions("grow", 4)])["grow"].result(10)
    assert len(a.list_topics("grow", timeout=10).topics["grow"].partitions) == 4
    with pytest.raises(KafkaException, match="must be larger"):
        a.create_partitions([NewPartitions("grow", 2)])["grow"].result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce("grow", b"x", partition=3)
    assert p.flush(10) == 0

    a.delete_topics(["grow"])["grow"].result(10)
    assert "grow" not in a.list_topics(timeout=10).topics
    assert not list(broker.data_dir.glob("grow-*"))
    # Re-created with the same name: empty, new id.
    create_topic(broker.bootstrap, "grow", 1)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    assert c.get_watermark_offsets(TopicPartition("grow", 0), timeout=10) == (0, 0)
    c.close()


def test_describe_cluster(broker: BrokerProcess) -> None:
    a = admin(broker)  # keep the client alive while its future is pending
    desc = a.describe_cluster().result(10)
    assert desc.controller.id == 0
    assert [(n.id, n.host, n.port) for n in desc.nodes] == [(0, "127.0.0.1", broker.port)]
    assert desc.cluster_id


def test_list_offsets_by_time(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "times", 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    base = int(time.time() * 1000) - 100_000
    for i in range(10):
        p.produce("times", f"v{i}".encode(), partition=0, timestamp=base + i * 1000)
        p.flush(10)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    found = c.offsets_for_times([TopicPartition("times", 0, base + 4500)], timeout=10)
    assert found[0].offset == 5
    found = c.offsets_for_times([TopicPartition("times", 0, base + 999_999)], timeout=10)
    assert found[0].offset == -1  # no record that late: the end
    assert c.get_watermark_offsets(TopicPartition("times", 0), timeout=10) == (0, 10)
    c.close()


def test_auto_create_on_metadata(broker: BrokerProcess) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce("auto-created", b"hello")
    assert p.flush(10) == 0
    md = admin(broker).list_topics("auto-created", timeout=10)
    assert len(md.topics["auto-created"].partitions) == 3  # the broker's --num-partitions
