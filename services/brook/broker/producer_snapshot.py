"""What a partition's snapshot holds: its producer state and leader-epoch cache as of the snapshot's
offset (brook.log.snapshot_files keeps the files, at segment roll and at clean shutdown).

At start-up the partition loads the newest readable snapshot and reads only the batch headers after it,
instead of every header of the log; a body that does not decode is treated like a damaged file (the
next older snapshot, or a full scan). Binary, big-endian, versioned:

    version int16
    epochs  int32 count, then (epoch int32, start offset int64) each
    producers int32 count, then (producer id int64, epoch int16, coordinator epoch int32 (version 2+),
              last timestamp int64 (version 3+), batches int8, then (first seq int32, last seq int32,
              base offset int64, last offset int64) per batch)
    open transactions int32 count, then (producer id int64, first offset int64, start ms int64) each
"""

from __future__ import annotations

import struct

from brook.replication.epochs import LeaderEpochCache

from .producer_state import CachedBatch, ProducerEntry, ProducerStateTable

# 2: the producers' coordinator epochs; 3: their last timestamps. Older ones are still read (unknown: -1).
_VERSION = 3
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_EPOCH = struct.Struct(">iq")
_PRODUCER = struct.Struct(">qhiqb")
_PRODUCER_V2 = struct.Struct(">qhib")
_PRODUCER_V1 = struct.Struct(">qhb")
_BATCH = struct.Struct(">iiqq")
_TXN = struct.Struct(">qqq")


def encode_snapshot(table: ProducerStateTable, epochs: LeaderEpochCache) -> bytes:
    out = [_I16.pack(_VERSION)]
    entries = epochs.entries()
    out.append(_I32.pack(len(entries)))
    out += [_EPOCH.pack(e, start) for e, start in entries]
    producers = table.entries()
    out.append(_I32.pack(len(producers)))
    for pid, entry in producers.items():
        n = len(entry.batches)
        out.append(_PRODUCER.pack(pid, entry.epoch, entry.coordinator_epoch, entry.last_timestamp, n))
        out += [_BATCH.pack(b.first_seq, b.last_seq, b.base_offset, b.last_offset) for b in entry.batches]
    ongoing = table.ongoing()
    out.append(_I32.pack(len(ongoing)))
    out += [_TXN.pack(pid, first, table.txn_start_ms(pid)) for pid, first in ongoing.items()]
    return b"".join(out)


def decode_snapshot(body: bytes) -> tuple[ProducerStateTable, LeaderEpochCache] | None:
    """The state a snapshot body holds; None when it is not one this version reads (or is malformed)."""
    try:
        return _decode(body)
    except (struct.error, ValueError):
        return None


def _decode(body: bytes) -> tuple[ProducerStateTable, LeaderEpochCache] | None:
    pos = 0

    def take(s: struct.Struct) -> tuple[int, ...]:
        nonlocal pos
        values = s.unpack_from(body, pos)
        pos += s.size
        return values

    version = take(_I16)[0]
    if version not in (1, 2, _VERSION):
        return None
    epochs = LeaderEpochCache()
    for _ in range(take(_I32)[0]):
        epoch, start = take(_EPOCH)
        epochs.assign(epoch, start)
    producers: dict[int, ProducerEntry] = {}
    for _ in range(take(_I32)[0]):
        coordinator_epoch = last_timestamp = -1
        if version == 1:
            pid, epoch, count = take(_PRODUCER_V1)
        elif version == 2:
            pid, epoch, coordinator_epoch, count = take(_PRODUCER_V2)
        else:
            pid, epoch, coordinator_epoch, last_timestamp, count = take(_PRODUCER)
        entry = producers[pid] = ProducerEntry(
            epoch, coordinator_epoch=coordinator_epoch, last_timestamp=last_timestamp
        )
        for _ in range(count):
            entry.batches.append(CachedBatch(*take(_BATCH)))
    ongoing: dict[int, int] = {}
    started: dict[int, int] = {}
    for _ in range(take(_I32)[0]):
        pid, first, start_ms = take(_TXN)
        ongoing[pid] = first
        started[pid] = start_ms
    if pos != len(body):
        raise ValueError(f"{len(body) - pos} trailing bytes")
    table = ProducerStateTable()
    table.load(producers, ongoing, started)
    return table, epochs
