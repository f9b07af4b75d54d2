"""Leader election over a Lease: decisions, and two electors against one in-memory Lease."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from brook_operator import election
from brook_operator.election import LeaseRecord, decide
from brook_operator.leader import LeaderElector

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def test_no_lease_is_created_by_the_first_replica() -> None:
    d = decide(None, "a", T0, 15)
    assert d.action == "create" and d.leader
    assert d.record == LeaseRecord("a", 15, T0, T0, 0)


def test_the_holder_renews() -> None:
    cur = LeaseRecord("a", 15, T0, T0, 3)
    d = decide(cur, "a", T0 + timedelta(seconds=5), 15)
    assert d.action == "update" and d.leader
    assert d.record == LeaseRecord("a", 15, T0, T0 + timedelta(seconds=5), 3)


def test_others_wait_while_the_lease_is_fresh() -> None:
    d = decide(LeaseRecord("a", 15, T0, T0, 0), "b", T0 + timedelta(seconds=14), 15)
    assert d.action == "wait" and not d.leader and d.record is None


def test_an_expired_lease_is_taken_over() -> None:
    d = decide(LeaseRecord("a", 15, T0, T0, 2), "b", T0 + timedelta(seconds=15), 15)
    assert d.action == "update" and d.leader
    assert d.record is not None and d.record.holder == "b" and d.record.transitions == 3


def test_a_released_lease_is_taken_at_once() -> None:
    released = election.release(LeaseRecord("a", 15, T0, T0, 0), "a", T0)
    assert released is not None and released.holder is None
    assert decide(released, "b", T0, 15).leader
    assert election.release(LeaseRecord("a", 15, T0, T0, 0), "b", T0) is None


def test_spec_round_trip_uses_microtime() -> None:
    r = LeaseRecord("a", 15, T0, T0 + timedelta(microseconds=5), 1)
    spec = r.to_spec()
    assert spec["renewTime"] == "2025-01-01T00:00:00.000005Z"
    assert LeaseRecord.from_spec(spec) == r
    assert election.parse_time("2025-01-01T00:00:00Z") == T0


class Store:
    """One Lease with resourceVersion checks, as the API server does it."""

    def __init__(self) -> None:
        self.obj: dict[str, Any] | None = None
        self.rv = 0

    async def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.obj)

    async def create(self, body: Any) -> dict[str, Any]:
        if self.obj is not None:
            raise RuntimeError("409 AlreadyExists")
        self.rv += 1
        self.obj = copy.deepcopy(body)
        self.obj["metadata"]["resourceVersion"] = str(self.rv)
        return self.obj

    async def replace(self, body: Any) -> dict[str, Any]:
        assert self.obj is not None
        if body["metadata"].get("resourceVersion") != self.obj["metadata"]["resourceVersion"]:
            raise RuntimeError("409 Conflict")
        self.rv += 1
        self.obj = copy.deepcopy(body)
        self.obj["metadata"]["resourceVersion"] = str(self.rv)
        return self.obj


def test_two_replicas_one_leader_then_failover() -> None:
    now = [T0]
    store = Store()

    def clock() -> datetime:
        return now[0]

    a = LeaderElector(store, namespace="ns", name="op", identity="a", lease_seconds=15, clock=clock)
    b = LeaderElector(store, namespace="ns", name="op", identity="b", lease_seconds=15, clock=clock)

    async def scenario() -> None:
        assert await a.try_acquire()
        assert not await b.try_acquire()
        now[0] += timedelta(seconds=10)
        assert await a.try_acquire()  # renewed
        now[0] += timedelta(seconds=10)
        assert not await b.try_acquire()  # 10 s after the renewal: still a's
        now[0] += timedelta(seconds=6)  # a stopped renewing 16 s ago
        assert await b.try_acquire()
        assert not await a.try_acquire()
        assert a.holder_seen == "b"
        await b.release()
        assert await a.try_acquire()

    asyncio.run(scenario())
    assert store.obj is not None and store.obj["spec"]["leaseTransitions"] == 2


def test_a_stale_write_loses_the_race() -> None:
    store = Store()
    a = LeaderElector(store, namespace="ns", name="op", identity="a", clock=lambda: T0)

    async def scenario() -> None:
        assert await a.try_acquire()
        expired = T0 + timedelta(seconds=60)
        b = LeaderElector(store, namespace="ns", name="op", identity="b", clock=lambda: expired)
        c = LeaderElector(store, namespace="ns", name="op", identity="c", clock=lambda: expired)
        live = await store.get("Lease", "ns", "op")
        assert await b.try_acquire()
        # c read the same expired lease before b wrote: its write carries the old resourceVersion
        original_get = store.get

        async def stale_get(kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
            return copy.deepcopy(live)

        store.get = stale_get  # type: ignore[method-assign]
        assert not await c.try_acquire()
        store.get = original_get  # type: ignore[method-assign]

    asyncio.run(scenario())
    assert store.obj is not None and store.obj["spec"]["holderIdentity"] == "b"


def test_hold_reports_a_lost_lease() -> None:
    store = Store()
    now = [T0]
    a = LeaderElector(
        store,
        namespace="ns",
        name="op",
        identity="a",
        lease_seconds=15,
        renew_seconds=0.001,
        clock=lambda: now[0],
    )
    thief = LeaderElector(
        store, namespace="ns", name="op", identity="b", clock=lambda: now[0] + timedelta(seconds=99)
    )

    async def scenario() -> bool:
        assert await a.try_acquire()
        assert await thief.try_acquire()
        lost = asyncio.Event()
        await asyncio.wait_for(a.hold(lost), 2)
        return lost.is_set()

    assert asyncio.run(scenario())
