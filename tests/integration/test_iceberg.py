"""Iceberg topics against a real broker process, read back with pyiceberg as a user would: the table holds
each committed record once (aborted transactions never), in raw and json value modes, and a broker
killed with -9 at random points, again and again, leaves no offset written twice or skipped."""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table
from sqlalchemy.exc import OperationalError

from tests.integration.test_clients import create_topic
from tests.integration.test_console import as_json
from tests.support.broker import BrokerProcess
from tests.support.ports import free_port
from tests.support.registry import registry_args, wait_serving

pytestmark = pytest.mark.slow

Row = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def load_table(data_dir: Path, name: str) -> Table | None:
    """The topic's table through pyiceberg's SQL catalog, as docs/iceberg.md tells users to open it."""
    root = data_dir.resolve() / "iceberg"
    if not (root / "catalog.db").exists():
        return None  # no writer has started yet
    # A reader never creates the catalog's tables: the broker's writer may be creating them this
    # instant (both would, and one would fail with "table ... already exists").
    catalog = load_catalog(
        "brook",
        type="sql",
        uri=f"sqlite:///{root / 'catalog.db'}",
        warehouse=(root / "warehouse").as_uri(),
        init_catalog_tables="false",
    )
    try:
        return catalog.load_table(("brook", name))
    except (NoSuchTableError, OperationalError):  # no table yet, or the catalog not yet created
        return None


def table_offsets(table: Table | None) -> dict[int, int]:
    snapshot = None if table is None else table.current_snapshot()
    raw = None if snapshot is None or snapshot.summary is None else snapshot.summary["brook.next-offsets"]
    return {int(k): v for k, v in json.loads(raw).items()} if raw else {}


def last_stable_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    asked = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    got = admin.list_offsets(asked, isolation_level=IsolationLevel.READ_COMMITTED)
    return {tp.partition: f.result(15).offset for tp, f in got.items()}


