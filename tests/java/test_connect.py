"""Kafka Connect 4.4 in distributed mode on Brook: two workers (ConnectDistributed processes) keep their
config, offset and status topics on a 3-broker Brook cluster; the FileStream source (file -> topic,
exactly-once source support, KIP-618, on Brook's transactions) and sink (topic -> file) connectors are
made through the REST API; a worker is killed -9 mid-stream and restarted, and every line arrives once."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import Cluster, eventually
from tests.support.jvm import JvmProcess
from tests.support.ports import free_port

pytestmark = [
    pytest.mark.slow,
    pytest.mark.needs_cluster,
    pytest.mark.skipif(
        not os.environ.get("BROOK_JVM_PIPELINES"), reason="minutes long: scripts/jvm-pipelines"
    ),
]


class Worker:
    """One Connect worker process (org.apache.kafka.connect.cli.ConnectDistributed) and its REST API."""

    def __init__(self, root: Path, name: str, bootstrap: str, group: str = "connect", **extra: str) -> None:
        self.port = free_port()
        props = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "listeners": f"http://127.0.0.1:{self.port}",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            "offset.flush.interval.ms": "1000",
            # A dead worker's tasks move on in seconds, not Connect's default 5 minutes.
            "scheduled.rebalance.max.delay.ms": "3000",
            "session.timeout.ms": "6000",
            "heartbeat.interval.ms": "1000",
            **extra,
        }
        path = root / f"{name}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.proc = JvmProcess(
            root / f"{name}.log", "org.apache.kafka.connect.cli.ConnectDistributed", str(path)
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Worker:
        self.proc.start()
        eventually(lambda: self.rest("GET", "/connectors") == [], 180, "the worker's REST API")
        return self

    def rest(self, method: str, path: str, body: Any = None) -> Any:
        req = urllib.request.Request(
            self.url + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read()
        return json.loads(text) if text else None

    def running(self, connector: str, tasks: int = 1) -> bool:
        s = self.rest("GET", f"/connectors/{connector}/status")
        return (
            s["connector"]["state"] == "RUNNING" and [t["state"] for t in s["tasks"]] == ["RUNNING"] * tasks
        )


def host_of(w: Worker, connector: str, workers: tuple[Worker, ...]) -> Worker:
    """The worker running the connector's task 0."""
    where = w.rest("GET", f"/connectors/{connector}/status")["tasks"][0]["worker_id"]
    return next(x for x in workers if where.endswith(f":{x.port}"))


def read_topic(bootstrap: str, topic: str, partitions: int) -> list[str]:
    """Every committed value of `topic` (read_committed, to its end)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "isolation.level": "read_committed"})
    try:
        ends = [c.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(partitions)]
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[str] = []
        positions = [0] * partitions
        deadline = time.monotonic() + 30
        while (
            any(pos < end for pos, end in zip(positions, ends, strict=True)) and time.monotonic() < deadline
        ):
            for m in c.consume(10_000, 0.5):
                assert m.error() is None, m.error()
                got.append(m.value().decode())
                positions[m.partition()] = m.offset() + 1
            # Aborted records and markers take offsets a read_committed consumer never sees.
            positions = [
                max(pos, c.position([TopicPartition(topic, p)])[0].offset) for p, pos in enumerate(positions)
            ]
        return got
    finally:
        c.close()


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_file_source_and_sink_exactly_once_through_worker_kill(txn_cluster: Cluster, tmp_path: Path) -> None:
    b = txn_cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    for f in admin.create_topics([NewTopic("lines", 3, 3)]).values():
        f.result(30)
    eos = {"exactly.once.source.support": "enabled"}
    w1 = Worker(tmp_path, "w1", b, **eos).start()
    w2 = Worker(tmp_path, "w2", b, **eos).start()
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("")
    try:
        w1.rest(
            "PUT",
            "/connectors/file-source/config",
            {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                "file": str(source),
                "topic": "lines",
                "tasks.max": "1",
                # KIP-618: refused unless the worker and the connector can give it.
                "exactly.once.support": "required",
                "transaction.boundary": "poll",
            },
        )
        w1.rest(
            "PUT",
            "/connectors/file-sink/config",
            {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                "file": str(sink),
                "topics": "lines",
                "tasks.max": "1",
            },
        )
        eventually(lambda: w1.running("file-source") and w1.running("file-sink"), 120, "both connectors")
        n = 6000
        with source.open("a") as f:
            for i in range(n):
                f.write(f"line-{i}\n")
                if i % 100 == 99:
                    f.flush()
                    time.sleep(0.05)
                if i == n // 2:
                    eventually(lambda: len(lines(sink)) > 500, 120, "lines reaching the sink")
                    # The worker running the source task dies, its transaction open.
                    victim = host_of(w1, "file-source", (w1, w2))
                    victim.proc.kill()
                    victim.proc.start()
        eventually(lambda: len(set(lines(sink))) >= n, 240, f"{n} lines in the sink file")
        want = Counter(f"line-{i}" for i in range(n))
        # The source is exactly once: the topic holds every line once.
        assert Counter(read_topic(b, "lines", 3)) == want
        # The sink is at least once (Connect's promise for FileStreamSink): nothing lost.
        assert set(lines(sink)) == set(want)
    finally:
        w1.proc.kill()
        w2.proc.kill()


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A second Brook cluster (one broker) for MirrorMaker 2 to replicate into."""
    c = Cluster(
        tmp_path_factory.mktemp("target"), brokers=1, extra_args=["--default-replication-factor", "1"]
    ).start()
    try:
        yield c
    finally:
        c.stop()


