"""Iceberg topics on a REST catalog: a broker whose `--iceberg-catalog-uri` is Apache Iceberg's own REST
catalog server (tests/support/iceberg_rest.py) writes its tables through pyiceberg's REST client, and a
reader opening the same REST catalog finds each committed record once (aborted transactions never);
`brook topic describe` shows a table's lag through it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table

from tests.integration.test_clients import create_topic
from tests.integration.test_console import as_json
from tests.integration.test_iceberg import (
    FAST,
    committed_rows,
    last_stable_offsets,
    produce_mixed,
    produce_values,
    scan,
    table_offsets,
)
from tests.support.broker import BrokerProcess
from tests.support.iceberg_rest import IcebergRestServer

pytestmark = pytest.mark.slow


@pytest.fixture
def rest(tmp_path: Path) -> Iterator[IcebergRestServer]:
    with IcebergRestServer(tmp_path / "rest") as server:
        yield server


def rest_catalog(uri: str) -> Catalog:
    """The catalog as a user opens it (docs/iceberg.md): pyiceberg's REST client."""
    return load_catalog("reader", type="rest", uri=uri)


def wait_for_rest_table(catalog: Catalog, name: str, ends: dict[int, int], timeout: float = 60) -> Table:
    deadline = time.monotonic() + timeout
    table: Table | None = None
    while time.monotonic() < deadline:
        try:
            table = catalog.load_table(("brook", name))
        except NoSuchTableError:
            table = None
        if table is not None and all(table_offsets(table).get(p, 0) >= end for p, end in ends.items()):
            return table
        time.sleep(0.2)
    raise AssertionError(f"the table did not reach {ends}: {table_offsets(table)}")


def check_rows(table: Table, expected: list[Any]) -> list[dict[str, Any]]:
    """The table's rows are the read_committed consumer's, once each, in the json value mode's columns."""
    rows = scan(table)
    assert [(r["partition"], r["offset"]) for r in rows] == [(e[0], e[1]) for e in expected]
    assert [r["key"] for r in rows] == [e[2] for e in expected]
    for row, (_, _, _, value, _) in zip(rows, expected, strict=True):
        obj = json.loads(value) if value is not None and value.startswith(b"{") else None
        if obj is None:  # not an object: kept as bytes
            assert row["value"] is None and row["value_raw"] == value
        else:
            assert {k: v for k, v in row["value"].items() if v is not None} == obj
    return rows


