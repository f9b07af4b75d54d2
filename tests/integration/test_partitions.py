"""Network partitions: etcd and each broker on a host of its own (tests/support/netns.py), the test's
clients in the root namespace, faults as packet filters between the hosts."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ack_probe import AckProbe
from tests.support.checker import Workload, read_all
from tests.support.cluster import Cluster, eventually
from tests.support.netns import NetLab

from .test_cluster import create, partition_md

pytestmark = pytest.mark.slow


@pytest.fixture
def lab() -> Iterator[NetLab]:
    net = NetLab()
    try:
        yield net
    finally:
        net.close()


@pytest.fixture
def cluster(tmp_path: Path, lab: NetLab) -> Iterator[Cluster]:
    c = Cluster(tmp_path, lab=lab).start()
    try:
        yield c
    finally:
        lab.heal()
        c.stop()


def brokers(c: Cluster) -> dict[int, str]:
    return {int(b.args[1]): b.bootstrap for b in c.brokers}


def test_a_leader_cut_from_etcd_stops_acknowledging_before_another_starts(
    cluster: Cluster, lab: NetLab
) -> None:
    """The leader still reaches its clients and its followers, not etcd: its lease expires there and
    the controller elects another leader. It must have stopped acknowledging (acks=1 and acks=all)
    before the new leader's first acknowledgement, and acks=all records are all kept."""
    create(cluster, "split", 1, 3, {"min.insync.replicas": "2"})
    old = partition_md(cluster, "split").leader
    probes = [AckProbe(brokers(cluster), "split", acks=a).start() for a in (1, -1)]
    try:
        eventually(lambda: all(any(a.broker == old for a in p.acked) for p in probes), 20, "acks")
        cut = time.monotonic()
        lab.cut(cluster.hosts[old], cluster.hosts["etcd"])

        def taken_over() -> list[int]:  # a list: broker 0 is a falsy answer
            return [a.broker for p in probes for a in p.acked if a.broker != old][:1]

        [new] = eventually(taken_over, 20, "another broker to acknowledge")
        time.sleep(1.0)
    finally:
        acked = [p.stop() for p in probes]
    lab.heal()
    report = []
    for p, acks in zip(probes, acked, strict=True):
        last_old = max(a.at for a in acks if a.broker == old) - cut
        first_new = min(a.at for a in acks if a.broker == new) - cut
        report.append(
            f"acks={p.acks}: old leader's last ack {last_old:+.2f}s, new leader's first {first_new:+.2f}s"
        )
    print("\n".join(report))
    for p in probes:
        assert p.window(old, new) < 0, (
            f"acks={p.acks}: both acknowledged for {p.window(old, new):.2f}s; {report}"
        )
    assert first_new <= 3.5, f"failover took {first_new:.2f}s"
    # Healed, the old leader follows again; every acks=all record is kept (acks=1 ones the old leader
    # took after the new leader's last fetch are not, as in Kafka).
    kept = {v for *_, v in read_all(cluster.bootstrap, ["split"])}
    lost = [(a.broker, a.offset, round(a.at - cut, 2)) for a in acked[1] if a.value not in kept]
    assert lost == [], f"old {old}, new {new}; lost (broker, offset, at): {lost}"
    print(f"acks=1 records acknowledged and lost: {sum(a.value not in kept for a in acked[0])}")


def test_clients_lose_nothing_through_partitions_one_way_cuts_and_loss(cluster: Cluster, lab: NetLab) -> None:
    """An idempotent producer, a transactional one and a consumer group run through: a follower cut
    from its leader (both ways), a leader that cannot send to etcd (one way), a broker dropping a
    fifth of its packets, and a leader cut from etcd and its followers but not from its clients;
    after each, the cut heals."""
    for name in ("wl", "wl-txn"):
        create(cluster, name, 3, 3, {"min.insync.replicas": "2"})
    work = Workload(cluster.bootstrap, "wl", "wl-txn", "wl-group").start()
    h = cluster.hosts
    try:
        eventually(lambda: len(work.acked) > 200 and work.txns["committed"] > 2, 30, "a running workload")
        leader = partition_md(cluster, "wl").leader
        follower = next(r for r in partition_md(cluster, "wl").replicas if r != leader)
        for fault in (
            lambda: lab.cut(h[follower], h[leader]),
            lambda: lab.cut(h[leader], h["etcd"], one_way=True),
            lambda: lab.loss(h[follower], 20),
            lambda: lab.isolate(h[partition_md(cluster, "wl").leader]),
        ):
            before = len(work.acked)
            fault()
            time.sleep(4)
            lab.heal()
            eventually(lambda b=before: len(work.acked) > b + 100, 30, "acknowledgements after healing")
    finally:
        work.stop()
    verdict = work.check()
    print(verdict, dict(work.errors))
    assert verdict.ok, str(verdict)
