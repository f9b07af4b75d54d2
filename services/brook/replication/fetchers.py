"""This broker's replica fetchers: one LeaderFetcher per leader broker it follows partitions of, made
when a partition first follows that leader (or the leader's address changed) and stopped together."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Generic

from .follower import LeaderFetcher, R, Throttle
from .peer import PLAINTEXT, PeerSecurity


class ReplicaFetchers(Generic[R]):
    def __init__(
        self,
        node_id: int,
        throttled: Callable[[R], bool],
        throttled_rate: int,
        on_replicated: Callable[[int], None] = lambda n: None,
        security: PeerSecurity = PLAINTEXT,
    ) -> None:
        self.node_id = node_id
        self._throttled = throttled  # replicas being added by a reassignment
        self._throttle = Throttle(
            throttled_rate
        )  # shared by every fetcher (leader.replication.throttled.rate)
        self._on_replicated = on_replicated
        self._security = security
        self._by_leader: dict[int, LeaderFetcher[R]] = {}

    def follow(
        self, p: R, leader: int, address: tuple[str, int], followers_of: Callable[[int], Iterable[R]]
    ) -> None:
        """Fetch `p` from broker `leader` at `address`. A new fetcher also takes every other replica
        `followers_of(leader)` names (those the fetcher it replaces had)."""
        self.unfollow(p)
        fetcher = self._by_leader.get(leader)
        if fetcher is None or fetcher.address != address:
            if fetcher is not None:
                asyncio.get_running_loop().create_task(fetcher.stop())
            fetcher = LeaderFetcher(
                self.node_id,
                leader,
                *address,
                self._throttled,
                self._throttle,
                self._on_replicated,
                self._security,
            )
            self._by_leader[leader] = fetcher
            fetcher.start()
            for other in followers_of(leader):
                if other is not p:
                    fetcher.add(other)
        fetcher.add(p)

    def unfollow(self, p: R) -> None:
        for f in self._by_leader.values():
            f.remove(p)

    async def stop(self) -> None:
        """Stop every fetcher (controlled shutdown, leaving the cluster)."""
        for f in self._by_leader.values():
            await f.stop()
        self._by_leader.clear()
