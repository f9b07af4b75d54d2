"""The catalog settings the broker (or `brook topic describe`) gives, and the name of a topic's table.
Light on purpose: pyiceberg and pyarrow are imported only once a writer starts or a table is read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from brook.config import TopicConfig


@dataclass(frozen=True, slots=True)
class IcebergSettings:
    """The broker's catalog: uri None is the embedded SQLite catalog under the data directory."""

    catalog_uri: str | None = None
    warehouse: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)  # passed to pyiceberg as they are
    schema_registry_url: str | None = None  # where brook.iceberg.value.mode=schema finds schemas by id


@dataclass(frozen=True, slots=True)
class TableId:
    namespace: str
    name: str

    @classmethod
    def of(cls, topic: str, config: TopicConfig) -> TableId:
        return cls(config.brook_iceberg_namespace, config.iceberg_table(topic))

    def __str__(self) -> str:
        return f"{self.namespace}.{self.name}"
