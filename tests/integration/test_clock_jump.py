"""Wall-clock jumps on one broker at a time (libfaketime, tests/support/diskfault.py's Clock), an hour
forward and back, while an idempotent producer, a transactional one and a consumer group run. Timeouts
go by the monotonic clock: no lease is lost, no open transaction is aborted as timed out, nothing
acknowledged is lost."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka.protocol.metadata import FindCoordinatorRequest

from tests.support.checker import Workload
from tests.support.cluster import Cluster, eventually, running
from tests.support.diskfault import Clock
from tests.support.raw import RawClient

from .test_cluster import create

pytestmark = pytest.mark.slow

# Timed-out transactions are looked for every 500 ms (Kafka: 10 s), so a wrong abort shows at once.
ARGS = ["--transaction-abort-timed-out-transaction-cleanup-interval-ms", "500"]


@pytest.fixture
def clocks(tmp_path: Path) -> dict[int, Clock]:
    return {n: Clock(tmp_path / f"clock-{n}") for n in range(3)}


@pytest.fixture
def cluster(tmp_path: Path, clocks: dict[int, Clock]) -> Iterator[Cluster]:
    yield from running(Cluster(tmp_path, extra_args=ARGS, broker_env=lambda n: clocks[n].env()))


def coordinated_by(cluster: Cluster, node: int) -> str:
    """A transactional id whose coordinator is broker `node`."""
    with RawClient(cluster.bootstrap.split(",")[0]) as c:
        for i in range(1000):
            tid = f"held-{node}-{i}"
            if c.request(FindCoordinatorRequest(key=tid, key_type=1), 2).node_id == node:
                return tid
    raise AssertionError(f"no transactional id found for coordinator {node}")


def open_transaction(bootstrap: str, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 60000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("wl-txn", f"{tid}-{time.monotonic()}".encode())  # unique: the checker counts duplicates
    p.flush(10)
    return p


def test_clock_jumps_expire_nothing_and_lose_nothing(cluster: Cluster, clocks: dict[int, Clock]) -> None:
    for name in ("wl", "wl-txn"):
        create(cluster, name, 3, 3, {"min.insync.replicas": "2"})
    work = Workload(cluster.bootstrap, "wl", "wl-txn", "wl-group").start()
    try:
        eventually(lambda: len(work.acked) > 200 and work.txns["committed"] > 2, 30, "a running workload")
        for n, clock in clocks.items():
            for offset in (3600, 0):  # an hour forward, then back
                before, txns = len(work.acked), work.txns["committed"]
                held = open_transaction(cluster.bootstrap, coordinated_by(cluster, n))
                clock.set(offset)
                time.sleep(2)
                held.commit_transaction(10)  # open across the jump, yet not timed out: it commits
                eventually(
                    lambda b=before, t=txns: len(work.acked) > b + 100 and work.txns["committed"] > t,
                    30,
                    f"progress after broker {n}'s clock moved to {offset:+d}s",
                )
    finally:
        work.stop()
    verdict = work.check()
    print(verdict, dict(work.errors))
    assert verdict.ok, str(verdict)
    logs = "".join(b.log_text() for b in cluster.brokers)
    assert "open longer than" not in logs  # no transaction aborted as timed out
    assert "registration lost" not in logs  # no lease lost
    assert not [e for e in work.errors if e.startswith("transaction")], dict(work.errors)
