"""Validation and preparation of the record batches of one append (a Produce request's records).

Batches stay opaque (only their 61-byte headers are parsed) unless the topic's config needs their records,
on the leader only (a follower stores the leader's batches as they are), as Kafka's LogValidator does:
- cleanup.policy has compact: every record must have a key (else INVALID_RECORD, nothing is stored);
- compression.type is a codec (not `producer`): a batch compressed otherwise is recompressed with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from brook.config import TopicConfig
from brook.log.records import TOPIC_CODECS, RecordError, decode_records, recompress_batch
from brook.log.segment import BatchInfo
from brook.protocol.batch import (
    ATTR_COMPRESSION_MASK,
    BatchHeader,
    crc_ok,
    iter_headers,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from brook.protocol.errors import ErrorCode, KafkaError, RecordValidationError


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
    data: bytearray | memoryview  # the batches, offsets assigned, ready to write
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
    headers: list[tuple[int, BatchHeader]] | None = None,
    in_place: bool = False,
) -> PreparedAppend:
    """Check every batch, then assign offsets, leader epoch and LogAppendTime in one private copy, or
    with `in_place` in `records` itself when it is writable (the caller's own buffer, e.g. a Produce
    request's frame: no copy). A follower's append (assign_offsets=False, no leader_epoch) changes
    nothing, so it writes `records` themselves, LogAppendTime stamps included. `headers`:
    iter_headers(records) when the caller has them already.

    Raises KafkaError before anything is written: CORRUPT_MESSAGE (empty, torn, bad CRC, bad offset delta,
    undecodable records where they are looked at), MESSAGE_TOO_LARGE, INVALID_TIMESTAMP (a CreateTime
    outside message.timestamp.before/after.max.ms), UNSUPPORTED_FOR_MESSAGE_FORMAT (magic
    other than 2), INVALID_RECORD (a keyless record on a compacted topic) or, for a follower append
    (assign_offsets=False), OFFSET_OUT_OF_RANGE when a batch starts below the next offset.
    """
    if len(records) == 0:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "no record batches to append")
    data: bytearray | memoryview
    if not assign_offsets and leader_epoch is None:
        # A follower writes the leader's batches byte for byte (Kafka's appendAsFollower): no copy.
        data = records if isinstance(records, bytearray | memoryview) else memoryview(records)
    elif in_place and (
        isinstance(records, bytearray) or (isinstance(records, memoryview) and not records.readonly)
    ):
        data = records
    else:
        data = bytearray(records)  # one copy: base offsets and timestamps are rewritten in place
    if headers is None:
        headers = iter_headers(data)
    check_times = assign_offsets and config.message_timestamp_type == "CreateTime" and _bounded_times(config)
    for pos, h in headers:
        _check_size(h, config)
        if check_times and not h.is_control:
            _check_timestamps(h, config, now_ms)
        if h.last_offset_delta < 0:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"negative lastOffsetDelta {h.last_offset_delta}")
        if not crc_ok(data, pos, h):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record batch CRC-32C mismatch")
    if assign_offsets and (config.compacted or config.compression_type in TOPIC_CODECS):
        converted = validate_records(data, headers, config)
        if converted is not None:
            data = converted
            headers = iter_headers(data)

    # The leader stamps LogAppendTime; a follower keeps the leader's stamp (its replica stays identical).
    log_append = assign_offsets and config.message_timestamp_type == "LogAppendTime"
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


def _bounded_times(config: TopicConfig) -> bool:
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    return before < _UNBOUNDED or after < _UNBOUNDED


def _check_timestamps(h: BatchHeader, config: TopicConfig, now_ms: int) -> None:
    """message.timestamp.before.max.ms / after.max.ms (KIP-937) against the batch's first and largest
    timestamps: the header bounds its records without decoding them (Kafka checks each record)."""
    for ts in (h.base_timestamp, h.max_timestamp):
        if now_ms - ts > config.message_timestamp_before_max_ms:
            raise KafkaError(
                ErrorCode.INVALID_TIMESTAMP,
                f"timestamp {ts} is more than message.timestamp.before.max.ms="
                f"{config.message_timestamp_before_max_ms} before the broker's time {now_ms}",
            )
        if ts - now_ms > config.message_timestamp_after_max_ms:
            raise KafkaError(
                ErrorCode.INVALID_TIMESTAMP,
                f"timestamp {ts} is more than message.timestamp.after.max.ms="
                f"{config.message_timestamp_after_max_ms} after the broker's time {now_ms}",
            )


_UNBOUNDED = 2**63 - 1


def _check_size(h: BatchHeader, config: TopicConfig) -> None:
    if h.size > config.max_message_bytes:
        raise KafkaError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"record batch of {h.size} bytes exceeds max.message.bytes={config.max_message_bytes}",
        )


def validate_records(
    data: bytearray | memoryview, headers: list[tuple[int, BatchHeader]], config: TopicConfig
) -> bytearray | None:
    """The leader's record-level checks and conversion (see the module docstring): the batches with those
    of another codec recompressed, or None when every batch is kept as it is. Raises KafkaError."""
    target = TOPIC_CODECS.get(config.compression_type)
    check_keys = config.compacted
    out: list[bytes | memoryview] = []
    changed = False
    keyless: list[int] = []
    index = 0  # of the first record of the batch, in the whole record set
    view = memoryview(data)
    for pos, h in headers:
        batch = view[pos : pos + h.size]
        convert = (
            target is not None
            and h.attributes & ATTR_COMPRESSION_MASK != target
            and not h.is_control
            and h.record_count > 0
        )
        if not convert and (not check_keys or h.is_control):
            out.append(batch)
            index += h.record_count
            continue
        try:
            records = decode_records(bytes(batch), h)
        except RecordError as e:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"record batch at {pos}: {e}") from None
        if check_keys and not h.is_control:
            keyless += [index + i for i, r in enumerate(records) if r.key is None]
        index += h.record_count
        if convert:
            assert target is not None
            out.append(recompress_batch(h, records, target))
            changed = True
        else:
            out.append(batch)
    if keyless:
        message = "Compacted topic cannot accept message without key"
        raise RecordValidationError(
            ErrorCode.INVALID_RECORD,
            f"{len(keyless)} record(s) rejected: {message}",
            [(i, message) for i in keyless],
        )
    if not changed:
        return None
    converted = bytearray().join(out)
    for _, h in iter_headers(converted):
        _check_size(h, config)  # a recompressed batch may have grown
    return converted
