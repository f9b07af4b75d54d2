"""Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords, idempotent sequences: the edges."""

from __future__ import annotations

from typing import Any

import pytest

from brook.protocol.versions import ApiKey
from tests.support.cluster import eventually
from tests.support.differential import Wire, agree, differences
from tests.support.records import batch

from .test_topics import create, topic

pytestmark = pytest.mark.slow


def produce(
    name: str, records: bytes, partition: int = 0, acks: int = -1, txn: str | None = None
) -> dict[str, Any]:
    return {
        "transactional_id": txn,
        "acks": acks,
        "timeout_ms": 5000,
        "topic_data": [{"name": name, "partition_data": [{"index": partition, "records": records}]}],
    }


def fetch(name: str, offset: int, partition: int = 0, epoch: int = -1) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "forgotten_topics_data": [],
        "rack_id": "",
        "topics": [
            {
                "topic": name,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": epoch,
                        "fetch_offset": offset,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
    }


def list_offsets(name: str, timestamp: int, partition: int = 0, epoch: int = -1) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "isolation_level": 0,
        "timeout_ms": 5000,
        "topics": [
            {
                "name": name,
                "partitions": [
                    {"partition_index": partition, "current_leader_epoch": epoch, "timestamp": timestamp}
                ],
            }
        ],
    }


RECORDS = batch([b"a", b"b", b"c"])


def led(w: Wire, name: str, partitions: int) -> None:
    """Until the broker leads every partition of a new topic: Kafka's broker takes its leaderships from
    the controller's metadata after CreateTopics is answered (NOT_LEADER_OR_FOLLOWER meanwhile)."""

    def leads() -> bool:
        a = w.send(
            ApiKey.LIST_OFFSETS,
            7,
            {
                **list_offsets(name, -1),
                "topics": [
                    {
                        "name": name,
                        "partitions": [
                            {"partition_index": i, "current_leader_epoch": -1, "timestamp": -1}
                            for i in range(partitions)
                        ],
                    }
                ],
            },
        )
        assert isinstance(a, dict)
        return all(p["error_code"] == "NONE(0)" for t in a["topics"] for p in t["partitions"])

    eventually(leads, 30, f"{name} led")


@pytest.fixture(scope="module")
def data(peers: tuple[str, str]) -> str:
    """A 2-partition topic with 3 records in partition 0, and a topic taking at most 200-byte batches."""
    with Wire(peers[0]) as k, Wire(peers[1]) as b:
        agree(k, b, ApiKey.CREATE_TOPICS, 7, create(topic("r-data", 2)), ignore=["configs"])
        agree(
            k,
            b,
            ApiKey.CREATE_TOPICS,
            7,
            create(topic("r-small", configs={"max.message.bytes": "200"})),
            ignore=["configs"],
        )
        for w in (k, b):
            led(w, "r-data", 2)
            led(w, "r-small", 1)
        agree(k, b, ApiKey.PRODUCE, 9, produce("r-data", RECORDS))
    return "r-data"


def test_produce_edges(wires: tuple[Wire, Wire], data: str) -> None:
    k, b = wires
    agree(k, b, ApiKey.PRODUCE, 9, produce("r-no-such-topic", RECORDS))
    agree(k, b, ApiKey.PRODUCE, 9, produce(data, RECORDS, partition=7))
    agree(k, b, ApiKey.PRODUCE, 9, produce(data, RECORDS, acks=2))
    agree(k, b, ApiKey.PRODUCE, 9, produce("r-small", batch([b"x" * 300])))
    corrupt = bytearray(RECORDS)
    corrupt[-1] ^= 0xFF  # the CRC covers the records: the last byte of the last one
    agree(k, b, ApiKey.PRODUCE, 9, produce(data, bytes(corrupt), partition=1))
    agree(k, b, ApiKey.PRODUCE, 9, produce(data, b"\x00" * 5, partition=1))
    agree(k, b, ApiKey.PRODUCE, 9, produce(data, RECORDS[:40], partition=1))  # a truncated header
    agree(k, b, ApiKey.PRODUCE, 9, produce(data, RECORDS[:-3], partition=1))  # a truncated batch
    agree(k, b, ApiKey.PRODUCE, 9, produce(data, b"", partition=1))
    agree(k, b, ApiKey.PRODUCE, 9, produce(data, RECORDS + RECORDS, partition=1))  # one batch per partition
    for magic in (1, 3):
        agree(
            k, b, ApiKey.PRODUCE, 9, produce(data, RECORDS[:16] + bytes([magic]) + RECORDS[17:], partition=1)
        )
    short = bytearray(RECORDS)
    short[8:12] = (10).to_bytes(4, "big")  # a batch length below any record's overhead
    agree(k, b, ApiKey.PRODUCE, 9, produce(data, bytes(short), partition=1))
    agree(k, b, ApiKey.PRODUCE, 3, produce(data, RECORDS, partition=1))
    agree(k, b, ApiKey.PRODUCE, 12, produce(data, RECORDS, partition=1))
    agree(k, b, ApiKey.LIST_OFFSETS, 7, list_offsets(data, -1, partition=1))


