"""The share-partition state machine (brook.share.partition): acquisition, acknowledgement, locks,
the delivery count limit, the in-flight limit, and what a snapshot keeps."""

from __future__ import annotations

import pytest

from brook.protocol.errors import ErrorCode, KafkaError
from brook.share.partition import (
    AckType,
    Acquired,
    FetchedBatch,
    RecordState,
    SharePartition,
    ShareSettings,
)

S = ShareSettings(lock_duration_ms=1000, delivery_count_limit=3, max_record_locks=10)


def test_acquire_accept_advances_the_start() -> None:
    sp = SharePartition(0)
    got = sp.acquire("a", [FetchedBatch(0, 4)], now=0, settings=S, max_records=100)
    assert got == [Acquired(0, 4, 1)]
    assert sp.in_flight == 5
    sp.acknowledge("a", [(0, 1, [AckType.ACCEPT])], now=1, settings=S)
    assert sp.start_offset == 2
    # Only the holder may acknowledge; a second acknowledgement of a done record is refused.
    with pytest.raises(KafkaError) as e:
        sp.acknowledge("b", [(2, 2, [AckType.ACCEPT])], now=1, settings=S)
    assert e.value.code == ErrorCode.INVALID_RECORD_STATE
    with pytest.raises(KafkaError):
        sp.acknowledge("a", [(1, 1, [AckType.ACCEPT])], now=1, settings=S)


def test_acknowledgements_are_all_or_nothing_per_partition() -> None:
    sp = SharePartition(0)
    sp.acquire("a", [FetchedBatch(0, 2)], now=0, settings=S, max_records=100)
    with pytest.raises(KafkaError):
        sp.acknowledge("a", [(0, 0, [AckType.ACCEPT]), (5, 5, [AckType.ACCEPT])], now=0, settings=S)
    assert sp.state_of(0) == (RecordState.ACQUIRED, 1)


def test_release_redelivers_and_the_limit_archives() -> None:
    sp = SharePartition(0)
    for delivery in range(1, 4):
        got = sp.acquire("a", [FetchedBatch(0, 1)], now=0, settings=S, max_records=100)
        assert got == [Acquired(0, 1 if delivery == 1 else 0, delivery)]
        types = [AckType.RELEASE, AckType.ACCEPT] if delivery == 1 else [AckType.RELEASE]
        last = 1 if delivery == 1 else 0
        sp.acknowledge("a", [(0, last, types)], now=0, settings=S)
    # Delivered 3 times (the limit) and released: archived, never delivered again.
    assert sp.state_of(0) is None and sp.start_offset == 2
    assert sp.acquire("a", [FetchedBatch(0, 1)], now=0, settings=S, max_records=100) == []
    assert sp.counts.archived == 1 and sp.counts.released == 3


def test_lock_expiry_and_renew() -> None:
    sp = SharePartition(0)
    sp.acquire("a", [FetchedBatch(0, 1)], now=0, settings=S, max_records=100)
    sp.acknowledge("a", [(1, 1, [AckType.RENEW])], now=900, settings=S)
    assert sp.expire_locks(1000, S) == 1  # offset 0 ran out; 1 was renewed until 1900
    assert sp.state_of(0) == (RecordState.AVAILABLE, 1)
    assert sp.state_of(1) == (RecordState.ACQUIRED, 1)
    assert sp.fetch_offset() == 0
    got = sp.acquire("b", [FetchedBatch(0, 1)], now=1000, settings=S, max_records=100)
    assert got == [Acquired(0, 0, 2)]
    assert sp.counts.lock_expiries == 1


def test_reject_and_gap_archive() -> None:
    sp = SharePartition(0)
    sp.acquire("a", [FetchedBatch(0, 2)], now=0, settings=S, max_records=100)
    sp.acknowledge("a", [(0, 2, [AckType.REJECT, AckType.GAP, AckType.ACCEPT])], now=0, settings=S)
    assert sp.start_offset == 3 and sp.counts.archived == 2


def test_in_flight_limit_and_max_records() -> None:
    sp = SharePartition(0)
    got = sp.acquire("a", [FetchedBatch(0, 5), FetchedBatch(6, 11)], now=0, settings=S, max_records=100)
    assert got == [Acquired(0, 11, 1)]  # the batch crossing the limit is taken whole
    assert sp.acquire("b", [FetchedBatch(12, 12)], now=0, settings=S, max_records=100) == []
    sp2 = SharePartition(0)
    got = sp2.acquire("a", [FetchedBatch(0, 5)], now=0, settings=S, max_records=2, strict=True)
    assert got == [Acquired(0, 1, 1)] and sp2.end_offset == 2
    assert sp2.acquire("b", [FetchedBatch(0, 5)], now=0, settings=S, max_records=100) == [Acquired(2, 5, 1)]


def test_control_batches_and_holes_are_never_delivered() -> None:
    sp = SharePartition(0)
    got = sp.acquire(
        "a", [FetchedBatch(0, 1), FetchedBatch(2, 2, deliverable=False), FetchedBatch(5, 6)], 0, S, 100
    )
    assert got == [Acquired(0, 1, 1), Acquired(5, 6, 1)]
    sp.acknowledge("a", [(0, 1, [AckType.ACCEPT])], now=0, settings=S)
    assert sp.start_offset == 5


def test_snapshot_keeps_acknowledgements_and_delivery_counts() -> None:
    sp = SharePartition(10)
    sp.acquire("a", [FetchedBatch(10, 14)], now=0, settings=S, max_records=100)
    sp.acknowledge("a", [(11, 11, [AckType.ACCEPT]), (12, 12, [AckType.RELEASE])], now=0, settings=S)
    start, end, runs = sp.snapshot()
    back = SharePartition.restore(start, end, runs, state_epoch=1)
    assert (back.start_offset, back.end_offset) == (10, 15)
    assert back.state_of(10) == (RecordState.AVAILABLE, 1)  # was acquired: its lock did not survive
    assert back.state_of(11) == (RecordState.ACKNOWLEDGED, 1)
    got = back.acquire("b", [FetchedBatch(10, 14)], now=0, settings=S, max_records=100)
    assert got == [Acquired(10, 10, 2), Acquired(12, 14, 2)]


def test_log_start_moves_past_in_flight_records() -> None:
    sp = SharePartition(0)
    sp.acquire("a", [FetchedBatch(0, 4)], now=0, settings=S, max_records=100)
    sp.advance_to_log_start(3)
    assert sp.start_offset == 3 and sp.state_of(2) is None
    sp.advance_to_log_start(9)
    assert (sp.start_offset, sp.end_offset, sp.in_flight) == (9, 9, 0)
