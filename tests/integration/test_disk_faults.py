"""Disk faults injected into one broker at a time (tests/support/diskfault.py's LD_PRELOAD shim) while
an idempotent producer, a transactional one and a consumer group run: EIO on write, ENOSPC on fsync,
EIO on read, a slow fsync. A broker whose log directory fails stops serving it (leadership moves),
acknowledges nothing it did not persist, and serves again once the directory takes writes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from tests.support.broker import BrokerProcess
from tests.support.checker import Workload
from tests.support.cluster import Cluster, eventually, running
from tests.support.diskfault import DiskFaults

from .test_cluster import create, partition_md

pytestmark = pytest.mark.slow

PROBE_ARGS = ["--log-dir-probe-interval-ms", "200"]
# Every append is fsynced, so fsync faults meet the produce path.
TOPIC_CONFIG = {"min.insync.replicas": "2", "flush.messages": "1"}


@pytest.fixture
def disks(tmp_path: Path) -> dict[int, DiskFaults]:
    return {n: DiskFaults(tmp_path / f"disk-{n}.ctl", tmp_path / f"broker-{n}") for n in range(3)}


@pytest.fixture
def cluster(tmp_path: Path, disks: dict[int, DiskFaults]) -> Iterator[Cluster]:
    yield from running(Cluster(tmp_path, extra_args=PROBE_ARGS, broker_env=lambda n: disks[n].env()))


def test_disk_errors_move_leadership_and_lose_no_acknowledged_record(
    cluster: Cluster, disks: dict[int, DiskFaults]
) -> None:
    for name in ("wl", "wl-txn"):
        create(cluster, name, 3, 3, TOPIC_CONFIG)
    work = Workload(cluster.bootstrap, "wl", "wl-txn", "wl-group").start()
    hit: list[int] = []
    try:
        eventually(lambda: len(work.acked) > 200 and work.txns["committed"] > 2, 30, "a running workload")
        for fault in ({"write": "EIO"}, {"fsync": "ENOSPC"}, {"read": "EIO"}, {"fsync_delay_ms": 1500}):
            leader = partition_md(cluster, "wl").leader
            hit.append(leader)
            before = len(work.acked)
            disks[leader].set(**fault)
            time.sleep(3)
            disks[leader].set()
            eventually(lambda b=before: len(work.acked) > b + 100, 30, f"acknowledgements after {fault}")
    finally:
        work.stop()
    verdict = work.check()
    print(verdict, dict(work.errors))
    assert verdict.ok, str(verdict)
    logs = "".join(cluster.broker(n).log_text() for n in set(hit))
    assert "is offline" in logs and "EIO" in logs and "ENOSPC" in logs
    assert "read of" in logs  # a failed read takes the directory offline too
    assert "OSError" not in logs  # ... rather than failing a request and closing its connection


def test_a_disk_error_while_a_large_fetch_is_sent_takes_the_directory_offline(tmp_path: Path) -> None:
    """Fetches of 64 KiB and more go out with sendfile, after the log's guards: EIO there (the shim
    fails sendfile and the pread fallback) must take the directory offline as a guarded read does,
    not only close the connection, so the partition answers KAFKA_STORAGE_ERROR (and in a cluster
    leadership moves) instead of failing every fetch that reaches the bad sectors."""
    disk = DiskFaults(tmp_path / "disk.ctl", tmp_path / "data")
    broker = BrokerProcess(tmp_path / "data", args=PROBE_ARGS, env=disk.env()).start()
    try:
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        for i in range(20):
            p.produce("big", b"x" * 100_000, key=b"%d" % i)
        assert p.flush(30) == 0
        disk.set(read="EIO")
        c = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": "g", "auto.offset.reset": "earliest"}
        )
        c.subscribe(["big"])
        try:
            deadline = time.monotonic() + 20
            while "is offline" not in broker.log_text() and time.monotonic() < deadline:
                c.poll(0.5)
        finally:
            c.close()
        logs = broker.log_text()
        assert "is offline: read of big-0" in logs, logs[-3000:]
        assert "OSError" not in logs  # the connection ends without a traceback
    finally:
        broker.stop()