def test_fetch_edges(wires: tuple[Wire, Wire], data: str) -> None:
    k, b = wires
    for v in (4, 11, 12):
        agree(k, b, ApiKey.FETCH, v, fetch(data, 0))
        agree(k, b, ApiKey.FETCH, v, fetch(data, 100))
        agree(k, b, ApiKey.FETCH, v, fetch(data, 0, partition=9))
        agree(k, b, ApiKey.FETCH, v, fetch("r-no-such-topic", 0))
    agree(k, b, ApiKey.FETCH, 12, fetch(data, 0, epoch=0))
    agree(k, b, ApiKey.FETCH, 12, fetch(data, 0, epoch=5))  # ahead of the leader: UNKNOWN_LEADER_EPOCH
    agree(k, b, ApiKey.FETCH, 12, fetch(data, 3))
    agree(k, b, ApiKey.FETCH, 12, fetch(data, -1))


def test_list_offsets_and_epochs(wires: tuple[Wire, Wire], data: str) -> None:
    k, b = wires
    for ts in (-1, -2, -3, 0, 1_700_000_000_001, 1_900_000_000_000):
        agree(k, b, ApiKey.LIST_OFFSETS, 7, list_offsets(data, ts))
    agree(k, b, ApiKey.LIST_OFFSETS, 7, list_offsets(data, -1, partition=9))
    agree(k, b, ApiKey.LIST_OFFSETS, 7, list_offsets("r-no-such-topic", -1))
    agree(k, b, ApiKey.LIST_OFFSETS, 7, list_offsets(data, -1, epoch=5))
    agree(
        k,
        b,
        ApiKey.LIST_OFFSETS,
        1,
        {
            "replica_id": -1,
            "topics": [{"name": data, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
    )
    for epoch, leader_epoch in ((0, -1), (0, 0), (0, 3), (5, 0)):
        req = {
            "replica_id": -1,
            "topics": [
                {
                    "topic": data,
                    "partitions": [
                        {"partition": 0, "current_leader_epoch": leader_epoch, "leader_epoch": epoch}
                    ],
                }
            ],
        }
        agree(k, b, ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, req)


def test_delete_records_edges(wires: tuple[Wire, Wire], data: str) -> None:
    k, b = wires
    for offset in (10, -1, 1):
        req = {
            "topics": [{"name": data, "partitions": [{"partition_index": 1, "offset": offset}]}],
            "timeout_ms": 5000,
        }
        agree(k, b, ApiKey.DELETE_RECORDS, 2, req)
    req = {
        "topics": [{"name": data, "partitions": [{"partition_index": 8, "offset": 0}]}],
        "timeout_ms": 5000,
    }
    agree(k, b, ApiKey.DELETE_RECORDS, 2, req)


def init_producer(w: Wire, txn: str | None = None, pid: int = -1, epoch: int = -1) -> tuple[int, int]:
    """A producer id and epoch, once the broker's coordinator has loaded (Kafka answers
    COORDINATOR_LOAD_IN_PROGRESS while it creates __transaction_state)."""
    req = {
        "transactional_id": txn,
        "transaction_timeout_ms": 60000,
        "producer_id": pid,
        "producer_epoch": epoch,
    }

    def ready() -> Any:
        a = w.send(ApiKey.INIT_PRODUCER_ID, 4, req, normalize=False)
        assert isinstance(a, dict)
        return a if a["error_code"] == 0 else None

    a = eventually(ready, 60, "InitProducerId")
    return a["producer_id"], a["producer_epoch"]


def test_idempotent_sequences(wires: tuple[Wire, Wire], data: str) -> None:
    """Each broker's own producer id; the same sequence of batches to each."""
    k, b = wires
    ids = {k: init_producer(k), b: init_producer(b)}

    def both(seq: int, epoch_delta: int = 0, pid_delta: int = 0, n: int = 2) -> None:
        answers = []
        for w in (k, b):
            pid, epoch = ids[w]
            records = batch(
                [b"v"] * n, producer_id=pid + pid_delta, producer_epoch=epoch + epoch_delta, base_sequence=seq
            )
            answers.append(w.send(ApiKey.PRODUCE, 9, produce(data, records, partition=1)))
        assert not differences(*answers), (seq, epoch_delta, differences(*answers))

    both(0)
    both(0)  # the same batch again: a duplicate, answered with its first offset
    both(2)
    both(2)
    both(0)  # an older batch still among the last five: a duplicate
    both(7)  # a gap: OUT_OF_ORDER_SEQUENCE_NUMBER
    both(4, epoch_delta=1)  # a new epoch must start at sequence 0
    both(0, epoch_delta=1)
    both(2, epoch_delta=0)  # the old epoch is fenced now
    both(0, pid_delta=1000)  # a producer id no broker gave out
