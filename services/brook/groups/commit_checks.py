"""Which partitions of an offset commit a consumer group (KIP-848) takes: Kafka 4.4's checks of the
member and its epoch, per partition for a commit with an older member epoch (consumer_coordinator.py's
validate_commit), for OffsetCommit and for TxnOffsetCommit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from brook.protocol.errors import ErrorCode, KafkaError

from .consumer_coordinator import ConsumerGroups
from .epoch_checks import PartitionCheck


class _Commit(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...


C = TypeVar("C", bound=_Commit)
Refused = dict[tuple[str, int], ErrorCode]


def split(
    commits: Sequence[C],
    check: PartitionCheck | None,
    code: Callable[[KafkaError], ErrorCode] = lambda e: e.code,
) -> tuple[list[C], Refused]:
    """The commits `check` lets through, and the error codes of those it refuses."""
    if check is None:
        return list(commits), {}
    refused: Refused = {}
    for c in commits:
        try:
            check(c.topic, c.partition)
        except KafkaError as e:
            refused[(c.topic, c.partition)] = code(e)
    return [c for c in commits if (c.topic, c.partition) not in refused], refused


def txn_commits(
    groups: ConsumerGroups,
    group_id: str,
    member_id: str,
    instance_id: str | None,
    epoch: int,
    commits: Sequence[C],
) -> tuple[list[C], Refused]:
    """A TxnOffsetCommit to a consumer group: taken whole without a member (epoch -1, no member id),
    else checked as an OffsetCommit; a stale epoch is answered ILLEGAL_GENERATION, which every
    TxnOffsetCommit version Brook serves (0-3) knows (Kafka answers STALE_MEMBER_EPOCH from v6)."""
    if epoch == -1 and not member_id and instance_id is None:
        return list(commits), {}

    def code(e: KafkaError) -> ErrorCode:
        return ErrorCode.ILLEGAL_GENERATION if e.code == ErrorCode.STALE_MEMBER_EPOCH else e.code

    try:
        check = groups.validate_commit(group_id, member_id, epoch, transactional=True)
    except KafkaError as e:
        return [], {(c.topic, c.partition): code(e) for c in commits}
    return split(commits, check, code)
