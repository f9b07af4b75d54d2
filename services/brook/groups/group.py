"""One consumer group's membership state, as Kafka's classic group coordinator keeps it.

States: Empty → PreparingRebalance → CompletingRebalance → Stable, and Dead once deleted. A rebalance
collects JoinGroup requests from every member (or drops those that miss the rebalance timeout), bumps
the generation, picks a protocol all members support and a leader; the leader's SyncGroup carries the
assignment that every member's SyncGroup then receives.
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from dataclasses import dataclass, field

from brook.protocol.errors import ErrorCode, KafkaError


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)  # only for the leader


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_waiter: asyncio.Future[JoinResult] | None = None
    sync_waiter: asyncio.Future[tuple[ErrorCode, bytes]] | None = None
    deadline: float = 0.0  # loop time at which the session expires without a heartbeat

    def metadata_for(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(protocol)

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None and not self.join_waiter.done()


@dataclass(slots=True)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)  # KIP-394: ids handed out, join awaited
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id → member id
    state_timestamp: int = -1
    rebalance_deadline: float = 0.0
    initial_delay_until: float = 0.0  # group.initial.rebalance.delay.ms window of a new group
    new_member_added: bool = False
    rebalance_timer: asyncio.TimerHandle | None = None

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp = now_ms

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        return bool(self.candidate_protocols() & {name for name, _ in protocols})

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol among those all support; most votes win."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise KafkaError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "no protocol is supported by every member"
            )
        votes: Counter[str] = Counter()
        for m in self.members.values():
            votes[next(name for name, _ in m.protocols if name in candidates)] += 1
        return max(votes.items(), key=lambda kv: kv[1])[0]

    def all_rejoined(self) -> bool:
        return all(m.awaiting_join for m in self.members.values()) and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), or None when it cannot be known."""
        if self.protocol_type != "consumer" or self.protocol is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            try:
                topics |= _subscription_topics(m.metadata_for(self.protocol))
            except (KeyError, ValueError, IndexError):
                return None
        return topics


def _subscription_topics(meta: bytes) -> set[str]:
    """Topics of a ConsumerProtocolSubscription (version i16, then an array of i16 strings)."""
    import struct

    pos = 2
    (n,) = struct.unpack_from(">i", meta, pos)
    pos += 4
    out = set()
    for _ in range(n):
        (length,) = struct.unpack_from(">h", meta, pos)
        pos += 2
        out.add(meta[pos : pos + length].decode())
        pos += length
    return out
