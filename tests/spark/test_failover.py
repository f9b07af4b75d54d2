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

from tests.spark.helpers import batch_ids, require_spark

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
    """Killed once the query has committed a few micro-batches, so the kill lands mid-stream whatever
    the machine's speed; the query plans batches (offset look-ups) while the partition has no leader."""
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
                time.sleep(0.1)  # about 2,000 records a second: the query keeps up
        p.flush(60)

    rows: list[Any] = []
    lock = threading.Lock()

    def collect(df: Any, _batch_id: int) -> None:
        got = df.select("partition", "offset", "value").collect()
        with lock:
            rows.extend(got)

    checkpoint = tmp_path / "ck"
    q = (
        spark.readStream.format("brook")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "fo")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "10000")
        .load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    producer = threading.Thread(target=produce)
    producer.start()
    try:
        def progressed(batches: int) -> bool:
            assert q.exception() is None, q.exception()
            with lock:
                read = len(rows)
            return read > 0 and len(batch_ids(checkpoint, "commits")) >= batches

        def read_all(want: set[bytes]) -> bool:
            assert q.exception() is None, q.exception()
            with lock:
                return want <= {r.value for r in rows}

        wait_for(lambda: progressed(3), 120, "three committed micro-batches with records")
        with lock:
            read_before = len(rows)
        committed_before = len(batch_ids(checkpoint, "commits"))
        leader = admin.list_topics("fo", timeout=10).topics["fo"].partitions[0].leader
        _kill(cluster, leader)
        acked_at_kill = len(acked)
        wait_for(lambda: progressed(committed_before + 3), 120, "three more micro-batches after the kill")
        wait_for(lambda: len(acked) > acked_at_kill + 1000, 60, "records acknowledged after the kill")
        stop.set()
        producer.join(90)
        want = set(acked)
        wait_for(lambda: read_all(want), 120, "every acknowledged record to be read")
    finally:
        stop.set()
        q.stop()
    assert read_before < len(rows), "the kill came after the query had read everything"
    by_position = Counter((r.partition, r.offset) for r in rows)
    assert not [k for k, c in by_position.items() if c > 1], "records read twice"
    by_value = Counter(r.value for r in rows)
    assert not [v for v, c in by_value.items() if c > 1], "a record is twice in the topic or was read twice"
    missing = want - set(by_value)
    assert not missing, f"{len(missing)} acknowledged records never read"


def wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)


def test_query_planned_while_a_partition_has_no_leader_waits_for_it(
    spark: Any, cluster: Any, tmp_path: Path
) -> None:
    """The query plans its first offsets (earliest) while partition 0 has no leader at all (its only
    replica is down): librdkafka answers OFFSET_INVALID (-1001) then, which once became a range
    "-1001..-1 no longer available". The source must wait for the leader to come back."""
    bootstrap = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("down", 3, 1)])["down"].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    values = [b"%06d" % i for i in range(3000)]
    for v in values:
        p.produce("down", value=v, partition=int(v) % 3)
    assert p.flush(30) == 0
    del p
    down = cluster.broker(admin.list_topics("down", timeout=10).topics["down"].partitions[0].leader)
    down.kill()
    rows: list[Any] = []
    q = None
    try:
        deadline = time.monotonic() + 30
        while admin.list_topics("down", timeout=10).topics["down"].partitions[0].leader != -1:
            assert time.monotonic() < deadline, "partition 0 still has a leader"
            time.sleep(0.2)
        q = (
            spark.readStream.format("brook")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", "down")
            .option("startingOffsets", "earliest")
            .load()
            .writeStream.foreachBatch(lambda df, _id: rows.extend(df.select("value").collect()))
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start()
        )
        time.sleep(5)  # the query plans meanwhile (nothing to wait on: it is blocked, on purpose)
        assert not rows, "read partition 0 while it had no leader?"
    finally:
        down.restart()  # its log is intact: it leads partition 0 again
    assert q is not None
    try:
        q.awaitTermination(120)
        assert q.exception() is None, q.exception()
    finally:
        q.stop()
    assert sorted(r.value for r in rows) == values
