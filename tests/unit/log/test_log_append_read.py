"""PartitionLog append and read: validation, offset assignment, slices."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch
from log_batches import FakeClock, base_offset_of, make_batch, open_log, with_base_offset

from brook.config import TopicConfig
from brook.log import AppendResult, FileSlice
from brook.log.append import prepare_append
from brook.protocol.batch import parse_header
from brook.protocol.errors import ErrorCode, KafkaError


def test_append_read_round_trip_rewrites_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p0")
    b1 = make_batch(3, base_offset=777)
    b2 = make_batch(2, base_offset=0)
    r1 = log.append(b1)
    r2 = log.append(b2)
    assert r1 == AppendResult(
        base_offset=0, last_offset=2, max_timestamp=1002, log_append_time=-1, record_count=3, batch_count=1
    )
    assert (r2.base_offset, r2.last_offset) == (3, 4)
    assert log.log_start_offset == 0 and log.log_end_offset == 5
    assert log.size_bytes == len(b1) + len(b2)
    s = log.read(0, 1 << 20)
    assert s is not None and s.position == 0
    assert s.read() == with_base_offset(b1, 0) + with_base_offset(b2, 3)
    log.close()


def test_multiple_batches_in_one_append(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    log.append(make_batch(1))
    batches = [make_batch(2), make_batch(1), make_batch(4)]
    r = log.append(b"".join(batches))
    assert (r.base_offset, r.last_offset, r.record_count, r.batch_count) == (1, 7, 7, 3)
    s = log.read(1, 1 << 20)
    assert s is not None
    data = s.read()
    assert data == b"".join(with_base_offset(b, o) for b, o in zip(batches, (1, 3, 4), strict=True))
    assert [h.base_offset for h in log.iter_batch_headers()] == [0, 1, 3, 4]
    assert [h.base_offset for h in log.iter_batch_headers(4)] == [4]
    # The stored batches still parse and check out with an independent implementation.
    assert DefaultRecordBatch(data[: len(batches[0])]).validate_crc()


def test_in_place_append_rewrites_the_callers_buffer_only_when_writable(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    log.append(make_batch(2))
    batches = [make_batch(3, base_offset=777), make_batch(1, base_offset=5)]
    frame = bytearray(b"".join(batches))
    log.append(memoryview(frame), leader_epoch=4, in_place=True)
    # The offsets and the epoch are set in the caller's buffer itself, which is what was written.
    assert base_offset_of(frame) == 2 and base_offset_of(frame, len(batches[0])) == 5
    assert parse_header(frame).partition_leader_epoch == 4
    s = log.read(2, 1 << 20)
    assert s is not None and s.read() == bytes(frame)
    # A read-only buffer (bytes) is copied as without in_place: the caller's bytes stay as they were.
    ro = make_batch(2, base_offset=99)
    r = log.append(memoryview(ro), in_place=True)
    assert r.base_offset == 6 and base_offset_of(ro) == 99
    # A request that fails validation leaves the buffer untouched.
    bad = bytearray(make_batch(2, base_offset=42) + _corrupt(make_batch(2), 70))
    before = bytes(bad)
    with pytest.raises(KafkaError):
        log.append(memoryview(bad), in_place=True)
    assert bytes(bad) == before
    log.close()


def _corrupt(batch: bytes, at: int) -> bytes:
    b = bytearray(batch)
    b[at] ^= 0xFF
    return bytes(b)


@pytest.mark.parametrize(
    ("records", "code"),
    [
        (b"", ErrorCode.CORRUPT_MESSAGE),
        (make_batch(2) + _corrupt(make_batch(2), 70), ErrorCode.CORRUPT_MESSAGE),  # bad CRC in 2nd batch
        (make_batch(2) + make_batch(2)[:-3], ErrorCode.CORRUPT_MESSAGE),  # torn tail
        (make_batch(2) + make_batch(2)[:40], ErrorCode.CORRUPT_MESSAGE),  # torn header
        (make_batch(1, value_size=2000), ErrorCode.MESSAGE_TOO_LARGE),
    ],
)
def test_invalid_appends_write_nothing(tmp_path: Path, records: bytes, code: ErrorCode) -> None:
    log = open_log(tmp_path / "p", max_message_bytes=1000)
    log.append(make_batch(1))
    size, leo = log.size_bytes, log.log_end_offset
    with pytest.raises(KafkaError) as e:
        log.append(records)
    assert e.value.code == code
    assert (log.size_bytes, log.log_end_offset) == (size, leo)
    assert (tmp_path / "p" / "00000000000000000000.log").stat().st_size == size


def test_wrong_magic_rejected(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    b = bytearray(make_batch(1))
    b[16] = 1
    with pytest.raises(KafkaError) as e:
        log.append(bytes(b))
    assert e.value.code == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
    assert log.size_bytes == 0


def test_read_in_the_middle_of_a_batch_returns_the_whole_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    b0, b1, b2 = make_batch(5), make_batch(5), make_batch(5)
    for b in (b0, b1, b2):
        log.append(b)
    s = log.read(7, 1 << 20)
    assert s is not None
    assert s.position == len(b0)
    assert s.read() == with_base_offset(b1, 5) + with_base_offset(b2, 10)


def test_max_bytes_and_min_one(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    b0, b1 = make_batch(3, value_size=50), make_batch(3, value_size=50)
    log.append(b0)
    log.append(b1)
    # max_bytes cuts mid-batch (clients drop the partial trailing batch).
    s = log.read(0, len(b0) + 10)
    assert s is not None and s.size == len(b0) + 10
    # min_one: at least the first whole batch, even past max_bytes; not the next one.
    s = log.read(0, 5)
    assert s is not None and s.size == len(b0)
    s = log.read(3, 0)
    assert s is not None and (s.position, s.size) == (len(b0), len(b1))
    # Without min_one the limit is strict.
    s = log.read(0, 5, min_one=False)
    assert s is not None and s.size == 5
    assert log.read(0, 0, min_one=False) is None


def test_max_offset_bounds_the_slice_at_a_batch_boundary(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p", index_interval_bytes=0)
    sizes = []
    for _ in range(6):
        b = make_batch(2)
        sizes.append(len(b))
        log.append(b)
    s = log.read(0, 1 << 20, max_offset=6)  # batches at 0, 2, 4
    assert s is not None and s.size == sum(sizes[:3])
    # The bound is the first batch whose base offset is >= max_offset (the batch at 4 starts below 5).
    s = log.read(2, 1 << 20, max_offset=5)
    assert s is not None and (s.position, s.size) == (sizes[0], sizes[1] + sizes[2])
    s = log.read(2, 1 << 20, max_offset=4)
    assert s is not None and (s.position, s.size) == (sizes[0], sizes[1])
    assert log.read(6, 1 << 20, max_offset=6) is None
    assert log.read(7, 1 << 20, max_offset=6) is None
    # min_one never crosses max_offset.
    s = log.read(0, 1, max_offset=1)
    assert s is not None and s.size == sizes[0]


def test_read_at_log_end_and_out_of_range(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    assert log.read(0, 100) is None
    log.append(make_batch(3))
    assert log.read(3, 100) is None
    for bad in (-1, 4, 100):
        with pytest.raises(KafkaError) as e:
            log.read(bad, 100)
        assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_log_append_time_stamps_and_resigns(tmp_path: Path) -> None:
    clock = FakeClock(5_000_000)
    log = open_log(tmp_path / "p", clock, message_timestamp_type="LogAppendTime")
    r = log.append(make_batch(2, timestamp=10) + make_batch(1, timestamp=20))
    assert r.log_append_time == 5_000_000 and r.max_timestamp == 5_000_000
    s = log.read(0, 1 << 20)
    assert s is not None
    data = s.read()
    for pos in (0, len(make_batch(2))):
        h = parse_header(data, pos)
        assert h.max_timestamp == 5_000_000
        assert h.attributes & 0x08
        batch = DefaultRecordBatch(data[pos : pos + h.size])
        assert batch.validate_crc()
        assert batch.timestamp_type == 1
    assert log.max_timestamp() == (5_000_000, 0, -1)


def test_a_follower_keeps_the_leaders_log_append_time_byte_for_byte(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader", FakeClock(5_000_000), message_timestamp_type="LogAppendTime")
    leader.append(make_batch(2, timestamp=10), leader_epoch=3)
    s = leader.read(0, 1 << 20)
    assert s is not None
    stamped = s.read()
    follower = open_log(tmp_path / "follower", FakeClock(9_000_000), message_timestamp_type="LogAppendTime")
    received = memoryview(bytearray(stamped))
    follower.append(received, assign_offsets=False)
    f = follower.read(0, 1 << 20)
    assert f is not None and f.read() == stamped  # the same replica, not restamped with its own clock
    assert follower.max_timestamp() == (5_000_000, 0, 3)
    prepared = prepare_append(
        received, TopicConfig(), 0, assign_offsets=False, leader_epoch=None, now_ms=9_000_000
    )
    assert prepared.data is received  # written as received: no copy


def test_leader_epoch_is_stamped(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    log.append(make_batch(1) + make_batch(1), leader_epoch=7)
    assert [h.partition_leader_epoch for h in log.iter_batch_headers()] == [7, 7]


def test_follower_append_keeps_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    r = log.append(make_batch(2, base_offset=0) + make_batch(3, base_offset=10), assign_offsets=False)
    assert (r.base_offset, r.last_offset) == (0, 12)
    assert log.log_end_offset == 13
    s = log.read(5, 1 << 20)  # in the gap: starts at the next batch
    assert s is not None and base_offset_of(s.read()) == 10
    for bad in (make_batch(1, base_offset=12), make_batch(1, base_offset=13) + make_batch(1, base_offset=13)):
        with pytest.raises(KafkaError) as e:
            log.append(bad, assign_offsets=False)
        assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert log.log_end_offset == 13


def test_offset_for_timestamp_and_max_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p", index_interval_bytes=0, segment_bytes=400)
    # Batch i holds offsets 3i..3i+2 with timestamps 1000*i + {0, 10, 20}.
    for i in range(20):
        log.append(make_batch(3, timestamp=1000 * i, ts_step=10))
    # (timestamp, offset, leader epoch) of the first record at or after the target.
    assert log.offset_for_timestamp(0) == (0, 0, -1)
    assert log.offset_for_timestamp(5005) == (5010, 16, -1)
    assert log.offset_for_timestamp(5020) == (5020, 17, -1)
    assert log.offset_for_timestamp(5021) == (6000, 18, -1)
    assert log.offset_for_timestamp(19020) == (19020, 59, -1)
    assert log.offset_for_timestamp(19021) is None
    assert log.max_timestamp() == (19020, 59, -1)


def test_offset_for_timestamp_with_out_of_order_timestamps(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p", index_interval_bytes=200)
    stamps = [100, 500, 200, 300, 900, 50, 950, 10]
    for ts in stamps:
        log.append(make_batch(1, timestamp=ts))
    for target in range(0, 1000, 25):
        expected = next(((ts, i, -1) for i, ts in enumerate(stamps) if ts >= target), None)
        assert log.offset_for_timestamp(target) == expected, target
    assert log.max_timestamp() == (950, 6, -1)


def test_file_slice_reads_with_pread_only(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    log.append(make_batch(1))
    log.append(make_batch(1))
    s = log.read(1, 100)
    assert isinstance(s, FileSlice)
    position = s.file.tell()
    assert s.read() == s.read()
    assert s.file.tell() == position  # never seeked
    # The active segment's one descriptor reads and appends; appends land at the end whatever reads do.
    assert s.file.mode == "ab+"
    log.append(make_batch(1))
    assert log.read(2, 100).read()[:8] == (2).to_bytes(8, "big")
