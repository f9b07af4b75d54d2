"""Table hygiene, so frequent small commits stay a readable table: each table partition's small data files
are rewritten into one (an Iceberg `overwrite` snapshot holding the same rows), and snapshots older than
brook.iceberg.snapshot.max.age.ms are expired (the current one always stays). Run by a writer of the table
every brook.iceberg.maintenance.interval.ms, in the Iceberg worker process, under the table's lock.

The rewrite is committed like an append: conditional on the snapshot it read, and carrying the offsets
map, so a writer's append in between makes it fail (it is tried again next time) and never loses rows.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import UTC, datetime, timedelta

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files
from pyiceberg.table import FileScanTask, Table

from .catalog import OFFSETS_PROPERTY, offsets_property, recorded_offsets

log = logging.getLogger(__name__)

SMALL_FILE_BYTES = 32 * 1024 * 1024  # files below this are rewritten ...
MIN_SMALL_FILES = 8  # ... once a table partition has this many


def compact(table: Table) -> int:
    """Rewrite each table partition's small files into one; returns how many files were replaced."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return 0
    groups: dict[tuple[int, str], list[FileScanTask]] = defaultdict(list)
    for task in table.scan(snapshot_id=snapshot.snapshot_id).plan_files():
        f = task.file
        if f.file_size_in_bytes < SMALL_FILE_BYTES and not task.delete_files:
            groups[(f.spec_id, repr(f.partition))].append(task)
    due = [tasks for tasks in groups.values() if len(tasks) >= MIN_SMALL_FILES]
    if not due:
        return 0
    offsets = recorded_offsets(table)
    replaced = 0
    with table.transaction() as tx:
        summary = {OFFSETS_PROPERTY: offsets_property(offsets)} if offsets else {}
        with tx.update_snapshot(snapshot_properties=summary).overwrite() as rewrite:
            for tasks in due:
                scan = ArrowScan(table.metadata, table.io, table.schema(), table.scan().row_filter)
                rows = scan.to_table(tasks)
                for task in tasks:
                    rewrite.delete_data_file(task.file)
                new = _dataframe_to_data_files(table.metadata, rows, table.io, rewrite.commit_uuid)
                for data_file in new:
                    rewrite.append_data_file(data_file)
                replaced += len(tasks)
    return replaced


def expire(table: Table, max_age_ms: int) -> int:
    """Expire the snapshots older than max_age_ms but the current one; returns how many."""
    current = table.current_snapshot()
    cutoff = datetime.now(UTC) - timedelta(milliseconds=max_age_ms)
    old = [
        s.snapshot_id
        for s in table.snapshots()
        if s.timestamp_ms < cutoff.timestamp() * 1000
        and (current is None or s.snapshot_id != current.snapshot_id)
    ]
    if old:
        table.maintenance.expire_snapshots().by_ids(old).commit()
    return len(old)


def maintain(table: Table, max_age_ms: int) -> None:
    """One round of hygiene; a commit race with a writer is left for the next round."""
    try:
        replaced = compact(table)
        expired = expire(table.refresh(), max_age_ms)
    except CommitFailedException as e:
        log.info("%s: maintenance raced a writer (%s); next time", table.name(), e)
        return
    if replaced or expired:
        log.info(
            "%s: %d small data files rewritten, %d snapshots expired",
            ".".join(table.name()),
            replaced,
            expired,
        )
