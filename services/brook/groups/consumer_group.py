"""A consumer group of the KIP-848 protocol: its epochs, members, target assignment and the
reconciliation that brings each member from what it owns to its target (Kafka's ConsumerGroup,
ConsumerGroupMember and CurrentAssignmentBuilder).

A partition moves in two steps: its owner is first asked to revoke it (the member keeps its epoch
until it acknowledges, by heartbeating without it), and only then may the new owner get it. A
partition is therefore never owned by two members at once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from brook.protocol.consumer_group_records import ClassicMemberMetadata

from .assignors import Assignment

__all__ = [
    "LEAVE_EPOCH",
    "STATIC_LEAVE_EPOCH",
    "ConsumerGroup",
    "ConsumerMember",
    "GroupType",
    "MemberState",
    "reconcile",
]

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"  # waits for the member to give partitions up
    UNRELEASED_PARTITIONS = "unreleased_partitions"  # waits for others to give its partitions up


class GroupType(Enum):
    CLASSIC = "classic"
    CONSUMER = "consumer"


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_names: frozenset[str] = frozenset()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    state: MemberState = MemberState.STABLE
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    session_deadline: float = 0.0  # monotonic seconds
    rebalance_deadline: float | None = None  # set while partitions wait to be revoked
    # the member epoch at which each held partition was assigned (Kafka 4.4's assignment epochs): a
    # commit with an older member epoch is taken for partitions held since then
    assignment_epochs: dict[tuple[bytes, int], int] = field(default_factory=dict)
    # A member of the classic protocol (JoinGroup/SyncGroup/Heartbeat) in this consumer group, with
    # its session timeout and protocols (classic_members.py); None for a consumer-protocol member.
    classic: ClassicMemberMetadata | None = None
    # A classic member must send SyncGroup after its join, or JoinGroup after being told to rejoin,
    # by this time (Kafka's sync and join timeouts: its rebalance timeout).
    classic_deadline: float | None = None

    def assignment_epoch(self, topic_id: bytes, partition: int) -> int | None:
        """The epoch the member has held the partition since (assigned or pending revocation);
        None when it does not hold it. Unknown (a group loaded from records): its current epoch."""
        held = self.assigned.get(topic_id, set()) | self.pending_revocation.get(topic_id, set())
        if partition not in held:
            return None
        return self.assignment_epochs.get((topic_id, partition), self.member_epoch)

    def owned(self) -> Assignment:
        """What the member may still be consuming: its assigned and to-be-revoked partitions."""
        out = {t: set(ps) for t, ps in self.assigned.items()}
        for t, ps in self.pending_revocation.items():
            out.setdefault(t, set()).update(ps)
        return out


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    assigned_at_ms: int = 0  # wall-clock time the target assignment was computed
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> target partitions
    owners: dict[tuple[bytes, int], str] = field(default_factory=dict)  # partition -> owning member
    # Topic name -> (id, partitions) of the subscribed topics, as of the last epoch bump.
    subscription_metadata: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    assignor: str = "uniform"
    # Regex -> the topic names it matched when last resolved (used from the heartbeat after the one
    # that resolved it, as Kafka resolves regexes asynchronously).
    regex_topics: dict[str, frozenset[str]] = field(default_factory=dict)
    regex_resolved_ms: dict[str, int] = field(default_factory=dict)  # when each last matched anew
    regex_refreshed_at: float = -math.inf  # the coordinator's clock at the last resolution
    regex_topic_names: frozenset[str] = frozenset()  # the topics that resolution saw

    @property
    def state(self) -> str:
        """Kafka's ConsumerGroupState names: Empty, Assigning, Reconciling, Stable."""
        if not self.members:
            return "Empty"
        if self.assignment_epoch != self.group_epoch:
            return "Assigning"
        settled = (MemberState.STABLE, self.assignment_epoch)
        for m in self.members.values():
            if (m.state, m.member_epoch) != settled and m.member_epoch != STATIC_LEAVE_EPOCH:
                return "Reconciling"
        return "Stable"

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        mid = self.static_members.get(instance_id)
        return None if mid is None else self.members.get(mid)

    def set_ownership(self, member: ConsumerMember) -> None:
        """Record which partitions `member` owns now (after its assignment changed)."""
        for tp in [tp for tp, m in self.owners.items() if m == member.member_id]:
            del self.owners[tp]
        for t, ps in member.owned().items():
            for p in ps:
                self.owners[(t, p)] = member.member_id

    def add(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self.set_ownership(member)

    def remove(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        for tp in [tp for tp, m in self.owners.items() if m == member_id]:
            del self.owners[tp]
        # A regex no member uses any more is forgotten: subscribing to it again resolves it anew.
        used = {m.subscribed_regex for m in self.members.values()}
        self.regex_topics = {r: ts for r, ts in self.regex_topics.items() if r in used}
        self.regex_resolved_ms = {r: ms for r, ms in self.regex_resolved_ms.items() if r in used}
        return member

    def take_over(self, old: ConsumerMember, member_id: str) -> ConsumerMember:
        """A static member rejoins under a new member id: the new member takes the old one's place,
        subscription and assignment, from epoch 0 (Kafka copies the member under the new id); the
        protocol it speaks is the joining request's to set."""
        new = ConsumerMember(
            member_id,
            instance_id=old.instance_id,
            rack_id=old.rack_id,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            subscribed_names=old.subscribed_names,
            subscribed_regex=old.subscribed_regex,
            server_assignor=old.server_assignor,
            assigned={t: set(ps) for t, ps in old.assigned.items()},
        )
        target = self.target.pop(old.member_id, None)
        self.remove(old.member_id)
        self.add(new)
        if target is not None:
            self.target[new.member_id] = target
        return new


def reconcile(
    group: ConsumerGroup, member: ConsumerMember, owned: Mapping[bytes, set[int]] | None, now: float
) -> bool:
    """Move `member` one step towards its target assignment (Kafka's CurrentAssignmentBuilder).
    `owned` is what the member says it owns (None: unchanged since its last heartbeat). Returns
    whether its assigned partitions changed."""
    before = {t: set(ps) for t, ps in member.assigned.items() if ps}
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owned is None or _overlaps(owned, member.pending_revocation):
            return False
    elif member.state is MemberState.STABLE and member.member_epoch == group.assignment_epoch:
        return False
    _next(group, member)
    group.set_ownership(member)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if member.rebalance_deadline is None:
            member.rebalance_deadline = now + member.rebalance_timeout_ms / 1000
    else:
        member.rebalance_deadline = None
    return before != {t: set(ps) for t, ps in member.assigned.items() if ps}


def _overlaps(owned: Mapping[bytes, set[int]], revoking: Assignment) -> bool:
    return any(owned.get(t, set()) & ps for t, ps in revoking.items())


def _next(group: ConsumerGroup, member: ConsumerMember) -> None:
    target = group.target.get(member.member_id, {})
    assigned: Assignment = {}
    revoking: Assignment = {}
    unreleased = False
    for t in set(target) | set(member.assigned):
        want, have = target.get(t, set()), member.assigned.get(t, set())
        keep = have & want
        free = {p for p in want - have if group.owners.get((t, p), member.member_id) == member.member_id}
        unreleased = unreleased or len(free) != len(want - have)
        if have - want:
            revoking[t] = have - want
        if keep | free:
            assigned[t] = keep | free
    if revoking:
        # Revoke first: the member keeps its epoch and gets nothing new until it acknowledges.
        member.assigned = {t: ps & target.get(t, set()) for t, ps in member.assigned.items()}
        member.assigned = {t: ps for t, ps in member.assigned.items() if ps}
        member.pending_revocation = revoking
        member.state = MemberState.UNREVOKED_PARTITIONS
        _keep_assignment_epochs(member)
        return
    member.assigned = assigned
    member.pending_revocation = {}
    if member.member_epoch != group.assignment_epoch:
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = group.assignment_epoch
    member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    _keep_assignment_epochs(member)


def _keep_assignment_epochs(member: ConsumerMember) -> None:
    """Partitions held before keep their assignment epoch; new ones get the member's epoch."""
    held = [(t, p) for a in (member.assigned, member.pending_revocation) for t, ps in a.items() for p in ps]
    before = member.assignment_epochs
    member.assignment_epochs = {tp: before.get(tp, member.member_epoch) for tp in held}
