"""Validation and preparation of the record batches of one append (a Produce request's records)."""

from __future__ import annotations

from dataclasses import dataclass

from brook.config import TopicConfig
from brook.log.segment import BatchInfo
from brook.protocol.batch import (
    crc_ok,
    iter_headers,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from brook.protocol.errors import ErrorCode, KafkaError


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int  # offset assigned to the first record
    last_offset: int  # offset of the last record appended
    max_timestamp: int  # max timestamp over appended batches
    log_append_time: int  # the stamped time when message.timestamp.type=LogAppendTime, else -1
    record_count: int
    batch_count: int


@dataclass(frozen=True, slots=True)
class PreparedAppend:
    data: bytearray  # the batches, offsets assigned, ready to write
    batches: list[BatchInfo]
    result: AppendResult


def prepare_append(
    records: bytes | bytearray | memoryview,
    config: TopicConfig,
    next_offset: int,
    *,
    assign_offsets: bool,
    leader_epoch: int | None,
    now_ms: int,
) -> PreparedAppend:
    """Check every batch, then assign offsets, leader epoch and LogAppendTime in one private copy.

    Raises KafkaError before anything is written: CORRUPT_MESSAGE (empty, torn, bad CRC, bad offset delta),
    MESSAGE_TOO_LARGE, UNSUPPORTED_FOR_MESSAGE_FORMAT (magic other than 2) or, for a follower append
    (assign_offsets=False), OFFSET_OUT_OF_RANGE when a batch starts below the next offset.
    """
    if len(records) == 0:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "no record batches to append")
    data = bytearray(records)  # one copy: base offsets and timestamps are rewritten in place
    headers = iter_headers(data)
    for pos, h in headers:
        if h.size > config.max_message_bytes:
            limit = config.max_message_bytes
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"record batch of {h.size} bytes exceeds max.message.bytes={limit}",
            )
        if h.last_offset_delta < 0:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"negative lastOffsetDelta {h.last_offset_delta}")
        if not crc_ok(data, pos, h):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record batch CRC-32C mismatch")

    log_append = config.message_timestamp_type == "LogAppendTime"
    batches: list[BatchInfo] = []
    offset = next_offset
    max_timestamp = -1
    record_count = 0
    for pos, h in headers:
        if assign_offsets:
            base = offset
            set_base_offset(data, pos, base)
        else:
            base = h.base_offset
            if base < offset:
                raise KafkaError(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    f"record batch base offset {base} is below the log's next offset {offset}",
                )
        if leader_epoch is not None:
            set_partition_leader_epoch(data, pos, leader_epoch)
        if log_append:
            set_log_append_time(data, pos, h.size, now_ms)
            batch_ts = now_ms
        else:
            batch_ts = h.max_timestamp
        last = base + h.last_offset_delta
        batches.append((pos, base, last, h.size, batch_ts))
        max_timestamp = max(max_timestamp, batch_ts)
        record_count += h.record_count
        offset = last + 1

    result = AppendResult(
        base_offset=batches[0][1],
        last_offset=batches[-1][2],
        max_timestamp=max_timestamp,
        log_append_time=now_ms if log_append else -1,
        record_count=record_count,
        batch_count=len(batches),
    )
    return PreparedAppend(data, batches, result)
