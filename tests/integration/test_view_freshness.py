"""A broker whose metadata watch stops delivering without an error stops leading within seconds and
reads the cluster again (brook.broker.view_freshness).

Two brokers in this process share a real etcd; broker 0 leads a partition. Its watch streams are then
frozen (they deliver nothing more and raise nothing, as a stalled etcd stream does) while its lease
lives on, and the partition's state is moved to broker 1 in etcd as the controller would. Broker 0
must stop acting as the leader within a few seconds, then take the new state from a fresh read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brook.broker.broker import Broker
from brook.broker.cluster import ClusterNode
from brook.dev.etcd import EtcdProcess
from brook.metadata.client import RawWatch
from brook.settings.broker import BrokerSettings
from tests.support.etcd import cluster_name, etcd_process, eventually, run
from tests.support.ports import free_port


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdProcess]:
    yield from etcd_process(tmp_path_factory)


class FreezableWatches:
    """Every RawWatch made from now on; `freeze(client)` makes those of one aetcd client stall."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made: list[RawWatch] = []
        self.frozen: set[int] = set()
        init, nxt = RawWatch.__init__, RawWatch.next
        watches = self

        def __init__(self: RawWatch, client: Any, watch: Any) -> None:
            init(self, client, watch)
            watches.made.append(self)

        async def next(self: RawWatch) -> Any:
            ev = None if id(self) in watches.frozen else await nxt(self)
            if id(self) in watches.frozen:  # (also when it froze while this call waited)
                await asyncio.Event().wait()  # nothing more, no error
            return ev

        monkeypatch.setattr(RawWatch, "__init__", __init__)
        monkeypatch.setattr(RawWatch, "next", next)

    def freeze(self, client: Any) -> int:
        streams = [w for w in self.made if w._client is client]
        self.frozen.update(id(w) for w in streams)
        return len(streams)


def test_a_broker_whose_watch_stalls_stops_leading_then_reads_the_cluster_again(
    tmp_path: Path, etcd: EtcdProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    watches = FreezableWatches(monkeypatch)
    name = cluster_name("view")

    def broker(node_id: int) -> Broker:
        return Broker(
            BrokerSettings(
                node_id=node_id,
                port=free_port(),
                data_dir=tmp_path / f"b{node_id}",
                etcd_endpoints=[etcd.endpoint],
                cluster_name=name,
            )
        )

    async def scenario() -> None:
        a, b = broker(0), broker(1)
        await a.start()
        await b.start()
        node_a, node_b = a.metadata, b.metadata
        assert isinstance(node_a, ClusterNode) and isinstance(node_b, ClusterNode)
        try:
            await eventually(lambda: len(node_a.live) == 2, 10)
            await node_a.create_topic("t", 1, 2, {}, False, manual=[[0, 1]])
            led = lambda: (p := a.replicas.local_partition("t", 0)) is not None and p.leads_now  # noqa: E731
            await eventually(led, 10)
            await eventually(lambda: ("t", 0) in node_b.states, 10)
            assert watches.freeze(node_a.client._aetcd()) >= 1
            # An admin request waiting on broker 0's view (a CreateTopics waits for its partitions).
            moved_seen = asyncio.create_task(
                node_a.wait_until(lambda: node_a.states[("t", 0)].leader == 1, timeout=30)
            )

            # The controller moves the leadership to broker 1 (its lease, broker 0's, both live on).
            st = node_b.states[("t", 0)]
            assert st.leader == 0
            epoch = node_b.controller.epoch if node_b.controller is not None else 0
            moved = st.evolve(leader=1, isr=[1])
            await node_b.store.set_partition_state(
                "t", 0, moved, expected_version=st.version, controller_epoch=epoch
            )
            frozen_at = time.monotonic()
            p = a.replicas.local_partition("t", 0)
            assert p is not None
            await eventually(lambda: not p.leads_now, 6)
            fenced_after = time.monotonic() - frozen_at
            assert node_a.registry.registered.is_set()  # its lease never lapsed
            assert p.is_leader  # still believes it leads: the fence alone stops it

            # It reads the cluster again: broker 1 leads at the new epoch, broker 0 follows.
            await eventually(lambda: node_a.states[("t", 0)].leader == 1, 15)
            await asyncio.wait_for(moved_seen, 2)  # woken by the fresh read, not left to time out
            now = a.replicas.local_partition("t", 0)
            assert now is not None
            await eventually(lambda: not now.is_leader and now.role.leader == 1, 5)
            assert now.role.leader_epoch == moved.leader_epoch
            print(f"fenced {fenced_after:.1f} s after the watch froze")
        finally:
            await b.stop()
            await a.stop()

    run(scenario(), timeout=60)
