"""Share groups as records in `__consumer_offsets` (Kafka 4.4's ShareGroup* records,
protocol/share_group_records.py): what each group last wrote, the records that bring the log level
with the group after a change, and the replay that rebuilds the groups on the broker that becomes
their coordinator, so a coordinator failover keeps the members, their epochs and assignments.

As for consumer groups (groups/consumer_store.py), records are a diff against what was last
written, and only the named members (besides joins and leaves) are compared.
"""

from __future__ import annotations

from collections.abc import Iterable

from brook.protocol import share_group_records as rec
from brook.protocol.consumer_group_records import metadata_hash
from brook.protocol.share_group_records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    share_key,
)

from .members import ShareGroup, ShareMember

__all__ = ["Record", "ShareGroupStore"]

Record = tuple[bytes, bytes | None]
_Written = dict[tuple[int, str | None], bytes]
_STABLE = 0  # Kafka's MemberState.STABLE: a share member never revokes
# A member's assignment is its target (the assignor's, applied to every member at once); its current
# assignment record is what it was last told, at which epoch.
_REPLAYED = frozenset(
    {
        MEMBER_METADATA,
        GROUP_METADATA,
        TARGET_ASSIGNMENT_METADATA,
        TARGET_ASSIGNMENT_MEMBER,
        CURRENT_MEMBER_ASSIGNMENT,
    }
)


def _partitions(member: ShareMember) -> dict[bytes, set[int]]:
    return {t: set(ps) for t, ps in member.assigned.items() if ps}


class ShareGroupStore:
    def __init__(self) -> None:
        self._written: dict[str, _Written] = {}
        self.loaded_hash: dict[str, int] = {}  # each group's metadata hash, as read back at load
        self._assignment_epoch: dict[str, int] = {}  # the target's epoch when last written

    def records(self, group: ShareGroup, members: Iterable[str]) -> list[Record]:
        """The records that make the log say what `group` is now, in Kafka's order: removed members'
        tombstones, subscriptions, the group epoch, target assignment, current assignments. After
        a failed append, `forget` the group."""
        gid = group.group_id
        written = self._written.setdefault(gid, {})
        out: list[Record] = []

        def put(kind: int, member: str | None, value: bytes) -> None:
            if written.get((kind, member)) != value:
                written[(kind, member)] = value
                out.append((share_key(kind, gid, member), value))

        known = {m for (kind, m) in written if kind == MEMBER_METADATA and m is not None}
        for mid in sorted(known - set(group.members)):
            for kind in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA):
                if written.pop((kind, mid), None) is not None:
                    out.append((share_key(kind, gid, mid), None))
        changed = [m for m in sorted(set(members) | (set(group.members) - known)) if m in group.members]
        for mid in changed:
            m = group.members[mid]
            value = rec.ShareMemberValue(m.rack_id, m.client_id, m.client_host, sorted(m.subscribed))
            put(MEMBER_METADATA, mid, rec.encode_share_member(value))
        put(GROUP_METADATA, None, rec.encode_share_epoch(group.group_epoch, metadata_hash(group.metadata)))
        # The assignment changes every member's at once (it is computed for the whole group): every
        # target is compared when its epoch moved, else only the named members' (a heartbeat costs
        # its own member's records, not the group's).
        retarget = self._assignment_epoch.get(gid) != group.assignment_epoch
        self._assignment_epoch[gid] = group.assignment_epoch
        for mid in sorted(group.members) if retarget else changed:
            put(TARGET_ASSIGNMENT_MEMBER, mid, rec.encode_target_member(_partitions(group.members[mid])))
        put(TARGET_ASSIGNMENT_METADATA, None, rec.encode_target_epoch(group.assignment_epoch, 0))
        for mid in changed:
            m = group.members[mid]
            told = {t: set(ps) for t, ps in (m.sent or {}).items() if ps}
            current = rec.ShareCurrentAssignment(m.member_epoch, m.previous_epoch, _STABLE, told)
            put(CURRENT_MEMBER_ASSIGNMENT, mid, rec.encode_share_current(current))
        return out

    def tombstones(self, group: ShareGroup) -> list[Record]:
        """Deleting an empty share group."""
        gid = group.group_id
        out: list[Record] = [(share_key(TARGET_ASSIGNMENT_METADATA, gid), None)]
        out.append((share_key(GROUP_METADATA, gid), None))
        self.forget(gid)
        return out

    def forget(self, group_id: str) -> None:
        self._written.pop(group_id, None)
        self.loaded_hash.pop(group_id, None)
        self._assignment_epoch.pop(group_id, None)

    def replay(self, groups: dict[str, ShareGroup], raw_key: bytes, raw_value: bytes | None) -> None:
        """Apply one record of `__consumer_offsets` (Kafka's GroupMetadataManager.replay)."""
        kind, gid, mid = rec.decode_share_key(raw_key)
        if kind not in _REPLAYED:
            return  # type 15: share-partition state is the partition leaders', not here
        group = groups.get(gid)
        if raw_value is None:
            if group is not None:
                self._written.get(gid, {}).pop((kind, mid), None)
                if kind == GROUP_METADATA:
                    groups.pop(gid, None)
                    self.forget(gid)
                elif kind == MEMBER_METADATA:
                    group.members.pop(mid or "", None)
            return
        if group is None:
            group = groups[gid] = ShareGroup(gid)
        self._written.setdefault(gid, {})[(kind, mid)] = raw_value
        if kind == GROUP_METADATA:
            group.group_epoch, self.loaded_hash[gid] = rec.decode_share_epoch(raw_value)
        elif kind == TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch, _ = rec.decode_target_epoch(raw_value)
            self._assignment_epoch[gid] = group.assignment_epoch
        else:
            assert mid is not None
            member = group.members.setdefault(mid, ShareMember(mid))
            if kind == MEMBER_METADATA:
                v = rec.decode_share_member(raw_value)
                member.rack_id, member.client_id, member.client_host = v.rack_id, v.client_id, v.client_host
                member.subscribed = frozenset(v.subscribed_topic_names)
                group.topics.update(member.subscribed)
            elif kind == TARGET_ASSIGNMENT_MEMBER:
                member.assigned = {t: sorted(ps) for t, ps in rec.decode_target_member(raw_value).items()}
            else:
                c = rec.decode_share_current(raw_value)
                member.member_epoch, member.previous_epoch = c.member_epoch, c.previous_member_epoch
                member.sent = {t: sorted(ps) for t, ps in c.assigned.items()}
