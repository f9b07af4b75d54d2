"""What a writer needs of a partition: brook.broker.partition.Partition satisfies it."""

from __future__ import annotations

from typing import Protocol

from brook.log import PartitionLog


class WrittenPartition(Protocol):
    """What a writer needs of a partition (brook.broker.partition.Partition satisfies it)."""

    topic: str
    index: int
    log: PartitionLog

    @property
    def leads_now(self) -> bool: ...

    @property
    def last_stable_offset(self) -> int: ...
