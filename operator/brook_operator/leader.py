"""Holding the operator's Lease: acquire (waiting as a standby), renew, release (I/O around `election`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from . import election

log = logging.getLogger(__name__)


class LeaseStore(Protocol):
    """The Lease calls the elector makes (kube.Kube implements them)."""

    async def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None: ...

    async def create(self, body: Any) -> dict[str, Any]: ...

    async def replace(self, body: Any) -> dict[str, Any]: ...


class LeaderElector:
    def __init__(
        self,
        store: LeaseStore,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_seconds: int = 15,
        renew_seconds: float = 5.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = store
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.renew_seconds = renew_seconds
        self.clock = clock
        self.holder_seen: str | None = None  # the holder in the Lease last read

    def _body(self, record: election.LeaseRecord, resource_version: str | None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if resource_version is not None:
            meta["resourceVersion"] = resource_version
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": record.to_spec(),
        }

    async def try_acquire(self) -> bool:
        """One attempt to take or renew the Lease; True when this replica holds it afterwards."""
        try:
            live = await self.store.get("Lease", self.namespace, self.name)
        except Exception as e:  # the API being unreachable: not leading, try again later
            log.warning("lease %s/%s unreadable: %s", self.namespace, self.name, e)
            return False
        current = None if live is None else election.LeaseRecord.from_spec(live.get("spec"))
        self.holder_seen = None if current is None else current.holder
        decision = election.decide(current, self.identity, self.clock(), self.lease_seconds)
        if decision.record is None:
            return False
        try:
            if decision.action == "create":
                await self.store.create(self._body(decision.record, None))
            else:
                rv = ((live or {}).get("metadata") or {}).get("resourceVersion")
                await self.store.replace(self._body(decision.record, rv))
        except Exception as e:  # a 409 (another replica wrote first) or the API being unreachable
            log.info("lease %s/%s not taken: %s", self.namespace, self.name, e)
            return False
        return decision.leader

    async def acquire(self) -> None:
        """Wait (as a standby) until this replica holds the Lease."""
        announced = False
        while not await self.try_acquire():
            if not announced:
                log.info("standing by: lease %s/%s is held by another replica", self.namespace, self.name)
                announced = True
            await asyncio.sleep(self.renew_seconds)
        log.info("leading: lease %s/%s acquired by %s", self.namespace, self.name, self.identity)

    async def hold(self, lost: asyncio.Event) -> None:
        """Renew until the Lease cannot be renewed before it expires; then set `lost` and return."""
        last_ok = self.clock()
        while True:
            await asyncio.sleep(self.renew_seconds)
            try:
                ok = await self.try_acquire()
            except Exception as e:
                log.warning("lease renewal failed: %s", e)
                ok = False
            now = self.clock()
            if ok:
                last_ok = now
                continue
            taken = self.holder_seen is not None and self.holder_seen != self.identity
            if taken or (now - last_ok).total_seconds() >= self.lease_seconds - self.renew_seconds:
                log.error("lost lease %s/%s", self.namespace, self.name)
                lost.set()
                return

    async def release(self) -> None:
        """Hand the Lease over at once (clean stop)."""
        try:
            live = await self.store.get("Lease", self.namespace, self.name)
            if live is None:
                return
            record = election.release(
                election.LeaseRecord.from_spec(live.get("spec")), self.identity, self.clock()
            )
            if record is not None:
                rv = (live.get("metadata") or {}).get("resourceVersion")
                await self.store.replace(self._body(record, rv))
        except Exception as e:
            log.warning("lease release failed: %s", e)
