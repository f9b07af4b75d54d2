"""Connection churn: clients that vanish mid-request never cost another connection its answers.

Clients reset or close their connections at random points of a request's life (topics being
auto-created, a long poll woken by a produce, a response leaving with sendfile) while new connections
keep arriving and take the freed file descriptor numbers. Every new connection must be answered, and
the broker must log no error for what is ordinary client behaviour. (On Python 3.12+ a response written
to a transport whose connection was just lost left a stale selector key; the next connection given that
fd number failed in asyncio's _add_reader with FileNotFoundError and was never answered.)
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from tests.support.broker import BrokerProcess
from tests.support.raw import readable
from tests.support.records import batch

pytestmark = pytest.mark.slow

CHURN_S = 6.0
ANSWER_TIMEOUT_S = 10.0  # a wedged connection never answers; a slow one does well within this
BIG = "big"  # holds more than the sendfile threshold (64 KiB) per fetch
HOT = "hot"  # empty at first; long polls on it are woken by produces during the churn


@pytest.fixture(scope="module", params=["asyncio", "uvloop"])
def churn_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    root: Path = tmp_path_factory.mktemp("churn")
    # One partition per topic: hundreds get auto-created, and each costs files, fsyncs and stop time.
    args = ["--auto-create-topics", "true", "--num-partitions", "1", "--event-loop", request.param]
    b = BrokerProcess(root / "data", args=args).start()
    try:
        yield b
    finally:
        b.stop()


class Frames:
    """Kafka request frames encoded by kafka-python (independent of Brook's codec)."""

    def __init__(self) -> None:
        self.cid = 0

    def encode(self, req: Any, version: int) -> bytes:
        self.cid += 1
        req.with_header(correlation_id=self.cid, client_id="churn")
        payload: bytes = req.encode(version=version, header=True)
        return struct.pack(">i", len(payload)) + payload

    def metadata(self, topics: list[str]) -> bytes:
        m = MetadataRequest
        topic_list = [m.MetadataRequestTopic(topic_id=None, name=t) for t in topics]
        req = m(
            topics=topic_list,
            allow_auto_topic_creation=True,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        return self.encode(req, 9)

    def fetch(self, topic: str, partition: int, offset: int, max_wait_ms: int) -> bytes:
        f = FetchRequest
        part = f.FetchTopic.FetchPartition(
            partition=partition,
            current_leader_epoch=-1,
            fetch_offset=offset,
            log_start_offset=-1,
            partition_max_bytes=4 << 20,
        )
        req = f(
            replica_id=-1,
            max_wait_ms=max_wait_ms,
            min_bytes=1,
            max_bytes=4 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[f.FetchTopic(topic=topic, partitions=[part])],
            forgotten_topics_data=[],
            rack_id="",
        )
        return self.encode(req, 11)

    def produce(self, topic: str, partition: int, records: bytes) -> bytes:
        p = ProduceRequest
        data = p.TopicProduceData.PartitionProduceData(index=partition, records=records)
        req = p(
            transactional_id=None,
            acks=1,
            timeout_ms=5000,
            topic_data=[p.TopicProduceData(name=topic, partition_data=[data])],
        )
        return self.encode(req, 9)

    def api_versions(self) -> bytes:
        return self.encode(ApiVersionsRequest(), 0)


async def read_frame(r: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await r.readexactly(4))
    return await r.readexactly(size)


async def request(port: int, frames: list[bytes]) -> None:
    """Open a connection, send `frames`, read as many answers (each within ANSWER_TIMEOUT_S), close."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    try:
        for frame in frames:
            w.write(frame)
            await asyncio.wait_for(read_frame(r), ANSWER_TIMEOUT_S)
    finally:
        w.close()


def reset(w: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (what a client closing with unread responses does)."""
    sock = w.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    w.close()


async def churn(
    port: int, frames: Frames, rng: random.Random, seq: list[int], ends: list[int], end: float
) -> int:
    """Connections that go away mid-request, in several ways. Returns how many were opened."""
    n = 0
    while time.monotonic() < end:
        seq[0] += 1
        s = seq[0]
        r, w = await asyncio.open_connection("127.0.0.1", port)
        n += 1
        kind = s % 4
        try:
            if kind == 0:  # auto-create topics and fetch a sendfile-sized range, reset meanwhile
                w.write(frames.metadata([f"auto-{s}"]) + frames.fetch(BIG, 0, 0, 0))
                await w.drain()
                await asyncio.sleep(rng.random() * 0.02)
            elif kind == 1:  # a long poll at the log end, woken by the next produce; reset meanwhile
                w.write(frames.fetch(HOT, 0, ends[0], 200))
                await w.drain()
                await asyncio.sleep(rng.random() * 0.05)
            elif kind == 2:  # read part of a large response, then reset
                w.write(frames.fetch(BIG, 0, 0, 0))
                await w.drain()
                await r.read(rng.randrange(1, 200_000))
            else:  # pipelined large fetches, closed (FIN) without reading
                w.write(frames.fetch(BIG, 0, 0, 0) * 3)
                await w.drain()
                await asyncio.sleep(rng.random() * 0.02)
        except OSError:
            pass
        if kind == 3:
            w.close()
        else:
            reset(w)
    return n


async def producer(port: int, frames: Frames, ends: list[int], end: float) -> None:
    """Appends that wake the long polls on HOT while their clients reset; ends[0]: HOT's log end."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.monotonic() < end:
            w.write(frames.produce(HOT, 0, batch([b"x" * 100])))
            await asyncio.wait_for(read_frame(r), ANSWER_TIMEOUT_S)
            ends[0] += 1  # one record per produce
            await asyncio.sleep(0.002)
    finally:
        w.close()


async def checker(port: int, frames: Frames, end: float) -> int:
    """Fresh connections (they reuse freed fd numbers) that must each be answered. Returns answers."""
    answered = 0
    while time.monotonic() < end:
        await request(port, [frames.api_versions()] * 3)
        answered += 3
    return answered


async def run_churn(port: int) -> tuple[int, int]:
    frames = Frames()
    payload = batch([b"v" * 100_000])
    await request(port, [frames.metadata([BIG, HOT])] + [frames.produce(BIG, 0, payload) for _ in range(8)])
    rng = random.Random(42)
    seq = [0]
    ends = [0]
    end = time.monotonic() + CHURN_S
    results = await asyncio.gather(
        *[churn(port, frames, rng, seq, ends, end) for _ in range(8)],
        producer(port, frames, ends, end),
        *[checker(port, frames, end) for _ in range(3)],
    )
    # Afterwards a burst of new connections takes the lowest free fd numbers: each must be answered.
    await asyncio.gather(*[request(port, [frames.api_versions()]) for _ in range(50)])
    churned = sum(results[:8])
    answered = sum(results[9:])
    return churned, answered


def test_connections_that_vanish_mid_request_cost_no_one_else_an_answer(churn_broker: BrokerProcess) -> None:
    log_start = churn_broker.log_path.stat().st_size
    churned, answered = asyncio.run(run_churn(churn_broker.port))
    assert churned > 50, churned
    assert answered > 0
    assert churn_broker.proc is not None and churn_broker.proc.poll() is None
    with open(churn_broker.log_path, errors="replace") as f:
        f.seek(log_start)
        log = f.read()
    # Clients going away is ordinary: no error, no traceback (FileNotFoundError in _add_reader was the bug).
    bad = [line for line in log.splitlines() if " ERROR " in line or "Traceback" in line]
    assert not bad, "\n".join(bad[:20])


def test_shutdown_with_responses_stuck_in_sendfile_is_clean(tmp_path: Path) -> None:
    """Stopping closes connections whose fetch responses are mid-sendfile (clients not reading): the
    sendfile is cancelled before its socket is closed, so no callback fails and the broker exits 0."""
    b = BrokerProcess(tmp_path / "data", args=["--num-partitions", "1"]).start()
    socks: list[socket.socket] = []
    try:
        frames = Frames()
        payload = batch([b"v" * 100_000])
        asyncio.run(request(b.port, [frames.metadata([BIG])] + [frames.produce(BIG, 0, payload)] * 30))
        for _ in range(4):
            s = socket.create_connection(("127.0.0.1", b.port))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(frames.fetch(BIG, 0, 0, 0))  # ~3 MB the client never reads
            socks.append(s)
        # Response bytes arriving mean its sendfile has started; ~3 MB into a 4 KiB buffer keeps it going.
        for s in socks:
            assert readable(s, ANSWER_TIMEOUT_S), "no response started"
        log_start = b.log_path.stat().st_size
        assert b.stop() == 0
    finally:
        b.kill()
        for s in socks:
            s.close()
    with open(b.log_path, errors="replace") as f:
        f.seek(log_start)
        bad = [line for line in f.read().splitlines() if " ERROR " in line or "Traceback" in line]
    assert not bad, "\n".join(bad[:20])
