"""Helpers for the Spark tests: a SparkSession, topics, producing, consuming everything, Spark jobs run
as subprocesses (so a test can SIGKILL them), spark-on-k8s/'s jobs and their output."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("stream_job.py")

# (partition, offset, key, value, headers)
Record = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes]]]


def require_spark() -> None:
    """Skip the calling test module when pyspark, pyarrow or a JDK is missing."""
    import pytest

    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install pyspark==4.3.0)")
    pytest.importorskip("pyarrow")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs a JDK 17 (apt-get install openjdk-17-jre-headless)", allow_module_level=True)


def kafka_connector_jars() -> str | None:
    """Spark's Kafka connector and its dependencies as `spark.jars` takes them (comma-separated local
    paths, resolved once by scripts/setup-spark-kafka), or None where set-up has not run."""
    listing = ROOT / ".venv" / "spark-kafka-jars.txt"
    if not listing.is_file():
        return None
    jars = listing.read_text().strip()
    return jars if jars and all(Path(j).is_file() for j in jars.split(",")) else None


def require_kafka_connector() -> str:
    """The connector's jars, or skip the calling module."""
    import pytest

    jars = kafka_connector_jars()
    if jars is None:
        pytest.skip(
            "Spark's Kafka connector is not resolved (scripts/setup-spark-kafka)", allow_module_level=True
        )
    return jars


def spark_session(warehouse: Path, app: str = "brook-tests") -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    jars = kafka_connector_jars()
    if jars is not None:  # format "kafka" beside "brook", offline: no spark.jars.packages resolution
        builder = builder.config("spark.jars", jars)
    session = (
        builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    import pyspark_brook

    pyspark_brook.register(session)
    return session


def create_topic(
    bootstrap: str, name: str, partitions: int = 3, config: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})]
    )
    fut[name].result(15)
    deadline = time.monotonic() + 15
    while True:
        md = admin.list_topics(name, timeout=5).topics.get(name)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {name} not ready")
        time.sleep(0.05)


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None, list[tuple[str, bytes]] | None, int | None]],
    timestamp_ms: int | None = None,
) -> int:
    """records: (key, value, headers, partition). Returns how many were acknowledged."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "enable.idempotence": True,
            "partitioner": "murmur2_random",
        }
    )
    errors: list[str] = []
    n = 0

    def cb(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    for key, value, headers, partition in records:
        kw: dict[str, Any] = {"key": key, "value": value, "on_delivery": cb}
        if headers:
            kw["headers"] = headers
        if partition is not None:
            kw["partition"] = partition
        if timestamp_ms is not None:
            kw["timestamp"] = timestamp_ms
        while True:
            try:
                p.produce(topic, **kw)
                break
            except BufferError:
                p.poll(0.05)
        n += 1
    assert p.flush(30) == 0
    assert not errors, errors[:3]
    return n


def consume_all(bootstrap: str, topic: str, timeout: float = 30) -> list[Record]:
    """Every record of the topic, from offset 0 to the end offsets as of now."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    parts = sorted(admin.list_topics(topic, timeout=10).topics[topic].partitions)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "tests-spark-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    out: list[Record] = []
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
        todo = {p for p in parts if ends[p] > 0}
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        deadline = time.monotonic() + timeout
        while todo and time.monotonic() < deadline:
            for m in c.consume(10_000, 0.5):
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF and m.offset() >= ends[m.partition()]:
                        todo.discard(m.partition())
                    continue
                if m.offset() < ends[m.partition()]:
                    out.append((m.partition(), m.offset(), m.key(), m.value(), list(m.headers() or [])))
                if m.offset() >= ends[m.partition()] - 1:
                    todo.discard(m.partition())
        assert not todo, f"did not reach the end of {topic} partitions {todo}"
    finally:
        c.close()
    return out


class SparkJob:
    """tests/spark/stream_job.py in its own process (its own JVM), so it can be SIGKILLed mid-batch."""

    def __init__(self, args: list[str], log_path: Path) -> None:
        self.args = args
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> SparkJob:
        env = dict(
            os.environ,
            PYSPARK_PYTHON=sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
            PYTHONPATH=str(ROOT),
        )
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        # A session of its own: SIGKILL of the group takes the JVM and its Python workers down together.
        self.proc = subprocess.Popen(
            [sys.executable, str(JOB), *self.args],
            stdout=log,
            stderr=log,
            env=env,
            cwd=str(ROOT),
            start_new_session=True,
        )
        return self

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"job did not finish in {timeout}s:\n{self.tail()}") from None

    def kill(self, timeout: float = 20.0) -> None:
        """SIGKILL every process of the job's session, like a crash: the driver, its JVM, and PySpark's
        worker daemon and Python workers, which move into process groups of their own (so a killpg of
        the job's group would leave them running, and finishing a sink commit after the "crash")."""
        if self.proc is None:
            return
        sid = self.proc.pid  # start_new_session: the job leads its session
        known: set[int] = set()
        deadline = time.monotonic() + timeout
        while True:
            live = _live_processes()
            known |= {pid for pid, (_, session) in live.items() if session == sid}
            grown = True
            while grown:  # and their descendants, should one have left the session
                more = {pid for pid, (ppid, _) in live.items() if ppid in known} - known
                known |= more
                grown = bool(more)
            targets = known & live.keys()
            if not targets:
                break
            assert time.monotonic() < deadline, f"processes of the job outlived SIGKILL: {sorted(targets)}"
            for pid in targets:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)
        self.proc.wait(10)

    def survivors(self) -> list[int]:
        """Live processes of the job's session (none after kill())."""
        if self.proc is None:
            return []
        return sorted(pid for pid, (_, session) in _live_processes().items() if session == self.proc.pid)

    def tail(self, n: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-n:]


def _live_processes() -> dict[int, tuple[int, int]]:
    """Every live (not zombie) process on the machine: pid -> (parent pid, session id), from /proc."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # exited meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp session
        if fields[0] not in ("Z", "X"):
            out[int(entry)] = (int(fields[1]), int(fields[3]))
    return out


def batch_ids(checkpoint: Path, kind: str) -> list[int]:
    d = checkpoint / kind
    if not d.is_dir():
        return []
    return sorted(int(f.name) for f in d.iterdir() if f.name.isdigit())


def load_job(name: str) -> ModuleType:
    """A script of spark-on-k8s/jobs/ as a module (its functions without spark-submit)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "spark-on-k8s" / "jobs" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def latest_counts(bootstrap: str, topic: str = "page-view-counts") -> dict[tuple[str, int], int]:
    """What a compacted page-view-counts topic keeps: the newest count per (page, window start ms)."""
    newest: dict[bytes, tuple[int, int, bytes]] = {}
    for p, o, k, v, _ in consume_all(bootstrap, topic):
        assert k is not None and v is not None
        if k not in newest or (p, o) > newest[k][:2]:
            newest[k] = (p, o, v)
    out: dict[tuple[str, int], int] = {}
    for _, _, v in newest.values():
        d = json.loads(v)
        start = datetime.strptime(d["window_start"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        out[(d["page"], int(start.timestamp() * 1000))] = d["count"]
    return out
