"""Test helper: build valid magic-2 record batches (uncompressed, simple records) without a client library."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import crc32c

from brook.config import TopicConfig
from brook.log import PartitionLog


def varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)  # zigzag
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def make_batch(
    records: int = 1,
    *,
    base_offset: int = 0,
    timestamp: int = 1_000,
    ts_step: int = 1,
    value_size: int = 10,
    leader_epoch: int = -1,
    attributes: int = 0,
    key: bytes | None = None,
) -> bytes:
    """A batch of `records` records with timestamps timestamp, timestamp + ts_step, ... (all with `key`)"""
    body = bytearray()
    key_field = varint(-1) if key is None else varint(len(key)) + key
    for i in range(records):
        value = bytes([i % 256]) * value_size
        rec = b"\x00" + varint(i * ts_step) + varint(i) + key_field + varint(len(value)) + value + varint(0)
        body += varint(len(rec)) + rec
    max_ts = timestamp + (records - 1) * ts_step
    producer = (-1, -1, -1)  # producerId, producerEpoch, baseSequence
    fields = (attributes, records - 1, timestamp, max_ts, *producer, records)
    after_crc = struct.pack(">hiqqqhii", *fields) + body
    batch_length = 4 + 1 + 4 + len(after_crc)
    crc = crc32c.crc32c(after_crc)
    return struct.pack(">qiibI", base_offset, batch_length, leader_epoch, 2, crc) + after_crc


def base_offset_of(batch: bytes | bytearray, pos: int = 0) -> int:
    return int(struct.unpack_from(">q", batch, pos)[0])


def with_base_offset(batch: bytes, base_offset: int) -> bytes:
    """The batch as the log stores it (the CRC does not cover the base offset)."""
    return struct.pack(">q", base_offset) + batch[8:]


class FakeClock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_log(path: Path, clock: FakeClock | None = None, **config: Any) -> PartitionLog:
    return PartitionLog.open(path, TopicConfig(**config), clock=clock or FakeClock())


def append_all(log: PartitionLog, batches: Sequence[bytes]) -> None:
    for b in batches:
        log.append(b)
