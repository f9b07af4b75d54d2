"""Classic-protocol members of a consumer group (KIP-848's online migration): JoinGroup, SyncGroup,
Heartbeat and LeaveGroup from consumers that still speak the classic protocol, answered from the
consumer group's state as Kafka's classicGroup{Join,Sync,Heartbeat,Leave}ToConsumerGroup do.

The broker assigns: a classic member's JoinGroup is one reconciliation step (what it says it owns
is its ConsumerProtocolSubscription's owned partitions), its generation is its member epoch, it is
never the leader, and its SyncGroup returns its assignment. A Heartbeat asks it to rejoin
(REBALANCE_IN_PROGRESS) whenever a rejoin would move it on: the group epoch moved past it, it has
partitions to give up, or partitions it waits for were released.
"""

from __future__ import annotations

import logging
import uuid

from brook.protocol.consumer_group_records import ClassicMemberMetadata
from brook.protocol.consumer_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    Subscription,
    decode_subscription,
    encode_assignment,
    version_of,
)
from brook.protocol.errors import ErrorCode, KafkaError

from .consumer_coordinator import ConsumerGroups
from .consumer_group import ConsumerGroup, ConsumerMember, MemberState
from .group import JoinRequest, JoinResult
from .migration import ids_of, names_of

log = logging.getLogger(__name__)

__all__ = ["ClassicMembers", "supports"]


def supports(group: ConsumerGroup, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
    """Kafka's ConsumerGroup.supportsClassicProtocols: the consumer protocol, with a protocol name
    every classic member of the group also named."""
    if protocol_type != PROTOCOL_TYPE or not protocols:
        return False
    known = [{name for name, _ in m.classic.protocols} for m in group.members.values() if m.classic]
    return any(all(name in names for names in known) for name, _ in protocols)


class ClassicMembers:
    def __init__(self, groups: ConsumerGroups) -> None:
        self._groups = groups

    async def join(self, group: ConsumerGroup, req: JoinRequest) -> JoinResult:
        """Kafka's classicGroupJoinToConsumerGroup: answered at once, after its records are written."""
        new_id = req.member_id or str(uuid.uuid4())
        # A static instance joining without a member id takes its old member's place.
        replaces = (
            not req.member_id
            and req.group_instance_id is not None
            and group.static_member(req.group_instance_id) is not None
        )
        try:
            sub = self._check_join(group, new_id, req.protocol_type, req.protocols)
            if not req.member_id and req.group_instance_id is None and req.require_known_member_id:
                return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id)
            member = self._joining(group, req.member_id, new_id, req.group_instance_id)
        except KafkaError as e:
            return JoinResult(e.code, member_id=req.member_id)
        bump = member.member_id not in group.members
        if bump:
            group.add(member)
        bump |= _update(member, sub, req.rebalance_timeout_ms, req.client_id, req.client_host)
        member.classic = ClassicMemberMetadata(req.session_timeout_ms, tuple(req.protocols))
        self._groups.advance(group, member, bump, ids_of(sub.owned, self._groups.topics()))
        now = self._groups.now()
        member.session_deadline = now + req.session_timeout_ms / 1000
        member.classic_deadline = now + member.rebalance_timeout_ms / 1000  # until its SyncGroup
        if replaces:
            # It may have replaced the last consumer-protocol member: then the group is classic again,
            # Stable, the newcomer holding its predecessor's partitions (Kafka's downgrade on a
            # replaced static member).
            self._groups.hand_over(group, "", rebalance=False)
        code = await self._groups.persist(group.group_id, [member.member_id])
        if code is not ErrorCode.NONE:
            return JoinResult(code, member_id=req.member_id)
        return JoinResult(
            ErrorCode.NONE,
            generation=member.member_epoch,
            protocol_type=PROTOCOL_TYPE,
            protocol=req.protocols[0][0],
            member_id=member.member_id,
        )

    def _check_join(
        self, group: ConsumerGroup, member_id: str, protocol_type: str, protocols: list[tuple[str, bytes]]
    ) -> Subscription:
        max_size = self._groups.settings.consumer_max_size
        if len(group.members) >= max_size and member_id not in group.members:
            raise KafkaError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {max_size} members.",
            )
        if not supports(group, protocol_type, protocols):
            raise KafkaError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not supported."
            )
        try:
            return decode_subscription(protocols[0][1])
        except Exception:  # the reader's errors: truncated or invalid metadata
            raise KafkaError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                f"Member {member_id}'s embedded consumer protocol subscription is malformed.",
            ) from None

    def _joining(
        self, group: ConsumerGroup, member_id: str, new_id: str, instance_id: str | None
    ) -> ConsumerMember:
        """Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember for a classic member: a
        dynamic member is created when unknown; a static instance joining without a member id takes
        its old member's place (from epoch 0); one joining with an id must be that member."""
        if instance_id is None:
            member = group.members.get(new_id) or ConsumerMember(new_id)
            _check_classic(member, group)
            return member
        old = group.static_member(instance_id)
        if member_id:
            return self.member(group, member_id, instance_id)
        if old is None:
            return ConsumerMember(new_id, instance_id=instance_id)
        new = group.take_over(old, new_id)
        log.info(
            "consumer group %s: static member %s rejoins as %s (classic protocol)",
            group.group_id,
            instance_id,
            new_id,
        )
        return new

    def sync(
        self,
        group: ConsumerGroup,
        generation: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> tuple[ErrorCode, bytes, str | None, str | None]:
        """Kafka's classicGroupSyncToConsumerGroup: the member's assignment, as it reads it."""
        try:
            member = self.member(group, member_id, instance_id)
            _check_generation(member, generation)
            assert member.classic is not None
            name, metadata = member.classic.protocols[0]
            if (protocol_type is not None and protocol_type != PROTOCOL_TYPE) or (
                protocol_name is not None and protocol_name != name
            ):
                raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            if (
                group.group_epoch > member.member_epoch
                and member.state is not MemberState.UNREVOKED_PARTITIONS
            ):
                self._rejoin_by(member)
                raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS)
        except KafkaError as e:
            return e.code, b"", None, None
        member.classic_deadline = None
        member.session_deadline = self._groups.now() + member.classic.session_timeout_ms / 1000
        partitions = names_of(member.assigned, self._groups.topics())
        assignment = encode_assignment(Assignment(partitions), version_of(metadata))
        return ErrorCode.NONE, assignment, protocol_type, protocol_name

    def heartbeat(
        self, group: ConsumerGroup, generation: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        """Kafka's classicGroupHeartbeatToConsumerGroup."""
        try:
            member = self.member(group, member_id, instance_id)
            _check_generation(member, generation)
        except KafkaError as e:
            return e.code
        assert member.classic is not None
        member.session_deadline = self._groups.now() + member.classic.session_timeout_ms / 1000
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS and not _waiting(group, member))
        ):
            self._rejoin_by(member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    async def leave(self, group: ConsumerGroup, members: list[tuple[str, str | None]]) -> list[ErrorCode]:
        """Kafka 4.4's classicGroupLeaveToConsumerGroup: the named members leave, whichever protocol
        they speak; when only classic members remain the group may become classic again."""
        results, leaving = [], []
        for member_id, instance_id in members:
            try:
                leaving.append(self.member(group, member_id, instance_id, classic_only=False).member_id)
                results.append(ErrorCode.NONE)
            except KafkaError as e:
                results.append(e.code)
        for i, member_id in enumerate(leaving):
            # Whether to downgrade is asked once, with every leaver gone but the last (Kafka asks it
            # of the set).
            last = i == len(leaving) - 1
            self._groups.fence(group, member_id, "left the group (LeaveGroup)", downgrade=last)
        if leaving:
            code = await self._groups.persist(group.group_id)
            if code is not ErrorCode.NONE:
                return [code] * len(members)
        return results

    def _rejoin_by(self, member: ConsumerMember) -> None:
        """Kafka's join timeout: a member told to rejoin must, within its rebalance timeout."""
        if member.classic_deadline is None:
            member.classic_deadline = self._groups.now() + member.rebalance_timeout_ms / 1000

    def member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, classic_only: bool = True
    ) -> ConsumerMember:
        """Kafka's validateConsumerGroupMember (and, unless told, throwIfMemberDoesNotUseClassicProtocol)."""
        if instance_id is None:
            found = group.members.get(member_id)
            if found is None:
                raise KafkaError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {member_id} is not a member of group {group.group_id}.",
                )
        else:
            found = group.static_member(instance_id)
            if found is None:
                raise KafkaError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member with instance id {instance_id} is not a member of group {group.group_id}.",
                )
            if member_id and found.member_id != member_id:
                raise KafkaError(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} was fenced by member "
                    f"{found.member_id}.",
                )
        if classic_only:
            _check_classic(found, group)
        return found


