"""Batch and streaming reads with real PySpark (local[2]) against a real Brook."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.spark.helpers import consume_all, create_topic, produce, require_spark
from tests.support.broker import BrokerProcess

require_spark()
pytestmark = pytest.mark.slow

# A fixed CreateTime (recent: retention deletes old segments), so the timestamp column is checked exactly.
TS_MS = int(time.time() * 1000) - 60_000


def reader(spark: Any, brook: BrokerProcess, **opts: str) -> Any:
    r = spark.read.format("brook").option("kafka.bootstrap.servers", brook.bootstrap)
    for k, v in opts.items():
        r = r.option(k, v)
    return r


def test_batch_read_returns_exactly_what_was_produced(spark: Any, brook: BrokerProcess) -> None:
    create_topic(brook.bootstrap, "exact", 3)
    records = []
    for i in range(3000):
        key = None if i % 5 == 0 else f"k{i % 17}".encode()
        value = None if i % 97 == 0 else os.urandom(i % 60) + b"\x00\xff" + str(i).encode()
        headers = [("n", str(i).encode()), ("bin", b"\x00\x01")] if i % 3 else []
        records.append((key, value, headers, i % 3))
    produce(brook.bootstrap, "exact", records, timestamp_ms=TS_MS)
    produced = consume_all(brook.bootstrap, "exact")

    df = reader(spark, brook, subscribe="exact", includeHeaders="true").load()
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"
    ]
    rows = df.collect()
    got = sorted(
        (r.partition, r.offset, r.key, r.value, [(h.key, h.value) for h in (r.headers or [])]) for r in rows
    )
    assert got == sorted(produced)
    assert len(got) == 3000
    assert {r.topic for r in rows} == {"exact"}
    assert {r.timestampType for r in rows} == {0}  # CreateTime, as Spark's Kafka source numbers it
    want_ts = datetime.fromtimestamp(TS_MS / 1000, tz=UTC).replace(tzinfo=None)
    assert {r.timestamp for r in rows} == {want_ts}  # session time zone is UTC


def test_offsets_json_and_max_records_per_partition(spark: Any, brook: BrokerProcess) -> None:
    create_topic(brook.bootstrap, "ranges", 2)
    produce(brook.bootstrap, "ranges", [(None, str(i).encode(), None, i % 2) for i in range(1000)])
    df = reader(
        spark,
        brook,
        subscribe="ranges",
        startingOffsets=json.dumps({"ranges": {"0": 100, "1": -2}}),
        endingOffsets=json.dumps({"ranges": {"0": 400, "1": -1}}),
        maxRecordsPerPartition="100",
    ).load()
    # [100, 400) of partition 0 in 3 tasks, [0, 500) of partition 1 in 5.
    assert df.rdd.getNumPartitions() == 8
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == sorted([(0, o) for o in range(100, 400)] + [(1, o) for o in range(500)])


def test_subscribe_pattern_and_assign(spark: Any, brook: BrokerProcess) -> None:
    for name in ("pat.a", "pat.b", "other"):
        create_topic(brook.bootstrap, name, 2)
        produce(brook.bootstrap, name, [(None, name.encode(), None, i % 2) for i in range(10)])
    df = reader(spark, brook, subscribePattern=r"pat\..*").load()
    assert sorted(df.groupBy("topic").count().collect()) == [("pat.a", 10), ("pat.b", 10)]
    df = reader(spark, brook, assign=json.dumps({"other": [1]})).load()
    assert {(r.topic, r.partition) for r in df.collect()} == {("other", 1)}
    assert df.count() == 5


def test_bad_options_are_clear(spark: Any, brook: BrokerProcess) -> None:
    with pytest.raises(Exception, match="exactly one of the options subscribe"):
        reader(spark, brook).load().collect()
    with pytest.raises(Exception, match="latest is not valid for a batch query"):
        reader(spark, brook, subscribe="exact", startingOffsets="latest").load().collect()


def run_available_now(spark: Any, brook: BrokerProcess, checkpoint: Path, **opts: str) -> list[Any]:
    """One Trigger.AvailableNow run (foreachBatch collects on the driver); returns [rows, progress]."""
    r = spark.readStream.format("brook").option("kafka.bootstrap.servers", brook.bootstrap)
    for k, v in opts.items():
        r = r.option(k, v)
    rows: list[Any] = []
    q = (
        r.load()
        .select("topic", "partition", "offset", "value")
        .writeStream.foreachBatch(lambda df, _id: rows.extend(df.collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    return [rows, q.recentProgress]


def test_streaming_max_offsets_per_trigger_available_now_and_new_partitions(
    spark: Any, brook: BrokerProcess, tmp_path: Path
) -> None:
    create_topic(brook.bootstrap, "st", 2)
    produce(brook.bootstrap, "st", [(None, str(i).encode(), None, i % 2) for i in range(1000)])
    ck = tmp_path / "ck"
    rows, progress = run_available_now(
        spark, brook, ck, subscribe="st", startingOffsets="earliest", maxOffsetsPerTrigger="300"
    )
    sizes = [p["numInputRows"] for p in progress if p["numInputRows"]]
    assert sum(sizes) == 1000 and max(sizes) <= 300 and len(sizes) >= 4
    assert sorted((r.partition, r.offset) for r in rows) == sorted((p, o) for p in (0, 1) for o in range(500))

    # More records, and a new partition: the same checkpoint picks both up, each record once.
    admin = AdminClient({"bootstrap.servers": brook.bootstrap})
    admin.create_partitions([NewPartitions("st", 3)])["st"].result(15)
    time.sleep(0.5)
    produce(brook.bootstrap, "st", [(None, b"more", None, p) for p in (0, 1, 2) for _ in range(20)])
    rows2, _ = run_available_now(
        spark, brook, ck, subscribe="st", startingOffsets="earliest", maxOffsetsPerTrigger="300"
    )
    got = sorted((r.partition, r.offset) for r in rows2)
    assert got == sorted([(0, 500 + i) for i in range(20)] + [(1, 500 + i) for i in range(20)]
                         + [(2, i) for i in range(20)])


def test_streaming_new_topic_matching_pattern(spark: Any, brook: BrokerProcess, tmp_path: Path) -> None:
    create_topic(brook.bootstrap, "np.one", 1)
    produce(brook.bootstrap, "np.one", [(None, b"1", None, 0)] * 5)
    ck = tmp_path / "ck"
    rows, _ = run_available_now(spark, brook, ck, subscribePattern=r"np\..*", startingOffsets="earliest")
    assert len(rows) == 5
    create_topic(brook.bootstrap, "np.two", 2)
    produce(brook.bootstrap, "np.two", [(None, b"2", None, i % 2) for i in range(8)])
    rows, _ = run_available_now(spark, brook, ck, subscribePattern=r"np\..*", startingOffsets="earliest")
    assert sorted((r.topic, r.partition, r.offset) for r in rows) == sorted(
        ("np.two", p, o) for p in (0, 1) for o in range(4)
    )


def _wait_log_start(brook: BrokerProcess, topic: str, minimum: int, timeout: float = 30) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": brook.bootstrap, "group.id": "x"})
    try:
        deadline = time.monotonic() + timeout
        while True:
            low, _ = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5, cached=False)
            if low >= minimum or time.monotonic() > deadline:
                return int(low)
            time.sleep(0.2)
    finally:
        c.close()


def test_fail_on_data_loss(spark: Any, brook: BrokerProcess, tmp_path: Path) -> None:
    # Small segments; the first 100 records carry an hour-old timestamp, so retention (10 min) deletes
    # their segments at once, while the next 100 stay.
    create_topic(brook.bootstrap, "lossy", 1, {"segment.bytes": "2000", "retention.ms": "600000"})
    produce(brook.bootstrap, "lossy", [(None, b"x" * 100, None, 0) for _ in range(100)],
            timestamp_ms=int(time.time() * 1000) - 3_600_000)
    produce(brook.bootstrap, "lossy", [(None, b"y" * 100, None, 0) for _ in range(100)])
    low = _wait_log_start(brook, "lossy", 50)
    assert 50 <= low <= 100, f"retention did not delete the first segments (log start {low})"
    from_zero = json.dumps({"lossy": {"0": 0}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        reader(spark, brook, subscribe="lossy", startingOffsets=from_zero).load().count()
    df = reader(spark, brook, subscribe="lossy", startingOffsets=json.dumps({"lossy": {"0": 0}}),
                failOnDataLoss="false").load()
    assert df.count() == 200 - low
    # A streaming query positioned before the log start: a clear error, or a skip when false.
    with pytest.raises(Exception, match="failOnDataLoss"):
        run_available_now(spark, brook, tmp_path / "ck2", subscribe="lossy",
                          startingOffsets=json.dumps({"lossy": {"0": 3}}))
    rows, _ = run_available_now(spark, brook, tmp_path / "ck3", subscribe="lossy",
                                startingOffsets=json.dumps({"lossy": {"0": 3}}), failOnDataLoss="false")
    assert sorted(r.offset for r in rows) == list(range(low, 200))


def test_commit_publishes_progress_as_group_offsets(spark: Any, brook: BrokerProcess, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, TopicPartition

    create_topic(brook.bootstrap, "lag", 2)
    produce(brook.bootstrap, "lag", [(None, b"v", None, i % 2) for i in range(300)])
    rows, _ = run_available_now(spark, brook, tmp_path / "ck", subscribe="lag",
                                startingOffsets="earliest", maxOffsetsPerTrigger="100",
                                **{"kafka.group.id": "spark-lag-test"})
    assert len(rows) == 300
    c = Consumer({"bootstrap.servers": brook.bootstrap, "group.id": "spark-lag-test"})
    try:
        deadline = time.monotonic() + 20
        while True:
            committed = c.committed([TopicPartition("lag", p) for p in (0, 1)], timeout=10)
            offsets = sorted((tp.partition, tp.offset) for tp in committed)
            if offsets == [(0, 150), (1, 150)] or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert offsets == [(0, 150), (1, 150)]
    finally:
        c.close()
