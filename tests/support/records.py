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
) -> bytes:
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=2**30,
    )
    for i, v in enumerate(values):
        b.append(i, timestamp=timestamp + i, key=key, value=v, headers=[])
    return bytes(b.build())
