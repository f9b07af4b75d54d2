"""What the Iceberg room takes from the broker (its catalog settings, its partitions) and the name of a
topic's table. Light on purpose: pyiceberg and pyarrow are imported only once a writer starts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from brook.config import TopicConfig
from brook.log import PartitionLog


@dataclass(frozen=True, slots=True)
class IcebergSettings:
    """The broker's catalog: uri None is the embedded SQLite catalog under the data directory."""

    catalog_uri: str | None = None
    warehouse: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)  # passed to pyiceberg as they are


class WrittenPartition(Protocol):
    """What a writer needs of a partition (brook.broker.partition.Partition satisfies it)."""

    topic: str
    index: int
    log: PartitionLog

    @property
    def leads_now(self) -> bool: ...

    @property
    def last_stable_offset(self) -> int: ...


@dataclass(frozen=True, slots=True)
class TableId:
    namespace: str
    name: str

    @classmethod
    def of(cls, topic: str, config: TopicConfig) -> TableId:
        return cls(config.brook_iceberg_namespace, config.iceberg_table(topic))

    def __str__(self) -> str:
        return f"{self.namespace}.{self.name}"
