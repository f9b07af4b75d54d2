"""Controller election against a real etcd: one winner, failover after a crash, epochs."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

import pytest

from brook.dev.etcd import EtcdProcess
from brook.metadata import ControllerElection, ControllerInfo, EtcdClient, FencedError, KeyLayout
from tests.support.etcd import cluster_name, etcd_process, eventually, run

# Leases long enough that a loaded machine does not miss a keep-alive; waits are on conditions with
# generous deadlines (failover speed is bench/'s business, not a test's).
TTL = 3
DEADLINE = 20


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdProcess]:
    yield from etcd_process(tmp_path_factory)


async def _contenders(etcd: EtcdProcess, n: int) -> tuple[list[EtcdClient], list[ControllerElection]]:
    layout = KeyLayout(cluster_name())
    clients = [EtcdClient(etcd.endpoint) for _ in range(n)]
    elections = [ControllerElection(c, layout, i + 1, ttl=TTL) for i, c in enumerate(clients)]
    await asyncio.gather(*(e.start() for e in elections))
    return clients, elections


async def _close(clients: list[EtcdClient], elections: list[ControllerElection]) -> None:
    for e in elections:
        await e.stop()
    for c in clients:
        await c.close()


def _winners(elections: list[ControllerElection]) -> list[ControllerElection]:
    return [e for e in elections if e.is_controller]


def test_exactly_one_of_three_wins_and_all_agree(etcd: EtcdProcess) -> None:
    async def scenario() -> None:
        clients, elections = await _contenders(etcd, 3)
        try:
            await eventually(lambda: all(e.controller is not None for e in elections), DEADLINE)
            winners = _winners(elections)
            assert len(winners) == 1
            leader = winners[0]
            assert leader.epoch == 1
            assert {e.controller for e in elections} == {ControllerInfo(leader.broker_id, 1)}
            lease = leader._lease
            assert lease is not None
            # Past the lease's first expiry, etcd still has it: refreshed by the keep-alive loop.
            first_expiry = asyncio.get_running_loop().time() + TTL

            async def outlived() -> bool:
                past = asyncio.get_running_loop().time() > first_expiry
                return past and await clients[0].lease_ttl(lease.id) > 0

            await eventually(outlived, DEADLINE, interval=0.2)
            assert _winners(elections) == [leader] and leader.epoch == 1
        finally:
            await _close(clients, elections)

    run(scenario(), timeout=90)


def test_crashed_controller_is_replaced_within_ttl_and_epoch_grows(etcd: EtcdProcess) -> None:
    async def scenario() -> None:
        clients, elections = await _contenders(etcd, 3)
        try:
            await eventually(lambda: len(_winners(elections)) == 1, 5)
            old = _winners(elections)[0]
            old_epoch = old.epoch
            assert old_epoch is not None
            resigned: list[ControllerInfo] = []
            t0 = time.monotonic()
            await old.abandon()  # no revoke: the lease has to expire
            rest = [e for e in elections if e is not old]
            await eventually(lambda: len(_winners(rest)) == 1, TTL + DEADLINE)
            took = time.monotonic() - t0
            new = _winners(rest)[0]
            assert new.epoch == old_epoch + 1
            await eventually(lambda: all(e.controller == new.controller for e in rest), DEADLINE)
            assert not resigned
            print(f"failover after a crash took {took:.2f}s with TTL {TTL}s")

            # A clean stop resigns at once: it revokes its lease (etcd no longer has it), so the next
            # one need not wait for an expiry.
            lease = new._lease
            assert lease is not None
            await new.stop()
            assert await clients[0].lease_ttl(lease.id) == -1
            last = [e for e in rest if e is not new]
            await eventually(lambda: len(_winners(last)) == 1, DEADLINE)
            assert last[0].epoch == old_epoch + 2
        finally:
            await _close(clients, elections)

    run(scenario(), timeout=90)


def test_callbacks_and_resignation_when_lease_is_revoked_behind_its_back(etcd: EtcdProcess) -> None:
    async def scenario() -> None:
        layout = KeyLayout(cluster_name())
        events: list[tuple[str, int]] = []
        async with EtcdClient(etcd.endpoint) as client:
            e = ControllerElection(
                client,
                layout,
                5,
                ttl=TTL,
                on_elected=lambda info: events.append(("elected", info.epoch)),
                on_resigned=lambda info: events.append(("resigned", info.epoch)),
            )
            await e.start()
            await e.wait_elected(DEADLINE)
            # Someone deletes the controller key (an operator, or etcd's lease expiry): step down,
            # then win again with the next epoch.
            await client.delete(layout.controller)
            await eventually(lambda: events[-1:] == [("elected", 2)], DEADLINE)
            assert events == [("elected", 1), ("resigned", 1), ("elected", 2)]
            await e.stop()
            assert events[-1] == ("resigned", 2)
            assert await client.get(layout.controller) is None

    run(scenario(), timeout=90)


def test_a_term_fenced_as_it_begins_is_a_warning_and_the_next_election_follows(
    etcd: EtcdProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """The elected callback's first controller write can be fenced (the lease expired meanwhile: a
    starved event loop, etcd away). That is a lost term, not a bug: one warning, no traceback, and the
    election goes on (here the key is deleted, as an expiry deletes it, and the contender wins again)."""

    async def scenario() -> None:
        layout = KeyLayout(cluster_name())
        client = EtcdClient(etcd.endpoint)
        terms: list[int] = []

        async def elected(info: ControllerInfo) -> None:
            terms.append(info.epoch)
            if len(terms) == 1:
                await client.delete(layout.controller)  # as the lease's expiry would
                raise FencedError(info.epoch, info.epoch, None)

        election = ControllerElection(client, layout, 1, ttl=TTL, on_elected=elected)
        await election.start()
        try:
            await eventually(lambda: len(terms) >= 2 and election.is_controller, DEADLINE)
        finally:
            await election.stop()
            await client.close()

    with caplog.at_level(logging.WARNING, logger="brook.metadata.election"):
        run(scenario(), timeout=60)
    fenced = [r for r in caplog.records if "ended as it began" in r.getMessage()]
    assert len(fenced) == 1 and fenced[0].levelno == logging.WARNING and fenced[0].exc_info is None
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
