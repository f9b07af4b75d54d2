"""Consumer-protocol groups as records in `__consumer_offsets` (Kafka's GroupCoordinatorShard does the
same): what each group last wrote, the records that bring the log level with the group after a
change, and the replay that rebuilds the groups when a broker becomes their coordinator.

Records are a diff: after each change the group is compared with what was last written for it, so
every path that changes a group (a heartbeat, a leave, an expired session) writes by the same rule.
Only the named members and, when the target assignment moved, every member's target are compared,
so a heartbeat costs its own member's records, not the group's.
"""

from __future__ import annotations

from collections.abc import Iterable

from brook.protocol import consumer_group_records as rec
from brook.protocol.consumer_group_records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    REGULAR_EXPRESSION,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    consumer_key,
    metadata_hash,
)

from .consumer_group import ConsumerGroup, ConsumerMember, MemberState

__all__ = ["ConsumerGroupStore", "Record", "metadata_hash"]

Record = tuple[bytes, bytes | None]
# (record type, member id or None) -> the value last written
_Written = dict[tuple[int, str | None], bytes]

_STATES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2}
_STATE_OF = {v: k for k, v in _STATES.items()}


def _member_value(m: ConsumerMember) -> bytes:
    return rec.encode_member_metadata(
        rec.MemberMetadataValue(
            m.instance_id,
            m.rack_id,
            m.client_id,
            m.client_host,
            sorted(m.subscribed_names),
            m.subscribed_regex,
            m.rebalance_timeout_ms,
            m.server_assignor,
            m.classic,
        )
    )


def _current_value(m: ConsumerMember) -> bytes:
    return rec.encode_current_assignment(
        rec.CurrentAssignmentValue(
            m.member_epoch,
            m.previous_member_epoch,
            _STATES[m.state],
            m.assigned,
            m.pending_revocation,
            m.assignment_epochs,
        )
    )


