"""Kafka Streams 4.4 against a 3-broker Brook cluster, exactly_once_v2: a repartition, a windowed count
and a stream-table join (tests/jvm StreamsPipeline), two instances, one killed -9 under load and
restarted, a clean rebalance with standby replicas, then kafka-streams-application-reset and a rerun.
Every time, the output read read_committed equals the reference computed here from the input."""

from __future__ import annotations

import os
import re
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from tests.support.cluster import Cluster, eventually
from tests.support.jvm import JvmProcess, kafka_tool

pytestmark = [
    pytest.mark.slow,
    pytest.mark.needs_cluster,
    pytest.mark.skipif(
        not os.environ.get("BROOK_JVM_PIPELINES"), reason="minutes long: scripts/jvm-pipelines"
    ),
]

APP = "brook-pipeline"
# The users table and the repartitioned events must agree on key -> partition: the Java client's hash.
JAVA_PARTITIONER = {"partitioner": "murmur2_random"}
OUTPUTS = ("enriched", "counts")
USERS = 12
WINDOW_MS = 10_000
BASE_TS = 1_790_000_000_000 - 1_790_000_000_000 % WINDOW_MS


def event(i: int) -> tuple[str, str, int]:
    """Event i: key, value "user,page,id", timestamp (10 events a second of event time)."""
    return f"e{i}", f"u{i % USERS},p{i % 7},e{i}", BASE_TS + i * 100


def region(u: int) -> str:
    return ("eu", "us", "ap")[u % 3]


def reference(n: int) -> tuple[Counter[str], dict[str, str]]:
    """What the topology must output for events 0..n-1: every enriched event once, and each
    (user, window)'s final count."""
    enriched: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    for i in range(n):
        _, v, ts = event(i)
        user = v.split(",")[0]
        enriched[f"{v},{region(int(user[1:]))}"] += 1
        counts[f"{user}@{ts - ts % WINDOW_MS}"] += 1
    return enriched, {k: str(c) for k, c in counts.items()}


class Output:
    """Everything committed to a topic so far (read_committed, from the start), read incrementally."""

    def __init__(
        self, bootstrap: str, topic: str, isolation: str = "read_committed", start: list[int] | None = None
    ) -> None:
        self.c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"check-{topic}",
                "isolation.level": isolation,
                "enable.auto.commit": False,
            }
        )
        self.c.assign([TopicPartition(topic, p, (start or [0, 0, 0])[p]) for p in range(3)])
        self.records: list[tuple[str, str]] = []

    def read(self) -> list[tuple[str, str]]:
        while batch := self.c.consume(10_000, 1.0):
            for m in batch:
                assert m.error() is None, m.error()
                self.records.append((m.key().decode(), m.value().decode()))
        return self.records

    def close(self) -> None:
        self.c.close()


N_MAX = 18_000  # events fed while the kill is prepared (at 100 a second: past the 180 s it may take)
N_TOTAL = 20_000  # events in all, after the clean rebalance


