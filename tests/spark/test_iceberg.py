"""An Iceberg topic's table read by real PySpark (local[2]) through format "brook-iceberg" (pyiceberg and
Arrow: Iceberg publishes no Spark runtime for Spark 4.3), against a Structured Streaming read of the
topic itself: the same committed records, values and counts; time travel by snapshot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_iceberg import produce_mixed, produce_values, wait_for_table
from tests.spark.helpers import create_topic, require_spark
from tests.spark.test_read import run_available_now
from tests.support.broker import BrokerProcess

require_spark()
pytestmark = pytest.mark.slow


def table_reader(spark: Any, brook: BrokerProcess, table: str, **opts: str) -> Any:
    uri = f"sqlite:///{brook.data_dir.resolve() / 'iceberg' / 'catalog.db'}"
    r = spark.read.format("brook-iceberg").option("catalog.uri", uri).option("table", table)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def test_spark_sql_over_the_table_agrees_with_a_stream_of_the_topic(
    spark: Any, brook: BrokerProcess, tmp_path: Path
) -> None:
    topic = "lake.orders"
    config = {
        "brook.iceberg.enabled": "true",
        "brook.iceberg.value.mode": "json",
        "brook.iceberg.commit.interval.ms": "200",
    }
    create_topic(brook.bootstrap, topic, 2, config)
    produce_mixed(brook.bootstrap, topic)  # with an aborted transaction: never in either read
    streamed, _ = run_available_now(
        spark,
        brook,
        tmp_path / "ck",
        subscribe=topic,
        startingOffsets="earliest",
        **{"kafka.isolation.level": "read_committed"},
    )
    ends: dict[int, int] = {}
    for r in streamed:
        ends[r.partition] = max(ends.get(r.partition, 0), r.offset + 1)
    # The stream stops at the last data record; the table goes on to the last marker: wait for at least.
    wait_for_table(brook.data_dir, "lake_orders", ends)

    table_reader(spark, brook, "brook.lake_orders").createOrReplaceTempView("lake_orders")
    counts = spark.sql(
        "SELECT partition, count(*) AS n FROM lake_orders GROUP BY partition ORDER BY partition"
    ).collect()
    assert [(r.partition, r.n) for r in counts] == [
        (p, sum(1 for s in streamed if s.partition == p)) for p in (0, 1)
    ]
    rows = spark.sql(
        "SELECT partition, offset, value, value_raw FROM lake_orders ORDER BY partition, offset"
    ).collect()
    expected = sorted(streamed, key=lambda r: (r.partition, r.offset))
    assert [(r.partition, r.offset) for r in rows] == [(e.partition, e.offset) for e in expected]
    for row, e in zip(rows, expected, strict=True):
        raw = bytes(e.value) if e.value is not None else None
        if raw is not None and raw.startswith(b"{"):
            got = {k: v for k, v in row.value.asDict().items() if v is not None}
            assert got == json.loads(raw)
        else:
            assert row.value is None and (bytes(row.value_raw) if row.value_raw is not None else None) == raw
    # The aborted transaction's values ({"aborted": true}) never reached the table, not even as a column.
    assert "aborted" not in spark.table("lake_orders").schema["value"].dataType.names


def test_time_travel_reads_an_older_snapshot(spark: Any, brook: BrokerProcess) -> None:
    topic = "travel"
    config = {"brook.iceberg.enabled": "true", "brook.iceberg.commit.interval.ms": "200"}
    create_topic(brook.bootstrap, topic, 1, config)
    produce_values(brook.bootstrap, topic, 30)
    first = wait_for_table(brook.data_dir, topic, {0: 30})
    produce_values(brook.bootstrap, topic, 12)
    wait_for_table(brook.data_dir, topic, {0: 42})
    snapshot = first.current_snapshot()
    assert snapshot is not None
    then = table_reader(spark, brook, f"brook.{topic}", snapshotId=str(snapshot.snapshot_id))
    assert then.count() == 30
    assert table_reader(spark, brook, f"brook.{topic}").count() == 42
