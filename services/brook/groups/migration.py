"""KIP-848's online migration: a live classic group becomes a consumer group when a member of the
consumer protocol joins it (upgrade), and a consumer group whose last consumer-protocol member
leaves becomes a classic group again (downgrade), each member keeping its partitions. Kafka's
ConsumerGroup.fromClassicGroup and ClassicGroup.fromConsumerGroup; `group.consumer.migration.policy`
says which ways are allowed.

Only groups of the embedded consumer protocol (protocol type "consumer") migrate: their members'
subscriptions and assignments are read and written with protocol/consumer_protocol.py.
"""

from __future__ import annotations

from collections.abc import Mapping

from brook.protocol.consumer_group_records import ClassicMemberMetadata
from brook.protocol.consumer_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    version_of,
)

from .assignors import Assignment as Partitions
from .consumer_group import ConsumerGroup, ConsumerMember, MemberState
from .group import Group, GroupState, Member
from .settings import GroupSettings

__all__ = ["can_downgrade", "can_upgrade", "ids_of", "names_of", "to_classic", "to_consumer"]

# topic name -> (topic id, partition count)
Topics = Mapping[str, tuple[bytes, int]]


def ids_of(partitions: Mapping[str, list[int]], topics: Topics) -> Partitions:
    """Partitions named by topic name, named by topic id (topics that no longer exist dropped)."""
    return {topics[t][0]: set(ps) for t, ps in partitions.items() if t in topics and ps}


def names_of(partitions: Partitions, topics: Topics) -> dict[str, list[int]]:
    by_id = {topic_id: name for name, (topic_id, _) in topics.items()}
    return {by_id[t]: sorted(ps) for t, ps in partitions.items() if t in by_id and ps}


def can_upgrade(group: Group, settings: GroupSettings) -> bool:
    """Kafka's validateOnlineUpgrade."""
    return (
        settings.upgrade_enabled
        and group.protocol_type == PROTOCOL_TYPE
        and len(group.members) <= settings.consumer_max_size
    )


def can_downgrade(group: ConsumerGroup, leaving: str, settings: GroupSettings) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMembers: once `leaving` is gone, members remain, no
    more than a classic group may hold (group.max.size), and all speak the classic protocol (it was the
    last consumer-protocol member, or a classic member of a group a policy once kept from
    downgrading)."""
    others = [m for mid, m in group.members.items() if mid != leaving]
    return (
        0 < len(others) <= settings.classic_max_size
        and settings.downgrade_enabled
        and all(m.classic is not None for m in others)
    )


def to_consumer(classic: Group, topics: Topics) -> ConsumerGroup:
    """The consumer group a classic group becomes: its generation is the group and assignment epoch,
    each member keeps its last assignment as its target and is Stable at that epoch. Classic members
    still rebalancing are told to rejoin by the caller. Raises ValueError on malformed metadata."""
    epoch = classic.generation
    group = ConsumerGroup(classic.group_id, group_epoch=epoch, assignment_epoch=epoch)
    for m in classic.members.values():
        protocol = classic.protocol or m.protocols[0][0]
        try:
            sub = decode_subscription(m.metadata_for(protocol))
            assigned = ids_of(decode_assignment(m.assignment).partitions, topics)
        except Exception as e:  # the reader's errors: truncated or invalid metadata
            raise ValueError(f"the embedded consumer protocol of member {m.member_id} is malformed") from e
        member = ConsumerMember(
            m.member_id,
            instance_id=m.group_instance_id,
            rack_id=sub.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            subscribed_names=frozenset(sub.topics),
            state=MemberState.STABLE,
            member_epoch=epoch,
            previous_member_epoch=epoch,
            assigned=assigned,
            assignment_epochs={(t, p): epoch for t, ps in assigned.items() for p in ps},
            classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
        )
        group.target[m.member_id] = {t: set(ps) for t, ps in assigned.items()}
        group.add(member)
    return group


def to_classic(group: ConsumerGroup, leaving: str, topics: Topics, now_ms: int) -> Group:
    """The classic group a consumer group becomes once `leaving` is gone: Stable at the group epoch,
    each remaining (classic) member holding its target assignment in the consumer protocol's version
    it speaks. The caller starts a rebalance, so the leaver's partitions find a new owner."""
    classic = Group(
        group.group_id,
        state=GroupState.STABLE,
        generation=group.group_epoch,
        protocol_type=PROTOCOL_TYPE,
        state_timestamp=now_ms,
    )
    for mid, m in group.members.items():
        if mid == leaving or m.classic is None:
            continue
        classic.members[mid] = Member(
            mid,
            m.instance_id,
            m.client_id,
            m.client_host,
            m.classic.session_timeout_ms,
            m.rebalance_timeout_ms,
            PROTOCOL_TYPE,
            list(m.classic.protocols),
        )
        if m.instance_id is not None:
            classic.static_members[m.instance_id] = mid
        if classic.leader is None:
            classic.leader = mid
    classic.protocol = classic.select_protocol()
    for mid, member in classic.members.items():
        partitions = names_of(group.target.get(mid, {}), topics)
        version = version_of(member.metadata_for(classic.protocol))
        member.assignment = encode_assignment(Assignment(partitions), version)
    return classic
