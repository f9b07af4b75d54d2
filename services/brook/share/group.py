"""Share groups' membership (ShareGroupHeartbeat, ShareGroupDescribe): KIP-932's coordinator side.

A member joins with epoch 0 and its subscription; the partitions of the subscribed topics are spread
over the members by Kafka's SimpleAssignor (with more members than partitions, several members share
a partition: the partition leader hands each record to one member at a time). The assignment needs
no revocation (a record acquired by a member that lost the partition is still its own until its
lock expires): a member's epoch is the group's after each heartbeat. The group epoch moves when a member
joins, leaves or changes its subscription, or a subscribed topic's partitions change. A member
silent for the session timeout is removed. Error codes and messages follow Kafka's
GroupMetadataManager.shareGroupHeartbeat.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

from brook.protocol.consumer_group_records import metadata_hash
from brook.protocol.errors import ErrorCode, KafkaError

from .members import Assignment, ShareGroup, ShareMember
from .store import Record, ShareGroupStore

__all__ = [
    "LEAVE_EPOCH",
    "ShareGroup",
    "ShareGroups",
    "ShareHeartbeat",
    "ShareHeartbeatResult",
    "ShareMember",
]

LEAVE_EPOCH = -1
ASSIGNOR = "simple"

# topic name -> (topic id, partition count)
TopicsView = Callable[[], Mapping[str, tuple[bytes, int]]]
# group id -> (session timeout ms, heartbeat interval ms)
TimingsOf = Callable[[str], tuple[int, int]]
# Appends a group's records to its partition of __consumer_offsets; the error to answer with, if any.
RecordWriter = Callable[[str, list[Record]], Awaitable[ErrorCode]]


@dataclass(slots=True)
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: list[str] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(slots=True)
class ShareHeartbeatResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


def _assign(
    members: list[ShareMember], subscribed: frozenset[str], metadata: Mapping[str, tuple[bytes, int]]
) -> None:
    """Kafka's SimpleAssignor for members of one subscription: with fewer members than partitions each
    partition goes to one member, round robin; with more, each member gets one partition and the
    partitions are shared round robin (several members read a partition: records, not partitions, are
    what they share)."""
    partitions = [
        (metadata[t][0], i) for t in sorted(subscribed) if t in metadata for i in range(metadata[t][1])
    ]
    for m in members:
        m.assigned = {}
    if not partitions:
        return
    if len(members) <= len(partitions):
        pairs = [(members[i % len(members)], tp) for i, tp in enumerate(partitions)]
    else:
        pairs = [(m, partitions[j % len(partitions)]) for j, m in enumerate(members)]
    for m, (topic_id, index) in pairs:
        m.assigned.setdefault(topic_id, []).append(index)


class ShareGroups:
    """The share groups this broker coordinates. Each change is written to `__consumer_offsets`
    (store.py) before it is answered, when a writer is wired (`write`), and replayed by the broker
    that becomes the group's coordinator: members keep their epochs and assignments across a
    failover. Records' states are the partition leaders' (coordinator.py)."""

    def __init__(
        self, topics: TopicsView, timings: TimingsOf, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._topics = topics
        self._timings = timings
        self._clock = clock
        self.groups: dict[str, ShareGroup] = {}
        # Groups read back from a partition still being replayed: out of the expiry sweep's sight
        # (their members have no session yet) until the whole partition is loaded.
        self._replayed: dict[str, ShareGroup] = {}
        self.store = ShareGroupStore()
        self.write: RecordWriter | None = None  # the group coordinator's, wired by the broker

    # -- persistence --------------------------------------------------------------------------------
    async def persist(self, group_id: str, members: Iterable[str] = ()) -> ErrorCode:
        """Write what changed in the group (`members`: those that may have, besides joins and
        leaves); the error to answer with when the write failed."""
        group = self.groups.get(group_id)
        if group is None or self.write is None:
            return ErrorCode.NONE
        records = self.store.records(group, members)
        if not records:
            return ErrorCode.NONE
        code = await self.write(group_id, records)
        if code is not ErrorCode.NONE:
            self.store.forget(group_id)  # unknown what the log holds: the next change rewrites it all
        return code

    def replay(self, raw_key: bytes, raw_value: bytes | None) -> None:
        self.store.replay(self._replayed, raw_key, raw_value)

    def loaded(self, group_ids: Iterable[str]) -> None:
        """Groups just replayed: every member gets a fresh session; topics unchanged since the group
        wrote its hash keep its epoch (a change bumps it at the next heartbeat)."""
        now, topics = self._clock(), self._topics()
        for gid in group_ids:
            if gid in self._replayed:
                self.groups[gid] = self._replayed.pop(gid)
            group = self.groups[gid]
            session_ms, _ = self._timings(gid)
            for m in group.members.values():
                m.deadline = now + session_ms / 1000
            wanted = set().union(*(m.subscribed for m in group.members.values())) if group.members else set()
            metadata = {t: topics[t] for t in wanted if t in topics}
            if metadata_hash(metadata) == self.store.loaded_hash.get(gid):
                group.metadata = metadata

    def group_ids(self) -> list[str]:
        """The groups here, with those being read back."""
        return [*self.groups, *self._replayed]

    def drop(self, group_ids: Iterable[str]) -> None:
        """Forget groups (their partition of the offsets topic moved away)."""
        for gid in group_ids:
            self.groups.pop(gid, None)
            self._replayed.pop(gid, None)
            self.store.forget(gid)

    def heartbeat(self, hb: ShareHeartbeat) -> ShareHeartbeatResult:
        try:
            self._validate(hb)
            if hb.member_epoch == LEAVE_EPOCH:
                return self._leave(hb)
            return self._heartbeat(hb)
        except KafkaError as e:
            return ShareHeartbeatResult(e.code, e.message)

    @staticmethod
    def _validate(hb: ShareHeartbeat) -> None:
        """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid."""
        if hb.group_id == "":
            raise _invalid("GroupId can't be empty.")
        if hb.rack_id == "":
            raise _invalid("RackId can't be empty.")
        if hb.member_id == "":
            raise _invalid("MemberId can't be empty.")
        if hb.member_epoch == 0:
            if not hb.subscribed_topic_names:
                raise _invalid("SubscribedTopicNames must be set in first request.")
        elif hb.member_epoch < LEAVE_EPOCH:
            raise _invalid(f"MemberEpoch is {hb.member_epoch}, but must be greater than or equal to -1.")

    def _heartbeat(self, hb: ShareHeartbeat) -> ShareHeartbeatResult:
        session_ms, interval_ms = self._timings(hb.group_id)
        group = self.groups.get(hb.group_id)
        member = group.members.get(hb.member_id) if group is not None else None
        if member is None:
            if hb.member_epoch != 0:
                raise KafkaError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {hb.member_id} is not a member of group {hb.group_id}.",
                )
            if group is None:
                group = self.groups[hb.group_id] = ShareGroup(hb.group_id)
            member = group.members[hb.member_id] = ShareMember(hb.member_id)
            group.group_epoch += 1
        elif hb.member_epoch != member.member_epoch and hb.member_epoch != 0:
            raise KafkaError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The share group member has a different member epoch ({hb.member_epoch}) than the one "
                f"known by the group coordinator ({member.member_epoch}). The member must rejoin.",
            )
        elif hb.member_epoch == 0:
            member.sent = None  # a member rejoining (its answer lost): tell it its assignment again
        assert group is not None
        if (
            hb.subscribed_topic_names is not None
            and frozenset(hb.subscribed_topic_names) != member.subscribed
        ):
            member.subscribed = frozenset(hb.subscribed_topic_names)
            group.topics.update(member.subscribed)
            group.group_epoch += 1
        if hb.rack_id is not None:
            member.rack_id = hb.rack_id
        member.client_id, member.client_host = hb.client_id, hb.client_host
        member.deadline = self._clock() + session_ms / 1000
        self._maybe_assign(group)
        if member.member_epoch != group.assignment_epoch:
            member.previous_epoch, member.member_epoch = member.member_epoch, group.assignment_epoch
        result = ShareHeartbeatResult(
            member_id=member.member_id, member_epoch=member.member_epoch, heartbeat_interval_ms=interval_ms
        )
        if member.sent != member.assigned:
            result.assignment = member.sent = {t: list(ps) for t, ps in member.assigned.items()}
        return result

    def _leave(self, hb: ShareHeartbeat) -> ShareHeartbeatResult:
        group = self.groups.get(hb.group_id)
        if group is None or hb.member_id not in group.members:
            raise KafkaError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {hb.member_id} is not a member of group {hb.group_id}."
            )
        self._remove(group, hb.member_id)
        return ShareHeartbeatResult(member_id=hb.member_id, member_epoch=LEAVE_EPOCH)

    def _remove(self, group: ShareGroup, member_id: str) -> None:
        del group.members[member_id]
        group.group_epoch += 1
        self._maybe_assign(group)

    def _maybe_assign(self, group: ShareGroup) -> None:
        topics = self._topics()
        wanted = set().union(*(m.subscribed for m in group.members.values())) if group.members else set()
        metadata = {t: topics[t] for t in wanted if t in topics}
        if metadata != group.metadata:
            group.metadata = metadata
            group.group_epoch += 1
        if group.assignment_epoch == group.group_epoch:
            return
        by_subscription: dict[frozenset[str], list[ShareMember]] = {}
        for m in group.members.values():
            by_subscription.setdefault(m.subscribed, []).append(m)
        for subscribed, members in by_subscription.items():
            _assign(sorted(members, key=lambda m: m.member_id), subscribed, metadata)
        group.assignment_epoch = group.group_epoch

    def expire(self) -> list[tuple[str, str]]:
        """Remove members whose session ran out; (group, member) of each."""
        now, gone = self._clock(), []
        for group in self.groups.values():
            for m in [m for m in group.members.values() if m.deadline <= now]:
                self._remove(group, m.member_id)
                gone.append((group.group_id, m.member_id))
        return gone

    def describe(self, group_id: str) -> ShareGroup:
        group = self.groups.get(group_id)
        if group is None:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        self._maybe_assign(group)
        return group

    def ensure(self, group_id: str) -> ShareGroup:
        """The group, created empty if unknown (AlterShareGroupOffsets may come before any member)."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id)
        return group

    def check_empty(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and group.members:
            raise KafkaError(
                ErrorCode.NON_EMPTY_GROUP,
                f"Share group {group_id} must be empty; it has {len(group.members)} member(s).",
            )

    async def delete(self, group_id: str) -> None:
        """DeleteGroups of an empty share group (NON_EMPTY_GROUP while it has members): its
        tombstones are written first."""
        self.check_empty(group_id)
        group = self.groups.get(group_id)
        if group is not None and self.write is not None:
            code = await self.write(group_id, self.store.tombstones(group))
            if code is not ErrorCode.NONE:
                raise KafkaError(code, f"Share group {group_id} could not be deleted.")
        self.groups.pop(group_id, None)
