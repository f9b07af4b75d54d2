"""Whether this broker's view of the cluster is current: a leader must act on one that is.

A cluster member's view is fed by one etcd watch, and a watch can stall without an error: a stream
that stops delivering, or a consumer stuck behind it. A broker whose lease lives on while its view is
frozen would go on leading partitions the controller has moved meanwhile: appending records the new
leader never sees (an idempotent producer then gets OUT_OF_ORDER_SEQUENCE_NUMBER, which is fatal to
it), serving groups as a coordinator it no longer is.

So every second the broker rewrites its own key `views/<id>` under its lease (brook.metadata.keys) and
counts its view current as of a write's sending time once its watch has delivered that write: etcd
delivers a watch's changes in revision order, so every change made before the write was applied
first. The leader fence (brook.broker.leader_fence) holds only while the last such proof is recent
(`valid_until`), as it holds only while the lease surely lives. When writes succeed but none comes
back through the watch (`stalled`), the watch is stuck: the broker re-reads the cluster state and
starts a new one (ClusterNode._restart_watch), and the proof is the snapshot read (`caught_up`).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable

from brook.metadata import BrokerRegistry, EtcdMetadataStore, MetadataError
from brook.tasks import every

log = logging.getLogger(__name__)

MARK_INTERVAL_S = 1.0
_KEEP = 64  # marks remembered while the watch is behind (older ones only prove less)


class ViewFreshness:
    def __init__(self, valid_s: float, stall_s: float, stall_marks: int = 3) -> None:
        """`valid_s`: how long after a mark's sending a view proven by it counts as current;
        `stall_s`, `stall_marks`: the watch is stalled when a mark written that long ago has not come
        back although `stall_marks` marks were written since (so the loop itself was running)."""
        self._valid_s = valid_s
        self._stall_s = stall_s
        self._stall_marks = stall_marks
        self._pending: deque[tuple[int, float]] = deque(maxlen=_KEEP)  # (revision, sent at)
        self._current_at = -math.inf  # sending time of the newest proof

    def written(self, revision: int, sent_at: float) -> None:
        """A mark was written at `revision`; the write was sent at loop time `sent_at`."""
        self._pending.append((revision, sent_at))

    def seen(self, revision: int) -> None:
        """The watch delivered (and the broker applied everything up to) a mark written at `revision`."""
        self.caught_up(revision, -math.inf)

    def caught_up(self, revision: int, sent_at: float) -> None:
        """The view holds every change up to `revision` (a snapshot read sent at `sent_at`, or a mark's
        write): every mark written at or before it is proven."""
        current = sent_at
        while self._pending and self._pending[0][0] <= revision:
            current = max(current, self._pending.popleft()[1])
        self._current_at = max(self._current_at, current)

    def valid_until(self) -> float:
        """The loop time until which the view counts as current."""
        return self._current_at + self._valid_s

    def stalled(self, now: float) -> bool:
        if len(self._pending) <= self._stall_marks:
            return False
        return now - self._pending[0][1] > self._stall_s


class ViewMarker:
    """The task that writes the marks (every `interval_s`) and restarts a stalled watch."""

    def __init__(
        self,
        node_id: int,
        store: EtcdMetadataStore,
        registry: BrokerRegistry,
        view_revision: Callable[[], int],
        restart_watch: Callable[[], Awaitable[None]],
        freshness: ViewFreshness,
        interval_s: float = MARK_INTERVAL_S,
    ) -> None:
        self._node_id = node_id
        self._store = store
        self._registry = registry
        self._view_revision = view_revision
        self._restart_watch = restart_watch
        self._freshness = freshness
        self._interval_s = interval_s

    async def run(self) -> None:
        """Mark until cancelled; the marks outlive a failed one: without them the fence stays closed."""
        await every(self._interval_s, self._mark, f"broker {self._node_id}: view mark", first=True)

    async def _mark(self) -> None:
        loop = asyncio.get_running_loop()
        lease = self._registry.lease_id
        if lease is None or not self._registry.registered.is_set():
            return  # no lease to write under: the fence is closed by the registration anyway
        sent = loop.time()
        try:
            revision = await self._store.put_view_mark(self._node_id, lease, self._view_revision())
        except MetadataError as e:
            log.debug("broker %d: view mark not written: %s", self._node_id, e)
            return
        self._freshness.written(revision, sent)
        if self._freshness.stalled(loop.time()):
            log.warning(
                "broker %d: its metadata watch has delivered none of its last view marks (view at "
                "revision %d, etcd at %d); re-reading the cluster state and watching afresh",
                self._node_id, self._view_revision(), revision,
            )  # fmt: skip
            await self._restart_watch()
