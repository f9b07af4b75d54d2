"""A kept lease against a real etcd when its refresh stream stops answering."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from brook.dev.etcd import EtcdProcess
from brook.metadata import EtcdClient, KeptLease
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