def committed_rows(bootstrap: str, topic: str, ends: dict[int, int]) -> list[Row]:
    """What a read_committed consumer reads below `ends` (per partition)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "iceberg-check",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in ends])
    rows: list[Row] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            positions = {
                tp.partition: tp.offset for tp in c.position([TopicPartition(topic, p) for p in ends])
            }
            if all(positions[p] >= end or end == 0 for p, end in ends.items()):
                break
            for m in c.consume(500, 0.5):
                if m.error() is None and m.offset() < ends[m.partition()]:
                    rows.append((m.partition(), m.offset(), m.key(), m.value(), list(m.headers() or [])))
        else:
            raise AssertionError(f"the consumer did not reach {ends}")
    finally:
        c.close()
    return sorted(rows, key=lambda r: (r[0], r[1]))


def wait_for_table(data_dir: Path, name: str, ends: dict[int, int], timeout: float = 60) -> Table:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        table = load_table(data_dir, name)
        if table is not None and all(table_offsets(table).get(p, 0) >= end for p, end in ends.items()):
            return table
        time.sleep(0.2)
    raise AssertionError(f"the table did not reach {ends}: {table_offsets(load_table(data_dir, name))}")


def scan(table: Table) -> list[dict[str, Any]]:
    rows = table.scan().to_arrow().to_pylist()
    return sorted(rows, key=lambda r: (r["partition"], r["offset"]))


def test_the_table_holds_each_committed_record_once_raw(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        topic = "raw.events"  # the table: raw_events
        create_topic(broker.bootstrap, topic, 2, {"brook.iceberg.enabled": "true", **FAST})
        produce_mixed(broker.bootstrap, topic)
        ends = last_stable_offsets(broker.bootstrap, topic, 2)
        expected = committed_rows(broker.bootstrap, topic, ends)
        table = wait_for_table(broker.data_dir, "raw_events", ends)
        rows = scan(table)
        assert [(r["partition"], r["offset"]) for r in rows] == [(e[0], e[1]) for e in expected]
        assert [(r["key"], r["value"]) for r in rows] == [(e[2], e[3]) for e in expected]
        assert [[(h["key"], h["value"]) for h in r["headers"] or []] for r in rows] == [
            e[4] for e in expected
        ]
        assert not any(b"aborted" in (r["value"] or b"") for r in rows)
        assert table.spec().fields[0].name == "timestamp_day"  # the default spec: day of the timestamp
    finally:
        broker.stop()


def test_the_table_holds_each_committed_record_once_json(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        topic = "orders"
        config = {"brook.iceberg.enabled": "true", "brook.iceberg.value.mode": "json", **FAST}
        create_topic(broker.bootstrap, topic, 2, config)
        produce_mixed(broker.bootstrap, topic)
        ends = last_stable_offsets(broker.bootstrap, topic, 2)
        expected = committed_rows(broker.bootstrap, topic, ends)
        table = wait_for_table(broker.data_dir, topic, ends)
        rows = scan(table)
        assert [(r["partition"], r["offset"]) for r in rows] == [(e[0], e[1]) for e in expected]
        for row, (_, _, _, value, _) in zip(rows, expected, strict=True):
            obj = json.loads(value) if value is not None and value.startswith(b"{") else None
            if obj is None:  # not an object: kept as bytes, never dropped
                assert row["value"] is None and row["value_raw"] == value
            else:
                assert {k: v for k, v in row["value"].items() if v is not None} == obj
                assert row["value_raw"] is None
        # Fields seen later became optional columns of the value struct, typed from the JSON.
        value_type = table.schema().as_arrow().field("value").type
        assert {f.name: str(f.type) for f in value_type} == {
            "n": "int64",
            "name": "large_string",
            "price": "double",
            "ok": "bool",
            "late": "large_string",
        }
        assert pa.types.is_large_binary(table.schema().as_arrow().field("value_raw").type)
    finally:
        broker.stop()


FAST = {"brook.iceberg.commit.interval.ms": "200"}


def produce_mixed(bootstrap: str, topic: str) -> None:
    """Plain records, a value that is no JSON object, a committed and an aborted transaction."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(300):
        value = {"n": i, "name": f"item-{i}", "price": i * 1.25, "ok": i % 2 == 0}
        p.produce(
            topic, json.dumps(value).encode(), f"k{i}".encode(), partition=i % 2, headers=[("src", b"t")]
        )
    p.produce(topic, b"not json", partition=0)
    p.produce(topic, None, b"tombstone", partition=1)
    assert p.flush(30) == 0
    t = Producer({"bootstrap.servers": bootstrap, "transactional.id": "iceberg-tx"})
    t.init_transactions(30)
    for commit, n in ((True, 20), (False, 15), (True, 10)):
        t.begin_transaction()
        for i in range(n):
            value = {"n": 1000 + i, "late": "yes"} if commit else {"aborted": True}
            t.produce(topic, json.dumps(value).encode(), partition=i % 2)
        t.flush(30)  # the aborted records too reach the log: the table must leave them out
        if commit:
            t.commit_transaction(30)
        else:
            t.abort_transaction(30)


def check_exactly_once(broker: BrokerProcess, topic: str, partitions: int) -> tuple[int, dict[int, int]]:
    """Every offset the table records as written is there once and matches the topic's committed records
    below it; returns (rows, the table's offsets). Values: the json mode's columns."""
    table = load_table(broker.data_dir, topic)
    recorded = table_offsets(table)
    if table is None or not recorded:
        return 0, recorded
    rows = scan(table)
    offsets = [(r["partition"], r["offset"]) for r in rows]
    assert len(offsets) == len(set(offsets)), "an offset is in the table twice"
    expected = committed_rows(broker.bootstrap, topic, {p: recorded.get(p, 0) for p in range(partitions)})
    assert offsets == [(e[0], e[1]) for e in expected], "the table's offsets differ from the topic's"
    assert [r["value"] for r in rows] == [json.loads(e[3] or b"null") for e in expected]
    return len(rows), recorded


def orphan_data_files(data_dir: Path, table: Table) -> int:
    """Data files on disk that no snapshot references: commits that a kill cut after their files."""
    referenced = {
        Path(m.file_path.removeprefix("file://")).name
        for s in table.snapshots()
        for manifest in s.manifests(table.io)
        for m in (e.data_file for e in manifest.fetch_manifest_entry(table.io, discard_deleted=False))
    }
    on_disk = {f.name for f in (data_dir / "iceberg" / "warehouse").rglob("*.parquet")}
    return len(on_disk - referenced)