def test_mirror_maker_2_replicates_a_topic_and_its_group_offsets(
    txn_cluster: Cluster, target: Cluster, tmp_path: Path
) -> None:
    src, dst = txn_cluster.bootstrap, target.bootstrap
    admin = AdminClient({"bootstrap.servers": src})
    for f in admin.create_topics([NewTopic("orders", 3, 3)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": src, "enable.idempotence": True})
    n = 300
    for i in range(n):
        p.produce("orders", f"order-{i}".encode(), f"k{i}".encode())
    assert p.flush(30) == 0
    # The group g1 reads every order on the source cluster and commits; MM2 carries that position over.
    g = Consumer(
        {
            "bootstrap.servers": src,
            "group.id": "g1",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    g.subscribe(["orders"])
    seen: list[Any] = []
    deadline = time.monotonic() + 60
    while len(seen) < n and time.monotonic() < deadline:
        seen += [m for m in g.consume(n - len(seen), 1.0) if m.error() is None]
    g.commit(asynchronous=False)
    committed = {
        tp.partition: tp.offset for tp in g.committed([TopicPartition("orders", q) for q in range(3)], 10)
    }
    g.close()
    assert sum(committed.values()) == n

    # The worker is on the target cluster (MM2's usual place); internal topics at its one broker's RF.
    rf1 = {f"{k}.storage.replication.factor": "1" for k in ("config", "offset", "status")}
    w = Worker(tmp_path, "mm2", dst, group="mm2", **rf1).start()
    common = {
        "source.cluster.alias": "src",
        "target.cluster.alias": "dst",
        "source.cluster.bootstrap.servers": src,
        "target.cluster.bootstrap.servers": dst,
        "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "tasks.max": "1",
    }
    try:
        w.rest(
            "PUT",
            "/connectors/mm2-source/config",
            {
                **common,
                "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
                "topics": "orders",
                "replication.factor": "1",
                "offset-syncs.topic.replication.factor": "3",
                # An offset sync for every record: translated offsets are exact, not just never ahead.
                "offset.lag.max": "0",
                "refresh.topics.interval.seconds": "1",
                "sync.topic.acls.enabled": "false",
            },
        )
        w.rest(
            "PUT",
            "/connectors/mm2-checkpoint/config",
            {
                **common,
                "connector.class": "org.apache.kafka.connect.mirror.MirrorCheckpointConnector",
                "groups": "g1",
                "checkpoints.topic.replication.factor": "1",
                "emit.checkpoints.interval.seconds": "1",
                "sync.group.offsets.enabled": "true",
                "sync.group.offsets.interval.seconds": "1",
                "refresh.groups.interval.seconds": "1",
            },
        )
        eventually(
            lambda: sorted(read_topic(dst, "src.orders", 3)) == sorted(f"order-{i}" for i in range(n)),
            180,
            f"the {n} orders in src.orders on the target cluster",
        )

        def translated() -> dict[int, int]:
            c = Consumer({"bootstrap.servers": dst, "group.id": "g1"})
            try:
                tps = c.committed([TopicPartition("src.orders", q) for q in range(3)], 10)
                return {tp.partition: tp.offset for tp in tps}
            finally:
                c.close()

        # Records keep their partition and (one producer, no gaps) their offsets: the same positions.
        eventually(lambda: translated() == committed, 120, f"g1's offsets {committed} on the target")
    finally:
        w.proc.kill()
