"""Fetch long polling (handlers/fetch.py) over a raw socket: a waiting fetch answers as soon as data
arrives, answers empty at max.wait.ms and not before, and holds out for min.bytes; a replica's fetch
(replica_id >= 0) waits the same way."""

from __future__ import annotations

import itertools
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.producer import ProduceRequest

from brook.protocol.messages import response_class
from tests.support.broker import BrokerProcess
from tests.support.raw import RawClient, fetch_request, readable
from tests.support.records import batch

pytestmark = pytest.mark.slow

VERSION = 11
_topics = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root: Path = tmp_path_factory.mktemp("longpoll")
    b = BrokerProcess(root / "data", args=["--num-partitions", "1"]).start()
    try:
        yield b
    finally:
        b.stop()


def new_topic(broker: BrokerProcess) -> str:
    """A fresh topic with one record batch in it (offset 0)."""
    name = f"lp{next(_topics)}"
    T = CreateTopicsRequest
    req = T(
        topics=[
            T.CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])
        ],
        timeout_ms=5000,
        validate_only=False,
    )
    with RawClient(broker.bootstrap) as c:
        assert c.request(req, 5).topics[0].error_code == 0
        assert produce(c, name, batch([b"first"])) == (0, 0)
    return name


def produce(c: RawClient, topic: str, records: bytes) -> tuple[int, int]:
    P = ProduceRequest
    req = P(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            P.TopicProduceData(
                name=topic,
                partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=records)],
            )
        ],
    )
    r = c.request(req, 9).responses[0].partition_responses[0]
    return int(r.error_code), int(r.base_offset)


class PendingFetch:
    """A Fetch sent now and answered later: the test watches the socket in between."""

    def __init__(
        self,
        c: RawClient,
        topic: str,
        offset: int,
        *,
        max_wait_ms: int,
        min_bytes: int = 1,
        replica_id: int = -1,
    ) -> None:
        self.c = c
        self.req = fetch_request(
            topic, offset, max_wait_ms=max_wait_ms, min_bytes=min_bytes, replica_id=replica_id
        )
        self.req.with_header(correlation_id=4242, client_id="long-poll-test")
        self.sent_at = time.monotonic()
        c.send_frame(self.req.encode(version=VERSION, header=True))

    def answered_within(self, seconds: float) -> bool:
        """Whether the response (its first bytes) arrives within `seconds`."""
        return readable(self.c.sock, seconds)

    def result(self) -> tuple[float, Any]:
        """(seconds since sent, the partition's response)."""
        frame = self.c.read_frame()
        elapsed = time.monotonic() - self.sent_at
        assert struct.unpack_from(">i", frame)[0] == 4242
        resp = response_class(1).decode(frame[4:], version=VERSION)
        part = resp.responses[0].partitions[0]
        assert part.error_code == 0, part
        return elapsed, part


def records_len(part: Any) -> int:
    return len(part.records or b"")


@pytest.mark.parametrize("replica_id", [-1, 5], ids=["consumer", "replica"])
def test_a_waiting_fetch_returns_as_soon_as_data_arrives(broker: BrokerProcess, replica_id: int) -> None:
    topic = new_topic(broker)
    with RawClient(broker.bootstrap) as reader, RawClient(broker.bootstrap) as writer:
        pending = PendingFetch(reader, topic, 1, max_wait_ms=20_000, replica_id=replica_id)
        assert not pending.answered_within(0.5), "answered at once with nothing to return"
        err, base = produce(writer, topic, batch([b"arrives"]))
        assert (err, base) == (0, 1)
        produced_at = time.monotonic()
        elapsed, part = pending.result()
        waited_after_produce = time.monotonic() - produced_at
        assert records_len(part) > 0
        assert waited_after_produce < 5.0, f"answered {waited_after_produce:.2f}s after the produce"
        assert elapsed < 15.0


@pytest.mark.parametrize("replica_id", [-1, 5], ids=["consumer", "replica"])
def test_a_fetch_with_nothing_to_return_answers_empty_at_its_deadline(
    broker: BrokerProcess, replica_id: int
) -> None:
    topic = new_topic(broker)
    with RawClient(broker.bootstrap, timeout=30) as reader:
        elapsed, part = PendingFetch(reader, topic, 1, max_wait_ms=1500, replica_id=replica_id).result()
        assert records_len(part) == 0
        assert part.high_watermark == 1
        assert elapsed >= 1.45, f"answered after {elapsed:.3f}s, before max.wait.ms (1.5 s)"
        assert elapsed < 10.0


def test_min_bytes_holds_the_fetch_until_that_much_data_is_there(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    one = batch([b"x" * 200])
    with RawClient(broker.bootstrap, timeout=30) as reader, RawClient(broker.bootstrap) as writer:
        pending = PendingFetch(reader, topic, 1, max_wait_ms=20_000, min_bytes=3 * len(one))
        for i in range(2):
            assert produce(writer, topic, one) == (0, 1 + i)
            assert not pending.answered_within(0.5), f"answered with {i + 1} of 3 batches (min.bytes)"
        assert produce(writer, topic, one) == (0, 3)
        produced_at = time.monotonic()
        _, part = pending.result()
        assert time.monotonic() - produced_at < 5.0
        assert records_len(part) >= 3 * len(one)  # all three batches in one answer


def test_min_bytes_not_reached_answers_what_there_is_at_the_deadline(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    with RawClient(broker.bootstrap, timeout=30) as reader:
        elapsed, part = PendingFetch(reader, topic, 0, max_wait_ms=1500, min_bytes=1 << 20).result()
        assert records_len(part) > 0  # the first batch, short of min.bytes
        assert elapsed >= 1.45, f"answered after {elapsed:.3f}s, before max.wait.ms (1.5 s)"
        assert elapsed < 10.0