def test_kill_9_at_random_points_leaves_each_offset_once(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    topic, partitions = "events", 2
    config = {
        "brook.iceberg.enabled": "true",
        "brook.iceberg.value.mode": "json",
        "brook.iceberg.commit.interval.ms": "100",
    }
    create_topic(broker.bootstrap, topic, partitions, config)
    rng = random.Random(34)
    seen: list[tuple[int, dict[int, int]]] = []
    try:
        for _ in range(8):
            stop = threading.Event()
            producing = threading.Thread(
                target=produce_until, args=(broker.bootstrap, topic, stop, rng.random())
            )
            producing.start()
            # Kill while the writer is busy: once the table moved in this round, at a random moment.
            wait_for_a_commit(broker.data_dir, topic, table_offsets(load_table(broker.data_dir, topic)))
            time.sleep(rng.uniform(0.0, 1.0))
            broker.kill()
            stop.set()
            producing.join(30)
            broker.start()
            seen.append(check_exactly_once(broker, topic, partitions))
        ends = last_stable_offsets(broker.bootstrap, topic, partitions)
        table = wait_for_table(broker.data_dir, topic, ends)
        total, _ = check_exactly_once(broker, topic, partitions)
        assert total == sum(ends.values())  # nothing but records in this topic: every offset, once
        assert len({tuple(sorted(r.items())) for _, r in seen}) > 4  # the kills met a moving table
        orphans = orphan_data_files(broker.data_dir, table)
        kills = [r for _, r in seen]
        print(
            f"rows {total}; table offsets after each kill {kills}; files of commits cut by a kill {orphans}"
        )
    finally:
        broker.stop()


def wait_for_a_commit(data_dir: Path, name: str, before: dict[int, int], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while table_offsets(load_table(data_dir, name)) == before:
        assert time.monotonic() < deadline, "no commit to the table"
        time.sleep(0.1)


def produce_until(bootstrap: str, topic: str, stop: threading.Event, seed: float) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "log_level": 2})
    pad = "x" * 900  # ~1 KiB JSON values
    i = 0
    while not stop.is_set():
        for _ in range(20):
            p.produce(topic, json.dumps({"i": i, "seed": seed, "pad": pad}).encode(), partition=i % 2)
            i += 1
        p.poll(0)
        time.sleep(0.02)  # ~1,000 records/s: a commit every 100 ms has work each time
    p.flush(0.5)  # the broker is gone: what the log holds, not the acks, is the truth


