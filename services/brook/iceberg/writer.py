"""One partition's writer: its committed records, appended to the topic's Iceberg table exactly once.

It runs on the partition's leader. Every commit interval it reads the batches from the table's next
offset for the partition up to the last stable offset (what a read_committed fetch sees: records of
aborted transactions are left out, by the aborted-transaction index, and so are control batches),
decodes them, writes Parquet and commits one snapshot whose summary records the partition's new next
offset (catalog.OFFSETS_PROPERTY). The commit is conditional on the snapshot it started from (pyiceberg's
AssertRefSnapshotId; the SQL catalog's compare-and-swap of the metadata location): a writer that lost
the race reloads the table and takes its offsets from there. A writer that starts (a new leader, a
restart after kill -9) starts from the table's record, so no offset is written twice or skipped; data
files written by a commit that never happened are unreferenced and nothing reads them.

Log reads happen on the event loop (whole batches, a bounded slice per turn, as a fetch does);
decoding, Parquet and the catalog run in the Iceberg worker process (worker.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.table import Table
from pyiceberg.transforms import DayTransform, HourTransform, MonthTransform, Transform, YearTransform

from brook.config import TopicConfig
from brook.log.records import FullRecord, RecordError, full_records
from brook.log.txn_index import AbortedTxn
from brook.protocol.batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, BatchHeader

from .avro_values import AvroValues, SchemaLookup
from .catalog import OFFSETS_PROPERTY, offsets_property, recorded_offsets
from .chunks import Chunk
from .maintenance import maintain
from .ports import TableId
from .rows import JsonValues, RawValues, StructValues, ValueColumns, to_arrow

log = logging.getLogger(__name__)

_TRANSFORMS: dict[str, Callable[[], Transform[object, int]]] = {
    "hour": HourTransform,
    "day": DayTransform,
    "month": MonthTransform,
    "year": YearTransform,
}


def committed_records(chunk: Chunk) -> list[FullRecord]:
    """The data records a read_committed consumer gets from the chunk (aborted ones and markers out)."""
    out: list[FullRecord] = []
    for data, h in chunk.batches:
        if h.attributes & ATTR_CONTROL:
            continue
        if h.attributes & ATTR_TRANSACTIONAL and _aborted(h, chunk.aborted):
            continue
        try:
            out.extend(full_records(data, h))
        except RecordError as e:  # a batch the log took but its records do not decode: say so, go on
            log.error("batch at offset %d: records not decodable (%s); not written", h.base_offset, e)
    return out


def _aborted(h: BatchHeader, aborted: list[AbortedTxn]) -> bool:
    return any(
        a.producer_id == h.producer_id and a.first_offset <= h.base_offset <= a.last_offset for a in aborted
    )


def value_columns(mode: str, schema: pa.Schema | None, registry: SchemaLookup | None) -> ValueColumns:
    """The value mode's columns, continuing from the table's schema (None: no table yet)."""
    values: StructValues
    if mode == "json":
        values = JsonValues()
    elif mode == "schema":
        values = AvroValues(registry=registry)
    else:
        return RawValues()
    values.continue_from(schema)
    return values


class TableWriter:
    """The commits of one partition into one table (blocking: runs in the Iceberg worker process)."""

    def __init__(
        self,
        catalog: Catalog,
        table: TableId,
        partition: int,
        config: TopicConfig,
        lock: threading.Lock,
        registry: SchemaLookup | None = None,
    ) -> None:
        self.catalog = catalog
        self.registry = registry  # the schema registry, for brook.iceberg.value.mode=schema
        self.table_id = table
        self.partition = partition
        self.config = config
        self.lock = lock  # this broker's writers of the table commit one at a time (no needless races)

    def next_offset(self) -> int | None:
        """Where the table says this partition continues (None: nothing recorded yet)."""
        table = self._load()
        return None if table is None else recorded_offsets(table).get(self.partition)

    def commit(self, chunk: Chunk) -> int:
        """Append the chunk; returns the partition's next offset as the table now records it (the
        chunk's end, or another writer's value when one committed this partition meanwhile)."""
        records = committed_records(chunk)
        with self.lock:
            for _ in range(10):
                table = self._load()
                offsets = recorded_offsets(table) if table is not None else {}
                recorded = offsets.get(self.partition)
                if recorded is not None and recorded != chunk.start:
                    log.warning(
                        "%s partition %d: the table records offset %d, not %d (another writer): "
                        "continuing from the table",
                        self.table_id,
                        self.partition,
                        recorded,
                        chunk.start,
                    )
                    return recorded
                mode = self.config.brook_iceberg_value_mode
                values = value_columns(mode, _arrow_schema(table), self.registry)
                df = to_arrow(self.partition, records, values)
                table = table if table is not None else self._create(df.schema)
                try:
                    self._append(table, df, {**offsets, self.partition: chunk.end})
                    return chunk.end
                except CommitFailedException as e:
                    log.info("%s: commit raced another writer (%s); retrying", self.table_id, e)
            raise CommitFailedException(f"{self.table_id}: 10 commits in a row lost a race")

    def maintain(self) -> None:
        """Table hygiene (maintenance.py), between this broker's commits to the table."""
        with self.lock:
            table = self._load()
            if table is not None:
                c = self.config
                # Unreachable files go once older than an expired snapshot and ten commit intervals: a
                # writer's files are named by its commit within one interval of being written.
                orphan_age = max(c.brook_iceberg_snapshot_max_age_ms, 10 * c.brook_iceberg_commit_interval_ms)
                maintain(table, c.brook_iceberg_snapshot_max_age_ms, orphan_age)

    def _append(self, table: Table, df: pa.Table, offsets: dict[int, int]) -> None:
        with table.transaction() as tx:
            current = tx.table_metadata.schema().as_arrow()
            if not _covers(current, df.schema):
                with tx.update_schema() as update:
                    update.union_by_name(df.schema)
                current = tx.table_metadata.schema().as_arrow()
            summary = {OFFSETS_PROPERTY: offsets_property(offsets)}
            tx.append(_conform(df, current), snapshot_properties=summary)

    def _load(self) -> Table | None:
        try:
            return self.catalog.load_table((self.table_id.namespace, self.table_id.name))
        except NoSuchTableError:
            return None

    def _create(self, schema: pa.Schema) -> Table:
        self.catalog.create_namespace_if_not_exists(self.table_id.namespace)
        table = self.catalog.create_table_if_not_exists(
            (self.table_id.namespace, self.table_id.name), schema=schema
        )
        transform = _TRANSFORMS.get(self.config.brook_iceberg_partition_spec)
        if transform is not None and table.spec().is_unpartitioned():
            try:
                name = f"timestamp_{self.config.brook_iceberg_partition_spec}"
                with table.update_spec() as spec:
                    spec.add_field("timestamp", transform(), name)
            except CommitFailedException:
                pass  # another writer created it and set its spec first
            table = self.catalog.load_table((self.table_id.namespace, self.table_id.name))
        return table


def _arrow_schema(table: Table | None) -> pa.Schema | None:
    return None if table is None else table.schema().as_arrow()


def _covers(current: pa.Schema, new: pa.Schema) -> bool:
    """Whether the table's schema already has every column (and struct field) of `new`."""
    for f in new:
        if f.name not in current.names:
            return False
        have = current.field(f.name).type
        if (
            pa.types.is_struct(f.type)
            and pa.types.is_struct(have)
            and not {c.name for c in f.type} <= {c.name for c in have}
        ):
            return False
    return True


def _conform(df: pa.Table, schema: pa.Schema) -> pa.Table:
    """The rows with the table's columns in its order (nulls for columns these rows lack)."""
    arrays = []
    for f in schema:
        if f.name in df.column_names:
            arrays.append(df.column(f.name).cast(f.type))
        else:
            arrays.append(pa.nulls(len(df), f.type))
    return pa.Table.from_arrays(arrays, schema=schema)
