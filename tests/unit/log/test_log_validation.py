"""The leader's record-level checks on append: recompression to the topic's compression.type and keys on
compacted topics (Kafka's LogValidator); batches stay untouched when neither applies."""

from __future__ import annotations

import itertools
import struct
from pathlib import Path
from typing import Any

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from log_batches import FakeClock, open_log, with_base_offset

from brook.log import PartitionLog
from brook.log.records import TOPIC_CODECS, decode_records, recompress_batch
from brook.protocol.batch import ATTR_TIMESTAMP_TYPE, crc_ok, iter_headers, parse_header
from brook.protocol.errors import ErrorCode, KafkaError, RecordValidationError

CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TS = 1_700_000_000_000
Rec = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]

RECORDS: list[Rec] = [
    (b"key-0", b"value " * 50, [("h1", b"x"), ("h2", None)]),
    (None, b"no key", []),
    (b"key-2", None, [("tomb", b"stone")]),
    (b"", b"", []),
    (b"key-4", bytes(range(256)) * 4, []),
]


def kbatch(
    records: list[Rec],
    codec: int = 0,
    *,
    producer: tuple[int, int, int] = (-1, -1, -1),
    transactional: bool = False,
) -> bytes:
    pid, epoch, seq = producer
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        batch_size=2**30,
    )
    for i, (k, v, h) in enumerate(records):
        b.append(i, timestamp=TS + 7 * i, key=k, value=v, headers=h)
    return bytes(b.build())


def read_back(batch: bytes) -> list[tuple[int, int, bytes | None, bytes | None, list[Any]]]:
    """(offset, timestamp, key, value, headers) of every record, as kafka-python's reader sees them."""
    return [
        (r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers])
        for r in DefaultRecordBatch(batch)
    ]


def stored(log: PartitionLog) -> bytes:
    s = log.read(log.log_start_offset, 1 << 30)
    assert s is not None
    return s.read()


@pytest.mark.parametrize(("source", "target"), list(itertools.product(CODECS.values(), CODECS.values())))
def test_recompress_every_codec_pair(source: int, target: int) -> None:
    original = kbatch(RECORDS, source, producer=(42, 3, 17), transactional=True)
    h = parse_header(original)
    converted = recompress_batch(h, decode_records(original, h), target)
    n = parse_header(converted)
    assert n.attributes & 0x07 == target
    assert crc_ok(converted, 0, n)
    assert n.attributes & ~0x07 == h.attributes & ~0x07  # transactional and timestamp-type bits kept
    same = ("producer_id", "producer_epoch", "base_sequence", "base_timestamp", "max_timestamp")
    assert all(getattr(n, f) == getattr(h, f) for f in same)
    assert (n.last_offset_delta, n.record_count) == (h.last_offset_delta, h.record_count)
    assert decode_records(converted, n) == decode_records(original, h)
    assert read_back(converted) == read_back(original)
    assert [(k, v, hs) for _, _, k, v, hs in read_back(converted)] == [
        (k, v, [(hk, hv) for hk, hv in hs]) for k, v, hs in RECORDS
    ]


@pytest.mark.parametrize("topic_codec", sorted(TOPIC_CODECS))
@pytest.mark.parametrize("sent", sorted(CODECS))
def test_append_stores_the_topics_codec(tmp_path: Path, topic_codec: str, sent: str) -> None:
    log = open_log(tmp_path / "p", compression_type=topic_codec)
    log.append(kbatch(RECORDS[:1]))  # something before, so the converted batch's offsets are rewritten
    batch = kbatch(RECORDS, CODECS[sent], producer=(7, 0, 1))
    result = log.append(batch)
    assert (result.base_offset, result.last_offset) == (1, len(RECORDS))
    data = stored(log)
    (_, first), (pos, h) = iter_headers(data)
    assert first.attributes & 0x07 == TOPIC_CODECS[topic_codec]
    assert h.attributes & 0x07 == TOPIC_CODECS[topic_codec]
    assert crc_ok(data, pos, h) and h.base_offset == 1
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 0, 1)
    expected = [(o + 1, *rest) for o, *rest in read_back(batch)]
    assert read_back(data[pos:]) == expected
    if topic_codec == sent:
        assert data[pos:] == with_base_offset(batch, 1)  # same codec: the batch as sent


