"""The aborted-transaction index (.txnindex): appends, range queries, reload, and re-filing after
segments are deleted, truncated or merged; and the log keeping it through those operations."""

from __future__ import annotations

from pathlib import Path

from brook.config import TopicConfig
from brook.log import PartitionLog
from brook.log.txn_index import TXN_INDEX_SUFFIX, AbortedTxn, TxnIndex
from brook.protocol.txn_records import build_control_batch


def test_collect_returns_overlapping_aborts_by_first_offset(tmp_path: Path) -> None:
    idx = TxnIndex(tmp_path, [])
    idx.append(AbortedTxn(1, 10, 20, 21), 0)
    idx.append(AbortedTxn(2, 5, 30, 31), 0)
    idx.append(AbortedTxn(3, 40, 50, 51), 40)
    idx.append(AbortedTxn(3, 40, 50, 51), 40)  # seen again (a rebuild): not indexed twice
    assert [e.producer_id for e in idx.collect(0, 100)] == [2, 1, 3]
    assert [e.producer_id for e in idx.collect(21, 100)] == [2, 3]  # pid 1 ended before 21
    assert [e.producer_id for e in idx.collect(0, 10)] == [2]  # pid 1 starts at 10: not below
    assert idx.collect(51, 100) == []
    again = TxnIndex.load(tmp_path)
    assert again.entries() == idx.entries()
    assert sorted(p.name for p in tmp_path.glob("*" + TXN_INDEX_SUFFIX)) == [
        f"{0:020d}{TXN_INDEX_SUFFIX}",
        f"{40:020d}{TXN_INDEX_SUFFIX}",
    ]


def test_sync_drops_deleted_and_truncated_and_refiles_merged(tmp_path: Path) -> None:
    idx = TxnIndex(tmp_path, [])
    idx.append(AbortedTxn(1, 1, 5, 6), 0)
    idx.append(AbortedTxn(2, 12, 15, 16), 10)
    idx.append(AbortedTxn(3, 22, 25, 26), 20)
    idx.sync([10, 20], 30)  # segment 0 deleted by retention
    assert [e.producer_id for e in idx.entries()] == [2, 3]
    idx.sync([10], 20)  # truncated to 20
    assert [e.producer_id for e in idx.entries()] == [2]
    assert not (tmp_path / f"{20:020d}{TXN_INDEX_SUFFIX}").exists()
    assert TxnIndex.load(tmp_path).entries() == idx.entries()


def test_a_torn_last_entry_is_ignored(tmp_path: Path) -> None:
    idx = TxnIndex(tmp_path, [])
    idx.append(AbortedTxn(1, 1, 5, 6), 0)
    path = tmp_path / f"{0:020d}{TXN_INDEX_SUFFIX}"
    path.write_bytes(path.read_bytes() + b"\x00\x01\x02")
    assert [e.producer_id for e in TxnIndex.load(tmp_path).entries()] == [1]


def test_the_log_keeps_its_index_through_reopen_and_truncation(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", TopicConfig())
    for _ in range(3):
        log.append(build_control_batch(9, 0, False, 0, 1000))
    log.record_aborted(AbortedTxn(9, 0, 1, 2))
    log.record_aborted(AbortedTxn(9, 2, 2, 3))
    assert log.last_indexed_abort == 2
    log.close()
    log = PartitionLog.open(tmp_path / "t-0", TopicConfig())
    assert [e.last_offset for e in log.aborted_transactions(0, 10)] == [1, 2]
    log.truncate_to(2)
    assert [e.last_offset for e in log.aborted_transactions(0, 10)] == [1]
    log.close()
