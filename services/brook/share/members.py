"""A share group and its members, as the coordinator keeps them (group.py changes them, store.py
writes and replays them)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Assignment", "ShareGroup", "ShareMember"]

# topic id -> partitions
Assignment = dict[bytes, list[int]]


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int = 0
    previous_epoch: int = 0  # the epoch before the last move (Kafka's previous member epoch)
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed: frozenset[str] = frozenset()
    assigned: Assignment = field(default_factory=dict)
    sent: Assignment | None = None  # the assignment last answered (None: answer it next time)
    deadline: float = 0.0


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    # what the assignment was computed from: topic -> (id, partitions) of the subscribed topics
    metadata: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    # every topic a member subscribed to or an offset reset named: where its share-partitions may have
    # state on other brokers (DescribeShareGroupOffsets of all topics asks their leaders)
    topics: set[str] = field(default_factory=set)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"