def produce(bootstrap: str, first: int, last: int, per_tick: int = 0) -> None:
    """Events first..last-1, `per_tick` every 0.1 s (0: all at once)."""
    p = Producer(
        {**JAVA_PARTITIONER, "bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    for i in range(first, last):
        k, v, ts = event(i)
        p.produce("events", v.encode(), k.encode(), timestamp=ts)
        if per_tick and (i - first) % per_tick == per_tick - 1:
            p.poll(0)
            time.sleep(0.1)
    assert p.flush(30) == 0


def open_transaction(admin: AdminClient, topic: str) -> bool:
    """Whether some partition of `topic` has records past its last stable offset."""
    tps = [TopicPartition(topic, p) for p in range(3)]

    def latest(level: IsolationLevel) -> list[int]:
        fs = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, isolation_level=level)
        return [fs[tp].result(10).offset for tp in tps]

    ends, stable = latest(IsolationLevel.READ_UNCOMMITTED), latest(IsolationLevel.READ_COMMITTED)
    return any(e > s for e, s in zip(ends, stable, strict=True))


def instance(root: Path, name: str, bootstrap: str) -> JvmProcess:
    configs = {
        "bootstrap.servers": bootstrap,
        "application.id": APP,
        "state.dir": str(root / f"state-{name}"),
        "processing.guarantee": "exactly_once_v2",
        "num.standby.replicas": "1",
        "commit.interval.ms": "200",
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "1000",
        "auto.offset.reset": "earliest",
    }
    return JvmProcess(
        root / f"{name}.log", "dev.brook.jvmtest.StreamsPipeline", *(f"{k}={v}" for k, v in configs.items())
    )


def ends(bootstrap: str) -> dict[str, list[int]]:
    """Each output topic's end offsets, by partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check-ends"})
    try:
        return {t: [c.get_watermark_offsets(TopicPartition(t, p), 10)[1] for p in range(3)] for t in OUTPUTS}
    finally:
        c.close()


def wait_output(
    bootstrap: str, n: int, start: dict[str, list[int]] | None = None, timeout: float = 240.0
) -> None:
    """Until enriched and counts (from `start`) hold exactly the reference for n events."""
    want_enriched, want_counts = reference(n)
    start = start or {}
    enriched = Output(bootstrap, "enriched", start=start.get("enriched"))
    counts = Output(bootstrap, "counts", start=start.get("counts"))
    try:
        deadline = time.monotonic() + timeout
        while True:
            got = Counter(v for _, v in enriched.read())
            last = dict(counts.read())
            if sum(got.values()) >= n and last == want_counts:
                break
            if time.monotonic() > deadline:
                missing = want_enriched - got
                raise AssertionError(
                    f"after {timeout}s: {sum(got.values())} enriched of {n} ({len(missing)} missing), "
                    f"{sum(1 for k, v in want_counts.items() if last.get(k) != v)} counts differ"
                )
            time.sleep(1)
        # Exactly once: nothing twice, nothing missing, nothing else.
        time.sleep(2)
        got = Counter(v for _, v in enriched.read())
        assert got == want_enriched, (sum(got.values()), len(want_enriched - got), len(got - want_enriched))
        assert dict(counts.read()) == want_counts
    finally:
        enriched.close()
        counts.close()


@pytest.mark.timeout(900)
def test_exactly_once_through_kill_and_rebalance(txn_cluster: Cluster, tmp_path: Path) -> None:
    b = txn_cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    for f in admin.create_topics(
        [NewTopic(t, 3, 3) for t in ("events", "users", "counts", "enriched")]
    ).values():
        f.result(30)
    users = Producer({**JAVA_PARTITIONER, "bootstrap.servers": b})
    for u in range(USERS):
        users.produce("users", region(u).encode(), f"u{u}".encode(), timestamp=BASE_TS - 60_000)
    assert users.flush(30) == 0

    t0 = time.monotonic()
    a, c = instance(tmp_path, "a", b).start(), instance(tmp_path, "b", b).start()
    try:
        for s in (a, c):
            s.wait_for("STATE RUNNING", 180)
        # Under load: events keep arriving (100 a second) until instance a has been killed
        # mid-processing and restarted, however long the pipeline takes to get going.
        fed, stop = [0], threading.Event()

        def feed() -> None:
            while not stop.is_set() and fed[0] < N_MAX:
                produce(b, fed[0], fed[0] + 100, 10)
                fed[0] += 100

        feeder = threading.Thread(target=feed)
        feeder.start()
        progress = Output(b, "enriched", "read_uncommitted")
        eventually(lambda: len(progress.read()) >= 1500, 120, "the pipeline to get going")
        progress.close()
        # Mid-commit: killed while a transaction has output in the log not yet committed.
        eventually(lambda: open_transaction(admin, "enriched"), 60, "an open transaction on enriched")
        a.kill()
        time.sleep(1)
        a.start()
        stop.set()
        feeder.join()
        n1 = fed[0]
        wait_output(b, n1)
        print(f"kill -9 and restart: {n1} events exactly once, {time.monotonic() - t0:.0f}s")
        # num.standby.replicas=1: each instance keeps a warm copy of some of the other's stores.
        logs = a.log_path.read_text() + c.log_path.read_text()
        assert re.search(r"Assignment of tasks to nodes: .*standbyTasks: \(\[\d", logs)

        # A clean rebalance: c leaves, a takes over (its standbys become active), c comes back.
        c.stop()
        n2 = N_TOTAL
        produce(b, n1, n2)
        c.start()
        wait_output(b, n2)
        print(f"clean rebalance: {n2} events exactly once, {time.monotonic() - t0:.0f}s")
        a.stop()
        c.stop()
    finally:
        for s in (a, c):
            s.kill()


@pytest.mark.timeout(600)
def test_application_reset_and_rerun(txn_cluster: Cluster, tmp_path: Path) -> None:
    """After the test above (its N_TOTAL events in the topics, its instances stopped):
    kafka-streams-application-reset back to the inputs' start (the table's topic too: its store's
    changelog is deleted with the other internal topics); a rerun outputs it all again."""
    b, n2 = txn_cluster.bootstrap, N_TOTAL
    r = kafka_tool(
        "kafka-streams-application-reset",
        "--bootstrap-server",
        b,
        "--application-id",
        APP,
        "--input-topics",
        "events,users",
        "--force",
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    before = ends(b)
    a = instance(tmp_path, "a", b).start()
    try:
        wait_output(b, n2, start=before)
    finally:
        a.kill()
