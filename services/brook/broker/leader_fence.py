"""Whether this broker may still act as a leader: a deposed leader must stop acknowledging.

In a cluster a broker leads only while its etcd lease is surely alive. etcd counts a lease's TTL from
when it received the last refresh, the broker from when it sent it (brook.metadata.KeptLease), so
the broker's deadline always comes first: once it passes, etcd may expire the lease and the
controller may elect other leaders at any moment, and this broker appends nothing more as a leader
nor completes an acks=all produce (NOT_LEADER_OR_FOLLOWER, which clients retry elsewhere). The check
reads the monotonic clock at each append, so a broker that was paused (SIGSTOP, a stalled loop) is
fenced on its first request after resuming, before its lease keep-alive task has even run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable


def _forever() -> float:
    return math.inf


class LeaderFence:
    def __init__(self) -> None:
        self._until: Callable[[], float] = _forever  # a single broker: no lease, no fence

    def bind(self, valid_until: Callable[[], float]) -> None:
        """`valid_until()`: the monotonic time (time.monotonic(), asyncio's clock) until which this
        broker may lead; 0 when it may not."""
        self._until = valid_until

    def holds(self) -> bool:
        return time.monotonic() < self._until()
