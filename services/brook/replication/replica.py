"""What the replication room needs of a partition replica, as Protocols: the broker's Partition
(brook.broker.partition) satisfies them, and this room never imports it (the broker wires the two)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import NamedTuple, Protocol, Self, TypeVar

from brook.log import PartitionLog

from .epochs import LeaderEpochCache
from .follower_progress import FollowerProgress

P_contra = TypeVar("P_contra", contravariant=True)


class Listener(Protocol[P_contra]):
    """Told of a replica's changes (new records, truncation, a new role)."""

    def wake(self, p: P_contra, data: bool) -> None: ...


class FollowerReplica(Protocol):
    """A replica this broker follows: what the replica fetcher reads and does to it."""

    @property
    def topic(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def log(self) -> PartitionLog: ...
    @property
    def epochs(self) -> LeaderEpochCache: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def is_leader(self) -> bool: ...
    @property
    def high_watermark(self) -> int: ...

    def append_replicated(self, records: memoryview) -> None: ...
    def truncate_to(self, offset: int) -> None: ...
    def reset_to(self, offset: int) -> None: ...
    def set_follower_high_watermark(self, leader_hw: int) -> None: ...
    def set_follower_log_start_offset(self, leader_log_start: int) -> None: ...
    def add_waiter(self, w: Listener[Self]) -> None: ...
    def remove_waiter(self, w: Listener[Self]) -> None: ...


class Assignment(Protocol):
    @property
    def replicas(self) -> list[int]: ...


class LeaderReplica(Protocol):
    """A replica this broker leads: what it knows of its followers."""

    @property
    def node_id(self) -> int: ...
    @property
    def is_leader(self) -> bool: ...
    @property
    def isr(self) -> list[int]: ...
    @property
    def role(self) -> Assignment: ...
    @property
    def followers(self) -> Mapping[int, FollowerProgress]: ...


class LedReplica(Hashable, Protocol):
    """A replica this broker leads, as the ISR loop sees it."""

    def isr_change(self, lag_max_ms: int) -> list[int] | None: ...
    def isr_settled(self, lag_max_ms: int) -> bool: ...


class LeaderAndIsr(NamedTuple):
    """A partition's replication state as clients are told it (Metadata, FindCoordinator): its leader
    (-1: none live), the leader's epoch, its replicas and its in-sync replicas."""

    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
