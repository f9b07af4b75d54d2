"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848): the broker drives the rebalance.

Each heartbeat may change the member's subscription (bumping the group epoch), recompute the target
assignment when the group epoch is ahead of it, and move the member one reconciliation step
(consumer_group.reconcile). Sessions and rebalance timeouts are the broker's: a member silent for
`group.consumer.session.timeout.ms`, or holding partitions to revoke past its rebalance timeout, is
fenced and its partitions go to the others. Error codes and messages follow Kafka's
GroupMetadataManager.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

from brook.protocol.errors import ErrorCode, KafkaError
from brook.tasks import cancel_and_wait

from .assignors import ASSIGNORS, Assignment
from .consumer_group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    reconcile,
)
from .consumer_store import ConsumerGroupStore, Record, metadata_hash
from .epoch_checks import PartitionCheck, check_commit, check_fetch
from .regex import InvalidRegex, compile_regex
from .settings import GroupSettings

log = logging.getLogger(__name__)

# Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS and group.consumer.regex.refresh.interval.ms's default.
REGEX_REFRESH_MIN_INTERVAL_S = 10.0
REGEX_REFRESH_INTERVAL_S = 600.0

__all__ = ["ConsumerGroups", "Heartbeat", "HeartbeatResult"]

# topic name -> (topic id, partition count)
TopicsView = Callable[[], Mapping[str, tuple[bytes, int]]]
# Appends a group's records to its partition of __consumer_offsets; the error to answer with, if any.
RecordWriter = Callable[[str, list[Record]], Awaitable[ErrorCode]]
# Turns a consumer group whose last consumer-protocol member is leaving (or was replaced) into a
# classic group, rebalancing or not (the online downgrade): the records that say so in the log, or
# None when it stays a consumer group.
Downgrade = Callable[[ConsumerGroup, str, bool], list[Record] | None]


