"""The group coordinator: JoinGroup/SyncGroup/Heartbeat/LeaveGroup and committed offsets.

Group membership lives in memory; offsets and group metadata are records in `__consumer_offsets`
(Kafka's formats), written before they are acknowledged and replayed when a partition of that topic
is loaded. The coordinator of a group is the leader of partition hash(group) % partitions, as in Kafka.
The coordinator reaches the log only through `OffsetsLog`, so this room does not depend on the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.group_records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    build_batch,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_key,
    encode_offset_value,
    iter_batches,
)
from brook.protocol.primitives import java_string_hash
from brook.protocol.txn_records import CONTROL_COMMIT

from .group import Group, GroupState, JoinResult, Member, StaticRejoin

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"


@dataclass(slots=True)
class GroupSettings:
    offsets_topic_partitions: int = 50  # offsets.topic.num.partitions
    offsets_topic_replication_factor: int = 1  # offsets.topic.replication.factor
    offsets_retention_minutes: int = 7 * 24 * 60  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes


class OffsetsLog(Protocol):
    """What the coordinator needs from the broker: the `__consumer_offsets` partitions."""

    async def ensure_topic(self, partitions: int, replication_factor: int) -> None: ...
    def is_local_leader(self, partition: int) -> bool: ...
    def topic_exists(self, topic: str) -> bool: ...
    async def append(self, partition: int, batch: bytes) -> None: ...
    def read_batches(self, partition: int) -> Iterator[bytes]: ...


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


class GroupCoordinator:
    def __init__(
        self, log_: OffsetsLog, settings: GroupSettings, clock: Callable[[], float] = time.time
    ) -> None:
        self._log = log_
        self.settings = settings
        self._clock = clock
        self._groups: dict[str, Group] = {}
        self._offsets: dict[str, dict[tuple[str, int], OffsetValue]] = {}
        # TxnOffsetCommit offsets waiting for their transaction's marker: producer id -> group -> offsets
        self._pending_txn: dict[int, dict[str, dict[tuple[str, int], OffsetValue]]] = {}
        self._loaded: set[int] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()

    # -- lifecycle -----------------------------------------------------------------------------------
    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def start(self) -> None:
        if self._log.topic_exists(OFFSETS_TOPIC):
            for p in range(self.settings.offsets_topic_partitions):
                if self._log.is_local_leader(p):
                    self.load_partition(p)
        self._tasks.append(asyncio.create_task(self._expire_sessions_loop()))
        self._tasks.append(asyncio.create_task(self._expire_offsets_loop()))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks.clear()
        for g in self._groups.values():
            self._cancel_timer(g)

    def partition_for(self, group_id: str) -> int:
        return abs(java_string_hash(group_id)) % self.settings.offsets_topic_partitions

    async def ensure_offsets_topic(self) -> None:
        if not self._log.topic_exists(OFFSETS_TOPIC):
            await self._log.ensure_topic(
                self.settings.offsets_topic_partitions, self.settings.offsets_topic_replication_factor
            )
            for p in range(self.settings.offsets_topic_partitions):
                if self._log.is_local_leader(p):
                    self._loaded.add(p)

    def load_partition(self, partition: int) -> None:
        """Rebuild groups and offsets from one `__consumer_offsets` partition (this broker now leads it)."""
        if partition in self._loaded:
            return
        for chunk in self._log.read_batches(partition):
            for batch in iter_batches(chunk):
                if batch.control_type >= 0:
                    self._complete_txn(partition, batch.producer_id, batch.control_type == CONTROL_COMMIT)
                    continue
                for key, value in batch.records:
                    if key is None:
                        continue
                    try:
                        if batch.transactional:
                            self._replay_txn_offset(batch.producer_id, key, value)
                        else:
                            self._replay(key, value)
                    except Exception as e:  # a record we cannot read must not stop the coordinator
                        log.warning("skipping unreadable %s record: %s", OFFSETS_TOPIC, e)
        self._loaded.add(partition)

    def unload_partition(self, partition: int) -> None:
        self._loaded.discard(partition)
        for gid in [g for g in self._groups if self.partition_for(g) == partition]:
            group = self._groups.pop(gid)
            self._cancel_timer(group)
            self._fail_waiters(group, ErrorCode.NOT_COORDINATOR)
        for gid in [g for g in self._offsets if self.partition_for(g) == partition]:
            del self._offsets[gid]
        for groups in self._pending_txn.values():
            for gid in [g for g in groups if self.partition_for(g) == partition]:
                del groups[gid]

    def _replay_txn_offset(self, producer_id: int, raw_key: bytes, raw_value: bytes | None) -> None:
        key = decode_key(raw_key)
        if isinstance(key, OffsetKey) and raw_value is not None:
            pending = self._pending_txn.setdefault(producer_id, {}).setdefault(key.group, {})
            pending[(key.topic, key.partition)] = decode_offset_value(raw_value)

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT/ABORT marker was written to `partition` of __consumer_offsets: the transaction's
        offsets for the groups there become committed, or are dropped."""
        if partition in self._loaded:
            self._complete_txn(partition, producer_id, commit)

    def _complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        groups = self._pending_txn.get(producer_id)
        if not groups:
            return
        for gid in [g for g in groups if self.partition_for(g) == partition]:
            offsets = groups.pop(gid)
            if commit:
                self._offsets.setdefault(gid, {}).update(offsets)
        if not groups:
            del self._pending_txn[producer_id]

    def pending_txn_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """Partitions of the group with transactional offsets awaiting their marker."""
        out: set[tuple[str, int]] = set()
        for groups in self._pending_txn.values():
            out.update(groups.get(group_id, {}))
        return out

    def _replay(self, raw_key: bytes, raw_value: bytes | None) -> None:
        key = decode_key(raw_key)
        if isinstance(key, OffsetKey):
            offsets = self._offsets.setdefault(key.group, {})
            if raw_value is None:
                offsets.pop((key.topic, key.partition), None)
            else:
                offsets[(key.topic, key.partition)] = decode_offset_value(raw_value)
            return
        if raw_value is None:
            self._groups.pop(key.group, None)
            return
        v = decode_group_value(raw_value)
        g = Group(
            key.group,
            generation=v.generation,
            protocol_type=v.protocol_type or None,
            protocol=v.protocol,
            leader=v.leader,
            state_timestamp=v.state_timestamp,
        )
        deadline = asyncio.get_event_loop().time()
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
            member.deadline = deadline + m.session_timeout / 1000
            g.members[m.member_id] = member
            if m.group_instance_id is not None:
                g.static_members[m.group_instance_id] = m.member_id
        g.state = GroupState.STABLE if g.members else GroupState.EMPTY
        self._groups[key.group] = g

    # -- coordinator lookup ------------------------------------------------------------------------
    def check_coordinator(self, group_id: str) -> None:
        if not group_id:
            raise KafkaError(ErrorCode.INVALID_GROUP_ID, "group id is empty")
        p = self.partition_for(group_id)
        if p not in self._loaded:
            if not self._log.topic_exists(OFFSETS_TOPIC) or self._log.is_local_leader(p):
                raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the offsets topic is not ready")
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"this broker does not lead {OFFSETS_TOPIC}-{p}")

    # -- membership --------------------------------------------------------------------------------
    async def join(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        client_id: str,
        client_host: str,
        require_known_member_id: bool,
        skip_assignment_supported: bool = False,
    ) -> JoinResult:
        try:
            self.check_coordinator(group_id)
        except KafkaError as e:
            return JoinResult(e.code, member_id=member_id)
        s = self.settings
        if not s.min_session_timeout_ms <= session_timeout_ms <= s.max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=member_id)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        group = self._groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
            group = self._groups[group_id] = Group(group_id, state_timestamp=self.now_ms())
        if group.state is GroupState.DEAD:
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
        if not group.supports(protocol_type, protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)

        def new_member(mid: str) -> Member:
            return Member(
                mid,
                group_instance_id,
                client_id,
                client_host,
                session_timeout_ms,
                rebalance_timeout_ms,
                protocol_type,
                protocols,
            )

        if not member_id:
            new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if group_instance_id is not None:
                old_id = group.static_members.get(group_instance_id)
                if old_id is not None and old_id in group.members:
                    return await self._static_member_rejoin(
                        group, old_id, new_member(new_id), skip_assignment_supported
                    )
                return await self._add_member_and_rebalance(group, new_member(new_id))
            if require_known_member_id:
                # KIP-394: hand out an id and let the client come back with it.
                group.pending_members.add(new_id)
                asyncio.get_running_loop().call_later(
                    session_timeout_ms / 1000, self._expire_pending, group, new_id
                )
                return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id)
            return await self._add_member_and_rebalance(group, new_member(member_id or new_id))

        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            return await self._add_member_and_rebalance(group, new_member(member_id))
        if group_instance_id is not None:
            known = group.static_members.get(group_instance_id)
            if known is not None and known != member_id:
                # A newer incarnation of this instance holds its place: this one must shut down.
                return JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=member_id)
            if known is None:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
        member = group.members.get(member_id)
        if member is None:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
        changed = member.protocols != protocols
        member.protocols = protocols
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        if not changed and (
            group.is_(GroupState.COMPLETING_REBALANCE)
            or (group.is_(GroupState.STABLE) and member_id != group.leader)
        ):
            # Nothing new (e.g. a lost JoinGroup response): the current generation again, as Kafka.
            # A Stable group's leader rejoining means it wants a rebalance (e.g. topic metadata).
            self._touch(member)
            return self._join_result(group, member)
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, f"member {member_id} rejoined")
        return await self._await_join(group, member)

    async def _add_member_and_rebalance(self, group: Group, member: Member) -> JoinResult:
        if not group.members:
            group.protocol_type = member.protocol_type
        group.members[member.member_id] = member
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = member.member_id
        group.new_member_added = True
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, f"member {member.member_id} joined")
        elif group.is_(GroupState.PREPARING_REBALANCE) and self._in_initial_delay(group):
            self._extend_initial_delay(group)
        return await self._await_join(group, member)

    async def _static_member_rejoin(
        self, group: Group, old_id: str, member: Member, skip_assignment_supported: bool
    ) -> JoinResult:
        """KIP-345 (Kafka's doStaticMemberJoinGroup): a static member back with a new member id
        replaces its old one; in a Stable group it keeps its assignment and nobody rebalances."""
        previous_leader = group.leader or ""
        old = group.replace_static_member(old_id, member)
        self._touch(member)
        action = group.static_rejoin(old, member)
        log.info(
            "group %s: static member %s rejoined as %s (was %s%s): %s",
            group.group_id,
            member.group_instance_id,
            member.member_id,
            old_id,
            ", the leader" if old_id == previous_leader else "",
            action.value,
        )
        if action is StaticRejoin.REBALANCE:
            self._prepare_rebalance(group, f"static member {member.group_instance_id} rejoined")
        if action is not StaticRejoin.KEEP:
            return await self._await_join(group, member)
        await self._persist_group_async(group)  # the instance's new member id
        result = self._join_result(group, member)
        if member.member_id == group.leader:
            if skip_assignment_supported:
                # KIP-814: it learns it leads (and sees the members) but must not assign.
                result.skip_assignment = True
            else:
                # Before v9 the only way to stop it assigning: name the old id as the leader, so it
                # acts as a follower; its SyncGroup gets the stored assignment.
                result.leader = previous_leader
                result.members = []
        return result

    async def _await_join(self, group: Group, member: Member) -> JoinResult:
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_waiter = fut
        self._try_complete_join(group)
        try:
            return await fut
        except KafkaError as e:
            return JoinResult(e.code, member_id=member.member_id)

    def _join_result(self, group: Group, member: Member) -> JoinResult:
        assert group.protocol is not None
        members = []
        if member.member_id == group.leader:
            members = [
                (m.member_id, m.group_instance_id, m.metadata_for(group.protocol))
                for m in group.members.values()
            ]
        return JoinResult(
            ErrorCode.NONE,
            group.generation,
            group.protocol_type,
            group.protocol,
            group.leader or "",
            member.member_id,
            members,
        )

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        log.info("group %s: preparing rebalance (%s)", group.group_id, reason)
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_assignments(group, ErrorCode.REBALANCE_IN_PROGRESS)
        loop = asyncio.get_running_loop()
        initial = group.is_(GroupState.EMPTY)
        group.transition(GroupState.PREPARING_REBALANCE, self.now_ms())
        timeout = max(group.rebalance_timeout_ms(), 1) / 1000
        group.rebalance_deadline = loop.time() + timeout
        self._cancel_timer(group)
        if initial and self.settings.initial_rebalance_delay_ms > 0:
            group.initial_delay_until = loop.time() + min(
                self.settings.initial_rebalance_delay_ms / 1000, timeout
            )
            group.rebalance_timer = loop.call_at(group.initial_delay_until, self._on_rebalance_timer, group)
        else:
            group.initial_delay_until = 0.0
            group.rebalance_timer = loop.call_at(group.rebalance_deadline, self._on_rebalance_timer, group)

    def _in_initial_delay(self, group: Group) -> bool:
        return asyncio.get_running_loop().time() < group.initial_delay_until

    def _extend_initial_delay(self, group: Group) -> None:
        # Kafka's InitialDelayedJoin: each new member buys another delay, up to the rebalance timeout.
        loop = asyncio.get_running_loop()
        group.initial_delay_until = min(
            loop.time() + self.settings.initial_rebalance_delay_ms / 1000, group.rebalance_deadline
        )
        self._cancel_timer(group)
        group.rebalance_timer = loop.call_at(group.initial_delay_until, self._on_rebalance_timer, group)

    def _on_rebalance_timer(self, group: Group) -> None:
        group.rebalance_timer = None
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        loop = asyncio.get_running_loop()
        if group.initial_delay_until and loop.time() < group.rebalance_deadline and not group.all_rejoined():
            # The initial delay is over but members are still missing: wait up to the rebalance timeout.
            group.initial_delay_until = 0.0
            group.rebalance_timer = loop.call_at(group.rebalance_deadline, self._on_rebalance_timer, group)
            return
        group.initial_delay_until = 0.0
        self._complete_join(group, force=True)

    def _try_complete_join(self, group: Group) -> None:
        if (
            group.is_(GroupState.PREPARING_REBALANCE)
            and group.all_rejoined()
            and not self._in_initial_delay(group)
        ):
            self._complete_join(group, force=False)

    def _complete_join(self, group: Group, force: bool) -> None:
        self._cancel_timer(group)
        if force:
            for mid in [mid for mid, m in group.members.items() if not m.awaiting_join]:
                log.info("group %s: member %s did not rejoin in time; removing it", group.group_id, mid)
                self._remove_member(group, mid)
            group.pending_members.clear()
        group.generation += 1
        group.new_member_added = False
        if not group.members:
            group.protocol = None
            group.leader = None
            group.transition(GroupState.EMPTY, self.now_ms())
            self._persist_group(group)
            return
        try:
            group.protocol = group.select_protocol()
        except KafkaError as e:
            self._fail_waiters(group, e.code)
            return
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.transition(GroupState.COMPLETING_REBALANCE, self.now_ms())
        now = asyncio.get_running_loop().time()
        log.info(
            "group %s: generation %d with %d members, protocol %s",
            group.group_id,
            group.generation,
            len(group.members),
            group.protocol,
        )
        for m in group.members.values():
            m.deadline = now + m.session_timeout_ms / 1000
            if m.join_waiter is not None and not m.join_waiter.done():
                m.join_waiter.set_result(self._join_result(group, m))
            m.join_waiter = None

    async def sync(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> tuple[ErrorCode, bytes, str | None, str | None]:
        try:
            self.check_coordinator(group_id)
            group, member = self._member(group_id, member_id, group_instance_id)
        except KafkaError as e:
            return e.code, b"", None, None
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION, b"", None, None
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol
        ):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL, b"", None, None
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS, b"", None, None
        self._touch(member)
        if group.is_(GroupState.STABLE):
            return ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol
        fut: asyncio.Future[tuple[ErrorCode, bytes]] = asyncio.get_running_loop().create_future()
        member.sync_waiter = fut
        if member_id == group.leader:
            for mid, m in group.members.items():
                m.assignment = assignments.get(mid, b"")
            await self._persist_group_async(group)
            if group.is_(GroupState.COMPLETING_REBALANCE) and group.generation == generation:
                group.transition(GroupState.STABLE, self.now_ms())
                for m in group.members.values():
                    if m.sync_waiter is not None and not m.sync_waiter.done():
                        m.sync_waiter.set_result((ErrorCode.NONE, m.assignment))
                    m.sync_waiter = None
        try:
            code, assignment = await fut
        except KafkaError as e:
            return e.code, b"", None, None
        return code, assignment, group.protocol_type, group.protocol

    def heartbeat(
        self, group_id: str, generation: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        try:
            self.check_coordinator(group_id)
            group, member = self._member(group_id, member_id, group_instance_id)
        except KafkaError as e:
            return e.code
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        self._touch(member)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        try:
            self.check_coordinator(group_id)
        except KafkaError as e:
            return e.code, [e.code] * len(members)
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        results = []
        for member_id, instance_id in members:
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is None:
                    results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != known:
                    results.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = known
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                results.append(ErrorCode.NONE)
                continue
            if member_id not in group.members:
                results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            self._remove_member(group, member_id)
            self._after_member_left(group, f"member {member_id} left")
            results.append(ErrorCode.NONE)
        return ErrorCode.NONE, results

    def _member(self, group_id: str, member_id: str, instance_id: str | None) -> tuple[Group, Member]:
        group = self._groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"group {group_id} has no member {member_id}")
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is not None and known != member_id:
                raise KafkaError(ErrorCode.FENCED_INSTANCE_ID, f"instance {instance_id} has a newer member")
        member = group.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"group {group_id} has no member {member_id}")
        return group, member

    def _touch(self, member: Member) -> None:
        member.deadline = asyncio.get_running_loop().time() + member.session_timeout_ms / 1000

    def _remove_member(self, group: Group, member_id: str) -> None:
        m = group.members.pop(member_id)
        if m.group_instance_id is not None and group.static_members.get(m.group_instance_id) == member_id:
            del group.static_members[m.group_instance_id]
        for fut in (m.join_waiter, m.sync_waiter):
            if fut is not None and not fut.done():
                fut.set_exception(KafkaError(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.leader == member_id:
            group.leader = None

    def _after_member_left(self, group: Group, reason: str) -> None:
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            if group.members:
                self._prepare_rebalance(group, reason)
            else:
                group.generation += 1
                group.protocol = None
                group.transition(GroupState.EMPTY, self.now_ms())
                self._persist_group(group)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            if group.members:
                self._try_complete_join(group)
            else:
                self._complete_join(group, force=True)

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._try_complete_join(group)

    def _reset_assignments(self, group: Group, code: ErrorCode) -> None:
        for m in group.members.values():
            m.assignment = b""
            if m.sync_waiter is not None and not m.sync_waiter.done():
                m.sync_waiter.set_result((code, b""))
            m.sync_waiter = None

    def _fail_waiters(self, group: Group, code: ErrorCode) -> None:
        for m in group.members.values():
            for fut in (m.join_waiter, m.sync_waiter):
                if fut is not None and not fut.done():
                    fut.set_exception(KafkaError(code))

    def _cancel_timer(self, group: Group) -> None:
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
            group.rebalance_timer = None

    async def _expire_sessions_loop(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            for group in list(self._groups.values()):
                self._expire_sessions(group)

    def _expire_sessions(self, group: Group) -> bool:
        """Remove the members whose session deadline has passed; whether there were any. Also run on
        demand (DeleteGroups), so an answer right after a deadline does not depend on the loop's tick."""
        now = asyncio.get_running_loop().time()
        expired = [mid for mid, m in group.members.items() if not m.awaiting_join and m.deadline < now]
        for mid in expired:
            log.info("group %s: member %s session expired", group.group_id, mid)
            self._remove_member(group, mid)
        if expired:
            self._after_member_left(group, "session expired")
        return bool(expired)

    # -- queries -----------------------------------------------------------------------------------
    def describe(self, group_id: str) -> tuple[ErrorCode, Group | None]:
        try:
            self.check_coordinator(group_id)
        except KafkaError as e:
            return e.code, None
        return ErrorCode.NONE, self._groups.get(group_id)

    def list_groups(self) -> Iterable[Group]:
        names = set(self._groups) | set(self._offsets)
        for name in sorted(names):
            if self.partition_for(name) in self._loaded:
                yield self._groups.get(name) or Group(name)

    # -- offsets -----------------------------------------------------------------------------------
    async def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        commits: list[OffsetCommit],
        topic_exists: Callable[[str, int], bool],
    ) -> dict[tuple[str, int], ErrorCode]:
        def all_(code: ErrorCode) -> dict[tuple[str, int], ErrorCode]:
            return {(c.topic, c.partition): code for c in commits}

        try:
            self.check_coordinator(group_id)
        except KafkaError as e:
            return all_(e.code)
        group = self._groups.get(group_id)
        if group is None:
            if generation >= 0:
                return all_(ErrorCode.ILLEGAL_GENERATION)
            group = self._groups[group_id] = Group(group_id, state_timestamp=self.now_ms())
        if group.is_(GroupState.DEAD):
            return all_(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not (generation < 0 and group.is_(GroupState.EMPTY)):
            try:
                _, member = self._member(group_id, member_id, group_instance_id)
            except KafkaError as e:
                return all_(e.code)
            if generation != group.generation:
                return all_(ErrorCode.ILLEGAL_GENERATION)
            if group.is_(GroupState.COMPLETING_REBALANCE):
                return all_(ErrorCode.REBALANCE_IN_PROGRESS)
            self._touch(member)
        now = self.now_ms()
        results, records, values = self._offset_records(group_id, commits, topic_exists, now)
        if records:
            try:
                await self._log.append(self.partition_for(group_id), build_batch(records, now))
            except KafkaError as e:
                for key in values:
                    results[key] = e.code
                return results
            self._offsets.setdefault(group_id, {}).update(values)
            for key in values:
                results[key] = ErrorCode.NONE
        return results

    def _offset_records(
        self,
        group_id: str,
        commits: list[OffsetCommit],
        topic_exists: Callable[[str, int], bool],
        now: int,
    ) -> tuple[
        dict[tuple[str, int], ErrorCode], list[tuple[bytes, bytes | None]], dict[tuple[str, int], OffsetValue]
    ]:
        """(errors of the refused commits, records to write, values written) of an offset commit."""
        results: dict[tuple[str, int], ErrorCode] = {}
        records: list[tuple[bytes, bytes | None]] = []
        values: dict[tuple[str, int], OffsetValue] = {}
        for c in commits:
            key = (c.topic, c.partition)
            if not topic_exists(c.topic, c.partition):
                results[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif len((c.metadata or "").encode()) > self.settings.offset_metadata_max_bytes:
                results[key] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                v = values[key] = OffsetValue(c.offset, c.leader_epoch, c.metadata or "", now)
                okey = encode_key(OffsetKey(group_id, c.topic, c.partition))
                records.append((okey, encode_offset_value(v)))
        return results, records, values

    async def commit_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        commits: list[OffsetCommit],
        topic_exists: Callable[[str, int], bool],
    ) -> dict[tuple[str, int], ErrorCode]:
        """TxnOffsetCommit (KIP-98, KIP-447): written now as the producer's transactional records,
        applied when the transaction's COMMIT marker reaches this group's partition."""

        def all_(code: ErrorCode) -> dict[tuple[str, int], ErrorCode]:
            return {(c.topic, c.partition): code for c in commits}

        try:
            self.check_coordinator(group_id)
        except KafkaError as e:
            return all_(e.code)
        group = self._groups.get(group_id)
        if generation >= 0 or member_id:  # KIP-447: the producer's consumer must still be a member
            if group is None:
                return all_(ErrorCode.ILLEGAL_GENERATION)
            if member_id and member_id not in group.members:
                return all_(ErrorCode.UNKNOWN_MEMBER_ID)
            if generation >= 0 and generation != group.generation:
                return all_(ErrorCode.ILLEGAL_GENERATION)
        now = self.now_ms()
        results, records, values = self._offset_records(group_id, commits, topic_exists, now)
        if records:
            batch = build_batch(records, now, producer_id, producer_epoch)
            try:
                await self._log.append(self.partition_for(group_id), batch)
            except KafkaError as e:
                for key in values:
                    results[key] = e.code
                return results
            self._pending_txn.setdefault(producer_id, {}).setdefault(group_id, {}).update(values)
            for key in values:
                results[key] = ErrorCode.NONE
        return results

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, list[int]]] | None
    ) -> tuple[ErrorCode, list[tuple[str, int, OffsetValue | None]]]:
        try:
            self.check_coordinator(group_id)
        except KafkaError as e:
            return e.code, []
        offsets = self._offsets.get(group_id, {})
        if partitions is None:
            return ErrorCode.NONE, [(t, p, v) for (t, p), v in sorted(offsets.items())]
        return ErrorCode.NONE, [(t, p, offsets.get((t, p))) for t, ps in partitions for p in ps]

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        for gid in group_ids:
            try:
                self.check_coordinator(gid)
            except KafkaError as e:
                results[gid] = e.code
                continue
            group = self._groups.get(gid)
            if group is None and gid not in self._offsets:
                results[gid] = ErrorCode.GROUP_ID_NOT_FOUND
                continue
            if group is not None and self._expire_sessions(group):
                # The group's new (empty) metadata is being written: it must not land after the tombstone.
                await asyncio.gather(*list(self._background), return_exceptions=True)
            if group is not None and group.members:
                results[gid] = ErrorCode.NON_EMPTY_GROUP
                continue
            records = [(encode_key(OffsetKey(gid, t, p)), None) for t, p in self._offsets.get(gid, {})]
            records.append((encode_key(GroupKey(gid)), None))
            try:
                await self._log.append(self.partition_for(gid), build_batch(records, self.now_ms()))
            except KafkaError as e:
                results[gid] = e.code
                continue
            self._offsets.pop(gid, None)
            if group is not None:
                group.transition(GroupState.DEAD, self.now_ms())
                self._groups.pop(gid, None)
            results[gid] = ErrorCode.NONE
        return results

    async def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        try:
            self.check_coordinator(group_id)
        except KafkaError as e:
            return e.code, {}
        group = self._groups.get(group_id)
        if group is None and group_id not in self._offsets:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        subscribed = group.subscribed_topics() if group is not None and group.members else set()
        if group is not None and group.members and subscribed is None:
            return ErrorCode.NON_EMPTY_GROUP, {}
        results: dict[tuple[str, int], ErrorCode] = {}
        records: list[tuple[bytes, bytes | None]] = []
        for t, p in partitions:
            if subscribed and t in subscribed:
                results[(t, p)] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                results[(t, p)] = ErrorCode.NONE
                records.append((encode_key(OffsetKey(group_id, t, p)), None))
        if records:
            await self._log.append(self.partition_for(group_id), build_batch(records, self.now_ms()))
            offsets = self._offsets.get(group_id, {})
            for (t, p), code in results.items():
                if code is ErrorCode.NONE:
                    offsets.pop((t, p), None)
        return ErrorCode.NONE, results

    async def expire_offsets(self) -> int:
        """Drop offsets of empty groups older than offsets.retention.minutes; returns how many."""
        horizon = self.now_ms() - self.settings.offsets_retention_minutes * 60_000
        removed = 0
        for gid, offsets in list(self._offsets.items()):
            group = self._groups.get(gid)
            if group is not None and group.members:
                continue
            since = group.state_timestamp if group is not None else -1
            old = [k for k, v in offsets.items() if max(v.commit_timestamp, since) < horizon]
            if not old:
                continue
            records: list[tuple[bytes, bytes | None]] = [
                (encode_key(OffsetKey(gid, t, p)), None) for t, p in old
            ]
            if len(old) == len(offsets):
                records.append((encode_key(GroupKey(gid)), None))
            try:
                await self._log.append(self.partition_for(gid), build_batch(records, self.now_ms()))
            except KafkaError as e:
                log.warning("could not expire offsets of group %s: %s", gid, e)
                continue
            for k in old:
                del offsets[k]
            removed += len(old)
            if not offsets:
                del self._offsets[gid]
                if group is not None:
                    self._groups.pop(gid, None)
        return removed

    async def _expire_offsets_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.offsets_retention_check_interval_ms / 1000)
            try:
                n = await self.expire_offsets()
                if n:
                    log.info("expired %d committed offsets", n)
            except Exception:
                log.exception("offset expiration failed")

    # -- persistence of group metadata -------------------------------------------------------------
    def _group_record(self, group: Group) -> tuple[bytes, bytes | None]:
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

    async def _persist_group_async(self, group: Group) -> None:
        try:
            await self._log.append(
                self.partition_for(group.group_id), build_batch([self._group_record(group)], self.now_ms())
            )
        except KafkaError as e:
            log.warning("group %s: could not persist its metadata: %s", group.group_id, e)

    def _persist_group(self, group: Group) -> None:
        task = asyncio.get_running_loop().create_task(self._persist_group_async(group))
        self._background.add(task)  # keep a reference until it is done
        task.add_done_callback(self._background.discard)