def test_topic_describe_shows_the_tables_lag(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        topic = "slow.table"
        config = {"brook.iceberg.enabled": "true", "brook.iceberg.commit.interval.ms": "600000"}
        create_topic(broker.bootstrap, topic, 1, config)
        produce_values(broker.bootstrap, topic, 10)
        # The writer commits at once when it starts, then not for ten minutes: what comes later lags.
        first = wait_for_table(broker.data_dir, "slow_table", {0: 1})
        produce_values(broker.bootstrap, topic, 7)
        uri = f"sqlite:///{broker.data_dir.resolve() / 'iceberg' / 'catalog.db'}"
        shown = as_json(broker.bootstrap, "topic", "describe", topic, "--iceberg-catalog-uri", uri)
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
        # Without the catalog the lag is unknown, and said so; the offsets in the topic are still there.
        (unknown,) = as_json(broker.bootstrap, "topic", "describe", topic)["iceberg"]
        assert unknown["table_offset"] is None and unknown["stable_offset"] == 17
    finally:
        broker.stop()


def produce_values(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0


def test_schema_mode_types_columns_from_the_registry_and_follows_evolution(tmp_path: Path) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    args, url = registry_args()
    broker = BrokerProcess(tmp_path / "data", args=[*args, "--iceberg-schema-registry-url", url]).start()
    try:
        wait_serving(url)
        topic = "users"
        config = {"brook.iceberg.enabled": "true", "brook.iceberg.value.mode": "schema", **FAST}
        create_topic(broker.bootstrap, topic, 1, config)
        registry = SchemaRegistryClient({"url": url})
        v1 = {
            "type": "record",
            "name": "User",
            "fields": [
                {"name": "id", "type": "long"},
                {"name": "name", "type": "string"},
                {"name": "tags", "type": {"type": "array", "items": "string"}},
                {"name": "seen", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            ],
        }
        v2 = {**v1, "fields": [*v1["fields"], {"name": "email", "type": ["null", "string"], "default": None}]}
        ctx = SerializationContext(topic, MessageField.VALUE)
        p = Producer({"bootstrap.servers": broker.bootstrap})
        seen = 1_700_000_000_000
        for version, n in ((v1, 20), (v2, 10)):
            ser = AvroSerializer(registry, json.dumps(version))
            for i in range(n):
                user = {"id": i, "name": f"u{i}", "tags": ["a", str(i)], "seen": seen + i}
                if version is v2:
                    user |= {"id": 100 + i, "email": f"u{i}@example.com" if i % 2 else None}
                p.produce(topic, ser(user, ctx), partition=0)
        p.produce(topic, b"\x00\x00\x00\x03\xe7 no schema 999", partition=0)  # unknown id: kept raw
        p.produce(topic, b"plain bytes", partition=0)
        assert p.flush(30) == 0

        table = wait_for_table(broker.data_dir, topic, {0: 32})
        value = table.schema().as_arrow().field("value").type
        assert [(f.name, str(f.type)) for f in value] == [
            ("id", "int64"),
            ("name", "large_string"),
            ("tags", str(value.field("tags").type)),  # a list of strings (below)
            ("seen", "timestamp[us, tz=UTC]"),
            ("email", "large_string"),
        ]
        assert pa.types.is_list(value.field("tags").type) or pa.types.is_large_list(value.field("tags").type)
        rows = scan(table)
        assert len(rows) == 32
        first, late = rows[3]["value"], rows[25]["value"]
        assert (first["id"], first["name"], first["tags"], first["email"]) == (3, "u3", ["a", "3"], None)
        assert int(first["seen"].timestamp() * 1000) == seen + 3
        assert (late["id"], late["email"]) == (105, "u5@example.com")
        assert [r["value_raw"] for r in rows[30:]] == [b"\x00\x00\x00\x03\xe7 no schema 999", b"plain bytes"]
        assert all(r["value"] is None for r in rows[30:])
    finally:
        broker.stop()


def test_hygiene_rewrites_small_files_and_expires_snapshots_keeping_each_offset_once(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        topic = "tidy"
        config = {
            "brook.iceberg.enabled": "true",
            "brook.iceberg.commit.interval.ms": "100",
            "brook.iceberg.maintenance.interval.ms": "4000",
            "brook.iceberg.snapshot.max.age.ms": "0",
        }
        create_topic(broker.bootstrap, topic, 1, config)
        for i in range(12):  # a commit each: small files in one day's table partition
            produce_values(broker.bootstrap, topic, 5)
            wait_for_table(broker.data_dir, topic, {0: 5 * (i + 1)})
        # Files and snapshots pile up, then a maintenance round folds them (the table keeps taking
        # appends: a round that races one is tried again the next time).
        deadline = time.monotonic() + 60
        while True:
            table = wait_for_table(broker.data_dir, topic, {0: 60})
            files = len(table.inspect.files())
            if files < 4 and len(table.snapshots()) < 4:
                break
            assert time.monotonic() < deadline, f"{files} files, {len(table.snapshots())} snapshots"
            time.sleep(0.5)
        # (Twelve commits or more each added a file: fewer than four is the rewrite's doing.)
        rows, recorded = check_exactly_once_raw(broker, topic)
        assert rows == 60 and recorded == {0: 60}
        # The replaced small files and the expired snapshots' manifests leave the disk too (older than
        # ten commit intervals here): what stays is what the table's metadata reaches.
        while True:
            table = wait_for_table(broker.data_dir, topic, {0: 60})
            live = {Path(f.removeprefix("file://")) for f in table.inspect.files()["file_path"].to_pylist()}
            on_disk = set(Path(table.location().removeprefix("file://")).glob("data/**/*.parquet"))
            if on_disk == live:
                break
            assert time.monotonic() < deadline + 60, f"{len(on_disk)} data files on disk, {len(live)} live"
            time.sleep(0.5)
        produce_values(broker.bootstrap, topic, 7)  # the writer goes on after the rewrite
        wait_for_table(broker.data_dir, topic, {0: 67})
        assert check_exactly_once_raw(broker, topic) == (67, {0: 67})
    finally:
        broker.stop()


def check_exactly_once_raw(broker: BrokerProcess, topic: str) -> tuple[int, dict[int, int]]:
    table = load_table(broker.data_dir, topic)
    recorded = table_offsets(table)
    assert table is not None
    rows = scan(table)
    expected = committed_rows(broker.bootstrap, topic, recorded)
    assert [(r["partition"], r["offset"], r["value"]) for r in rows] == [(e[0], e[1], e[3]) for e in expected]
    return len(rows), recorded


MINIO = Path(os.environ.get("BROOK_MINIO_CACHE", Path.home() / ".cache" / "brook-minio")) / "bin" / "minio"


@pytest.fixture
def minio(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A real MinIO server (scripts/install-minio builds it from the Go module proxy), with bucket
    `lake`; yields pyiceberg's S3 properties for it."""
    if not MINIO.exists():
        pytest.skip("MinIO is not built (scripts/install-minio)")
    port = free_port()
    env = {**os.environ, "MINIO_ROOT_USER": "brook", "MINIO_ROOT_PASSWORD": "brook-secret"}
    address = f"127.0.0.1:{port}"
    log = open(tmp_path / "minio.log", "wb")  # noqa: SIM115 - the child's
    console = f"127.0.0.1:{free_port()}"
    cmd = [str(MINIO), "server", str(tmp_path / "minio"), "--address", address, "--console-address", console]
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    props = {
        "s3.endpoint": f"http://{address}",
        "s3.access-key-id": "brook",
        "s3.secret-access-key": "brook-secret",
        "s3.region": "us-east-1",
    }
    try:
        fs = s3_fs(props)
        deadline = time.monotonic() + 60
        while True:
            try:
                fs.create_dir("lake")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (
                    tmp_path / "minio.log"
                ).read_text()
                time.sleep(0.3)
        yield props
    finally:
        proc.terminate()
        proc.wait(15)


def s3_fs(props: dict[str, str]) -> Any:
    from pyarrow import fs

    return fs.S3FileSystem(
        access_key=props["s3.access-key-id"],
        secret_key=props["s3.secret-access-key"],
        endpoint_override=props["s3.endpoint"].removeprefix("http://"),
        scheme="http",
        region=props["s3.region"],
        allow_bucket_creation=True,
    )


def test_an_s3_warehouse_on_a_real_s3_server(tmp_path: Path, minio: dict[str, str]) -> None:
    """The table's files in an S3-compatible object store (MinIO), the catalog embedded."""
    from pyarrow import fs

    args = ["--iceberg-warehouse", "s3://lake/brook"]
    for k, v in minio.items():
        args += ["--iceberg-catalog-property", f"{k}={v}"]
    broker = BrokerProcess(tmp_path / "data", args=args).start()
    try:
        create_topic(broker.bootstrap, "clicks", 1, {"brook.iceberg.enabled": "true", **FAST})
        produce_values(broker.bootstrap, "clicks", 25)
        root = broker.data_dir.resolve() / "iceberg"
        deadline = time.monotonic() + 60
        while True:
            if (root / "catalog.db").exists():  # once the worker opened it
                catalog = load_catalog("brook", type="sql", uri=f"sqlite:///{root / 'catalog.db'}", **minio)
                try:
                    table = catalog.load_table(("brook", "clicks"))
                    if table_offsets(table).get(0) == 25:
                        break
                except NoSuchTableError:
                    pass
            assert time.monotonic() < deadline, "the table did not reach offset 25"
            time.sleep(0.3)
        assert table.metadata_location.startswith(
            "s3://lake/brook/brook/clicks/metadata/"
        )  # warehouse/ns/table
        assert [r["value"] for r in scan(table)] == [f"v{i}".encode() for i in range(25)]
        keys = [f.path for f in s3_fs(minio).get_file_info(fs.FileSelector("lake/brook", recursive=True))]
        assert any(k.endswith(".parquet") for k in keys) and any(k.endswith(".metadata.json") for k in keys)
        assert not (root / "warehouse").exists()  # nothing in the local default
    finally:
        broker.stop()
