"""Failover with the brokers' default lease TTL: a killed leader is replaced within 3 s, and a leader
paused for a second (SIGSTOP, as a long GC pause or a stalled VM) keeps its leadership and its lease."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ack_probe import AckProbe
from tests.support.cluster import Cluster, eventually, running

from .test_cluster import create, partition_md

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from running(Cluster(tmp_path))


def probe(c: Cluster, topic: str) -> AckProbe:
    return AckProbe({int(b.args[1]): b.bootstrap for b in c.brokers}, topic).start()


def test_a_killed_leader_is_replaced_within_3_seconds(cluster: Cluster) -> None:
    """kill -9 → the first acks=all acknowledgement by another broker (a probe asks every broker, so
    this is the cluster's part, without a client's metadata refresh)."""
    create(cluster, "kill", 1, 3, {"min.insync.replicas": "2"})
    old = partition_md(cluster, "kill").leader
    p = probe(cluster, "kill")
    try:
        eventually(lambda: any(a.broker == old for a in p.acked), 20, "acknowledgements")
        killed = time.monotonic()
        cluster.broker(old).kill()
        eventually(lambda: any(a.broker != old for a in p.acked), 20, "another broker to acknowledge")
    finally:
        acks = p.stop()
    failover = min(a.at for a in acks if a.broker != old) - killed
    print(f"kill -9 -> first acknowledgement by the new leader: {failover:.2f}s")
    assert failover <= 3.0


def test_a_leader_paused_for_a_second_keeps_leading(cluster: Cluster) -> None:
    create(cluster, "pause", 1, 3, {"min.insync.replicas": "2"})
    leader = partition_md(cluster, "pause")
    b = cluster.broker(leader.leader)
    assert b.proc is not None
    p = probe(cluster, "pause")
    try:
        for _ in range(3):
            b.proc.send_signal(signal.SIGSTOP)
            time.sleep(1.0)
            b.proc.send_signal(signal.SIGCONT)
            time.sleep(1.5)
    finally:
        p.stop()
    assert {a.broker for a in p.acked} == {leader.leader}  # nobody else took over
    assert partition_md(cluster, "pause").leader == leader.leader
    assert "registration lost" not in b.log_text()