class ConsumerGroupStore:
    def __init__(self) -> None:
        self._written: dict[str, _Written] = {}
        self._assignment_epoch: dict[str, int] = {}  # the target's epoch when last written
        self.loaded_hash: dict[str, int] = {}  # the metadata hash read back at load

    # -- writing ------------------------------------------------------------------------------------
    def records(self, group: ConsumerGroup, members: Iterable[str]) -> list[Record]:
        """The records that make the log say what `group` is now, in Kafka's order: removed members'
        tombstones, member subscriptions, the group epoch, target assignment, current assignments.
        `members` names those that may have changed besides the ones that joined or left. Marks them
        written: after a failed append, `forget` the group."""
        gid = group.group_id
        written = self._written.setdefault(gid, {})
        out: list[Record] = []

        def put(kind: int, member: str | None, value: bytes) -> None:
            if written.get((kind, member)) != value:
                written[(kind, member)] = value
                out.append((consumer_key(kind, gid, member), value))

        known: set[str] = set()  # the members and regexes the log holds, in one pass over it
        regexes: set[str] = set()
        for kind, key in written:
            if key is not None and kind in (MEMBER_METADATA, REGULAR_EXPRESSION):
                (known if kind == MEMBER_METADATA else regexes).add(key)
        for mid in sorted(known - set(group.members)):
            for kind in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA):
                if written.pop((kind, mid), None) is not None:
                    out.append((consumer_key(kind, gid, mid), None))
        changed = [m for m in sorted(set(members) | (set(group.members) - known)) if m in group.members]
        for mid in changed:
            put(MEMBER_METADATA, mid, _member_value(group.members[mid]))
        for regex in sorted(regexes - set(group.regex_topics)):
            del written[(REGULAR_EXPRESSION, regex)]
            out.append((consumer_key(REGULAR_EXPRESSION, gid, regex), None))
        for regex, topics in sorted(group.regex_topics.items()):
            resolved = rec.ResolvedRegex(sorted(topics), 0, group.regex_resolved_ms.get(regex, 0))
            put(REGULAR_EXPRESSION, regex, rec.encode_regex(resolved))
        put(GROUP_METADATA, None, rec.encode_group_epoch(group.group_epoch, self._hash(group)))
        retarget = self._assignment_epoch.get(gid) != group.assignment_epoch
        for mid in sorted(group.target) if retarget else changed:
            if mid in group.members:
                put(TARGET_ASSIGNMENT_MEMBER, mid, rec.encode_target_member(group.target[mid]))
        self._assignment_epoch[gid] = group.assignment_epoch
        target_epoch = rec.encode_target_epoch(group.assignment_epoch, group.assigned_at_ms)
        put(TARGET_ASSIGNMENT_METADATA, None, target_epoch)
        for mid in changed:
            put(CURRENT_MEMBER_ASSIGNMENT, mid, _current_value(group.members[mid]))
        return out

    def _hash(self, group: ConsumerGroup) -> int:
        if group.subscription_metadata or group.group_id not in self.loaded_hash:
            return metadata_hash(group.subscription_metadata)
        return self.loaded_hash[group.group_id]  # loaded, not yet compared with today's topics

    def tombstones(self, group: ConsumerGroup) -> list[Record]:
        """Deleting an empty group (Kafka's createGroupTombstoneRecords: Kafka 4.4 still deletes the
        partition metadata record it no longer writes, so this does too)."""
        gid = group.group_id
        out: list[Record] = []
        for kind in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER):
            out += [(consumer_key(kind, gid, m), None) for m in sorted(group.members)]
        out.append((consumer_key(TARGET_ASSIGNMENT_METADATA, gid), None))
        out += [(consumer_key(MEMBER_METADATA, gid, m), None) for m in sorted(group.members)]
        written = self._written.get(gid, {})
        regexes = {r for (kind, r) in written if kind == REGULAR_EXPRESSION and r is not None}
        out += [(consumer_key(REGULAR_EXPRESSION, gid, r), None) for r in sorted(regexes)]
        out.append((consumer_key(PARTITION_METADATA, gid), None))
        out.append((consumer_key(GROUP_METADATA, gid), None))
        return out

    def forget(self, group_id: str) -> None:
        self._written.pop(group_id, None)
        self._assignment_epoch.pop(group_id, None)
        self.loaded_hash.pop(group_id, None)

    # -- loading ------------------------------------------------------------------------------------
    def replay(self, groups: dict[str, ConsumerGroup], raw_key: bytes, raw_value: bytes | None) -> None:
        """Apply one record of `__consumer_offsets` (Kafka's GroupMetadataManager.replay)."""
        kind, gid, mid = rec.decode_consumer_key(raw_key)
        if kind == PARTITION_METADATA:
            return  # superseded by the metadata hash of the group's epoch record
        group = groups.get(gid)
        if raw_value is None:
            if group is not None:
                self._tombstone(groups, group, kind, mid)
            return
        if group is None:
            group = groups[gid] = ConsumerGroup(gid)
        written = self._written.setdefault(gid, {})
        written[(kind, mid)] = raw_value
        if kind == GROUP_METADATA:
            group.group_epoch, self.loaded_hash[gid] = rec.decode_group_epoch(raw_value)
        elif kind == TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch, group.assigned_at_ms = rec.decode_target_epoch(raw_value)
            self._assignment_epoch[gid] = group.assignment_epoch
        elif kind == TARGET_ASSIGNMENT_MEMBER:
            assert mid is not None
            group.target[mid] = rec.decode_target_member(raw_value)
        elif kind == REGULAR_EXPRESSION:
            assert mid is not None  # the regex
            resolved = rec.decode_regex(raw_value)
            group.regex_topics[mid] = frozenset(resolved.topics)
            group.regex_resolved_ms[mid] = resolved.timestamp_ms
        else:
            assert mid is not None
            member = group.members.get(mid) or ConsumerMember(mid)
            if kind == MEMBER_METADATA:
                _apply_subscription(member, rec.decode_member_metadata(raw_value))
            else:
                v = rec.decode_current_assignment(raw_value)
                member.member_epoch, member.previous_member_epoch = v.member_epoch, v.previous_member_epoch
                member.state = _STATE_OF.get(v.state, MemberState.STABLE)
                member.assigned = {t: set(ps) for t, ps in v.assigned.items()}
                member.pending_revocation = {t: set(ps) for t, ps in v.pending_revocation.items()}
                member.assignment_epochs = dict(v.epochs)
            group.members[mid] = member

    def _tombstone(
        self, groups: dict[str, ConsumerGroup], group: ConsumerGroup, kind: int, mid: str | None
    ) -> None:
        written = self._written.setdefault(group.group_id, {})
        written.pop((kind, mid), None)
        if kind == GROUP_METADATA:
            groups.pop(group.group_id, None)
            self.forget(group.group_id)
        elif kind == TARGET_ASSIGNMENT_MEMBER:
            group.target.pop(mid or "", None)
        elif kind == REGULAR_EXPRESSION:
            group.regex_topics.pop(mid or "", None)
            group.regex_resolved_ms.pop(mid or "", None)
        elif kind == MEMBER_METADATA:
            group.members.pop(mid or "", None)
        elif kind == CURRENT_MEMBER_ASSIGNMENT and mid in group.members:
            member = group.members[mid]
            member.assigned, member.pending_revocation = {}, {}
            member.member_epoch = member.previous_member_epoch = -1


def _apply_subscription(member: ConsumerMember, v: rec.MemberMetadataValue) -> None:
    member.instance_id, member.rack_id = v.instance_id, v.rack_id
    member.client_id, member.client_host = v.client_id, v.client_host
    member.subscribed_names = frozenset(v.subscribed_topic_names)
    member.subscribed_regex = v.subscribed_topic_regex
    member.rebalance_timeout_ms = v.rebalance_timeout_ms
    member.server_assignor = v.server_assignor
    member.classic = v.classic