def _check_classic(member: ConsumerMember, group: ConsumerGroup) -> None:
    if member.member_id in group.members and member.classic is None:
        raise KafkaError(
            ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol."
        )


def _check_generation(member: ConsumerMember, generation: int) -> None:
    if generation != member.member_epoch:
        raise KafkaError(
            ErrorCode.ILLEGAL_GENERATION,
            f"The member {member.member_id} used generation {generation} instead of {member.member_epoch}.",
        )


def _waiting(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """Kafka's waitingOnUnreleasedPartition: a partition of its target is still owned by another."""
    for t, ps in group.target.get(member.member_id, {}).items():
        held = member.assigned.get(t, set())
        if any(p not in held and (t, p) in group.owners for p in ps):
            return True
    return False


def _update(
    member: ConsumerMember, sub: Subscription, rebalance_timeout_ms: int, client_id: str, client_host: str
) -> bool:
    """Apply a classic JoinGroup to the member; True when its subscription changed."""
    if sub.rack_id is not None:
        member.rack_id = sub.rack_id
    if rebalance_timeout_ms != -1:
        member.rebalance_timeout_ms = rebalance_timeout_ms
    member.client_id, member.client_host = client_id, client_host
    names = frozenset(sub.topics)
    changed = names != member.subscribed_names or member.server_assignor is not None
    member.subscribed_names, member.server_assignor = names, None
    return changed
