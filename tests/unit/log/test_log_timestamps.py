"""Lookups by timestamp (ListOffsets): record granularity, inside compressed batches, LogAppendTime,
and only the batch that holds the answer is decoded."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from log_batches import FakeClock, make_batch, open_log

import brook.log.segment as segment_module
from brook.log.records import record_timestamps
from brook.protocol.errors import ErrorCode, KafkaError
from brook.replication.epochs import LeaderEpochCache

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4


def kbatch(timestamps: list[int], compression: int = NONE) -> bytes:
    """A CreateTime batch (kafka-python's encoder) with one record per timestamp, in that order."""
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=2**30,
    )
    for i, ts in enumerate(timestamps):
        b.append(i, timestamp=ts, key=None, value=b"v%d" % i * 20, headers=[])
    return bytes(b.build())


@pytest.mark.parametrize("compression", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_the_first_record_at_or_after_the_target_inside_a_batch(tmp_path: Path, compression: int) -> None:
    log = open_log(tmp_path / "p", index_interval_bytes=0)
    log.append(kbatch([100, 200, 300]), leader_epoch=1)  # offsets 0-2
    log.append(kbatch([500, 400, 900, 600], compression), leader_epoch=2)  # offsets 3-6, out of order
    log.append(kbatch([800]), leader_epoch=3)  # offset 7
    # (timestamp, offset, leader epoch) of the first record, in offset order, with timestamp >= target.
    assert log.offset_for_timestamp(0) == (100, 0, 1)
    assert log.offset_for_timestamp(150) == (200, 1, 1)
    assert log.offset_for_timestamp(300) == (300, 2, 1)
    assert log.offset_for_timestamp(301) == (500, 3, 2)
    assert log.offset_for_timestamp(450) == (500, 3, 2)
    assert log.offset_for_timestamp(501) == (900, 5, 2)
    assert log.offset_for_timestamp(900) == (900, 5, 2)
    assert log.offset_for_timestamp(901) is None
    assert log.max_timestamp() == (900, 5, 2)  # the record itself, not its batch's base offset


def test_log_append_time_gives_every_record_the_batch_time(tmp_path: Path) -> None:
    clock = FakeClock(5_000_000)
    log = open_log(tmp_path / "p", clock, message_timestamp_type="LogAppendTime")
    log.append(kbatch([10, 30, 20]), leader_epoch=4)  # offsets 0-2, all stamped 5_000_000
    clock.now = 6_000_000
    log.append(kbatch([1, 2]), leader_epoch=4)  # offsets 3-4
    assert log.offset_for_timestamp(0) == (5_000_000, 0, 4)
    assert log.offset_for_timestamp(5_000_000) == (5_000_000, 0, 4)
    assert log.offset_for_timestamp(5_000_001) == (6_000_000, 3, 4)
    assert log.offset_for_timestamp(6_000_001) is None
    assert log.max_timestamp() == (6_000_000, 3, 4)


def test_records_below_the_start_offset_are_skipped(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    log.append(kbatch([100, 200, 300, 400]), leader_epoch=0)
    segment = log._segments[0]
    assert segment.search_timestamp(0, 0) == (100, 0, 0)
    assert segment.search_timestamp(0, 2) == (300, 2, 0)  # a log start inside the batch
    assert segment.search_timestamp(350, 2) == (400, 3, 0)
    assert segment.search_timestamp(0, 4) is None


def test_only_the_batch_holding_the_answer_is_decoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path / "p", index_interval_bytes=500, segment_bytes=2000)
    for i in range(60):  # batch i: offsets 3i..3i+2, timestamps 1000i + {0, 10, 20}
        log.append(make_batch(3, timestamp=1000 * i, ts_step=10))
    assert len(log._segments) > 2
    decoded: list[int] = []

    def counting(batch: bytes, header: object) -> list[tuple[int, int]]:
        decoded.append(1)
        return record_timestamps(batch, header)  # type: ignore[arg-type]

    monkeypatch.setattr(segment_module, "record_timestamps", counting)
    assert log.offset_for_timestamp(41_015) == (41_020, 125, -1)
    assert len(decoded) == 1
    assert log.max_timestamp() == (59_020, 179, -1)
    assert len(decoded) == 2


def test_a_corrupt_record_is_a_corrupt_message_error(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    log.append(make_batch(2, timestamp=100))
    log.close()
    path = next((tmp_path / "p").glob("*.log"))
    data = bytearray(path.read_bytes())
    data[61] = 0x7E  # the first record's length varint: far past the batch (records carry no CRC check here)
    path.write_bytes(bytes(data))
    log = open_log(tmp_path / "p")
    with pytest.raises(KafkaError) as e:
        log.offset_for_timestamp(0)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE


def test_epoch_for_offset() -> None:
    cache = LeaderEpochCache()
    assert cache.epoch_for_offset(0) == -1
    cache.assign(2, 10)
    cache.assign(5, 40)
    assert [cache.epoch_for_offset(o) for o in (0, 9, 10, 39, 40, 1000)] == [-1, -1, 2, 2, 5, 5]
