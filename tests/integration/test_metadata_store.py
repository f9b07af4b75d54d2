"""EtcdMetadataStore against a real etcd: topics, partition state CAS and fencing, producer ids,
snapshot and typed watch."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

import pytest

from brook.dev.etcd import EtcdProcess
from brook.metadata import (
    BrokerInfo,
    BrokerJoined,
    BrokerLeft,
    BrokerRegistry,
    ConflictError,
    ControllerChanged,
    ControllerElection,
    EntityConfigsChanged,
    EtcdClient,
    EtcdMetadataStore,
    FencedError,
    MetadataEvent,
    PartitionState,
    PartitionStateChanged,
    PartitionStateDeleted,
    ScramChanged,
    ScramCredential,
    TopicChanged,
    TopicCreated,
    TopicDeleted,
    TopicExistsError,
    TopicRecord,
    UnknownTopicError,
)
from tests.support.etcd import cluster_name, etcd_process, run


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdProcess]:
    yield from etcd_process(tmp_path_factory)


def test_cluster_id_is_created_once(etcd: EtcdProcess) -> None:
    async def scenario() -> None:
        name = cluster_name()
        async with EtcdClient(etcd.endpoint) as c1, EtcdClient(etcd.endpoint) as c2:
            ids = await asyncio.gather(
                EtcdMetadataStore(c1, name).cluster_id(), EtcdMetadataStore(c2, name).cluster_id("mine")
            )
            assert ids[0] == ids[1]
            assert await EtcdMetadataStore(c1, name).cluster_id("other") == ids[0]

    run(scenario())


def test_topic_lifecycle(etcd: EtcdProcess) -> None:
    async def scenario() -> None:
        async with EtcdClient(etcd.endpoint) as client:
            store = EtcdMetadataStore(client, cluster_name())
            t = TopicRecord.new("orders", [[1, 2], [2, 3], [3, 1]], {"retention.ms": "1000"})
            created = await store.create_topic(t)
            assert created.version > 0
            with pytest.raises(TopicExistsError):
                await store.create_topic(TopicRecord.new("orders", [[1]]))
            got = await store.get_topic("orders")
            assert got == created and got.topic_id == t.topic_id
            assert got.partitions == 3 and got.replication_factor == 2

            # CAS update: the second writer with the same version loses.
            bigger = TopicRecord(got.name, got.topic_id, (*got.assignment, (1, 3)), got.configs, got.version)
            updated = await store.update_topic(bigger)
            assert updated.partitions == 4 and updated.topic_id == t.topic_id
            with pytest.raises(ConflictError):
                await store.update_topic(TopicRecord(got.name, got.topic_id, got.assignment, {}, got.version))
            assert (await store.topics())["orders"].configs == {"retention.ms": "1000"}

            await store.delete_topic("orders")
            assert await store.get_topic("orders") is None
            with pytest.raises(UnknownTopicError):
                await store.delete_topic("orders")
            again = await store.create_topic(TopicRecord.new("orders", [[1]]))
            assert again.topic_id != t.topic_id

    run(scenario())


def test_partition_state_cas_and_fencing(etcd: EtcdProcess) -> None:
    async def scenario() -> None:
        name = cluster_name()
        async with EtcdClient(etcd.endpoint) as client:
            store = EtcdMetadataStore(client, name)
            a = ControllerElection(client, store.layout, 1, ttl=1)
            await a.start()
            epoch_a = await a.wait_elected(5)

            topic = TopicRecord.new("t", [[1, 2, 3]])
            await store.create_topic(
                topic, initial_states={0: PartitionState.initial([1, 2, 3])}, controller_epoch=epoch_a
            )
            s0 = (await store.get_partition_states("t"))[0]
            assert (s0.leader, s0.isr, s0.controller_epoch) == (1, (1, 2, 3), epoch_a)

            s1 = await store.set_partition_state(
                "t", 0, s0.evolve(isr=[1, 2]), expected_version=s0.version, controller_epoch=epoch_a
            )
            assert s1.isr == (1, 2) and s1.partition_epoch == 1 and s1.leader_epoch == 0
            assert s1.version > s0.version
            assert await store.get_partition_state("t", 0) == s1

            # CAS conflict: writing from the stale version s0 fails.
            with pytest.raises(ConflictError) as conflict:
                await store.set_partition_state(
                    "t", 0, s0.evolve(leader=2), expected_version=s0.version, controller_epoch=epoch_a
                )
            assert conflict.value.current_version == s1.version

            # A controller change fences the old controller's writes, even with the right version.
            await a.stop()
            b = ControllerElection(client, store.layout, 2, ttl=1)
            await b.start()
            epoch_b = await b.wait_elected(5)
            assert epoch_b == epoch_a + 1
            with pytest.raises(FencedError) as fenced:
                await store.set_partition_state(
                    "t", 0, s1.evolve(leader=3), expected_version=s1.version, controller_epoch=epoch_a
                )
            assert (fenced.value.current_epoch, fenced.value.current_controller) == (epoch_b, 2)
            s2 = await store.set_partition_state(
                "t", 0, s1.evolve(leader=2), expected_version=s1.version, controller_epoch=epoch_b
            )
            assert (s2.leader, s2.leader_epoch, s2.controller_epoch) == (2, 1, epoch_b)

            # No controller at all: fenced too.
            await b.stop()
            with pytest.raises(FencedError):
                await store.set_partition_state(
                    "t", 0, s2.evolve(isr=[2]), expected_version=s2.version, controller_epoch=epoch_b
                )
            with pytest.raises(FencedError):
                await store.create_topic(TopicRecord.new("u", [[1]]), controller_epoch=epoch_b)

    run(scenario())


def test_many_partitions_are_created_in_chunks(etcd: EtcdProcess) -> None:
    async def scenario() -> None:
        async with EtcdClient(etcd.endpoint) as client:
            store = EtcdMetadataStore(client, cluster_name())
            assignment = [[i % 3, (i + 1) % 3] for i in range(300)]
            topic = TopicRecord.new("wide", assignment)
            states = {p: PartitionState.initial(r) for p, r in enumerate(assignment)}
            await store.create_topic(topic, initial_states=states)
            got = await store.get_partition_states("wide")
            assert sorted(got) == list(range(300))
            assert got[299].leader == 299 % 3

            # A controller may write first states while the creator is between two chunks (it gives one
            # to every partition without): the creator writes the others and keeps the controller's.
            assignment = [[0, 1]] * 300
            topic = TopicRecord.new("raced", assignment)
            states = {p: PartitionState.initial(r) for p, r in enumerate(assignment)}
            ahead = PartitionState.initial([1, 0])
            await store.client.put(store.layout.partition("raced", 250), ahead.to_json())
            await store.create_topic(topic, initial_states=states)
            got = await store.get_partition_states("raced")
            assert sorted(got) == list(range(300))
            assert got[250].leader == 1 and got[249].leader == 0

    run(scenario())


def test_producer_id_blocks_never_overlap(etcd: EtcdProcess) -> None:
    async def scenario() -> None:
        name = cluster_name()
        clients = [EtcdClient(etcd.endpoint) for _ in range(4)]
        try:
            stores = [EtcdMetadataStore(c, name) for c in clients]
            blocks = await asyncio.gather(
                *(stores[i % 4].allocate_producer_id_block(10 + i % 7) for i in range(60))
            )
        finally:
            for c in clients:
                await c.close()
        ids = [pid for b in blocks for pid in range(b.first, b.last + 1)]
        assert len(ids) == len(set(ids))
        assert min(ids) == 0 and max(ids) == len(ids) - 1  # contiguous: nothing lost without failures

    run(scenario())


def test_snapshot_and_watch_deliver_typed_events(etcd: EtcdProcess) -> None:
    async def scenario() -> None:
        name = cluster_name()
        async with EtcdClient(etcd.endpoint) as client:
            store = EtcdMetadataStore(client, name)
            await store.cluster_id()
            await store.create_topic(TopicRecord.new("before", [[1]]))
            snap = await store.snapshot()
            assert set(snap.topics) == {"before"} and snap.cluster_id is not None
            watch = store.watch(snap)
            events: list[MetadataEvent] = []

            async def collect(n: int) -> None:
                async for ev in watch:
                    events.append(ev)
                    if len(events) >= n:
                        return

            registry = BrokerRegistry(client, store.layout, BrokerInfo(7, "h", 9092, "r1"), ttl=1)
            await registry.register()
            election = ControllerElection(client, store.layout, 7, ttl=1)
            await election.start()
            epoch = await election.wait_elected(5)
            t = await store.create_topic(
                TopicRecord.new("x", [[7]]),
                initial_states={0: PartitionState.initial([7])},
                controller_epoch=epoch,
            )
            await store.update_topic(TopicRecord(t.name, t.topic_id, t.assignment, {"a": "b"}, t.version))
            await store.delete_topic("x")
            await election.stop()
            await registry.deregister()
            await asyncio.wait_for(collect(9), 10)
            await watch.aclose()

            kinds = [type(e) for e in events]
            assert kinds == [
                BrokerJoined,
                ControllerChanged,
                TopicCreated,
                PartitionStateChanged,
                TopicChanged,
                TopicDeleted,
                PartitionStateDeleted,
                ControllerChanged,
                BrokerLeft,
            ], kinds
            joined = events[0]
            assert isinstance(joined, BrokerJoined) and joined.broker.rack == "r1" and joined.broker.epoch > 0
            ctrl = events[1]
            assert isinstance(ctrl, ControllerChanged) and ctrl.controller is not None
            assert ctrl.controller.epoch == epoch
            deleted = events[5]
            assert isinstance(deleted, TopicDeleted) and deleted.topic_id == t.topic_id
            assert all(a.revision <= b.revision for a, b in itertools.pairwise(events))

    run(scenario())


def test_reassignments(etcd: EtcdProcess) -> None:
    async def scenario() -> None:
        async with EtcdClient(etcd.endpoint) as client:
            store = EtcdMetadataStore(client, cluster_name())
            with pytest.raises(UnknownTopicError):
                await store.put_reassignment("t", 0, [1, 2])
            await store.create_topic(TopicRecord.new("t", [[1, 2], [2, 3]]))
            await store.put_reassignment("t", 1, [3, 4])
            got = await store.reassignments()
            assert list(got) == [("t", 1)] and got[("t", 1)].target == (3, 4)
            with pytest.raises(FencedError):
                await store.delete_reassignment("t", 1, controller_epoch=9)
            assert await store.delete_reassignment("t", 1)
            assert not await store.delete_reassignment("t", 1)
            await store.put_reassignment("t", 0, [2, 1])
            await store.delete_topic("t")  # takes its reassignments along
            assert await store.reassignments() == {}

    run(scenario())


def test_entity_configs_and_scram_credentials(etcd: EtcdProcess) -> None:
    async def scenario() -> None:
        async with EtcdClient(etcd.endpoint) as client:
            store = EtcdMetadataStore(client, cluster_name())
            await store.put_entity_configs("broker", "", {"compression.type": "zstd"})
            snap = await store.snapshot()
            assert snap.entity_configs == {("broker", ""): {"compression.type": "zstd"}}
            watch = store.watch(snap)
            events: list[MetadataEvent] = []

            async def collect(n: int) -> None:
                async for ev in watch:
                    events.append(ev)
                    if len(events) >= n:
                        return

            odd = "a/group with <default> %2F"  # group ids and users are any string
            cred = ScramCredential(b"s\x00", b"k" * 32, b"v" * 32, 4096)
            await store.put_entity_configs("broker", "3", {"log.retention.ms": "1"})
            await store.put_entity_configs("group", odd, {"consumer.session.timeout.ms": "50000"})
            await store.put_scram(odd, {"SCRAM-SHA-256": cred})
            await store.put_entity_configs("broker", "", {})
            await store.put_scram(odd, {})
            await asyncio.wait_for(collect(5), 10)
            await watch.aclose()
            assert events[0] == EntityConfigsChanged(
                "broker", "3", {"log.retention.ms": "1"}, events[0].revision
            )
            assert isinstance(events[1], EntityConfigsChanged) and events[1].name == odd
            assert isinstance(events[2], ScramChanged) and events[2].credentials == {"SCRAM-SHA-256": cred}
            assert isinstance(events[3], EntityConfigsChanged) and (events[3].name, events[3].configs) == (
                "",
                {},
            )
            assert isinstance(events[4], ScramChanged) and (events[4].user, events[4].credentials) == (
                odd,
                {},
            )
            snap = await store.snapshot()
            assert snap.entity_configs == {
                ("broker", "3"): {"log.retention.ms": "1"},
                ("group", odd): {"consumer.session.timeout.ms": "50000"},
            }
            assert snap.scram == {}

    run(scenario())