@pytest.mark.parametrize("sent", sorted(CODECS))
def test_producer_compression_type_stores_batches_as_sent(tmp_path: Path, sent: str) -> None:
    log = open_log(tmp_path / "p")  # compression.type=producer
    batch = kbatch(RECORDS, CODECS[sent])
    log.append(batch)
    assert stored(log) == batch  # base offset 0, nothing rewritten


def test_recompression_with_log_append_time(tmp_path: Path) -> None:
    clock = FakeClock(TS + 10**6)
    log = open_log(tmp_path / "p", clock, compression_type="zstd", message_timestamp_type="LogAppendTime")
    log.append(kbatch(RECORDS, 1))
    data = stored(log)
    h = parse_header(data)
    assert h.attributes & 0x07 == 4 and h.attributes & ATTR_TIMESTAMP_TYPE
    assert h.max_timestamp == clock.now and crc_ok(data, 0, h)
    assert {ts for _, ts, *_ in read_back(data)} == {clock.now}


def test_recompressed_batch_is_checked_against_max_message_bytes(tmp_path: Path) -> None:
    big = [(b"k", b"a" * 20_000, [])]
    compressed = kbatch(big, 4)  # zstd: a few dozen bytes
    log = open_log(tmp_path / "p", compression_type="uncompressed", max_message_bytes=10_000)
    with pytest.raises(KafkaError) as e:
        log.append(compressed)
    assert e.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert log.log_end_offset == 0


def test_undecodable_batch_is_corrupt_when_records_are_needed(tmp_path: Path) -> None:
    bad = bytearray(kbatch(RECORDS, 1))
    bad[-6] ^= 0xFF  # the gzip trailer's CRC-32, re-signed so the batch CRC holds
    struct.pack_into(">I", bad, 17, crc32c.crc32c(bytes(bad[21:])))
    for config in ({"compression_type": "lz4"}, {"cleanup_policy": frozenset({"compact"})}):
        log = open_log(tmp_path / str(len(config)) / next(iter(config)), **config)
        with pytest.raises(KafkaError) as e:
            log.append(bytes(bad))
        assert e.value.code == ErrorCode.CORRUPT_MESSAGE
        assert log.log_end_offset == 0
    open_log(tmp_path / "producer").append(bytes(bad))  # opaque: stored as sent


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_compacted_topic_rejects_keyless_records(tmp_path: Path, codec: str) -> None:
    log = open_log(tmp_path / "p", cleanup_policy=frozenset({"compact"}))
    keyed = [(b"a", b"1", []), (b"b", b"2", [])]
    good, bad = kbatch(keyed, CODECS[codec]), kbatch(RECORDS, CODECS[codec])
    log.append(good)
    with pytest.raises(RecordValidationError) as e:
        log.append(good + bad)  # the whole append fails: nothing of it is stored
    assert e.value.code == ErrorCode.INVALID_RECORD
    assert [i for i, _ in e.value.record_errors] == [len(keyed) + 1]  # RECORDS[1] has no key
    assert log.log_end_offset == 2
    # A follower stores what its leader accepted; a topic that is not compacted never looks at keys.
    log.append(with_base_offset(bad, 2), assign_offsets=False)
    open_log(tmp_path / "delete").append(bad)


def test_control_batches_are_neither_checked_nor_converted(tmp_path: Path) -> None:
    control = bytearray(kbatch([(None, b"\x00\x00\x00\x00\x00\x00", [])], producer=(5, 0, 0)))
    struct.pack_into(">h", control, 21, 0x30)  # transactional + control
    struct.pack_into(">I", control, 17, crc32c.crc32c(bytes(control[21:])))
    log = open_log(tmp_path / "p", cleanup_policy=frozenset({"compact"}), compression_type="gzip")
    log.append(bytes(control))
    assert stored(log) == bytes(control)
