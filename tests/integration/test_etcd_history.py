"""The controller keeps etcd's history bounded: it compacts what is older than one round
(brook.broker.controller.HISTORY_S, 5 minutes; a fraction of a second here)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from brook.broker.controller import Controller
from brook.dev.etcd import EtcdProcess
from brook.metadata import CompactedError, EtcdClient, EtcdMetadataStore
from brook.settings.broker import BrokerSettings
from tests.support.etcd import cluster_name, etcd_process, run


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdProcess]:
    yield from etcd_process(tmp_path_factory)


@dataclass
class View:
    """The controller's view, reduced to what compaction reads: the store and the view's revision."""

    store: EtcdMetadataStore
    revision: int = 0
    settings: BrokerSettings = field(default_factory=BrokerSettings)
    live: dict = field(default_factory=dict)  # type: ignore[type-arg]
    topics: dict = field(default_factory=dict)  # type: ignore[type-arg]
    states: dict = field(default_factory=dict)  # type: ignore[type-arg]
    reassignments: dict = field(default_factory=dict)  # type: ignore[type-arg]
    topic_defaults: dict = field(default_factory=dict)  # type: ignore[type-arg]


def test_the_controller_compacts_the_history_older_than_one_round(etcd: EtcdProcess) -> None:
    async def scenario() -> None:
        async with EtcdClient([etcd.endpoint]) as client:
            store = EtcdMetadataStore(client, cluster_name("hist"))
            key = store.layout.prefix + b"views/0"
            first = await client.put(key, b"1")
            view = View(store, revision=first)
            controller = Controller(view, epoch=1)  # type: ignore[arg-type]
            task = asyncio.create_task(controller._compact_history(every_s=0.2))
            try:
                view.revision = await client.put(key, b"2")  # the view moves on ...
                await asyncio.sleep(0.5)  # ... and two rounds pass: history before `first` goes
                for _ in range(50):
                    old = await client.open_watch(key, None, first)
                    try:
                        async with asyncio.timeout(5):
                            assert (await old.next()).value == b"1"  # still there
                    except CompactedError:
                        break
                    finally:
                        await old.cancel()
                    await asyncio.sleep(0.1)
                else:
                    raise AssertionError("the history before the view's revision a round ago is still there")
                kept = await client.open_watch(key, None, view.revision)  # a round's history stays
                async with asyncio.timeout(5):
                    assert (await kept.next()).value == b"2"
                await kept.cancel()
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    run(scenario())
