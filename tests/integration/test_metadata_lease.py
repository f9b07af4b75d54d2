"""A kept lease against a real etcd when its refresh stream stops answering."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from brook.dev.etcd import EtcdProcess
from brook.metadata import EtcdClient, EtcdUnavailableError, KeptLease
from tests.support.etcd import etcd_process, run

TTL = 2


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdProcess]:
    yield from etcd_process(tmp_path_factory)


def test_a_refresh_stream_that_never_answers_does_not_lose_the_lease(etcd: EtcdProcess) -> None:
    """A soak once saw one broker's refreshes fail for 40 minutes after an etcd restart while its
    unary calls worked. That stuck stream cannot be made on demand, so the keep-alive channel's
    refresh is made to hang here: the next try must go over a new channel, within the TTL."""

    async def scenario() -> None:
        async with EtcdClient(etcd.endpoint) as client:
            lease = await KeptLease.grant(client, TTL)
            stuck = client._keepalive_aetcd()
            hung: list[int] = []

            async def never_answers(lease_id: int) -> Any:
                hung.append(lease_id)
                await asyncio.Event().wait()

            stuck.refresh_lease = never_answers
            # Three TTLs: without a new channel the lease is lost after one.
            await asyncio.sleep(3 * TTL)
            assert hung, "no refresh reached the stuck channel"
            assert lease.alive, lease.lost_reason
            assert await client.lease_ttl(lease.id) > 0
            assert client._keepalive_aetcd() is not stuck
            await lease.revoke()

    run(scenario())


def test_a_refresh_cut_by_a_channel_reset_is_a_failed_try(etcd: EtcdProcess) -> None:
    """Two leases refresh over one keep-alive channel. When one's try gets no answer it replaces the
    channel, and gRPC cancels the other's call in flight on the old one: that call must fail as etcd
    being unavailable, not end its task as cancelled (a soak's brokers lost their registration
    lease's keep-alive task that way and stayed out of the cluster). etcd is paused so the call is
    surely in flight when the channel closes."""

    async def scenario() -> None:
        async with EtcdClient(etcd.endpoint, timeout=5.0) as client:
            lease = await client.grant_lease(5)
            await client.refresh_lease(lease.id)  # the keep-alive channel is open
            assert etcd.proc is not None
            os.kill(etcd.proc.pid, signal.SIGSTOP)
            try:
                call = asyncio.create_task(client.refresh_lease(lease.id))
                await asyncio.sleep(0.3)
                assert not call.done()
                await client.reset_keepalive()  # what another lease's timed-out try does
                with pytest.raises(EtcdUnavailableError):
                    await asyncio.wait_for(call, 5)
            finally:
                os.kill(etcd.proc.pid, signal.SIGCONT)
            assert await client.refresh_lease(lease.id) > 0  # over the new channel
            await client.revoke_lease(lease.id)

    run(scenario())


def test_two_leases_keep_or_lose_their_lease_through_a_pause_of_etcd(etcd: EtcdProcess) -> None:
    """Both leases' tries time out while etcd is paused for most of a TTL, and each replaces the
    shared channel under the other's call. Afterwards each lease is either alive in etcd or says it
    is lost (its owner then takes a new one); never alive here and gone from etcd."""

    async def scenario() -> None:
        async with EtcdClient(etcd.endpoint) as client:
            leases = [await KeptLease.grant(client, TTL)]
            await asyncio.sleep(TTL / 8)  # half a refresh interval apart: one's try ends mid the other's
            leases.append(await KeptLease.grant(client, TTL))
            await asyncio.sleep(0.6)  # a refresh each
            assert etcd.proc is not None
            for _ in range(3):
                os.kill(etcd.proc.pid, signal.SIGSTOP)
                try:
                    await asyncio.sleep(1.2)
                finally:
                    os.kill(etcd.proc.pid, signal.SIGCONT)
                await asyncio.sleep(0.5)
            await asyncio.sleep(2 * TTL)  # a lease nobody refreshes is gone from etcd by now
            for kept in leases:
                if kept.alive:
                    assert await client.lease_ttl(kept.id) > 0, f"lease {kept.id:x}: alive here, not in etcd"
            for kept in leases:
                await kept.revoke()

    run(scenario())


def test_a_keep_alive_that_fails_says_the_lease_is_lost(etcd: EtcdProcess) -> None:
    """Whatever ends the refreshes (here a bug's exception) sets `lost`: its owner re-registers or
    steps down instead of waiting on a lease nobody refreshes."""

    async def scenario() -> None:
        async with EtcdClient(etcd.endpoint) as client:
            lease = await KeptLease.grant(client, TTL)

            async def broken(lease_id: int, *, retry: bool = False) -> int:
                raise RuntimeError("a bug")

            client.refresh_lease = broken  # type: ignore[method-assign]
            await asyncio.wait_for(lease.lost.wait(), TTL)
            assert "a bug" in lease.lost_reason
            await lease.revoke()

    run(scenario())


def test_a_reset_for_a_channel_already_replaced_keeps_the_new_one(etcd: EtcdProcess) -> None:
    """Two leases' tries time out on one stuck channel: the first replaces it, the second's reset
    (for the channel it used) must not also throw away the new channel and the calls on it."""

    async def scenario() -> None:
        async with EtcdClient(etcd.endpoint) as client:
            lease = await client.grant_lease(5)
            await client.refresh_lease(lease.id)
            stuck = client.keepalive_channel
            await client.reset_keepalive(stuck)  # the first lease's reset
            await client.refresh_lease(lease.id)
            fresh = client.keepalive_channel
            assert fresh is not None and fresh is not stuck
            await client.reset_keepalive(stuck)  # the second lease's, late
            assert client.keepalive_channel is fresh
            await client.reset_keepalive(fresh)
            assert client.keepalive_channel is not fresh
            await client.revoke_lease(lease.id)

    run(scenario())


def test_a_lease_granted_after_etcd_came_back_is_not_taken_as_expired(etcd: EtcdProcess) -> None:
    """etcd is away (killed) for longer than the TTL while a lease is asked for: the grant that
    succeeds once it is back counts its TTL from its own sending, so the lease is kept, not given up
    at its first check (each such loss made a broker register again for nothing)."""

    async def scenario() -> None:
        async with EtcdClient(etcd.endpoint, retry_for=20.0) as client:
            await client.revision()
            etcd.kill()
            back = asyncio.create_task(asyncio.to_thread(etcd.restart, downtime=3 * TTL / 2))
            try:
                lease = await KeptLease.grant(client, TTL)
                await asyncio.sleep(TTL)
                assert lease.alive, lease.lost_reason
                assert await client.lease_ttl(lease.id) > 0
                await lease.revoke()
            finally:
                await back

    run(scenario(), timeout=60)


def test_a_grant_answered_late_is_asked_again(etcd: EtcdProcess) -> None:
    """A grant sent while etcd is paused is answered only when it resumes, 1.5 TTL later: counted
    from its sending the lease would be expired on arrival. Attempts are abandoned after half the
    TTL and sent again, so the lease kept is one etcd granted just now."""

    async def scenario() -> None:
        async with EtcdClient(etcd.endpoint, timeout=10.0, retry_for=20.0) as client:
            await client.revision()
            assert etcd.proc is not None
            os.kill(etcd.proc.pid, signal.SIGSTOP)
            loop = asyncio.get_running_loop()
            resume = loop.call_later(3 * TTL / 2, os.kill, etcd.proc.pid, signal.SIGCONT)
            try:
                lease = await KeptLease.grant(client, TTL)
                await asyncio.sleep(TTL)
                assert lease.alive, lease.lost_reason
                await lease.revoke()
            finally:
                resume.cancel()
                os.kill(etcd.proc.pid, signal.SIGCONT)

    run(scenario(), timeout=60)
