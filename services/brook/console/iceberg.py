"""The Iceberg table of a topic as `brook topic describe` shows it: per partition, the offset the table
has reached (its snapshots' record, brook.iceberg.catalog) and its lag behind the topic's last stable
offset (the committed records a read_committed consumer sees)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from brook.iceberg.ports import IcebergSettings

from .common import CommandError, offset_spec, result

CatalogUri = Annotated[
    str | None,
    typer.Option(
        "--iceberg-catalog-uri",
        envvar="BROOK_ICEBERG_CATALOG_URI",
        help="the brokers' Iceberg catalog (as their --iceberg-catalog-uri): shows each table's lag",
    ),
]


def reading_settings(catalog_uri: str) -> IcebergSettings:
    """The catalog as reading a table's record needs it. A SQL catalog's warehouse is only where new
    tables go: a placeholder keeps its default (a directory under the current one) from being made. A
    REST catalog gets none: there the `warehouse` property is the server's to interpret (Polaris and
    Lakekeeper pick a catalog by it), and one set as PYICEBERG_CATALOG__BROOK__WAREHOUSE must stand."""
    from brook.iceberg.catalog import RestCatalogKind, catalog_kind

    settings = IcebergSettings(catalog_uri)
    if isinstance(catalog_kind(settings), RestCatalogKind):
        return settings
    return IcebergSettings(catalog_uri, warehouse="file:///nonexistent")


def table_offsets(catalog_uri: str, namespace: str, table: str) -> dict[int, int] | None:
    """{partition: next offset} the table records; None when it does not exist (yet)."""
    from pyiceberg.exceptions import NoSuchTableError

    from brook.iceberg.catalog import open_catalog, recorded_offsets

    try:
        catalog = open_catalog(reading_settings(catalog_uri), Path("."))
        return recorded_offsets(catalog.load_table((namespace, table)))
    except NoSuchTableError:
        return None
    except Exception as e:  # an unreachable catalog, a bad URI: one line, not a traceback
        raise CommandError(f"Iceberg catalog {catalog_uri}: {str(e).splitlines()[0]}") from None


def lag_rows(
    a: Any, topic: str, partitions: list[int], configs: dict[str, str], catalog_uri: str | None
) -> list[dict[str, Any]] | None:
    """Per partition: the last stable offset, the table's offset and the lag; None when the topic has
    no table. Without a catalog URI the table's offsets are unknown (None)."""
    from confluent_kafka import IsolationLevel, TopicPartition

    if configs.get("brook.iceberg.enabled") != "true":
        return None
    name = configs.get("brook.iceberg.table") or topic.replace(".", "_")
    namespace = configs.get("brook.iceberg.namespace", "brook")
    asked = {TopicPartition(topic, p): offset_spec("latest") for p in partitions}
    got = a.list_offsets(asked, isolation_level=IsolationLevel.READ_COMMITTED)
    stable = {
        tp.partition: result(f, f"last stable offset of {topic}-{tp.partition}").offset
        for tp, f in got.items()
    }
    recorded = table_offsets(catalog_uri, namespace, name) if catalog_uri else None
    rows = []
    for p in partitions:
        at = None if catalog_uri is None else (recorded or {}).get(p, 0)
        rows.append(
            {
                "partition": p,
                "table": f"{namespace}.{name}",
                "stable_offset": stable[p],
                "table_offset": at,
                "lag": None if at is None else max(stable[p] - at, 0),
            }
        )
    return rows
