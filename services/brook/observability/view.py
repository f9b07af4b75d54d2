"""The read-only view of a broker that the scrape-time collector reads.

The broker implements these protocols with a thin adapter (no copies of its state); the collector calls
them only while a scrape is being answered, on the broker's event loop, so what it reads is consistent.
Every member is cheap: attribute reads, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol


class PartitionView(Protocol):
    """One partition replica hosted by this broker (leader or follower)."""

    @property
    def topic(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def is_leader(self) -> bool: ...
    @property
    def replicas(self) -> Sequence[int]: ...
    @property
    def isr(self) -> Sequence[int]: ...
    @property
    def log_size_bytes(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...  # read_committed's end: consumer lag is measured to it
    @property
    def min_insync_replicas(self) -> int: ...


class GroupOffset(NamedTuple):
    """A committed offset held by this broker's group coordinator."""

    group: str
    topic: str
    partition: int
    committed_offset: int


class ShareRecordCounts(NamedTuple):
    """What this broker's share-partitions did with records since it started (counters)."""

    acquired: int
    acknowledged: int
    released: int
    archived: int
    lock_expiries: int


class SharePartitionStat(NamedTuple):
    """A share group's view of a partition led here: its start offset and records in flight."""

    group: str
    topic: str
    partition: int
    start_offset: int
    in_flight: int
    acquired: int


class BrokerView(Protocol):
    """What the collector needs from a broker, and nothing more."""

    @property
    def node_id(self) -> int: ...

    def is_controller(self) -> bool:
        """True while this broker is the active controller."""
        ...

    def offline_partitions(self) -> int:
        """Partitions of the cluster without a live leader. Read only while this broker is the
        controller (only the controller knows); other brokers report 0, as Kafka's do."""
        ...

    def offline_log_dirs(self) -> int:
        """Log directories of this broker that are offline (a write failed there): 0 or 1."""
        ...

    def partitions(self) -> Iterable[PartitionView]:
        """Every partition replica this broker hosts."""
        ...

    def group_offsets(self) -> Iterable[tuple[str, str, int, int]]:
        """(group, topic, partition, committed offset) of every group this broker coordinates
        (GroupOffset is such a tuple)."""
        ...

    def groups(self) -> Iterable[tuple[str, str, int]]:
        """(protocol, state, how many) of the groups this broker coordinates: protocol "classic" or
        "consumer" (KIP-848), state as Kafka names it (Empty, Stable, ...)."""
        ...

    def group_rebalances(self) -> Iterable[tuple[str, int]]:
        """(protocol, rebalances since start): classic generations completed, consumer target
        assignments computed, by this broker's coordinator."""
        ...

    def open_connections(self) -> int:
        """Client and peer connections currently open on the Kafka listener."""
        ...

    def share_records(self) -> ShareRecordCounts:
        """Share groups' record counts (KIP-932) on the partitions this broker leads."""
        ...

    def share_partitions(self) -> Iterable[SharePartitionStat]:
        """Every share-partition this broker holds."""
        ...
