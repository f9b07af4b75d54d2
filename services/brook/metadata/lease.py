"""A lease kept alive by our own task (aetcd has no background keep-alive)."""

from __future__ import annotations

import asyncio
import logging

from brook.tasks import cancel_and_wait, raise_if_cancelling

from .client import EtcdClient
from .errors import MetadataError

log = logging.getLogger(__name__)


class KeptLease:
    """An etcd lease refreshed every TTL/4 until `stop_keepalive()` or `revoke()`.

    `lost` is set as soon as the lease must be assumed gone: etcd answered that it no longer has it,
    or no refresh succeeded before the TTL ran out counted from the last successful refresh's
    *sending* time (etcd counts from when it received it, so our deadline is never the later one).
    """

    def __init__(self, client: EtcdClient, lease_id: int, ttl: int, granted_at: float) -> None:
        self._client = client
        self.id = lease_id
        self.ttl = ttl
        self.lost = asyncio.Event()
        self.lost_reason = ""
        self._alive_until = granted_at + ttl
        self._task: asyncio.Task[None] | None = None
        self._last_error = "none"

    @classmethod
    async def grant(cls, client: EtcdClient, ttl: int) -> KeptLease:
        if ttl < 1:
            raise ValueError("lease TTL must be at least 1 second")
        # Each attempt bounded, and the TTL counted from the one that succeeded (Lease.asked_at): a
        # grant that took longer than the TTL (etcd away) is not taken as expired at its first check
        # (a soak's needless re-registrations).
        lease = await client.grant_lease(ttl)
        kept = cls(client, lease.id, lease.ttl, lease.asked_at)
        kept._task = asyncio.create_task(kept._keepalive(), name=f"etcd-lease-{lease.id:x}")
        return kept

    @property
    def alive(self) -> bool:
        return not self.lost.is_set()

    @property
    def alive_until(self) -> float:
        """The loop time (monotonic) before which etcd surely still has this lease; 0 once lost."""
        return 0.0 if self.lost.is_set() else self._alive_until

    def _mark_lost(self, reason: str) -> None:
        if not self.lost.is_set():
            self.lost_reason = reason
            log.warning("etcd lease %x lost: %s", self.id, reason)
            self.lost.set()

    async def _keepalive(self) -> None:
        try:
            await self._refresh_until_lost()
        except Exception as e:  # no more refreshes: the lease's owner must know, or it waits for ever
            self._mark_lost(f"its keep-alive failed: {e!r}")
            raise

    async def _refresh_until_lost(self) -> None:
        loop = asyncio.get_running_loop()
        # Every TTL/4: a broker paused for up to half the TTL (a 1 s SIGSTOP at 2 s) keeps its lease.
        interval = max(self.ttl / 4, 0.1)
        retry = min(interval / 3, 0.25)
        pause = interval
        while True:
            raise_if_cancelling()
            await asyncio.sleep(pause)
            sent = loop.time()
            if sent >= self._alive_until:
                self._mark_lost(f"not refreshed within its {self.ttl}s TTL (last try: {self._last_error})")
                return
            channel = self._client.keepalive_channel
            try:
                # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a stop's cancel.
                # One attempt waits an interval at most, so a stuck one leaves time for another.
                async with asyncio.timeout(min(self._alive_until - sent, interval)):
                    remaining = await self._client.refresh_lease(self.id)
            except (MetadataError, TimeoutError) as e:
                if self._client.closed:
                    self._mark_lost("the etcd client is closed")
                    return
                log.debug("etcd lease %x: refresh failed: %r", self.id, e)
                self._last_error = repr(e) if str(e) else type(e).__name__
                if isinstance(e, TimeoutError):  # no answer at all: not a refused connection
                    await self._client.reset_keepalive(channel)
                pause = min(retry, max(self._alive_until - loop.time(), 0.0))
                continue
            if remaining <= 0:
                self._mark_lost("etcd no longer has it (expired or revoked)")
                return
            self._alive_until = sent + remaining
            pause = interval

    def give_up(self, reason: str) -> None:
        """Take the lease as lost (its owner found what it keeps gone from etcd)."""
        self._mark_lost(reason)

    def stop_keepalive(self) -> None:
        """Stop refreshing without revoking: the lease expires after its TTL (what a crash does)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def revoke(self) -> None:
        """Stop refreshing and revoke now, so keys under the lease go at once. If etcd cannot be
        reached the lease simply expires after its TTL."""
        task, self._task = self._task, None
        await cancel_and_wait(task)
        try:
            # Retried no longer than the TTL: unrefreshed, the lease is gone by then anyway (a broker
            # stopping after etcd waited out the client's whole retry window per lease).
            await asyncio.wait_for(self._client.revoke_lease(self.id), self.ttl)
        except (MetadataError, TimeoutError) as e:
            why = str(e) or f"no answer in {self.ttl}s"
            log.info("etcd lease %x: revoke failed (%s); it expires in at most %ds", self.id, why, self.ttl)
        if not self.lost.is_set():
            self.lost_reason = "revoked"
            self.lost.set()
