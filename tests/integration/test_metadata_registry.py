"""Broker registration under a lease against a real etcd."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from brook.dev.etcd import EtcdProcess
from brook.metadata import (
    BrokerIdInUseError,
    BrokerInfo,
    BrokerJoined,
    BrokerLeft,
    BrokerRegistry,
    EtcdClient,
    EtcdUnavailableError,
    KeyLayout,
    MetadataError,
)
from brook.metadata.kv import Put
from tests.support.etcd import cluster_name, etcd_process, eventually, run

# Leases long enough that a loaded machine does not miss a keep-alive; generous deadlines.
TTL = 3
DEADLINE = 20


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdProcess]:
    yield from etcd_process(tmp_path_factory)


def test_registration_lives_with_the_lease(etcd: EtcdProcess) -> None:
    async def scenario() -> None:
        layout = KeyLayout(cluster_name())
        async with EtcdClient(etcd.endpoint) as client:
            a = BrokerRegistry(client, layout, BrokerInfo(1, "10.0.0.1", 9092, "a"), ttl=TTL)
            b = BrokerRegistry(client, layout, BrokerInfo(2, "10.0.0.2", 9092, None), ttl=TTL)
            await a.register()
            await b.register()
            live = await a.live_brokers()
            assert set(live) == {1, 2}
            assert live[1] == a.broker and live[1].epoch > 0 and live[2].rack is None

            lease = b.lease_id
            assert lease is not None
            # Past the lease's first expiry, etcd still has it: refreshed by the keep-alive loop.
            first_expiry = asyncio.get_running_loop().time() + TTL

            async def outlived() -> bool:
                past = asyncio.get_running_loop().time() > first_expiry
                return past and await client.lease_ttl(lease) > 0

            await eventually(outlived, DEADLINE, interval=0.2)
            assert set(await a.live_brokers()) == {1, 2}

            await b.abandon()  # crash: no revoke, the lease expires
            await eventually(lambda: _has_only(a, {1}), TTL + DEADLINE)

            await a.deregister()  # clean: gone at once
            assert await a.live_brokers() == {}

    run(scenario(), timeout=90)


async def _has_only(r: BrokerRegistry, ids: set[int]) -> bool:
    return set(await r.live_brokers()) == ids


def test_duplicate_broker_id_is_refused(etcd: EtcdProcess) -> None:
    async def scenario() -> None:
        layout = KeyLayout(cluster_name())
        async with EtcdClient(etcd.endpoint) as c1, EtcdClient(etcd.endpoint) as c2:
            first = BrokerRegistry(c1, layout, BrokerInfo(3, "host-a", 9092), ttl=TTL)
            await first.register()
            second = BrokerRegistry(c2, layout, BrokerInfo(3, "host-b", 9093), ttl=TTL)
            with pytest.raises(BrokerIdInUseError, match="host-a:9092"):
                await second.register()
            assert (await first.live_brokers())[3].host == "host-a"

            # A restarted broker whose previous incarnation crashed a moment ago waits for it.
            await first.abandon()
            again = BrokerRegistry(
                c2, layout, BrokerInfo(3, "host-a", 9092), ttl=TTL, wait_for_stale=TTL + DEADLINE
            )
            info = await again.register()
            assert info.epoch > first.broker.epoch
            await again.deregister()

    run(scenario(), timeout=90)


def test_lost_lease_re_registers_and_membership_watch_sees_it(etcd: EtcdProcess) -> None:
    async def scenario() -> None:
        layout = KeyLayout(cluster_name())
        async with EtcdClient(etcd.endpoint) as client:
            reg = BrokerRegistry(client, layout, BrokerInfo(4, "h", 1), ttl=TTL)
            await reg.register()
            watch = await reg.watch_membership()
            assert set(watch.brokers) == {4}
            epoch = reg.broker.epoch
            lease = reg.lease_id
            assert lease is not None
            await client.revoke_lease(lease)  # etcd drops it behind the broker's back
            events = [await asyncio.wait_for(watch.__anext__(), DEADLINE) for _ in range(2)]
            assert isinstance(events[0], BrokerLeft) and events[0].broker_id == 4
            assert isinstance(events[1], BrokerJoined) and events[1].broker.epoch > epoch
            await eventually(lambda: reg.registrations == 2 and reg.registered.is_set(), DEADLINE)
            assert watch.brokers[4].epoch == reg.broker.epoch == events[1].broker.epoch
            await watch.aclose()
            await reg.deregister()

    run(scenario(), timeout=90)


def test_a_lease_gone_before_the_registration_is_replaced(etcd: EtcdProcess) -> None:
    """The lease lapses between its grant and the registration's write (a stalled start-up, or etcd
    killed and restarted: in the soak a broker exited on etcd's "requested lease not found"). The
    registration takes a new lease and goes on."""

    async def scenario() -> None:
        layout = KeyLayout(cluster_name())
        async with EtcdClient(etcd.endpoint) as client:
            real_txn = client.txn
            revoked: list[int] = []

            async def txn(compares: Any, success: Any, failure: Any = ()) -> Any:
                leases = [op.lease for op in success if isinstance(op, Put) and op.lease]
                if leases and not revoked:
                    revoked.append(leases[0])
                    await client.revoke_lease(leases[0])  # gone in etcd, as if it had expired
                return await real_txn(compares, success, failure)

            client.txn = txn  # type: ignore[method-assign]
            r = BrokerRegistry(client, layout, BrokerInfo(7, "10.0.0.7", 9092, None), ttl=TTL)
            await r.register()
            assert revoked and r.lease_id is not None and r.lease_id != revoked[0]
            assert set(await r.live_brokers()) == {7}
            await r.deregister()

    run(scenario(), timeout=60)


def test_a_registration_gone_while_its_lease_seems_kept_is_made_again(etcd: EtcdProcess) -> None:
    """The broker's key disappears while its lease's keep-alive reports nothing (here deleted behind
    its back; in a soak, a keep-alive task that ended unnoticed): the registry's own check finds it
    and registers again, instead of leaving the broker out of the cluster for good."""

    async def scenario() -> None:
        layout = KeyLayout(cluster_name())
        async with EtcdClient(etcd.endpoint) as client:
            reg = BrokerRegistry(client, layout, BrokerInfo(6, "h", 1), ttl=TTL, check_s=0.5)
            await reg.register()
            epoch = reg.broker.epoch
            await client.delete(layout.broker(6))
            await eventually(lambda: reg.registrations == 2, DEADLINE)
            kv = await client.get(layout.broker(6))
            assert kv is not None and kv.lease == reg.lease_id and reg.broker.epoch > epoch
            await reg.deregister()

    run(scenario(), timeout=60)


def test_its_own_old_key_kept_alive_is_revoked_not_waited_for(etcd: EtcdProcess) -> None:
    """A restarted etcd extends the leases it had by its election timeout, so the key under the lease a
    broker lost while etcd was down can outlive the broker's wait for stale registrations (soak 1136:
    two brokers found their own old keys and gave up their ids for good, leaving the cluster without
    leaders). Here the old lease is kept alive and its first revoke fails, as while etcd is down: the
    registry revokes the key under its own old lease and registers again."""

    async def scenario() -> None:
        layout = KeyLayout(cluster_name())
        async with EtcdClient(etcd.endpoint) as client:
            reg = BrokerRegistry(client, layout, BrokerInfo(8, "h", 1), ttl=TTL)
            await reg.register()
            old = reg.lease_id
            assert old is not None and reg._lease is not None
            real_revoke = client.revoke_lease
            refused: list[int] = []

            async def revoke_lease(lease_id: int) -> bool:
                if lease_id == old and not refused:
                    refused.append(lease_id)
                    raise EtcdUnavailableError("etcd is restarting")
                return await real_revoke(lease_id)

            client.revoke_lease = revoke_lease  # type: ignore[method-assign]

            async def extend() -> None:  # etcd keeping the old lease alive past the wait
                with contextlib.suppress(MetadataError):
                    while True:
                        await client.refresh_lease(old)
                        await asyncio.sleep(0.5)

            keeper = asyncio.create_task(extend())
            reg._lease.give_up("etcd unreachable (test)")
            await eventually(lambda: reg.registrations == 2 or reg.failed.is_set(), DEADLINE)
            keeper.cancel()
            assert not reg.failed.is_set(), reg.failure
            assert refused == [old]
            kv = await client.get(layout.broker(8))
            assert kv is not None and kv.lease == reg.lease_id and kv.lease != old
            await reg.deregister()

    run(scenario(), timeout=60)
