"""ListOffsets: the log start, the end, the record with the largest timestamp, or the first record at or
after a timestamp, with Kafka's rules (ReplicaManager.fetchOffset, Partition.fetchOffsetForTimestamp):

- A special (negative) timestamp newer than the request's version, or unknown, is UNSUPPORTED_VERSION.
- Consumers (replica id -1) read up to the high watermark: a record found at or past it is answered as
  "none" (offset -1, no error); other brokers see up to the log end. Replica id -2 (debugging) may ask a
  follower; everyone else asks the leader, in the leader epoch it believes in (v4+).
- A leader whose high watermark still lags its epoch's start (just elected) answers consumers'
  LATEST, and lookups that find nothing below it, with OFFSET_NOT_AVAILABLE (v5+; before:
  LEADER_NOT_AVAILABLE).
"""

from __future__ import annotations

from typing import Any

from brook.broker.broker import Broker
from brook.broker.partition import Partition
from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey

from .authorized import Operation, ResourceType, allowed
from .context import Body, check_epoch, check_leader

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
CONSUMER, DEBUGGING = -1, -2
# The first ListOffsets version that knows each special timestamp (KIP-734, KIP-405, KIP-1005).
_MIN_VERSION = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}

# (timestamp, offset, leader epoch) as the response carries them; -1 where Kafka leaves them unknown.
Answer = tuple[int, int, int]
_NONE: Answer = (-1, -1, -1)


def _partition(broker: Broker, topic: str, index: int, replica_id: int, current_epoch: int) -> Partition:
    p = broker.replicas.partition(topic, index)
    if replica_id == DEBUGGING:  # may be served by a follower
        check_epoch(p, current_epoch)
    else:
        check_leader(p, current_epoch)
    return p


def _lookup(p: Partition, ts: int, replica_id: int, version: int, isolation_level: int = 0) -> Answer:
    client = replica_id == CONSUMER
    # read_committed consumers see up to the last stable offset, others up to the high watermark.
    if client:
        last_fetchable = p.last_stable_offset if isolation_level == 1 else p.high_watermark
    else:
        last_fetchable = p.log.log_end_offset
    lagging = client and p.hw_lags_epoch_start

    def not_available() -> KafkaError:
        code = ErrorCode.OFFSET_NOT_AVAILABLE if version >= 5 else ErrorCode.LEADER_NOT_AVAILABLE
        return KafkaError(code, f"the high watermark {p.high_watermark} lags the leader epoch's start")

    if ts == LATEST:
        if lagging:
            raise not_available()
        return -1, last_fetchable, p.leader_epoch
    if ts in (EARLIEST, EARLIEST_LOCAL):  # no tiered storage: the local log start is the log start
        start = p.log.log_start_offset
        return -1, start, p.epochs.epoch_for_offset(start)
    if ts == LATEST_TIERED:
        return _NONE  # nothing is tiered
    found = p.log.max_timestamp() if ts == MAX_TIMESTAMP else p.log.offset_for_timestamp(ts)
    if found is None or found.offset >= last_fetchable:
        if lagging:
            raise not_available()
        return _NONE
    return found.timestamp, found.offset, found.leader_epoch if found.leader_epoch >= 0 else -1


async def handle_list_offsets(broker: Broker, hdr: RequestHeader) -> Body | None:
    version = hdr.api_version
    req = decode_request(ApiKey.LIST_OFFSETS, version, hdr.body)
    replica_id = req.replica_id
    seen: dict[tuple[str, int], int] = {}
    for t in req.topics:
        for p in t.partitions:
            seen[(t.name, p.partition_index)] = seen.get((t.name, p.partition_index), 0) + 1
    topics: dict[str, list[dict[str, Any]]] = {}
    answered: set[tuple[str, int]] = set()
    for t in req.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            parts = topics.setdefault(t.name, [])
            if key in answered:
                continue  # a duplicate: answered once, with INVALID_REQUEST
            answered.add(key)
            ts, off, epoch = _NONE
            error = ErrorCode.NONE
            try:
                if not allowed(broker, Operation.DESCRIBE, ResourceType.TOPIC, t.name):
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "DESCRIBE on the topic denied")
                if seen[key] > 1:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, "partition listed more than once")
                if p.timestamp < 0 and version < _MIN_VERSION.get(p.timestamp, 1 << 15):
                    raise KafkaError(
                        ErrorCode.UNSUPPORTED_VERSION,
                        f"timestamp {p.timestamp} is not supported by ListOffsets v{version}",
                    )
                current_epoch = p.current_leader_epoch
                part = _partition(broker, t.name, p.partition_index, replica_id, current_epoch)
                isolation = req.isolation_level or 0
                ts, off, epoch = _lookup(part, p.timestamp, replica_id, version, isolation)
            except KafkaError as e:
                error = e.code
            parts.append(
                {
                    "partition_index": p.partition_index,
                    "error_code": error,
                    "timestamp": ts,
                    "offset": off,
                    "leader_epoch": epoch,
                }
            )
    body = {"throttle_time_ms": 0, "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}
    return messages.encode_response(ApiKey.LIST_OFFSETS, version, body)
