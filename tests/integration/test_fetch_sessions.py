"""Incremental fetch sessions (KIP-227) on the wire: a session is created on request, incremental
fetches list only what changed and are answered with only what changed, epochs and ids are checked as
Kafka checks them, and a session closes; kafka-python (which uses sessions) consumes through them."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest

from tests.integration.test_fetch_long_poll import produce
from tests.support.broker import BrokerProcess
from tests.support.ports import free_port
from tests.support.raw import RawClient
from tests.support.records import batch

VERSION = 12
F = FetchRequest


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root: Path = tmp_path_factory.mktemp("sessions")
    b = BrokerProcess(root / "data", args=["--num-partitions", "2"]).start()
    try:
        yield b
    finally:
        b.stop()


def fetch(
    c: RawClient,
    session_id: int,
    epoch: int,
    wanted: dict[tuple[str, int], int],
    forgotten: tuple[tuple[str, int], ...] = (),
) -> Any:
    topics: dict[str, list[Any]] = {}
    for (topic, p), offset in wanted.items():
        topics.setdefault(topic, []).append(
            F.FetchTopic.FetchPartition(
                partition=p,
                current_leader_epoch=-1,
                fetch_offset=offset,
                log_start_offset=-1,
                partition_max_bytes=1 << 20,
            )
        )
    gone: dict[str, list[int]] = {}
    for topic, p in forgotten:
        gone.setdefault(topic, []).append(p)
    req = F(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
        session_id=session_id, session_epoch=epoch,
        topics=[F.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
        forgotten_topics_data=[F.ForgottenTopic(topic=t, partitions=ps) for t, ps in gone.items()],
        rack_id="",
    )  # fmt: skip
    return c.request(req, VERSION)


def answered(resp: Any) -> dict[tuple[str, int], int]:
    """(topic, partition) -> bytes of records in the response, for every partition it holds."""
    return {(t.topic, p.partition_index): len(p.records or b"") for t in resp.responses for p in t.partitions}


def test_an_incremental_session_answers_only_what_changed(broker: BrokerProcess) -> None:
    topic = "sessions"
    with RawClient(broker.bootstrap) as c:
        T = CreateTopicsRequest
        create = T(
            topics=[
                T.CreatableTopic(
                    name=topic, num_partitions=2, replication_factor=1, assignments=[], configs=[]
                )
            ],
            timeout_ms=5000,
            validate_only=False,
        )
        assert c.request(create, 5).topics[0].error_code == 0
        produce(c, topic, batch([b"first"]))  # to partition 0
        full = fetch(c, 0, 0, {(topic, 0): 0, (topic, 1): 0})
        assert full.error_code == 0 and full.session_id > 0
        assert set(answered(full)) == {(topic, 0), (topic, 1)}
        sid = full.session_id
        # Nothing changed since: an empty answer (the client moved partition 0 past its record).
        quiet = fetch(c, sid, 1, {(topic, 0): 1})
        assert quiet.error_code == 0 and quiet.session_id == sid
        assert answered(quiet) == {}
        nothing = fetch(c, sid, 2, {})
        assert answered(nothing) == {}
        # A record on partition 1: only partition 1 is answered, though the request lists nothing.
        P = ProduceRequest
        req = P(
            transactional_id=None, acks=1, timeout_ms=5000,
            topic_data=[P.TopicProduceData(name=topic, partition_data=[
                P.TopicProduceData.PartitionProduceData(index=1, records=batch([b"second"]))])],
        )  # fmt: skip
        assert c.request(req, 9).responses[0].partition_responses[0].error_code == 0
        news = fetch(c, sid, 3, {})
        assert set(answered(news)) == {(topic, 1)} and answered(news)[(topic, 1)] > 0
        # Kafka's refusals: a wrong epoch, an unknown session.
        assert fetch(c, sid, 7, {}).error_code == 71  # INVALID_FETCH_SESSION_EPOCH
        assert fetch(c, 12345, 1, {}).error_code == 70  # FETCH_SESSION_ID_NOT_FOUND
        # Forgetting a partition, then closing (epoch -1: a sessionless full fetch of what is listed).
        assert fetch(c, sid, 4, {}, forgotten=((topic, 1),)).error_code == 0
        closed = fetch(c, sid, -1, {(topic, 0): 0})
        assert closed.session_id == 0 and set(answered(closed)) == {(topic, 0)}
        assert fetch(c, sid, 5, {}).error_code == 70


class FetchRecorder:
    """A loopback proxy in front of one broker that decodes every Fetch request passing through and
    keeps (session_id, session_epoch, partitions listed): what the client really sent."""

    def __init__(self, upstream_port: int) -> None:
        self.port = free_port()
        self.fetches: list[tuple[int, int, int]] = []
        self._upstream = upstream_port
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self._listener.accept()
                server = socket.create_connection(("127.0.0.1", self._upstream))
                threading.Thread(target=self._requests, args=(client, server), daemon=True).start()
                threading.Thread(target=self._pipe, args=(server, client), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def _requests(self, src: socket.socket, dst: socket.socket) -> None:
        reader = src.makefile("rb")
        with contextlib.suppress(OSError, struct.error):
            while size_bytes := reader.read(4):
                frame = reader.read(struct.unpack(">i", size_bytes)[0])
                api_key, version = struct.unpack_from(">hh", frame)
                if api_key == F.API_KEY and version >= 12:  # header v2: client id, then tagged fields
                    (n,) = struct.unpack_from(">h", frame, 8)
                    body = frame[10 + max(n, 0) + 1 :]  # no header tags from kafka-python
                    req = F.decode(body, version=version)
                    listed = sum(len(t.partitions) for t in req.topics)
                    self.fetches.append((req.session_id, req.session_epoch, listed))
                dst.sendall(size_bytes + frame)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def test_kafka_python_consumes_through_sessions(tmp_path: Path) -> None:
    """kafka-python opens a session, then sends incremental fetches (session id and a rising epoch,
    unchanged partitions left out) and gets every record through them."""
    from kafka import KafkaConsumer, KafkaProducer

    b = BrokerProcess(tmp_path / "data", args=["--num-partitions", "2"])
    recorder = FetchRecorder(b.port)
    b.args += ["--advertised-port", str(recorder.port)]  # clients reach the broker only through it
    b.start()
    try:
        topic = "kp-sessions"
        producer = KafkaProducer(bootstrap_servers=b.bootstrap)
        for i in range(50):
            producer.send(topic, f"v{i}".encode(), partition=i % 2)
        producer.flush(30)
        producer.close()
        consumer = KafkaConsumer(
            topic, bootstrap_servers=f"127.0.0.1:{recorder.port}", auto_offset_reset="earliest",
            consumer_timeout_ms=5000,
        )  # fmt: skip
        try:
            got = {m.value for m in consumer}
        finally:
            consumer.close()
        assert got == {f"v{i}".encode() for i in range(50)}
        sessions = {sid for sid, epoch, _ in recorder.fetches if sid != 0 and epoch > 0}
        assert len(sessions) == 1, recorder.fetches[:10]
        incremental = [(sid, epoch, n) for sid, epoch, n in recorder.fetches if sid in sessions]
        assert [e for _, e, _ in incremental[:3]] == [1, 2, 3], recorder.fetches[:10]
        assert any(n == 0 for _, _, n in incremental), recorder.fetches[
            :10
        ]  # nothing changed: nothing listed
    finally:
        b.stop()
        recorder.close()
