"""Broker registration: `brokers/<id>` lives exactly as long as the broker's lease."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Iterable

from brook.tasks import cancel_and_wait

from .client import EtcdClient
from .errors import BrokerIdInUseError, EtcdUnavailableError, LeaseNotFoundError, MetadataError
from .keys import KeyLayout
from .kv import Compare, EventType, Get, KeyValue, Put, RangeResult
from .lease import KeptLease
from .models import BrokerInfo, BrokerJoined, BrokerLeft
from .watch import watch_prefix

log = logging.getLogger(__name__)

DEFAULT_TTL = 2  # seconds; etcd grants no less with its default 1 s election timeout
# How often a registered broker reads its own key back: a broker out of the cluster without knowing
# it is the worst outcome there is (a soak once saw a lease's keep-alive end unnoticed).
CHECK_S = 5.0


def parse_brokers(layout: KeyLayout, kvs: Iterable[KeyValue]) -> dict[int, BrokerInfo]:
    brokers: dict[int, BrokerInfo] = {}
    for kv in kvs:
        parsed = layout.parse(kv.key)
        if parsed is None or parsed.broker_id is None:
            continue
        try:
            brokers[parsed.broker_id] = BrokerInfo.from_json(kv.value, epoch=kv.create_revision)
        except (ValueError, KeyError, TypeError) as e:
            log.warning("ignoring unreadable broker registration %r: %s", kv.key, e)
    return brokers


async def live_brokers(client: EtcdClient, layout: KeyLayout) -> tuple[dict[int, BrokerInfo], int]:
    """The registered (so live) brokers, and the revision they were read at."""
    rr = await client.get_prefix(layout.brokers)
    return parse_brokers(layout, rr.kvs), rr.revision


class BrokerRegistry:
    """Registers one broker under a lease and keeps it registered.

    `register()` fails with BrokerIdInUseError while another live broker holds the id (after waiting
    up to `wait_for_stale` seconds for a registration to expire, e.g. the one this broker left behind
    when it crashed a moment ago). If the lease is lost (etcd unreachable for longer than the TTL, or
    the lease expired) the broker re-registers by itself with a new lease (and a new epoch); if its id
    was taken meanwhile, `failed` is set and `failure` says why.
    """

    def __init__(
        self,
        client: EtcdClient,
        layout: KeyLayout,
        broker: BrokerInfo,
        *,
        ttl: int = DEFAULT_TTL,
        wait_for_stale: float = 0.0,
        check_s: float = CHECK_S,
    ) -> None:
        self._client = client
        self._layout = layout
        self._broker = broker
        self.ttl = ttl
        self.wait_for_stale = wait_for_stale
        self.check_s = check_s
        self._lease: KeptLease | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._stopping = False
        self.registered = asyncio.Event()
        self.failed = asyncio.Event()
        self.failure: MetadataError | None = None
        self.registrations = 0

    @property
    def broker(self) -> BrokerInfo:
        """This broker, with the epoch of its current registration."""
        return self._broker

    def registered_until(self) -> float:
        """The loop time (monotonic) before which this broker's registration surely lives in etcd;
        0 while it is not registered."""
        lease = self._lease
        return lease.alive_until if lease is not None and self.registered.is_set() else 0.0

    @property
    def lease_id(self) -> int | None:
        return self._lease.id if self._lease is not None else None

    async def register(self) -> BrokerInfo:
        self._stopping = False
        await self._register_once(self.wait_for_stale)
        if self._supervisor is None:
            self._supervisor = asyncio.create_task(
                self._supervise(), name=f"broker-{self._broker.broker_id}-registration"
            )
        return self._broker

    async def _register_once(self, wait_for_stale: float, lost: int | None = None) -> None:
        """Register under a new lease. `lost`: the lease this broker held before; a key still under it
        is this broker's own and is revoked at once, not waited for (etcd restarted extends the leases
        it had by its election timeout: a soak saw the old key outlive wait_for_stale, and two brokers
        gave up their ids for good)."""
        key = self._layout.broker(self._broker.broker_id)
        lease = await KeptLease.grant(self._client, self.ttl)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_for_stale
        leases = 1
        try:
            while True:
                try:
                    r = await self._client.txn(
                        [Compare.absent(key)], [Put(key, self._broker.to_json(), lease.id)], [Get(key)]
                    )
                except LeaseNotFoundError:
                    # The lease lapsed between its grant and this write (a stalled start-up, etcd killed
                    # and restarted: seen in the soak, where the broker exited): a new one, a few times.
                    if leases >= 5:
                        raise
                    await lease.revoke()
                    lease = await KeptLease.grant(self._client, self.ttl)
                    leases += 1
                    continue
                if r.succeeded:
                    break
                holder = r.gets[0][0] if r.gets and r.gets[0] else None
                if holder is None:
                    continue  # it expired in between
                if lost is not None and holder.lease == lost:
                    with contextlib.suppress(MetadataError, TimeoutError):
                        await asyncio.wait_for(self._client.revoke_lease(lost), self.ttl)
                    continue
                if loop.time() >= deadline:
                    try:
                        who = BrokerInfo.from_json(holder.value)
                        at = f"{who.host}:{who.port}"
                    except (ValueError, KeyError, TypeError):
                        at = "an unreadable address"
                    raise BrokerIdInUseError(
                        f"broker id {self._broker.broker_id} is already registered by a live broker at {at} "
                        f"(etcd lease {holder.lease:x}, expires within {self.ttl}s of that broker's last "
                        "keep-alive): give this broker another node id, or stop the other one"
                    )
                await asyncio.sleep(0.2)
        except BaseException:
            await lease.revoke()
            raise
        self._lease = lease
        self._broker = dataclasses.replace(self._broker, epoch=r.revision)
        self.registrations += 1
        self.registered.set()
        log.info("broker %d registered (epoch %d, lease %x)", self._broker.broker_id, r.revision, lease.id)

    async def _until_lost(self, lease: KeptLease) -> None:
        """Until the lease is lost, or this broker's key is found gone from etcd (or under another
        lease) while the lease seems kept: then the lease is given up, and the broker registers
        again."""
        key = self._layout.broker(self._broker.broker_id)
        while not lease.lost.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.check_s):
                    await lease.lost.wait()
                    return
            try:
                async with asyncio.timeout(self.ttl):  # not the client's whole retry window
                    kv = await self._client.get(key)
            except (MetadataError, TimeoutError):  # etcd unreachable: the lease's refreshes judge that
                continue
            if not lease.lost.is_set() and (kv is None or kv.lease != lease.id):
                lease.give_up("its registration is gone from etcd")

    async def _supervise(self) -> None:
        while True:
            lease = self._lease
            assert lease is not None
            await self._until_lost(lease)
            if self._stopping:
                return
            self.registered.clear()
            log.warning(
                "broker %d: registration lost (%s); re-registering", self._broker.broker_id, lease.lost_reason
            )
            await lease.revoke()  # if etcd still has it, the old key goes now instead of after the TTL
            delay = 0.1
            while not self._stopping:
                try:
                    # Our own old key may outlive the lease we gave up on by up to a TTL.
                    await self._register_once(wait_for_stale=self.ttl + 1, lost=lease.id)
                    break
                except BrokerIdInUseError as e:
                    self.failure = e
                    self.failed.set()
                    log.error("broker %d cannot re-register: %s", self._broker.broker_id, e)
                    return
                except (EtcdUnavailableError, MetadataError) as e:
                    if self._client.closed:
                        return
                    log.info("broker %d: re-registration failed (%s); retrying", self._broker.broker_id, e)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 1.0)

    async def _stop_supervisor(self) -> None:
        self._stopping = True
        task, self._supervisor = self._supervisor, None
        await cancel_and_wait(task)

    async def deregister(self) -> None:
        """Leave the cluster now (revoke the lease: the key goes at once)."""
        await self._stop_supervisor()
        self.registered.clear()
        if self._lease is not None:
            await self._lease.revoke()
            self._lease = None

    async def abandon(self) -> None:
        """Stop keeping the registration alive without revoking it, as a crash would: the key goes
        when the lease expires (tests)."""
        await self._stop_supervisor()
        if self._lease is not None:
            self._lease.stop_keepalive()
            self._lease = None

    async def live_brokers(self) -> dict[int, BrokerInfo]:
        return (await live_brokers(self._client, self._layout))[0]

    async def watch_membership(self) -> MembershipWatch:
        return await MembershipWatch.start(self._client, self._layout)


class MembershipWatch:
    """The live brokers now (`brokers`, kept current as events are consumed) and, by iteration, every
    BrokerJoined / BrokerLeft after that. A re-registration is a BrokerLeft then a BrokerJoined with
    a larger epoch (or a BrokerJoined alone when the lease expiry and the new registration fall in
    the same compacted stretch of history)."""

    def __init__(self, client: EtcdClient, layout: KeyLayout, rr: RangeResult) -> None:
        self._layout = layout
        self.brokers = parse_brokers(layout, rr.kvs)
        self.snapshot_revision = rr.revision
        self._watch = watch_prefix(client, layout.brokers, rr.revision + 1, rr.kvs)

    @classmethod
    async def start(cls, client: EtcdClient, layout: KeyLayout) -> MembershipWatch:
        return cls(client, layout, await client.get_prefix(layout.brokers))

    @property
    def revision(self) -> int:
        return self._watch.revision

    def __aiter__(self) -> MembershipWatch:
        return self

    async def __anext__(self) -> BrokerJoined | BrokerLeft:
        async for ev in self._watch:
            parsed = self._layout.parse(ev.key)
            if parsed is None or parsed.broker_id is None:
                continue
            if ev.type is EventType.DELETE:
                if self.brokers.pop(parsed.broker_id, None) is None and not ev.resync:
                    continue
                return BrokerLeft(parsed.broker_id, ev.revision, ev.resync)
            try:
                info = BrokerInfo.from_json(ev.value, epoch=ev.create_revision)
            except (ValueError, KeyError, TypeError) as e:
                log.warning("ignoring unreadable broker registration %r: %s", ev.key, e)
                continue
            self.brokers[info.broker_id] = info
            return BrokerJoined(info, ev.revision, ev.resync)
        raise StopAsyncIteration

    async def aclose(self) -> None:
        await self._watch.aclose()
