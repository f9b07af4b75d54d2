"""Where Iceberg tables live: the catalog (one interface, pyiceberg's `Catalog`, two kinds of it) and what
a table records of the topic (the next offset of each partition, in its snapshots' summaries).

The embedded catalog is pyiceberg's SQL catalog on SQLite with a warehouse directory, both under the
broker's data directory unless `--iceberg-catalog-uri`/`--iceberg-warehouse` say otherwise; an
`http(s)://` URI is a REST catalog. Extra catalog properties (`s3.endpoint`, `s3.access-key-id`, ...)
pass through unchanged to pyiceberg.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.table import Table
from pyiceberg.table.snapshots import ancestors_of

from .ports import IcebergSettings

# The snapshot summary property holding {partition: next offset}: the offset each partition's writer
# continues from. Every snapshot Brook commits carries the whole map (its parent's, updated), so the
# current snapshot alone answers; older snapshots are looked at only if another tool committed since.
OFFSETS_PROPERTY = "brook.next-offsets"


class CatalogKind(Protocol):
    def properties(self, settings: IcebergSettings, data_dir: Path) -> dict[str, str]:
        """pyiceberg's catalog properties for these settings."""
        ...


class SqlCatalogKind:
    """pyiceberg's SQL catalog: SQLite (the embedded default) or any SQLAlchemy URI."""

    def properties(self, settings: IcebergSettings, data_dir: Path) -> dict[str, str]:
        root = (data_dir / "iceberg").resolve()
        if settings.catalog_uri is None or settings.warehouse is None:
            root.mkdir(parents=True, exist_ok=True)
        uri = settings.catalog_uri or f"sqlite:///{root / 'catalog.db'}"
        warehouse = settings.warehouse or (root / "warehouse").as_uri()
        return {"type": "sql", "uri": uri, "warehouse": warehouse, "init_catalog_tables": "true"}


class RestCatalogKind:
    """An Iceberg REST catalog (Polaris, Nessie, Lakekeeper, Tabular's reference server, ...)."""

    def properties(self, settings: IcebergSettings, data_dir: Path) -> dict[str, str]:
        out = {"type": "rest", "uri": settings.catalog_uri or ""}
        if settings.warehouse:
            out["warehouse"] = settings.warehouse
        return out


def catalog_kind(settings: IcebergSettings) -> CatalogKind:
    uri = settings.catalog_uri or ""
    return RestCatalogKind() if uri.startswith(("http://", "https://")) else SqlCatalogKind()


def open_catalog(settings: IcebergSettings, data_dir: Path) -> Catalog:
    """The catalog (blocking: SQLite or HTTP; call it off the event loop)."""
    props = catalog_kind(settings).properties(settings, data_dir)
    return load_catalog("brook", **{**props, **settings.properties})


def recorded_offsets(table: Table) -> dict[int, int]:
    """{partition: next offset} as the table's newest snapshot that records it says ({}: none yet)."""
    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        raw = snapshot.summary[OFFSETS_PROPERTY] if snapshot.summary is not None else None
        if raw:
            return {int(k): int(v) for k, v in json.loads(raw).items()}
    return {}


def offsets_property(offsets: Mapping[int, int]) -> str:
    return json.dumps({str(k): v for k, v in sorted(offsets.items())}, separators=(",", ":"))