@dataclass(slots=True)
class Heartbeat:
    """A decoded ConsumerGroupHeartbeat request (None: unchanged since the last heartbeat)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: dict[bytes, set[int]] | None = None
    client_id: str = ""
    client_host: str = ""
    version: int = 1


@dataclass(slots=True)
class HeartbeatResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


class ConsumerGroups:
    """The consumer-protocol groups this broker coordinates (held by the GroupCoordinator)."""

    def __init__(
        self,
        settings: GroupSettings,
        topics: TopicsView,
        check_coordinator: Callable[[str], None],
        write: RecordWriter,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._topics = topics
        self._check_coordinator = check_coordinator
        self._write = write
        self._clock = clock
        self.groups: dict[str, ConsumerGroup] = {}
        self.store = ConsumerGroupStore()
        self.rebalances = 0  # target assignments computed, for the metrics
        self._task: asyncio.Task[None] | None = None
        self.downgrade: Downgrade | None = None  # set by the coordinator, which keeps classic groups
        self._handed_over: dict[str, list[Record]] = {}  # downgraded groups' records, to be written

    def start(self) -> None:
        self._task = asyncio.create_task(self._expire_loop())

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    # -- persistence --------------------------------------------------------------------------------
    async def persist(self, group_id: str, members: Iterable[str] = ()) -> ErrorCode:
        """Write what changed in the group (`members`: those that may have, besides joins and leaves)
        to __consumer_offsets; the error to answer with when the write failed."""
        group = self.groups.get(group_id)
        if group is None:
            handed_over = self._handed_over.pop(group_id, None)
            return ErrorCode.NONE if handed_over is None else await self._write(group_id, handed_over)
        records = self.store.records(group, members)
        if not records:
            return ErrorCode.NONE
        code = await self._write(group_id, records)
        if code is not ErrorCode.NONE:
            self.store.forget(group_id)  # unknown what the log holds: the next change rewrites it all
        return code

    def loaded(self, group_ids: Iterable[str]) -> None:
        """Groups just replayed from the log (Kafka's onLoaded): every member gets a fresh session, a
        member revoking gets its rebalance timeout anew, and the subscribed topics are compared
        with the hash the group wrote, so topics that changed meanwhile bump the epoch at the next
        heartbeat."""
        now, topics = self._clock(), self._topics()
        for gid in group_ids:
            group = self.groups[gid]
            group.owners.clear()
            for mid, m in group.members.items():
                if m.instance_id is not None:
                    group.static_members[m.instance_id] = mid
                group.set_ownership(m)
                m.session_deadline = now + self.session_timeout_ms(m) / 1000
                if m.state is MemberState.UNREVOKED_PARTITIONS:
                    m.rebalance_deadline = now + m.rebalance_timeout_ms / 1000
            group.assignor = self._assignor_of(group)
            self._refresh_regexes(group, topics)
            metadata = self._subscription_metadata(group, topics)
            if metadata_hash(metadata) == self.store.loaded_hash.get(gid):
                group.subscription_metadata = metadata
            log.info(
                "consumer group %s loaded: group epoch %d, %d members",
                gid,
                group.group_epoch,
                len(group.members),
            )

    # -- the heartbeat ------------------------------------------------------------------------------
    def heartbeat(self, hb: Heartbeat) -> HeartbeatResult:
        try:
            self._validate(hb)
            self._check_coordinator(hb.group_id)
            if hb.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return self._leave(hb)
            return self._heartbeat(hb)
        except KafkaError as e:
            return HeartbeatResult(e.code, e.message)

    def _validate(self, hb: Heartbeat) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
        if hb.group_id == "":
            raise _invalid("GroupId can't be empty.")
        if hb.instance_id == "":
            raise _invalid("InstanceId can't be empty.")
        if hb.rack_id == "":
            raise _invalid("RackId can't be empty.")
        if hb.version >= 1 and hb.member_id == "":
            raise _invalid("MemberId can't be empty.")
        if hb.member_epoch > 0 or hb.member_epoch == LEAVE_EPOCH:
            if hb.member_id == "":
                raise _invalid("MemberId can't be empty.")
        elif hb.member_epoch == 0:
            if hb.rebalance_timeout_ms == -1:
                raise _invalid("RebalanceTimeoutMs must be provided in first request.")
            if hb.owned is None or any(hb.owned.values()):
                raise _invalid("TopicPartitions must be empty when (re-)joining.")
            if hb.subscribed_topic_names is None and hb.subscribed_topic_regex is None:
                # Kafka 4.4 asks for one of them non-null: an empty list is a subscription to nothing.
                raise _invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
                )
        elif hb.member_epoch == STATIC_LEAVE_EPOCH:
            if hb.member_id == "":
                raise _invalid("MemberId can't be empty.")
            if hb.instance_id is None:
                raise _invalid("InstanceId can't be null.")
        else:
            raise _invalid("MemberEpoch is invalid.")
        if hb.subscribed_topic_regex is not None:
            try:
                compile_regex(hb.subscribed_topic_regex)
            except InvalidRegex as e:
                raise KafkaError(
                    ErrorCode.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{hb.subscribed_topic_regex}` is not a valid regular "
                    f"expression: {e}.",
                ) from None
        assignors = self.settings.consumer_assignors
        if hb.server_assignor is not None and hb.server_assignor not in assignors:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {hb.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(assignors)}.",
            )

    def _group(self, group_id: str, create: bool) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            # Kafka 4.4 answers a group's first member with epoch 2: the group starts one epoch on.
            group = self.groups[group_id] = ConsumerGroup(group_id, group_epoch=1)
        return group

    def _member(self, group: ConsumerGroup, hb: Heartbeat, create: bool) -> ConsumerMember:
        """Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember."""
        if hb.instance_id is None:
            member = group.members.get(hb.member_id)
            if member is None:
                if not create:
                    raise KafkaError(
                        ErrorCode.UNKNOWN_MEMBER_ID,
                        f"Member {hb.member_id} is not a member of group {group.group_id}.",
                    )
                return ConsumerMember(hb.member_id)
            if hb.member_epoch == 0:
                # The member lost its place (fenced, or restarted under its KIP-1082 id): it has
                # given its partitions up and starts over.
                self._rejoin(group, member)
            self._check_epoch(member, hb)
            return member
        old = group.static_member(hb.instance_id)
        if create:
            if old is None:
                return ConsumerMember(hb.member_id, instance_id=hb.instance_id)
            if old.member_epoch != STATIC_LEAVE_EPOCH and old.member_id != hb.member_id:
                raise KafkaError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {hb.member_id} with instance id {hb.instance_id} cannot join the group "
                    f"because the instance id is owned by {old.member_id} member.",
                )
            # The rejoining instance takes the old member's place and assignment, from epoch 0.
            new = group.take_over(old, hb.member_id)
            log.info(
                "consumer group %s: static member %s (instance %s) rejoins as %s",
                group.group_id,
                old.member_id,
                hb.instance_id,
                new.member_id,
            )
            return new
        old = self._static_member(group, hb)
        self._check_epoch(old, hb)
        return old

    @staticmethod
    def _static_member(group: ConsumerGroup, hb: Heartbeat) -> ConsumerMember:
        """The static member of the request's instance id, which must be the request's member."""
        assert hb.instance_id is not None
        member = group.static_member(hb.instance_id)
        if member is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {hb.instance_id} is unknown.")
        if member.member_id != hb.member_id:
            raise KafkaError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {hb.member_id} with instance id {hb.instance_id} was fenced by member "
                f"{member.member_id}.",
            )
        return member

    def _rejoin(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        member.assigned, member.pending_revocation = {}, {}
        member.member_epoch = member.previous_member_epoch = 0
        member.state = MemberState.STABLE
        member.rebalance_deadline = None
        group.set_ownership(member)

    @staticmethod
    def _check_epoch(member: ConsumerMember, hb: Heartbeat) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid."""
        received, known = hb.member_epoch, member.member_epoch
        if received > known:
            raise KafkaError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({received}) than the one known by "
                f"the group coordinator ({known}). The member must abandon all its partitions and rejoin.",
            )
        if received < known:
            # The previous epoch with a subset of the assignment: the answer that bumped it was lost.
            subset = hb.owned is not None and all(
                ps <= member.assigned.get(t, set()) for t, ps in hb.owned.items()
            )
            if received != member.previous_member_epoch or not subset:
                raise KafkaError(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"The consumer group member has a smaller member epoch ({received}) than the one known "
                    f"by the group coordinator ({known}). The member must abandon all its partitions and "
                    "rejoin.",
                )

    def _heartbeat(self, hb: Heartbeat) -> HeartbeatResult:
        joining = hb.member_epoch == 0
        group = self._group(hb.group_id, create=joining)
        max_size = self.settings.consumer_max_size
        if len(group.members) >= max_size and (not hb.member_id or hb.member_id not in group.members):
            raise KafkaError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {max_size} members.",
            )
        if not hb.member_id:  # v0: the coordinator names the member
            hb.member_id = str(uuid.uuid4())
        member = self._member(group, hb, create=joining)
        bump = member.member_id not in group.members
        if bump:
            group.add(member)
        bump |= self._update(member, hb)
        changed = self.advance(group, member, bump, hb.owned)
        now = self._clock()
        member.session_deadline = now + self.settings.consumer_session_timeout_ms / 1000
        full = joining or (
            hb.rebalance_timeout_ms != -1
            and (hb.subscribed_topic_names is not None or hb.subscribed_topic_regex is not None)
            and hb.owned is not None
        )
        return HeartbeatResult(
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.settings.consumer_heartbeat_interval_ms,
            assignment=member.assigned if full or changed else None,
        )

    def advance(
        self, group: ConsumerGroup, member: ConsumerMember, bump: bool, owned: Mapping[bytes, set[int]] | None
    ) -> bool:
        """What every join or heartbeat does once the member is updated (`bump`: its subscription
        changed): a new group epoch when subscriptions or their topics changed, a new target
        assignment when the epoch is ahead of it, and one reconciliation step for the member.
        Returns whether the member's assigned partitions changed."""
        topics = self._topics()
        metadata = self._subscription_metadata(group, topics)
        self._refresh_regexes(group, topics)
        if bump or metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            group.group_epoch += 1
            log.info("consumer group %s: group epoch %d", group.group_id, group.group_epoch)
        if group.group_epoch > group.assignment_epoch:
            self._assign(group)
        return reconcile(group, member, owned, self._clock())

    @staticmethod
    def _update(member: ConsumerMember, hb: Heartbeat) -> bool:
        """Apply the fields the member sent; True when its subscription changed (a new group epoch)."""
        if hb.instance_id is not None:
            member.instance_id = hb.instance_id
        if hb.rack_id is not None:
            member.rack_id = hb.rack_id
        if hb.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = hb.rebalance_timeout_ms
        member.client_id, member.client_host = hb.client_id, hb.client_host
        changed = False
        if hb.subscribed_topic_names is not None:
            names = frozenset(hb.subscribed_topic_names)
            changed |= names != member.subscribed_names
            member.subscribed_names = names
        if hb.subscribed_topic_regex is not None:
            regex = hb.subscribed_topic_regex or None  # "" clears it
            changed |= regex != member.subscribed_regex
            member.subscribed_regex = regex
        if hb.server_assignor is not None:
            changed |= hb.server_assignor != member.server_assignor
            member.server_assignor = hb.server_assignor
        return changed

    def _refresh_regexes(self, group: ConsumerGroup, topics: Mapping[str, tuple[bytes, int]]) -> None:
        """Kafka's maybeUpdateRegularExpressions: the group's regexes are matched against the topics
        (whole names, internal topics never) at most every 10 s, when one is not resolved yet, a topic
        appeared since, or the last match is 10 minutes old; what they match counts from the next
        heartbeat on. Topics created within seconds of each other so reach the members in one
        assignment (librdkafka's 0113 n_wildcard expects it)."""
        regexes = {m.subscribed_regex for m in group.members.values() if m.subscribed_regex}
        for regex in set(group.regex_topics) - regexes:
            del group.regex_topics[regex]
            group.regex_resolved_ms.pop(regex, None)
        now = self._clock()
        if not regexes or now <= group.regex_refreshed_at + REGEX_REFRESH_MIN_INTERVAL_S:
            return
        names = frozenset(t for t in topics if not t.startswith("__"))
        if (
            regexes <= group.regex_topics.keys()
            and names <= group.regex_topic_names
            and now <= group.regex_refreshed_at + REGEX_REFRESH_INTERVAL_S
        ):
            return
        for regex in regexes:
            pattern = compile_regex(regex)
            matched = frozenset(t for t in names if pattern.fullmatch(t))
            if group.regex_topics.get(regex) != matched or regex not in group.regex_resolved_ms:
                # What the log's ConsumerGroupRegularExpression record holds, and since when.
                group.regex_resolved_ms[regex] = int(time.time() * 1000)
            group.regex_topics[regex] = matched
        group.regex_refreshed_at, group.regex_topic_names = now, names

    @staticmethod
    def _subscribed(
        group: ConsumerGroup, member: ConsumerMember, topics: Mapping[str, tuple[bytes, int]]
    ) -> set[str]:
        names = set(member.subscribed_names)
        if member.subscribed_regex:
            names |= group.regex_topics.get(member.subscribed_regex, frozenset())
        return {t for t in names if t in topics}

    def _subscription_metadata(
        self, group: ConsumerGroup, topics: Mapping[str, tuple[bytes, int]]
    ) -> dict[str, tuple[bytes, int]]:
        names: set[str] = set()
        for m in group.members.values():
            names |= self._subscribed(group, m, topics)
        return {t: topics[t] for t in sorted(names)}

    def _assign(self, group: ConsumerGroup) -> None:
        topics = group.subscription_metadata
        subscriptions = {
            mid: {topics[t][0] for t in self._subscribed(group, m, topics)}
            for mid, m in group.members.items()
        }
        group.assignor = self._assignor_of(group)
        partitions = dict(topics.values())
        group.target = ASSIGNORS[group.assignor](subscriptions, partitions, group.target)
        group.assignment_epoch = group.group_epoch
        group.assigned_at_ms = int(time.time() * 1000)
        self.rebalances += 1

    def _assignor_of(self, group: ConsumerGroup) -> str:
        wanted = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        return wanted.most_common(1)[0][0] if wanted else self.settings.consumer_assignors[0]

    def _leave(self, hb: Heartbeat) -> HeartbeatResult:
        """Kafka's consumerGroupLeave: -1 leaves; -2 (static) leaves for now, keeping the place."""
        group = self._group(hb.group_id, create=False)
        if hb.instance_id is None:
            member = group.members.get(hb.member_id)
            if member is None:
                raise KafkaError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {hb.member_id} is not a member of group {group.group_id}.",
                )
        else:
            member = self._static_member(group, hb)
            if hb.member_epoch == STATIC_LEAVE_EPOCH:
                log.info(
                    "consumer group %s: static member %s (instance %s) left for now",
                    group.group_id,
                    member.member_id,
                    member.instance_id,
                )
                member.member_epoch = STATIC_LEAVE_EPOCH
                member.pending_revocation = {}
                member.rebalance_deadline = None
                group.set_ownership(member)
                return HeartbeatResult(member_id=member.member_id, member_epoch=STATIC_LEAVE_EPOCH)
        self.fence(group, member.member_id, "left the group")
        return HeartbeatResult(member_id=hb.member_id, member_epoch=hb.member_epoch)

    def hand_over(self, group: ConsumerGroup, leaving: str, rebalance: bool) -> bool:
        """Make the group a classic group if it may be (see `downgrade`); the next `persist` writes
        the records that say so."""
        records = None if self.downgrade is None else self.downgrade(group, leaving, rebalance)
        if records is None:
            return False
        self.drop([group.group_id])
        self._handed_over[group.group_id] = records
        return True

    def session_timeout_ms(self, member: ConsumerMember) -> int:
        """A classic member's own session timeout, or the broker's for consumer-protocol members."""
        if member.classic is not None:
            return member.classic.session_timeout_ms
        return self.settings.consumer_session_timeout_ms

    def fence(self, group: ConsumerGroup, member_id: str, why: str, downgrade: bool = True) -> None:
        """Remove a member: its partitions go to the others at the next group epoch, whose target
        assignment is computed at once (as Kafka 4.4 does after a member leaves, even the last one).
        When only classic members stay, the group may become a classic group instead (Kafka's
        consumerGroupFenceMember): the next `persist` writes what the coordinator handed over."""
        if downgrade and self.hand_over(group, member_id, rebalance=True):
            log.info("consumer group %s: member %s %s; now a classic group", group.group_id, member_id, why)
            return
        if group.remove(member_id) is not None:
            group.subscription_metadata = self._subscription_metadata(group, self._topics())
            group.group_epoch += 1
            self._assign(group)
            log.info(
                "consumer group %s: member %s %s (group epoch %d)",
                group.group_id,
                member_id,
                why,
                group.group_epoch,
            )

    # -- timeouts -----------------------------------------------------------------------------------
    def expire(self) -> list[str]:
        """Fence the members past their session or rebalance timeout; the groups that changed."""
        now = self._clock()
        changed = []
        for group in list(self.groups.values()):
            epoch = group.group_epoch
            for member in list(group.members.values()):
                if group.group_id not in self.groups:
                    break  # downgraded to a classic group
                if member.session_deadline and now > member.session_deadline:
                    self.fence(group, member.member_id, "missed its session timeout")
                elif member.rebalance_deadline is not None and now > member.rebalance_deadline:
                    self.fence(group, member.member_id, "did not revoke its partitions in time")
                elif member.classic_deadline is not None and now > member.classic_deadline:
                    self.fence(group, member.member_id, "did not send SyncGroup or JoinGroup in time")
            if group.group_epoch != epoch or group.group_id in self._handed_over:
                changed.append(group.group_id)
        return changed

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(0.2)
            try:
                for gid in self.expire():
                    await self.persist(gid)
            except Exception:
                log.exception("consumer group session expiry failed")

    # -- offsets and listing ------------------------------------------------------------------------
    def validate_commit(
        self, group_id: str, member_id: str, member_epoch: int, version: int = 9, transactional: bool = False
    ) -> PartitionCheck | None:
        """Kafka 4.4's ConsumerGroup.validateOffsetCommit (epoch_checks.py)."""
        return check_commit(
            self.groups[group_id], self._topics, member_id, member_epoch, version, transactional
        )

    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> None:
        """Kafka's ConsumerGroup.validateOffsetFetch (OffsetFetch v9+ names the member)."""
        if member_id is not None or member_epoch >= 0:
            check_fetch(self.groups[group_id], member_id, member_epoch)

    def describe(self, group_id: str) -> tuple[ErrorCode, str | None, ConsumerGroup | None]:
        try:
            self._check_coordinator(group_id)
        except KafkaError as e:
            return e.code, e.message, None
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        return ErrorCode.NONE, None, group

    def topics(self) -> Mapping[str, tuple[bytes, int]]:
        return self._topics()

    def now(self) -> float:
        return self._clock()

    def list_groups(self) -> Iterable[ConsumerGroup]:
        """The consumer groups of the offsets-topic partitions this broker leads."""
        for gid in sorted(self.groups):
            try:
                self._check_coordinator(gid)
            except KafkaError:
                continue
            yield self.groups[gid]

    def drop(self, group_ids: Iterable[str]) -> None:
        """Forget groups (their partition of the offsets topic moved away, or they were deleted)."""
        for gid in group_ids:
            self.groups.pop(gid, None)
            self.store.forget(gid)
