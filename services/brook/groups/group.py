"""One consumer group's membership state, as Kafka's classic group coordinator keeps it.

States: Empty → PreparingRebalance → CompletingRebalance → Stable, and Dead once deleted. A rebalance
collects JoinGroup requests from every member (or drops those that miss the rebalance timeout), bumps
the generation, picks a protocol all members support and a leader; the leader's SyncGroup carries the
assignment that every member's SyncGroup then receives.
"""

from __future__ import annotations

import asyncio
import enum
import struct
from collections import Counter
from dataclasses import dataclass, field

from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.group_records import GroupKey, GroupValue, MemberValue, encode_group_value, encode_key


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class StaticRejoin(enum.Enum):
    """What a known group.instance.id joining with a new member id leads to (Kafka's
    doStaticMemberJoinGroup)."""

    KEEP = "keep"  # Stable and nothing that matters changed: same generation, same assignment
    REBALANCE = "rebalance"  # start a rebalance (the old member id may already be in an assignment)
    JOIN = "join"  # a rebalance is gathering members: wait for it like everyone else


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """A JoinGroup as the coordinator takes it (the handler fills it from the request's version)."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    require_known_member_id: bool  # KIP-394, v4+
    skip_assignment_supported: bool = False  # KIP-814, v9+


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)  # only for the leader
    skip_assignment: bool = False  # JoinGroup v9+ (KIP-814): the leader must not run the assignor


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

    def fail_waiters(self, code: ErrorCode) -> None:
        """Answer its waiting JoinGroup and SyncGroup with `code`. Their requests may be gone (the
        client hung up): the error is marked seen, so asyncio does not log it as never retrieved."""
        for fut in (self.join_waiter, self.sync_waiter):
            if fut is not None and not fut.done():
                fut.set_exception(KafkaError(code))
                fut.exception()

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

    def accepts_joining(self, member_id: str, max_size: int) -> bool:
        """Kafka's acceptJoiningMember (group.max.size): an empty group takes anyone; one preparing a
        rebalance takes a member already waiting, or anyone while fewer than max_size wait (the group
        may be above a lowered limit: the last to rejoin are refused); otherwise its members, or anyone
        while it is smaller than max_size."""
        if self.is_(GroupState.EMPTY, GroupState.DEAD):
            return True
        known = self.members.get(member_id)
        if self.is_(GroupState.PREPARING_REBALANCE):
            waiting = sum(1 for m in self.members.values() if m.awaiting_join)
            return (known is not None and known.awaiting_join) or waiting < max_size
        return known is not None or len(self.members) < max_size

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

    def replace_static_member(self, old_id: str, member: Member) -> Member:
        """KIP-345: a new incarnation of a static member takes the old one's place, assignment and
        leadership; the old one's pending JoinGroup/SyncGroup get FENCED_INSTANCE_ID. Returns the old."""
        assert member.group_instance_id is not None
        old = self.members.pop(old_id)
        old.fail_waiters(ErrorCode.FENCED_INSTANCE_ID)
        member.assignment = old.assignment
        self.members[member.member_id] = member
        self.static_members[member.group_instance_id] = member.member_id
        if self.leader == old_id:
            self.leader = member.member_id
        return old

    def static_rejoin(self, old: Member, new: Member) -> StaticRejoin:
        """Decide what the replacement of `old` by `new` (already done) means for the group.

        As Kafka: in Stable, no rebalance unless the group's protocol would change; in
        CompletingRebalance, a rebalance (the leader may have assigned to the old member id); in
        PreparingRebalance, just join it. Brook also rebalances a Stable group when a consumer's
        subscribed topics changed (Kafka would not notice until the next rebalance); other metadata
        (owned partitions, generation, user data) differs across restarts and is ignored.
        """
        if self.is_(GroupState.PREPARING_REBALANCE):
            return StaticRejoin.JOIN
        if not self.is_(GroupState.STABLE):
            return StaticRejoin.REBALANCE
        try:
            if self.select_protocol() != self.protocol:
                return StaticRejoin.REBALANCE
        except KafkaError:
            return StaticRejoin.REBALANCE
        if self.protocol_type == "consumer" and self.protocol is not None:
            try:
                before = _subscription_topics(old.metadata_for(self.protocol))
                after = _subscription_topics(new.metadata_for(self.protocol))
            except (KeyError, ValueError, IndexError, struct.error):
                return StaticRejoin.KEEP  # not a subscription we can read: Kafka's rule alone
            if before != after:
                return StaticRejoin.REBALANCE
        return StaticRejoin.KEEP

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
            except (KeyError, ValueError, IndexError, struct.error):
                return None
        return topics


def _subscription_topics(meta: bytes) -> set[str]:
    """Topics of a ConsumerProtocolSubscription (version i16, then an array of i16 strings)."""
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


def group_record(group: Group) -> tuple[bytes, bytes | None]:
    """The group's metadata record in `__consumer_offsets` (Kafka's GroupMetadataValue)."""
    protocol = group.protocol
    members = [
        MemberValue(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.session_timeout_ms,
            m.metadata_for(protocol) if protocol else b"",
            m.assignment,
        )
        for m in group.members.values()
    ]
    value = GroupValue(
        group.protocol_type or "",
        group.generation,
        protocol,
        group.leader,
        group.state_timestamp,
        members,
    )
    return encode_key(GroupKey(group.group_id)), encode_group_value(value)


def group_from_record(group_id: str, v: GroupValue) -> Group:
    """The group a metadata record describes, read back (its members' sessions start when the whole
    partition is loaded: GroupCoordinator.load_partition)."""
    g = Group(
        group_id,
        generation=v.generation,
        protocol_type=v.protocol_type or None,
        protocol=v.protocol,
        leader=v.leader,
        state_timestamp=v.state_timestamp,
    )
    for m in v.members:
        member = Member(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.session_timeout,
            m.rebalance_timeout,
            v.protocol_type,
            [(v.protocol or "", m.subscription)],
            m.assignment,
        )
        g.members[m.member_id] = member
        if m.group_instance_id is not None:
            g.static_members[m.group_instance_id] = m.member_id
    g.state = GroupState.STABLE if g.members else GroupState.EMPTY
    return g
