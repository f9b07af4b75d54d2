"""Unreachable files under an Iceberg table (brook.iceberg.maintenance.remove_orphans) on a real
pyiceberg SQL catalog: a stray file is deleted once older than the age given, never before; every file
the table reaches stays and the table reads the same."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog

from brook.iceberg.maintenance import reachable, remove_orphans


def test_only_old_unreachable_files_go(tmp_path: Path) -> None:
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/w")
    catalog.create_namespace("ns")
    rows = pa.table({"a": pa.array([1, 2, 3], pa.int64())})
    table = catalog.create_table("ns.t", schema=rows.schema)
    table.append(rows)
    table.append(rows)
    root = Path(table.location().removeprefix("file://"))
    stray = root / "data" / "crashed-commit.parquet"  # as a writer killed before its commit leaves
    stray.write_bytes(b"PAR1")
    before = {p for p in root.rglob("*") if p.is_file()}
    assert remove_orphans(table, 60_000) == 0  # young: it could belong to a commit in flight
    assert stray.exists()
    old = time.time() - 120
    for p in before:
        os.utime(p, (old, old))
    assert remove_orphans(table, 60_000) == 1
    assert not stray.exists()
    assert {p for p in root.rglob("*") if p.is_file()} == before - {stray}
    assert {Path(f.removeprefix("file://")) for f in reachable(table)} >= before - {stray}
    assert catalog.load_table("ns.t").scan().to_arrow().num_rows == 6
