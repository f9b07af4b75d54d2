"""A partition leader killed during a streaming read loses nothing (three brokers: etcd + 3 processes).

Uses tests/support/cluster.py's Cluster (`bootstrap`, `broker(node_id).kill()`).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.spark.helpers import require_spark

require_spark()
pytestmark = [pytest.mark.slow, pytest.mark.needs_cluster]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Any]:
    from tests.support.cluster import Cluster

    c = Cluster(tmp_path / "cluster").start()
    try:
        yield c
    finally:
        c.stop()


def _kill(cluster: Any, node_id: int) -> None:
    """kill -9 the broker with this node id."""
    cluster.broker(node_id).kill()


def test_leader_killed_during_streaming_read_loses_nothing(spark: Any, cluster: Any, tmp_path: Path) -> None:
    bootstrap = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("fo", 3, 3, config={"min.insync.replicas": "2"})])["fo"].result(30)
    time.sleep(1)

    acked: list[bytes] = []
    stop = threading.Event()

    def produce() -> None:
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 60_000})

        def cb(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                acked.append(msg.value())

        i = 0
        while not stop.is_set():
            try:
                p.produce("fo", value=b"%09d" % i, key=str(i % 31).encode(), on_delivery=cb)
                i += 1
            except BufferError:
                p.poll(0.05)
            if i % 200 == 0:
                p.poll(0)
                time.sleep(0.01)
        p.flush(60)

    rows: list[Any] = []
    lock = threading.Lock()

    def collect(df: Any, _batch_id: int) -> None:
        got = df.select("partition", "offset", "value").collect()
        with lock:
            rows.extend(got)

    q = (
        spark.readStream.format("brook")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "fo")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "5000")
        .load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    producer = threading.Thread(target=produce)
    producer.start()
    try:
        time.sleep(4)
        leader = admin.list_topics("fo", timeout=10).topics["fo"].partitions[0].leader
        _kill(cluster, leader)
        acked_at_kill = len(acked)
        time.sleep(6)
        stop.set()
        producer.join(90)
        want = set(acked)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with lock:
                have = {r.value for r in rows}
            if want <= have:
                break
            assert q.exception() is None, q.exception()
            time.sleep(0.5)
    finally:
        stop.set()
        q.stop()
    seen = Counter((r.partition, r.offset) for r in rows)
    assert not [k for k, c in seen.items() if c > 1], "records read twice"
    missing = want - {r.value for r in rows}
    assert not missing, f"{len(missing)} acknowledged records never read"
    assert len(want) > 1000
    assert len(want) > acked_at_kill, "no record was acknowledged after the leader was killed"
    with lock:
        read_before = {r.value for r in rows}
    assert read_before, "the query read nothing"
