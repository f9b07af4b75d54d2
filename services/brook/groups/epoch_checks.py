"""Kafka 4.4's checks of who may commit or fetch a consumer group's offsets (ConsumerGroup's
validateOffsetCommit and validateOffsetFetch): the member must be known and its epoch current. A
classic member of the group (online migration) is checked by its generation, which is its member
epoch, and answered ILLEGAL_GENERATION as a classic group would."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from brook.protocol.errors import ErrorCode, KafkaError

from .consumer_group import ConsumerGroup, ConsumerMember

__all__ = ["PartitionCheck", "check_commit", "check_fetch"]

# A commit's check of one partition (topic name, partition): raises the error to answer it with.
PartitionCheck = Callable[[str, int], None]
# topic name -> (topic id, partition count)
TopicsView = Callable[[], Mapping[str, tuple[bytes, int]]]


def _known(group: ConsumerGroup, member_id: str | None) -> ConsumerMember:
    member = group.members.get(member_id or "")
    if member is None:
        raise KafkaError(
            ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
        )
    return member


def _classic_generation(member: ConsumerMember, generation: int) -> None:
    if generation != member.member_epoch:
        raise KafkaError(
            ErrorCode.ILLEGAL_GENERATION,
            f"The received generation id {generation} does not match the expected generation id "
            f"{member.member_epoch}.",
        )


def check_commit(
    group: ConsumerGroup,
    topics_view: TopicsView,
    member_id: str,
    member_epoch: int,
    version: int = 9,
    transactional: bool = False,
) -> PartitionCheck | None:
    """Raises the error to answer every partition with, or returns the check of each partition for
    a commit with an older member epoch (None: all may be committed)."""
    if member_epoch < 0 and not group.members:
        return None  # an admin commit (or a consumer outside group management) to an empty group
    member = _known(group, member_id)
    if member.classic is not None:
        _classic_generation(member, member_epoch)
        return None
    if version < 9 and not transactional:
        raise KafkaError(
            ErrorCode.UNSUPPORTED_VERSION,
            "OffsetCommit version 9 or above must be used by members using the modern group protocol",
        )
    if member_epoch == member.member_epoch:
        return None
    if member_epoch > member.member_epoch:
        raise KafkaError(
            ErrorCode.STALE_MEMBER_EPOCH,
            f"Received member epoch {member_epoch} is newer than current member epoch {member.member_epoch}.",
        )
    topics = topics_view()  # looked up per partition: no map of every topic per commit

    def check(topic: str, partition: int) -> None:
        """An older epoch commits a partition the member has held since that epoch or before (a
        commit sent before a rebalance bumped the epoch), never one it got later or lost."""
        known = topics.get(topic)
        held = member.assignment_epoch(known[0] if known is not None else b"", partition)
        if held is None:
            raise KafkaError(
                ErrorCode.STALE_MEMBER_EPOCH,
                f"Partition {topic}-{partition} is not assigned or pending revocation for member.",
            )
        if member_epoch < held:
            raise KafkaError(
                ErrorCode.STALE_MEMBER_EPOCH,
                f"Received member epoch {member_epoch} is older than assignment epoch {held} for "
                f"partition {topic}-{partition}.",
            )

    return check


def check_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> None:
    member = _known(group, member_id)
    if member.classic is not None:
        _classic_generation(member, member_epoch)
    elif member_epoch != member.member_epoch:
        raise KafkaError(
            ErrorCode.STALE_MEMBER_EPOCH,
            f"The received member epoch {member_epoch} does not match the expected member epoch "
            f"{member.member_epoch}.",
        )
