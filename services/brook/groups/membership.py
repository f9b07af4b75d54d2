"""Group membership and rebalancing, Kafka's classic protocol: JoinGroup (KIP-394 member ids, static
membership with KIP-345, the initial rebalance delay), SyncGroup, Heartbeat, LeaveGroup and session
expiry. Groups live in memory; the coordinator (coordinator.py) persists them and owns their offsets.

A group id belongs to one protocol at a time. Classic requests to a consumer-protocol group go to
classic_members.py; a group changes protocol here (migration.py says how): an empty group when the
other protocol's first member arrives, a live one when `group.consumer.migration.policy` allows.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.group_records import GroupKey, encode_key

from .classic_members import ClassicMembers
from .consumer_coordinator import ConsumerGroups, Heartbeat, HeartbeatResult
from .consumer_group import ConsumerGroup
from .consumer_store import Record
from .group import Group, GroupState, JoinRequest, JoinResult, Member, StaticRejoin, group_record
from .migration import can_downgrade, can_upgrade, to_classic, to_consumer
from .settings import GroupSettings

log = logging.getLogger(__name__)


class GroupMembership:
    """The membership half of the group coordinator; GroupCoordinator adds where groups are kept."""

    settings: GroupSettings
    _groups: dict[str, Group]
    consumer: ConsumerGroups
    classic_members: ClassicMembers  # classic requests to consumer-protocol groups
    rebalances: int  # joins completed (a new generation), for the metrics

    # -- what the coordinator provides ---------------------------------------------------------------
    def now_ms(self) -> int:
        raise NotImplementedError

    def partition_for(self, group_id: str) -> int:
        raise NotImplementedError

    def check_coordinator(self, group_id: str) -> None:
        raise NotImplementedError

    async def _persist_group_async(self, group: Group) -> None:
        raise NotImplementedError

    def _persist_group(self, group: Group) -> None:
        raise NotImplementedError

    async def _write_records(self, group_id: str, records: list[Record]) -> ErrorCode:
        raise NotImplementedError

    def _is_here(self, group_id: str) -> bool:
        """Whether the group's partition of the offsets topic is loaded here."""
        raise NotImplementedError

    def _replaying(self, group_id: str) -> bool:
        raise NotImplementedError

    # -- changing protocol -------------------------------------------------------------------------
    async def _claim_for_classic(self, group_id: str) -> ErrorCode:
        """An empty consumer group becomes a classic one when a classic member joins (Kafka's offline
        downgrade: its tombstones are written first)."""
        cg = self.consumer.groups.get(group_id)
        if cg is None:
            return ErrorCode.NONE
        code = await self._write_records(group_id, self.consumer.store.tombstones(cg))
        if code is ErrorCode.NONE:
            self.consumer.drop([group_id])
        return code

    async def _claim_for_consumer(self, hb: Heartbeat) -> HeartbeatResult | None:
        """A classic group becomes a consumer group when a member of the consumer protocol joins it:
        an empty one always (the offline upgrade), a live one of the embedded consumer protocol when
        the policy allows (the online upgrade: its members keep their partitions, and those still
        rebalancing are told to rejoin). The classic group's tombstone goes first. None: go on with
        the heartbeat; else its answer."""
        gid = hb.group_id
        classic = self._groups.get(gid)
        if classic is None or not self._is_here(gid) or hb.member_epoch != 0:
            if classic is not None and classic.members:
                return HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")
            return None
        upgraded: ConsumerGroup | None = None
        if classic.members:
            if not can_upgrade(classic, self.settings):
                return HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")
            try:
                upgraded = to_consumer(classic, self.consumer.topics())
            except ValueError:
                return HeartbeatResult(
                    ErrorCode.GROUP_ID_NOT_FOUND,
                    f"Cannot upgrade the classic group {gid} to consumer group because the embedded "
                    "consumer protocol is malformed.",
                )
        code = await self._write_records(gid, [(encode_key(GroupKey(gid)), None)])
        if code is not ErrorCode.NONE:
            return HeartbeatResult(code)
        self._cancel_timer(classic)
        self._fail_waiters(classic, ErrorCode.REBALANCE_IN_PROGRESS)
        self._groups.pop(gid, None)
        if upgraded is not None:
            now = self.consumer.now()
            for m in upgraded.members.values():
                m.session_deadline = now + self.consumer.session_timeout_ms(m) / 1000
            self.consumer.groups[gid] = upgraded
            log.info("group %s: now a consumer group with %d classic members", gid, len(upgraded.members))
        return None

    def _downgrade(self, group: ConsumerGroup, leaving: str, rebalance: bool) -> list[Record] | None:
        """Only classic members remain once `leaving` is gone (it left, or a classic static member
        took its place, `leaving` then ""): the group becomes a classic group (Kafka's
        convertToClassicGroup), rebalancing at once unless nobody left. The records to write: the
        consumer group's tombstones and the classic group."""
        if not can_downgrade(group, leaving, self.settings):
            return None
        try:
            classic = to_classic(group, leaving, self.consumer.topics(), self.now_ms())
        except (KafkaError, ValueError, KeyError) as e:  # no common protocol, unreadable metadata
            log.warning("group %s: stays a consumer group: %s", group.group_id, e)
            return None
        records = [*self.consumer.store.tombstones(group), group_record(classic)]
        now = asyncio.get_running_loop().time()
        for m in classic.members.values():
            m.deadline = now + m.session_timeout_ms / 1000
        self._groups[group.group_id] = classic
        if rebalance:
            self._prepare_rebalance(classic, f"member {leaving}, the last of the consumer protocol, left")
        return records

    # -- membership --------------------------------------------------------------------------------
    async def join(self, req: JoinRequest) -> JoinResult:
        try:
            self.check_coordinator(req.group_id)
        except KafkaError as e:
            return JoinResult(e.code, member_id=req.member_id)
        s = self.settings
        cg = self.consumer.groups.get(req.group_id)
        if cg is not None and cg.members:
            if not s.min_session_timeout_ms <= req.session_timeout_ms <= s.max_session_timeout_ms:
                return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=req.member_id)
            return await self.classic_members.join(cg, req)
        code = await self._claim_for_classic(req.group_id)
        if code is not ErrorCode.NONE:
            return JoinResult(code, member_id=req.member_id)
        if not s.min_session_timeout_ms <= req.session_timeout_ms <= s.max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=req.member_id)
        # A JoinGroup v0 has no rebalance timeout: the session timeout stands for it.
        rebalance_timeout_ms = (
            req.rebalance_timeout_ms if req.rebalance_timeout_ms >= 0 else req.session_timeout_ms
        )
        group = self._groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id)
            group = self._groups[req.group_id] = Group(req.group_id, state_timestamp=self.now_ms())
            self._persist_group(group)  # as Kafka: a new group's (empty) metadata is written at once
        if not group.accepts_joining(req.member_id, s.classic_max_size):
            group.pending_members.discard(req.member_id)
            if req.member_id in group.members:  # it did not rejoin before the group filled up: it is out
                self._remove_member(group, req.member_id)
                self._try_complete_join(group)
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id="")
        if group.state is GroupState.DEAD:
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=req.member_id)
        if not group.supports(req.protocol_type, req.protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id)

        def new_member(mid: str) -> Member:
            return Member(
                mid,
                req.group_instance_id,
                req.client_id,
                req.client_host,
                req.session_timeout_ms,
                rebalance_timeout_ms,
                req.protocol_type,
                req.protocols,
            )

        if not req.member_id:
            new_id = f"{req.client_id or 'member'}-{uuid.uuid4()}"
            if req.group_instance_id is not None:
                old_id = group.static_members.get(req.group_instance_id)
                if old_id is not None and old_id in group.members:
                    return await self._static_member_rejoin(
                        group, old_id, new_member(new_id), req.skip_assignment_supported
                    )
                return await self._add_member_and_rebalance(group, new_member(new_id))
            if req.require_known_member_id:
                # KIP-394: hand out an id and let the client come back with it.
                group.pending_members.add(new_id)
                asyncio.get_running_loop().call_later(
                    req.session_timeout_ms / 1000, self._expire_pending, group, new_id
                )
                return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id)
            return await self._add_member_and_rebalance(group, new_member(req.member_id or new_id))

        if req.member_id in group.pending_members:
            group.pending_members.discard(req.member_id)
            return await self._add_member_and_rebalance(group, new_member(req.member_id))
        if req.group_instance_id is not None:
            known = group.static_members.get(req.group_instance_id)
            if known is not None and known != req.member_id:
                # A newer incarnation of this instance holds its place: this one must shut down.
                return JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=req.member_id)
            if known is None:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id)
        member = group.members.get(req.member_id)
        if member is None:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id)
        changed = member.protocols != req.protocols
        member.protocols = req.protocols
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        if not changed and (
            group.is_(GroupState.COMPLETING_REBALANCE)
            or (group.is_(GroupState.STABLE) and req.member_id != group.leader)
        ):
            # Nothing new (e.g. a lost JoinGroup response): the current generation again, as Kafka.
            # A Stable group's leader rejoining means it wants a rebalance (e.g. topic metadata).
            self._touch(member)
            return self._join_result(group, member)
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, f"member {req.member_id} rejoined")
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
        if initial:
            # Kafka completes a new group's first join when the delay ends (0 included), without
            # waiting for members it handed an id to (KIP-394) that have not joined with it yet.
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
        group.generation += 1
        self.rebalances += 1
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
            cg = self.consumer.groups.get(group_id)
            if cg is not None:
                return self.classic_members.sync(
                    cg, generation, member_id, group_instance_id, protocol_type, protocol_name
                )
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
            cg = self.consumer.groups.get(group_id)
            if cg is not None:
                return self.classic_members.heartbeat(cg, generation, member_id, group_instance_id)
            group, member = self._member(group_id, member_id, group_instance_id)
        except KafkaError as e:
            return e.code
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        self._touch(member)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    async def leave(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        try:
            self.check_coordinator(group_id)
        except KafkaError as e:
            return e.code, [e.code] * len(members)
        cg = self.consumer.groups.get(group_id)
        if cg is not None:
            return ErrorCode.NONE, await self.classic_members.leave(cg, members)
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
        m.fail_waiters(ErrorCode.UNKNOWN_MEMBER_ID)
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
            m.fail_waiters(code)

    def _cancel_timer(self, group: Group) -> None:
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
            group.rebalance_timer = None

    async def _expire_sessions_loop(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            for group in list(self._groups.values()):
                if not self._replaying(group.group_id):
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
