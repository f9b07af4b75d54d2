"""Table hygiene, so frequent small commits stay a readable table: each table partition's small data files
are rewritten into one (an Iceberg `overwrite` snapshot holding the same rows), snapshots older than
brook.iceberg.snapshot.max.age.ms are expired (the current one always stays), and files under the table's
location that no remaining snapshot or metadata file reaches are deleted once they are old enough that no
writer can still be about to commit them (pyiceberg's expiry removes metadata only, so without this the
rewritten small files and a crashed commit's files would stay on disk for good). Run by a writer of the
table every brook.iceberg.maintenance.interval.ms, in the Iceberg worker process, under the table's lock.

The rewrite is committed like an append: conditional on the snapshot it read, and carrying the offsets
map, so a writer's append in between makes it fail (it is tried again next time) and never loses rows.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta

from pyarrow.fs import FileSelector, FileType
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.io.pyarrow import ArrowScan, PyArrowFileIO, _dataframe_to_data_files
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


def reachable(table: Table) -> set[str]:
    """Every file the table's metadata reaches: its metadata files (current and logged), statistics, and
    each remaining snapshot's manifest list, manifests and live data and delete files."""
    md = table.metadata
    out = {table.metadata_location, *(e.metadata_file for e in md.metadata_log)}
    out.update(f.statistics_path for f in md.statistics)
    out.update(f.statistics_path for f in md.partition_statistics)
    manifests: set[str] = set()
    for snapshot in table.snapshots():
        out.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            if manifest.manifest_path in manifests:  # shared by the snapshots after the one adding it
                continue
            manifests.add(manifest.manifest_path)
            out.update(e.data_file.file_path for e in manifest.fetch_manifest_entry(table.io))
    return out | manifests


def remove_orphans(table: Table, older_than_ms: int) -> int:
    """Delete the files under the table's location that `reachable` does not name and that were last
    written more than older_than_ms ago; returns how many. A writer's data files are young until their
    commit names them, so files of a commit in flight are never taken."""
    io = table.io
    if not isinstance(io, PyArrowFileIO):  # listing goes through pyarrow's filesystems
        return 0
    scheme, netloc, root = io.parse_location(table.location(), io.properties)
    fs = io.fs_by_scheme(scheme, netloc)
    keep = {io.parse_location(location, io.properties)[2] for location in reachable(table)}
    cutoff = time.time() - older_than_ms / 1000
    removed = 0
    for info in fs.get_file_info(FileSelector(root, allow_not_found=True, recursive=True)):
        if info.type != FileType.File or info.path in keep or info.mtime is None:
            continue
        if info.mtime.timestamp() < cutoff:
            fs.delete_file(info.path)
            removed += 1
    return removed


def maintain(table: Table, max_age_ms: int, orphan_age_ms: int) -> None:
    """One round of hygiene; a commit race with a writer is left for the next round."""
    try:
        replaced = compact(table)
        expired = expire(table.refresh(), max_age_ms)
    except CommitFailedException as e:
        log.info("%s: maintenance raced a writer (%s); next time", table.name(), e)
        return
    try:
        removed = remove_orphans(table.refresh(), orphan_age_ms)
    except OSError as e:  # the storage refused a listing or a delete: the files wait for the next round
        log.warning("%s: unreachable files not deleted: %s", ".".join(table.name()), e)
        removed = 0
    if replaced or expired or removed:
        log.info(
            "%s: %d small data files rewritten, %d snapshots expired, %d unreachable files deleted",
            ".".join(table.name()),
            replaced,
            expired,
            removed,
        )
