"""Watches across etcd restarts and compactions: no change missed, none repeated."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator

import pytest

from brook.dev.etcd import EtcdProcess
from brook.metadata import (
    BrokerInfo,
    BrokerRegistry,
    ControllerElection,
    EtcdClient,
    EtcdMetadataStore,
    EtcdUnavailableError,
    MetadataEvent,
    PartitionState,
    PartitionStateChanged,
    TopicCreated,
    TopicDeleted,
    TopicExistsError,
    TopicRecord,
)
from brook.metadata.kv import EventType, KeyValue, WatchEvent
from brook.metadata.watch import PrefixWatch
from tests.support.etcd import cluster_name, etcd_process, eventually, run


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdProcess]:
    yield from etcd_process(tmp_path_factory)


async def _create_with_retry(store: EtcdMetadataStore, name: str) -> int:
    """Create a topic, retrying while etcd is down (a write that went through before the connection
    broke shows up as 'exists'). Returns how many attempts failed."""
    failures = 0
    while True:
        try:
            await store.create_topic(TopicRecord.new(name, [[1]]))
            return failures
        except TopicExistsError:
            return failures
        except EtcdUnavailableError:
            failures += 1
            await asyncio.sleep(0.02)


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_watch_resumes_after_etcd_restart_without_missing_events(etcd: EtcdProcess, how: str) -> None:
    async def scenario() -> None:
        async with EtcdClient(etcd.endpoint, retry_for=20) as client:
            store = EtcdMetadataStore(client, cluster_name())
            registry = BrokerRegistry(client, store.layout, BrokerInfo(1, "h", 1), ttl=2)
            await registry.register()
            election = ControllerElection(client, store.layout, 1, ttl=2)
            await election.start()
            await election.wait_elected(5)
            snap = await store.snapshot()
            watch = store.watch(snap)
            created: list[str] = []

            async def consume() -> None:
                async for ev in watch:
                    if isinstance(ev, TopicCreated):
                        created.append(ev.topic.name)

            consumer = asyncio.create_task(consume())
            names = [f"t{i:03d}" for i in range(10)]
            for name in names[:10]:
                await store.create_topic(TopicRecord.new(name, [[1]]))
            await eventually(lambda: len(created) == 10, 5)

            def bounce() -> None:
                if how == "kill":
                    etcd.kill()
                    etcd.start()
                else:
                    etcd.restart(downtime=0.5)

            restart = asyncio.create_task(asyncio.to_thread(bounce))
            # A writer keeps going through the restart: writes land just before the stop, fail while
            # etcd is down, and land right after the start while the watch stream is re-created.
            names = names[:10]
            failures = 0
            while not restart.done() or len(names) < 10:
                names.append(f"t{len(names):03d}")
                failures += await _create_with_retry(store, names[-1])
            await restart
            for _ in range(10):
                names.append(f"t{len(names):03d}")
                await store.create_topic(TopicRecord.new(names[-1], [[1]]))
            assert failures > 0  # some writes did hit the outage

            await eventually(lambda: len(created) >= len(names), 10)
            await asyncio.sleep(0.3)  # nothing repeated afterwards either
            assert created == names, created
            assert watch.reconnects >= 1

            # Leases survive a short outage (etcd extends them on restart), or are re-registered.
            await eventually(lambda: registry.registered.is_set(), 5)
            assert set(await registry.live_brokers()) == {1}
            await eventually(lambda: election.is_controller, 5)
            consumer.cancel()
            await watch.aclose()
            await election.stop()
            await registry.deregister()

    run(scenario(), timeout=45)


def test_watch_from_a_compacted_revision_resyncs_by_relisting(etcd: EtcdProcess) -> None:
    async def scenario() -> None:
        async with EtcdClient(etcd.endpoint) as client:
            store = EtcdMetadataStore(client, cluster_name())
            keep = await store.create_topic(
                TopicRecord.new("keep", [[1]]), initial_states={0: PartitionState.initial([1])}
            )
            gone = await store.create_topic(TopicRecord.new("gone", [[1]]))
            renewed = await store.create_topic(TopicRecord.new("renewed", [[1]]))
            old = await store.snapshot()

            await store.delete_topic("gone")
            await store.delete_topic("renewed")
            renewed2 = await store.create_topic(TopicRecord.new("renewed", [[1]]))
            await store.create_topic(TopicRecord.new("new", [[1]]))
            s0 = (await store.get_partition_states("keep"))[0]
            # A controller-less write, just to change the state.
            await client.put(store.layout.partition("keep", 0), s0.evolve(isr=[]).to_json())
            await client.compact(await client.revision())

            watch = store.watch(old)
            events: list[MetadataEvent] = []

            async def collect() -> None:
                async for ev in watch:
                    events.append(ev)

            task = asyncio.create_task(collect())
            await eventually(lambda: len(events) >= 5, 5)
            await asyncio.sleep(0.2)
            task.cancel()
            await watch.aclose()

            assert watch.resyncs == 1
            assert all(e.resync for e in events)
            summary = sorted(_label(e) for e in events)
            assert summary == sorted(
                [
                    ("TopicDeleted", "gone"),
                    ("TopicDeleted", "renewed"),
                    ("TopicCreated", "renewed"),
                    ("TopicCreated", "new"),
                    ("PartitionStateChanged", "keep"),
                ]
            ), summary
            by_type = {(type(e).__name__, getattr(e, "name", None)): e for e in events}
            deleted = by_type[("TopicDeleted", "gone")]
            assert isinstance(deleted, TopicDeleted) and deleted.topic_id == gone.topic_id
            created = [e for e in events if isinstance(e, TopicCreated) and e.topic.name == "renewed"]
            assert created[0].topic.topic_id == renewed2.topic_id != renewed.topic_id
            changed = [e for e in events if isinstance(e, PartitionStateChanged)]
            assert changed[0].state.isr == () and keep.name == "keep"

            # And it goes on live after the re-list.
            watch2 = store.watch(await store.snapshot())
            await store.create_topic(TopicRecord.new("later", [[1]]))
            ev = await asyncio.wait_for(watch2.__anext__(), 5)
            assert isinstance(ev, TopicCreated) and ev.topic.name == "later" and not ev.resync
            await watch2.aclose()

    run(scenario())


def test_watch_recovers_when_the_shared_stream_ends_silently(etcd: EtcdProcess) -> None:
    async def scenario() -> None:
        async with EtcdClient(etcd.endpoint) as client:
            store = EtcdMetadataStore(client, cluster_name())
            watch = store.watch(await store.snapshot())
            await store.create_topic(TopicRecord.new("a", [[1]]))
            first = await asyncio.wait_for(watch.__anext__(), 5)
            assert isinstance(first, TopicCreated)
            # aetcd's stream reader ends without telling the watches (as on a clean stream close).
            client._aetcd()._watcher._request_handler.cancel()
            await asyncio.sleep(0.1)
            await store.create_topic(TopicRecord.new("b", [[1]]))
            second = await asyncio.wait_for(watch.__anext__(), 5)
            assert isinstance(second, TopicCreated) and second.topic.name == "b"
            assert watch.reconnects == 1
            await watch.aclose()

    run(scenario())


def test_watch_ends_when_the_client_is_closed(etcd: EtcdProcess) -> None:
    async def scenario() -> None:
        client = EtcdClient(etcd.endpoint)
        store = EtcdMetadataStore(client, cluster_name())
        watch = store.watch(await store.snapshot())
        pending = asyncio.create_task(watch.__anext__())
        await asyncio.sleep(0.2)
        await client.close()
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(pending, 5)

    run(scenario())


def _label(e: MetadataEvent) -> tuple[str, str]:
    if isinstance(e, TopicCreated):
        return "TopicCreated", e.topic.name
    if isinstance(e, TopicDeleted):
        return "TopicDeleted", e.name
    if isinstance(e, PartitionStateChanged):
        return "PartitionStateChanged", e.topic
    return type(e).__name__, ""


# ---- resumption in the middle of a multi-key revision (a fake etcd, to cut the stream exactly there)


class _FakeRaw:
    def __init__(self, events: list[WatchEvent], fail_after: int | None) -> None:
        self.events = events
        self.fail_after = fail_after
        self.sent = 0

    async def next(self) -> WatchEvent:
        if self.fail_after is not None and self.sent >= self.fail_after:
            raise EtcdUnavailableError("stream broke")
        if self.sent >= len(self.events):
            await asyncio.Event().wait()
        ev = self.events[self.sent]
        self.sent += 1
        return ev

    async def cancel(self) -> None:
        pass


class _FakeClient:
    """History: revision 5 changes a, b, c in one txn; revision 6 changes d."""

    closed = False

    def __init__(self) -> None:
        self.history = [
            WatchEvent(EventType.PUT, b"a", b"1", 5, 5, 1),
            WatchEvent(EventType.PUT, b"b", b"1", 5, 5, 1),
            WatchEvent(EventType.PUT, b"c", b"1", 5, 5, 1),
            WatchEvent(EventType.PUT, b"d", b"1", 6, 6, 1),
        ]
        self.opened_at: list[int] = []

    async def open_watch(self, key: bytes, range_end: bytes | None, start_revision: int) -> _FakeRaw:
        self.opened_at.append(start_revision)
        events = [e for e in self.history if e.revision >= start_revision]
        return _FakeRaw(events, fail_after=2 if len(self.opened_at) == 1 else None)


def test_resuming_mid_revision_skips_what_was_delivered_and_misses_nothing() -> None:
    async def scenario() -> None:
        fake = _FakeClient()
        watch = PrefixWatch(fake, b"", None, 5, [KeyValue(b"z", b"0", 1, 1, 1, 0)])  # type: ignore[arg-type]
        got = [await watch.__anext__() for _ in range(4)]
        assert [(e.key, e.revision) for e in got] == [(b"a", 5), (b"b", 5), (b"c", 5), (b"d", 6)]
        assert fake.opened_at == [5, 5]  # resumed at the cut revision, not after it
        assert watch.reconnects == 1 and watch.revision == 6

    run(scenario(), timeout=5)


def test_a_watch_etcd_does_not_answer_is_unavailable(etcd: EtcdProcess) -> None:
    """etcd that takes the connection but answers nothing (paused, or cut off mid-stream): opening a
    watch times out in aetcd, which is etcd being unavailable (retried quietly, the next endpoint
    tried), not a failure without a reason ("etcd watch: cannot open: etcd watch: ")."""

    async def scenario() -> None:
        async with EtcdClient([etcd.endpoint], timeout=1.0) as client:
            await client.revision()  # connected
            assert etcd.proc is not None
            os.kill(etcd.proc.pid, signal.SIGSTOP)
            try:
                with pytest.raises(EtcdUnavailableError):
                    await client.open_watch(b"k", None, 0)
            finally:
                os.kill(etcd.proc.pid, signal.SIGCONT)

    run(scenario())
