"""Which pyiceberg catalog properties Brook passes for a catalog URI (no catalog is opened)."""

from __future__ import annotations

from pathlib import Path

from brook.console.iceberg import reading_settings
from brook.iceberg.catalog import RestCatalogKind, SqlCatalogKind, catalog_kind
from brook.iceberg.ports import IcebergSettings


def test_an_http_uri_is_a_rest_catalog_anything_else_sql() -> None:
    assert isinstance(catalog_kind(IcebergSettings("http://lake:8181")), RestCatalogKind)
    assert isinstance(catalog_kind(IcebergSettings("https://lake/api/catalog")), RestCatalogKind)
    assert isinstance(catalog_kind(IcebergSettings("sqlite:////var/lib/brook/catalog.db")), SqlCatalogKind)
    assert isinstance(catalog_kind(IcebergSettings()), SqlCatalogKind)


def test_a_rest_catalog_gets_the_warehouse_it_is_given_and_no_other(tmp_path: Path) -> None:
    kind = RestCatalogKind()
    given = IcebergSettings("http://lake:8181", warehouse="analytics")
    assert kind.properties(given, tmp_path) == {
        "type": "rest",
        "uri": "http://lake:8181",
        "warehouse": "analytics",
    }
    assert kind.properties(IcebergSettings("http://lake:8181"), tmp_path) == {
        "type": "rest",
        "uri": "http://lake:8181",
    }
    assert not (tmp_path / "iceberg").exists()


def test_topic_describe_reads_a_rest_catalog_without_a_made_up_warehouse(tmp_path: Path) -> None:
    """To Polaris or Lakekeeper `warehouse` names the catalog: a placeholder sent by `brook topic
    describe` would name none, and override PYICEBERG_CATALOG__BROOK__WAREHOUSE (pyiceberg lets the
    properties given win over its environment)."""
    rest = reading_settings("https://lake/api/catalog")
    assert "warehouse" not in catalog_kind(rest).properties(rest, tmp_path)
    sql = reading_settings(f"sqlite:///{tmp_path / 'catalog.db'}")
    assert catalog_kind(sql).properties(sql, tmp_path)["warehouse"] == "file:///nonexistent"
    assert not (tmp_path / "iceberg").exists()  # reading makes no warehouse directory
