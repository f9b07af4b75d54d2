"""Produce requests pipelined on one connection: each is appended when it is read, not once the request
before it has been answered, and the answers still come back in request order.

Both followers of the partition are stopped (SIGSTOP), so no acks=all request can commit: answered one
at a time, the second request would not even be appended until the first was answered. Here all three
are in the leader's log while none has been answered; once the followers go on, all three are
answered, in order."""

from __future__ import annotations

import signal
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest

from brook.protocol.messages import response_class
from tests.integration.test_cluster import create, partition_md
from tests.support.cluster import Cluster, eventually
from tests.support.raw import RawClient
from tests.support.records import batch

pytestmark = pytest.mark.slow

VERSION = 7
DEBUGGING = -2  # ListOffsets from a "replica": the leader answers its log end offset, not the high watermark


def log_end_offset(bootstrap: str, topic: str) -> int:
    L = ListOffsetsRequest
    req = L(
        replica_id=DEBUGGING,
        isolation_level=0,
        topics=[
            L.ListOffsetsTopic(
                name=topic,
                partitions=[L.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-1)],
            )
        ],
    )
    with RawClient(bootstrap) as c:
        part = c.request(req, 2).topics[0].partitions[0]
        assert part.error_code == 0, f"ListOffsets answered error {part.error_code}"
        return int(part.offset)


def served_log_end(bootstrap: str, topic: str) -> tuple[int] | None:
    """(log end,) once the broker serves the partition as its leader; None before (the metadata can say
    it leads before its own watch has applied that)."""
    try:
        return (log_end_offset(bootstrap, topic),)
    except AssertionError:
        return None


def produce_frame(
    topic: str, correlation_id: int, records: bytes, acks: int = -1, version: int = VERSION
) -> bytes:
    """A Produce request to partition 0 (header and body, without the size prefix)."""
    P = ProduceRequest
    req = P(
        transactional_id=None,
        acks=acks,
        timeout_ms=120_000,
        topic_data=[
            P.TopicProduceData(
                name=topic, partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=records)]
            )
        ],
    )
    req.with_header(correlation_id=correlation_id, client_id="pipelining-test")
    payload: bytes = req.encode(version=version, header=True)
    return payload


def full_isr(c: Cluster, topic: str) -> Any:
    md = partition_md(c, topic)
    return md if len(md.isrs) == 3 else None


def test_pipelined_produce_requests_append_at_once_and_answer_in_order(tmp_path: Path) -> None:
    # A long lease and lag: the stopped followers stay in the ISR for the whole test.
    c = Cluster(tmp_path, extra_args=["--lease-ttl", "30", "--replica-lag-time-max-ms", "60000"]).start()
    followers: list[subprocess.Popen[bytes]] = []
    try:
        topic = "pipelined"
        create(c, topic, 1, 3, {"min.insync.replicas": "2"})
        md = eventually(lambda: full_isr(c, topic), 60, "a full ISR")
        leader = c.broker(md.leader)
        (start,) = eventually(lambda: served_log_end(leader.bootstrap, topic), 60, "the leader to serve it")
        for r in md.replicas:
            proc = c.broker(r).proc
            if r != md.leader and proc is not None:
                followers.append(proc)
                proc.send_signal(signal.SIGSTOP)
        assert len(followers) == 2
        with RawClient(leader.bootstrap, timeout=120) as client:
            frames = [produce_frame(topic, cid, batch([b"r%d" % i for i in range(3)])) for cid in (1, 2, 3)]
            client.sock.sendall(b"".join(struct.pack(">i", len(f)) + f for f in frames))
            # All three requests are in the leader's log although none can commit (so none was answered).
            eventually(lambda: log_end_offset(leader.bootstrap, topic) == start + 9, 30, "all three appended")
            for proc in followers:
                proc.send_signal(signal.SIGCONT)
            answers = []
            for _ in frames:
                frame = client.read_frame()
                body = response_class(0).decode(frame[4:], version=VERSION)
                p = body.responses[0].partition_responses[0]
                answers.append((struct.unpack_from(">i", frame)[0], int(p.error_code), int(p.base_offset)))
        assert answers == [(1, 0, start), (2, 0, start + 3), (3, 0, start + 6)]
    finally:
        for proc in followers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
        c.stop()
