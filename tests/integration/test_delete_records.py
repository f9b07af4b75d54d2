"""DeleteRecords with real admin clients: the log start offset moves, durably, and in a cluster the
followers follow it (a new leader after failover starts where the old one did)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.integration.test_clients import confluent_consume, create_topic
from tests.integration.test_cluster import cluster, create, partition_md  # noqa: F401 (fixture)
from tests.support.broker import BrokerProcess
from tests.support.cluster import Cluster, eventually

pytestmark = pytest.mark.slow


def produce(bootstrap: str, topic: str, partition: int, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), partition=partition)
        if i % 10 == 9:
            p.flush(10)  # several batches, so a deletion can fall inside one
    assert p.flush(30) == 0


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return int(low), int(high)
    finally:
        c.close()


def test_delete_records_moves_the_log_start_durably(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data").start()
    try:
        create_topic(b.bootstrap, "dr", partitions=2)
        create_topic(b.bootstrap, "dr-compact", partitions=1, config={"cleanup.policy": "compact"})
        for part in (0, 1):
            produce(b.bootstrap, "dr", part, 50)
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        futures = a.delete_records(
            [TopicPartition("dr", 0, 25), TopicPartition("dr", 1, -1)], operation_timeout=5
        )
        lows = {tp.partition: f.result(10).low_watermark for tp, f in futures.items()}
        assert lows == {0: 25, 1: 50}
        for tp in (TopicPartition("dr", 0, 51), TopicPartition("dr-compact", 0, 0)):
            with pytest.raises(KafkaException) as e:
                a.delete_records([tp])[tp].result(10)
            assert e.value.args[0].name() in ("OFFSET_OUT_OF_RANGE", "POLICY_VIOLATION")
        assert watermarks(b.bootstrap, "dr", 0) == (25, 50)
        got = confluent_consume(b.bootstrap, "dr", 1, 25, extra={"auto.offset.reset": "earliest"})
        assert [off for _, off, *_ in got] == list(range(25, 50))  # nothing below 25, from a batch inside
        b.kill()  # no clean shutdown: the checkpoint alone must keep it
        b.start()
        assert watermarks(b.bootstrap, "dr", 0) == (25, 50)
        assert watermarks(b.bootstrap, "dr", 1) == (50, 50)
    finally:
        b.stop()


def test_kafka_python_delete_records(broker: BrokerProcess) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition as KTP

    create_topic(broker.bootstrap, "dr-kp", partitions=1)
    produce(broker.bootstrap, "dr-kp", 0, 20)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        result = admin.delete_records({KTP("dr-kp", 0): 12}, timeout_ms=5000)
    finally:
        admin.close()
    assert result[KTP("dr-kp", 0)]["low_watermark"] == 12
    assert watermarks(broker.bootstrap, "dr-kp", 0) == (12, 20)


def test_followers_follow_the_log_start_and_keep_it_after_failover(cluster: Cluster) -> None:  # noqa: F811
    create(cluster, "drc", 1, 3)
    produce(cluster.bootstrap, "drc", 0, 40)
    leader = partition_md(cluster, "drc").leader
    a = AdminClient({"bootstrap.servers": cluster.bootstrap})
    tp = TopicPartition("drc", 0, 30)
    # The answer comes once every in-sync follower's log starts at 30 too.
    assert a.delete_records([tp], operation_timeout=10)[tp].result(20).low_watermark == 30
    for b in cluster.brokers:
        assert (b.data_dir / "drc-0" / "log-start-offset").read_text().strip() == "30"
    cluster.broker(leader).kill()
    eventually(lambda: partition_md(cluster, "drc").leader not in (leader, -1), what="a new leader")
    assert eventually(lambda: watermarks(cluster.bootstrap, "drc", 0) == (30, 40), what="the watermarks")
