"""What the group coordinator needs of the rooms around it, as Protocols (the broker satisfies them),
and the offset commit it is handed: the coordinator depends on no broker code."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol


class OtherGroups(Protocol):
    """Groups of another kind kept in the same partitions (share groups: share/group.py)."""

    def replay(self, raw_key: bytes, raw_value: bytes | None) -> None: ...
    def loaded(self, group_ids: Iterable[str]) -> None: ...
    def group_ids(self) -> list[str]: ...
    def drop(self, group_ids: Iterable[str]) -> None: ...


class OffsetsLog(Protocol):
    """What the coordinator needs from the broker: the `__consumer_offsets` partitions."""

    async def ensure_topic(self, partitions: int, replication_factor: int) -> None: ...
    def is_local_leader(self, partition: int) -> bool: ...
    def topic_exists(self, topic: str) -> bool: ...
    async def append(self, partition: int, batch: bytes) -> None: ...
    def read_batches(self, partition: int) -> Iterator[bytes]: ...
    def topic_partitions(self) -> Mapping[str, tuple[bytes, int]]:
        """Every topic's id and partition count (consumer groups resolve subscriptions with it)."""
        ...


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
