"""Batch reads with Spark's built-in Kafka connector (`spark.read.format("kafka")`, the jars of
scripts/setup-spark-kafka) against a real Brook: what a Spark user's existing job does."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.spark.helpers import consume_all, create_topic, produce, require_kafka_connector, require_spark
from tests.support.broker import BrokerProcess

require_spark()
require_kafka_connector()
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # the first test may start Spark

# Recent CreateTimes (retention deletes old segments), ten seconds apart.
TS0 = int(time.time() * 1000) - 120_000
TS1, TS2 = TS0 + 10_000, TS0 + 20_000


def kafka(spark: Any, brook: BrokerProcess, topic: str, **opts: str) -> Any:
    r = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", brook.bootstrap)
        .option("subscribe", topic)
    )
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def test_offsets_as_json_and_headers(spark: Any, brook: BrokerProcess) -> None:
    create_topic(brook.bootstrap, "ck-offsets", 3)
    produce(
        brook.bootstrap,
        "ck-offsets",
        [
            (f"k{i}".encode(), f"v{i}".encode(), [("n", str(i).encode()), ("z", b"\x00")], i % 3)
            for i in range(90)
        ],
    )
    produced = {(p, o): (k, v, h) for p, o, k, v, h in consume_all(brook.bootstrap, "ck-offsets")}

    df = kafka(
        spark,
        brook,
        "ck-offsets",
        startingOffsets=json.dumps({"ck-offsets": {"0": 5, "1": -2, "2": -2}}),  # -2: earliest
        endingOffsets=json.dumps({"ck-offsets": {"0": 12, "1": -1, "2": 4}}),  # -1: latest
        includeHeaders="true",
    )
    got = {
        (r.partition, r.offset): (r.key, r.value, [(h.key, h.value) for h in r.headers]) for r in df.collect()
    }
    want = {
        po: kvh
        for po, kvh in produced.items()
        if (po[0] == 0 and 5 <= po[1] < 12) or po[0] == 1 or (po[0] == 2 and po[1] < 4)
    }
    assert got == want
    assert len(got) == 7 + 30 + 4


def test_starting_and_ending_timestamp(spark: Any, brook: BrokerProcess) -> None:
    create_topic(brook.bootstrap, "ck-times", 3)
    for ts in (TS0, TS1, TS2):
        produce(
            brook.bootstrap, "ck-times", [(None, f"{ts}-{i}".encode(), None, i % 3) for i in range(12)], ts
        )

    df = kafka(spark, brook, "ck-times", startingTimestamp=str(TS1), endingTimestamp=str(TS2))
    got = sorted(r.value.decode() for r in df.collect())
    assert got == sorted(f"{TS1}-{i}" for i in range(12))
    # Per partition, as JSON: partition 0 from TS2, the others from TS0 to the end.
    by_part = json.dumps({"ck-times": {"0": TS2, "1": TS0, "2": TS0}})
    df = kafka(spark, brook, "ck-times", startingOffsetsByTimestamp=by_part)
    assert df.count() == 4 + 12 + 12


def test_read_committed_skips_aborted_transactions(spark: Any, brook: BrokerProcess) -> None:
    create_topic(brook.bootstrap, "ck-txn", 2)
    p = Producer({"bootstrap.servers": brook.bootstrap, "transactional.id": "ck-txn-writer", "linger.ms": 5})
    p.init_transactions(30)
    want: set[bytes] = set()
    aborted: set[bytes] = set()
    for t in range(6):  # committed and aborted transactions interleaved on both partitions
        p.begin_transaction()
        values = [f"t{t}-{i}".encode() for i in range(25)]
        for i, v in enumerate(values):
            p.produce("ck-txn", value=v, partition=i % 2)
        assert p.flush(10) == 0  # on the broker before the abort (an abort purges unsent records)
        if t % 2:
            p.abort_transaction(30)
            aborted |= set(values)
        else:
            p.commit_transaction(30)
            want |= set(values)

    committed = kafka(spark, brook, "ck-txn", **{"kafka.isolation.level": "read_committed"})
    got = [r.value for r in committed.collect()]
    assert len(got) == len(set(got))
    assert set(got) == want
    # The aborted records are in the log: a read_uncommitted reader sees them.
    uncommitted = {r.value for r in kafka(spark, brook, "ck-txn").collect()}
    assert uncommitted == want | aborted


def test_min_partitions_splits_offset_ranges(spark: Any, brook: BrokerProcess) -> None:
    create_topic(brook.bootstrap, "ck-split", 2)
    produce(brook.bootstrap, "ck-split", [(None, str(i).encode(), None, i % 2) for i in range(2000)])

    df = kafka(spark, brook, "ck-split", minPartitions="7")
    assert df.rdd.getNumPartitions() >= 7
    rows = df.select("partition", "offset", "value").collect()
    assert len(rows) == 2000
    assert {(r.partition, r.offset) for r in rows} == {(p, o) for p in (0, 1) for o in range(1000)}
    assert sorted(int(r.value) for r in rows) == list(range(2000))


def test_fail_on_data_loss_after_delete_records(spark: Any, brook: BrokerProcess) -> None:
    create_topic(brook.bootstrap, "ck-loss", 1)
    produce(brook.bootstrap, "ck-loss", [(None, str(i).encode(), None, 0) for i in range(100)])
    admin = AdminClient({"bootstrap.servers": brook.bootstrap})
    done = admin.delete_records([TopicPartition("ck-loss", 0, 40)])
    for f in done.values():
        assert f.result(15).low_watermark == 40  # the new log start offset

    from_zero = json.dumps({"ck-loss": {"0": 0}})
    lenient = kafka(spark, brook, "ck-loss", startingOffsets=from_zero, failOnDataLoss="false")
    assert sorted(r.offset for r in lenient.collect()) == list(range(40, 100))
    strict = kafka(spark, brook, "ck-loss", startingOffsets=from_zero, failOnDataLoss="true")
    with pytest.raises(Exception) as err:
        strict.collect()
    assert "data may have been lost" in str(err.value).lower() or "out of range" in str(err.value).lower(), (
        str(err.value)[-2000:]
    )
