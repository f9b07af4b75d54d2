"""Transactions on a 3-broker cluster: the transaction coordinator's broker is killed (kill -9) while a
transaction is open and again right after a commit was acknowledged; the new coordinator (the new
leader of the `__transaction_state` partition) loads the state and finishes both. Nothing committed is
lost, nothing aborted shows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka.protocol.metadata import FindCoordinatorRequest

from tests.integration.test_cluster import create
from tests.integration.test_transactions import read_all
from tests.support.cluster import Cluster, eventually
from tests.support.raw import RawClient

pytestmark = pytest.mark.slow

TXN_CLUSTER_ARGS = [
    "--transaction-state-log-num-partitions",
    "3",
    "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
    "500",
]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, extra_args=TXN_CLUSTER_ARGS).start()
    try:
        yield c
    finally:
        c.stop()


def coordinator(c: Cluster, txn_id: str) -> int:
    """The node id FindCoordinator (key type 1: transaction) names, asked of a live broker."""

    def ask() -> tuple[int] | None:  # a tuple: node 0 is an answer, not a falsy "not yet"
        with RawClient(c.bootstrap.split(",")[0]) as client:
            resp = client.request(FindCoordinatorRequest(key=txn_id, key_type=1), 2)
        return (resp.node_id,) if resp.error_code == 0 else None

    node: tuple[int] = eventually(ask, 60, f"a coordinator for {txn_id}")
    return node[0]


def test_coordinator_kill_9_during_and_after_commit(cluster: Cluster) -> None:
    create(cluster, "ha.data", 2)
    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "transactional.id": "t-ha",
            "transaction.timeout.ms": 120_000,
        }
    )
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(20):
        p.produce("ha.data", f"one-{i}".encode(), partition=i % 2)
    p.commit_transaction(60)

    # Killed while the transaction is open: the new coordinator has it as Ongoing, the commit goes on.
    p.begin_transaction()
    for i in range(20):
        p.produce("ha.data", f"two-{i}".encode(), partition=i % 2)
    assert p.flush(60) == 0
    first = coordinator(cluster, "t-ha")
    cluster.broker(first).kill()
    p.commit_transaction(120)
    cluster.broker(first).start()
    eventually(cluster.all_registered, 60, "the killed broker to be back")

    # Killed right after the commit was acknowledged (PrepareCommit written, markers maybe not yet):
    # the new coordinator writes the markers and completes it.
    p.begin_transaction()
    for i in range(20):
        p.produce("ha.data", f"three-{i}".encode(), partition=i % 2)
    second = coordinator(cluster, "t-ha")
    p.commit_transaction(120)
    cluster.broker(second).kill()

    # An aborted one after all that stays invisible.
    p.begin_transaction()
    for i in range(5):
        p.produce("ha.data", f"aborted-{i}".encode(), partition=i % 2)
    assert p.flush(60) == 0
    p.abort_transaction(120)

    want = sorted(f"{n}-{i}".encode() for n in ("one", "two", "three") for i in range(20))
    eventually(
        lambda: read_all(cluster.bootstrap, "ha.data", 2, "read_committed") == want,
        120,
        "every committed record, and only those, for read_committed",
    )