def wait_for_log(broker: BrokerProcess, text: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while text not in broker.log_text():
        assert time.monotonic() < deadline, f"no {text!r} in the broker's log"
        time.sleep(0.2)


def test_a_rest_catalog_holds_each_committed_record_once(tmp_path: Path, rest: IcebergRestServer) -> None:
    args = ["--iceberg-catalog-uri", rest.uri, "--iceberg-warehouse", rest.warehouse.resolve().as_uri()]
    broker = BrokerProcess(tmp_path / "data", args=args).start()
    try:
        topic = "orders"
        config = {"brook.iceberg.enabled": "true", "brook.iceberg.value.mode": "json", **FAST}
        create_topic(broker.bootstrap, topic, 2, config)
        produce_mixed(broker.bootstrap, topic)  # plain records, a committed and an aborted transaction
        ends = last_stable_offsets(broker.bootstrap, topic, 2)
        expected = committed_rows(broker.bootstrap, topic, ends)
        catalog = rest_catalog(rest.uri)
        table = wait_for_rest_table(catalog, topic, ends)

        rows = check_rows(table, expected)
        assert not any(r["value"] and r["value"].get("aborted") for r in rows)
        assert table_offsets(table) == ends
        # Schema evolution went through the REST server too: `late` came with the transactions.
        value_type = table.schema().as_arrow().field("value").type
        assert {f.name for f in value_type} == {"n", "name", "price", "ok", "late"}
        assert table.spec().fields[0].name == "timestamp_day"
        # The REST server placed the table (under its warehouse, where pyiceberg wrote the data files);
        # the broker's embedded SQL catalog was never opened.
        warehouse = rest.warehouse.resolve()
        location = Path(urlparse(table.metadata_location).path)
        assert location.is_relative_to(warehouse / "brook" / topic), table.metadata_location
        assert list((warehouse / "brook" / topic / "data").rglob("*.parquet"))
        assert not (broker.data_dir / "iceberg").exists()

        # The catalog goes away for a while: the writers fail, retry, and once it is back go on from
        # what the table records: nothing lost, nothing twice.
        rest.stop()
        produce_values(broker.bootstrap, topic, 40)  # not JSON objects: value_raw
        wait_for_log(broker, "writing to brook.orders failed")
        rest.start()
        ends = last_stable_offsets(broker.bootstrap, topic, 2)
        table = wait_for_rest_table(catalog, topic, ends)
        rows = check_rows(table, committed_rows(broker.bootstrap, topic, ends))
        assert table_offsets(table) == ends
        print(f"{len(rows)} rows in {len(table.snapshots())} snapshots through {rest.uri}")
    finally:
        broker.stop()


def test_topic_describe_shows_the_lag_through_a_rest_catalog(tmp_path: Path, rest: IcebergRestServer) -> None:
    broker = BrokerProcess(tmp_path / "data", args=["--iceberg-catalog-uri", rest.uri]).start()
    try:
        topic = "slow.table"
        config = {"brook.iceberg.enabled": "true", "brook.iceberg.commit.interval.ms": "600000"}
        create_topic(broker.bootstrap, topic, 1, config)
        produce_values(broker.bootstrap, topic, 10)
        # The writer commits at once when it starts, then not for ten minutes: what comes later lags.
        first = wait_for_rest_table(rest_catalog(rest.uri), "slow_table", {0: 1})
        produce_values(broker.bootstrap, topic, 7)
        shown: Any = as_json(broker.bootstrap, "topic", "describe", topic, "--iceberg-catalog-uri", rest.uri)
        (row,) = shown["iceberg"]
        at = table_offsets(first)[0]
        assert row == {
            "partition": 0,
            "table": "brook.slow_table",
            "stable_offset": 17,
            "table_offset": at,
            "lag": 17 - at,
        }
        assert row["lag"] >= 7
    finally:
        broker.stop()


def test_hygiene_through_a_rest_catalog_keeps_each_offset_once(
    tmp_path: Path, rest: IcebergRestServer
) -> None:
    """Maintenance's commits (an `overwrite` of small files, expiring snapshots) are other updates than an
    append's: the REST server takes them too, and the rows stay the topic's, once each."""
    broker = BrokerProcess(tmp_path / "data", args=["--iceberg-catalog-uri", rest.uri]).start()
    catalog = rest_catalog(rest.uri)
    try:
        topic = "tidy"
        config = {
            "brook.iceberg.enabled": "true",
            "brook.iceberg.commit.interval.ms": "100",
            "brook.iceberg.maintenance.interval.ms": "3000",
            "brook.iceberg.snapshot.max.age.ms": "0",
        }
        create_topic(broker.bootstrap, topic, 1, config)
        for i in range(10):  # a commit each: small files in one day's table partition
            produce_values(broker.bootstrap, topic, 5)
            wait_for_rest_table(catalog, topic, {0: 5 * (i + 1)})
        deadline = time.monotonic() + 60
        while True:
            table = wait_for_rest_table(catalog, topic, {0: 50})
            files = len(table.inspect.files())
            if files < 4 and len(table.snapshots()) < 4:
                break
            assert time.monotonic() < deadline, f"{files} files, {len(table.snapshots())} snapshots"
            time.sleep(0.5)
        produce_values(broker.bootstrap, topic, 7)  # the writer goes on after the rewrite
        table = wait_for_rest_table(catalog, topic, {0: 57})
        expected = committed_rows(broker.bootstrap, topic, {0: 57})
        assert [(r["partition"], r["offset"], r["value"]) for r in scan(table)] == [
            (e[0], e[1], e[3]) for e in expected
        ]
        assert table_offsets(table) == {0: 57}
    finally:
        broker.stop()
