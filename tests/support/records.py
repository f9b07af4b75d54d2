"""Record batches built by kafka-python's encoder, for raw-protocol tests."""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatchBuilder


def batch(
    values: list[bytes],
    *,
    key: bytes | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: int = 0,
    timestamp: int = 1_700_000_000_000,
    timestamps: list[int] | None = None,
    transactional: bool = False,
) -> bytes:
    """One batch of `values`; record i's timestamp is timestamps[i] when given, else timestamp + i."""
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=2**30,
    )
    for i, v in enumerate(values):
        ts = timestamps[i] if timestamps is not None else timestamp + i
        b.append(i, timestamp=ts, key=key, value=v, headers=[])
    return bytes(b.build())
