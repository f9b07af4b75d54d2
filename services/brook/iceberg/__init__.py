"""Iceberg topics: a topic's committed records appended to an Apache Iceberg table by its partition
leaders, exactly once per offset (docs/iceberg.md). Importing this package imports neither pyiceberg
nor pyarrow: the writers do, when the first one starts."""

from .ports import IcebergSettings, TableId, WrittenPartition
from .writers import IcebergWriters

__all__ = ["IcebergSettings", "IcebergWriters", "TableId", "WrittenPartition"]
