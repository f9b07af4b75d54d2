"""`spark.read.format("brook-iceberg")`: an Iceberg table (an Iceberg topic's, docs/iceberg.md) read
through pyiceberg and Arrow, for Spark versions Iceberg's own Spark runtime does not support yet
(Iceberg publishes none for Spark 4.3).

Options: `table` ("namespace.name"), `catalog.uri` and any other pyiceberg catalog property as
`catalog.<property>` (`catalog.warehouse`, `catalog.s3.endpoint`, ...), `catalog.name` (default `brook`,
the name Brook's SQL catalog keys its tables by) and `snapshotId` (time travel; default: the snapshot
current when the query is planned, one for all its tasks). One Spark task per data file, planned on the
driver and read by path on the executors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import load_catalog
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.table import Table
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType


class DataFilePartition(InputPartition):
    """One Spark task: one data file of the snapshot (None: an empty table's one empty task)."""

    def __init__(self, path: str | None) -> None:
        super().__init__(path)
        self.path = path


def _load(options: Mapping[str, str]) -> Table:
    props = {k[len("catalog.") :]: v for k, v in options.items() if k.lower().startswith("catalog.")}
    name = props.pop("name", "brook")
    uri = props.get("uri")
    if not uri:
        raise ValueError('format "brook-iceberg" needs the option catalog.uri')
    props.setdefault("type", "rest" if uri.startswith(("http://", "https://")) else "sql")
    table = options.get("table", "")
    namespace, _, table_name = table.rpartition(".")
    if not namespace:
        raise ValueError(f'option table must be "namespace.name", got {table!r}')
    return load_catalog(name, **props).load_table((namespace, table_name))


def _plain(t: pa.DataType) -> pa.DataType:
    """Arrow types as Spark takes them from a data source: no large_* variants (pyiceberg reads those)."""
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(_plain_field(t.value_field))
    if pa.types.is_struct(t):
        return pa.struct([_plain_field(f) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_plain(t.key_type), _plain(t.item_type))
    return t


def _plain_field(f: pa.Field) -> pa.Field:
    return pa.field(f.name, _plain(f.type), f.nullable)


def spark_arrow_schema(table: Table) -> pa.Schema:
    return pa.schema([_plain_field(f) for f in table.schema().as_arrow()])


class IcebergTableReader(DataSourceReader):
    def __init__(self, options: dict[str, str], snapshot_id: int | None) -> None:
        self.options = options
        self.snapshot_id = snapshot_id

    def partitions(self) -> Sequence[InputPartition]:
        if self.snapshot_id is None:
            return [DataFilePartition(None)]
        scan = _load(self.options).scan(snapshot_id=self.snapshot_id)
        return [DataFilePartition(t.file.file_path) for t in scan.plan_files()] or [DataFilePartition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, DataFilePartition)
        if partition.path is None:
            return
        table = _load(self.options)
        schema = spark_arrow_schema(table)
        scan = table.scan(snapshot_id=self.snapshot_id)
        tasks = [t for t in scan.plan_files() if t.file.file_path == partition.path]
        arrow = ArrowScan(table.metadata, table.io, scan.projection(), scan.row_filter, scan.case_sensitive)
        for batch in arrow.to_record_batches(tasks):
            yield pa.RecordBatch.from_arrays(
                [batch.column(f.name).cast(f.type) for f in schema], schema=schema
            )


class BrookIcebergDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "brook-iceberg"

    def _options(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in dict(self.options).items()}

    def schema(self) -> StructType:
        struct: Any = from_arrow_schema(spark_arrow_schema(_load(self._options())))
        return struct  # type: ignore[no-any-return]

    def reader(self, schema: StructType) -> DataSourceReader:
        options = self._options()
        given = options.get("snapshotid") or options.get("snapshotId")
        if given:
            return IcebergTableReader(options, int(given))
        current = _load(options).current_snapshot()
        return IcebergTableReader(options, None if current is None else current.snapshot_id)
