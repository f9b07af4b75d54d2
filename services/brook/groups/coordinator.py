"""The group coordinator: JoinGroup/SyncGroup/Heartbeat/LeaveGroup and committed offsets.

Group membership lives in memory; offsets and group metadata are records in `__consumer_offsets`
(Kafka's formats), written before they are acknowledged and replayed when a partition of that topic
is loaded. The coordinator of a group is the leader of partition hash(group) % partitions, as in Kafka.
The coordinator reaches the log only through `OffsetsLog`, so this room does not depend on the broker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping

from brook.protocol.consumer_group_records import CONSUMER_RECORD_TYPES, record_type
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.group_records import (
    GroupKey,
    OffsetKey,
    OffsetValue,
    build_batch,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_key,
    encode_offset_value,
    iter_batches,
)
from brook.protocol.primitives import java_string_hash
from brook.protocol.share_group_records import SHARE_RECORD_TYPES
from brook.protocol.txn_records import CONTROL_COMMIT
from brook.tasks import cancel_and_wait, run_in_slices, run_to_end

from .classic_members import ClassicMembers
from .commit_checks import split, txn_commits
from .consumer_coordinator import ConsumerGroups, Heartbeat, HeartbeatResult
from .consumer_store import Record
from .group import Group, GroupState, group_from_record, group_record
from .membership import GroupMembership
from .ports import OffsetCommit, OffsetsLog, OtherGroups
from .settings import OFFSETS_TOPIC, GroupSettings

log = logging.getLogger(__name__)

__all__ = ["OFFSETS_TOPIC", "GroupCoordinator", "GroupSettings"]


class GroupCoordinator(GroupMembership):
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
        self._loading: dict[int, asyncio.Task[None]] = {}  # partitions being replayed in slices
        self.rebalances = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()
        self.consumer = ConsumerGroups(
            settings, log_.topic_partitions, self.check_coordinator, self._write_records
        )
        self.consumer.downgrade = self._downgrade
        self.share_groups: OtherGroups | None = None  # wired by the broker
        self.classic_members = ClassicMembers(self.consumer)

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
        self.consumer.start()

    async def stop(self) -> None:
        await cancel_and_wait(*self._tasks, *self._loading.values())
        self._tasks.clear()
        self._loading.clear()
        await self.consumer.stop()
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
        """Rebuild groups and offsets from one `__consumer_offsets` partition (this broker now leads
        it). A long one is replayed in slices on a task of its own (brook.tasks.run_in_slices), its
        groups answered COORDINATOR_LOAD_IN_PROGRESS meanwhile, as Kafka does."""
        if partition in self._loaded or partition in self._loading:
            return
        task = run_in_slices(lambda: self._replay_partition(partition), f"{OFFSETS_TOPIC}-{partition} replay")
        if task is not None:
            self._loading[partition] = task

    def _replay_partition(self, partition: int) -> Iterator[None]:
        """The partition's records applied in order, one chunk of batches per step. Markers written
        meanwhile are read here too: the replay reads on to the log's end."""
        try:
            for chunk in self._log.read_batches(partition):
                self._replay_chunk(partition, chunk)
                yield
        except Exception:
            self._forget(partition)  # a replay that fails leaves nothing half read back
            raise
        self._loading.pop(partition, None)
        now = asyncio.get_running_loop().time()
        for group in [g for gid, g in self._groups.items() if self.partition_for(gid) == partition]:
            for m in group.members.values():
                m.deadline = now + m.session_timeout_ms / 1000
            if len(group.members) > self.settings.classic_max_size:  # group.max.size lowered: as Kafka
                self._prepare_rebalance(group, f"{len(group.members)} members over group.max.size")
        self.consumer.loaded([g for g in self.consumer.groups if self.partition_for(g) == partition])
        if self.share_groups is not None:
            share = self.share_groups.group_ids()
            self.share_groups.loaded([g for g in share if self.partition_for(g) == partition])
        self._loaded.add(partition)

    def _replay_chunk(self, partition: int, chunk: bytes) -> None:
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

    def unload_partition(self, partition: int) -> None:
        self._loaded.discard(partition)
        task = self._loading.pop(partition, None)
        if task is not None:
            task.cancel()
        self._forget(partition)

    def _forget(self, partition: int) -> None:
        """Drop the groups and offsets of a partition this broker no longer leads."""
        for gid in [g for g in self._groups if self.partition_for(g) == partition]:
            group = self._groups.pop(gid)
            self._cancel_timer(group)
            self._fail_waiters(group, ErrorCode.NOT_COORDINATOR)
        for gid in [g for g in self._offsets if self.partition_for(g) == partition]:
            del self._offsets[gid]
        self.consumer.drop([g for g in self.consumer.groups if self.partition_for(g) == partition])
        if self.share_groups is not None:
            share = self.share_groups.group_ids()
            self.share_groups.drop([g for g in share if self.partition_for(g) == partition])
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
        kind = record_type(raw_key)
        if kind in CONSUMER_RECORD_TYPES:
            self.consumer.store.replay(self.consumer.groups, raw_key, raw_value)
            return
        if kind in SHARE_RECORD_TYPES:
            if self.share_groups is not None:
                self.share_groups.replay(raw_key, raw_value)
            return
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
        self._groups[key.group] = group_from_record(key.group, decode_group_value(raw_value))

    # -- coordinator lookup ------------------------------------------------------------------------
    def check_coordinator(self, group_id: str) -> None:
        if not group_id:
            raise KafkaError(ErrorCode.INVALID_GROUP_ID, "group id is empty")
        p = self.partition_for(group_id)
        if p not in self._loaded:
            if p in self._loading and self._log.is_local_leader(p):
                raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, f"loading group {group_id!r}")
            if not self._log.topic_exists(OFFSETS_TOPIC) or self._log.is_local_leader(p):
                raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the offsets topic is not ready")
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"this broker does not lead {OFFSETS_TOPIC}-{p}")

    async def consumer_heartbeat(self, hb: Heartbeat) -> HeartbeatResult:
        """ConsumerGroupHeartbeat, answered once its records are written (a classic group may become
        a consumer group first: membership.py)."""
        claimed = await self._claim_for_consumer(hb)
        if claimed is not None:
            return claimed
        result = self.consumer.heartbeat(hb)
        code = await self.consumer.persist(hb.group_id, [result.member_id or hb.member_id])
        return result if code is ErrorCode.NONE else HeartbeatResult(code)

    async def write_records(self, group_id: str, records: list[Record]) -> ErrorCode:
        """Append records of a group another room keeps (share groups)."""
        return await self._write_records(group_id, records)

    async def _write_records(self, group_id: str, records: list[Record]) -> ErrorCode:
        """Append a group's records; an error as Kafka's coordinator answers a failed write with."""
        try:
            await self._log.append(self.partition_for(group_id), build_batch(records, self.now_ms()))
        except KafkaError as e:
            log.warning("group %s: could not write its records: %s", group_id, e)
            if e.code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR):
                return ErrorCode.NOT_COORDINATOR
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE

    def _is_here(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self._loaded

    def _replaying(self, group_id: str) -> bool:
        """Whether the group's partition is still being replayed (its groups are half read back)."""
        return bool(self._loading) and self.partition_for(group_id) in self._loading

    def describe(self, group_id: str) -> tuple[ErrorCode, Group | None]:
        try:
            if group_id:  # Kafka describes the empty id as a group that does not exist (Dead)
                self.check_coordinator(group_id)
        except KafkaError as e:
            return e.code, None
        return ErrorCode.NONE, self._groups.get(group_id)

    def list_groups(self) -> Iterable[Group]:
        """The classic groups (a group id with only offsets is listed as an empty classic group)."""
        names = (set(self._groups) | set(self._offsets)) - set(self.consumer.groups)
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
        api_version: int = 9,
    ) -> dict[tuple[str, int], ErrorCode]:
        def all_(code: ErrorCode) -> dict[tuple[str, int], ErrorCode]:
            return {(c.topic, c.partition): code for c in commits}

        try:
            self.check_coordinator(group_id)
            if group_id in self.consumer.groups:
                check = self.consumer.validate_commit(group_id, member_id, generation, api_version)
                taken, refused = split(commits, check)
                return {**await self._commit(group_id, taken, topic_exists), **refused}
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
        return await self._commit(group_id, commits, topic_exists)

    async def _commit(
        self, group_id: str, commits: list[OffsetCommit], topic_exists: Callable[[str, int], bool]
    ) -> dict[tuple[str, int], ErrorCode]:
        now = self.now_ms()
        results, records, values = self._offset_records(group_id, commits, topic_exists, now)

        async def write() -> None:
            if await self._append_offsets(group_id, build_batch(records, now), values, results):
                self._offsets.setdefault(group_id, {}).update(values)

        if records:
            await run_to_end(write())  # what the log holds is what is committed, asked or not
        return results

    async def _append_offsets(
        self,
        group_id: str,
        batch: bytes,
        values: Mapping[tuple[str, int], object],
        results: dict[tuple[str, int], ErrorCode],
    ) -> bool:
        """Write the group's offset records; each offset in `values` gets NONE, or the append's error.
        True when written."""
        try:
            await self._log.append(self.partition_for(group_id), batch)
        except KafkaError as e:
            results.update(dict.fromkeys(values, e.code))
            return False
        results.update(dict.fromkeys(values, ErrorCode.NONE))
        return True

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
        if group_id in self.consumer.groups:  # a consumer group (KIP-848): its member and epoch
            taken, refused = txn_commits(
                self.consumer, group_id, member_id, group_instance_id, generation, commits
            )
            written = await self._write_txn_offsets(
                group_id, producer_id, producer_epoch, taken, topic_exists
            )
            return {**written, **refused}
        group = self._groups.get(group_id)
        if generation >= 0 or member_id:  # KIP-447: the producer's consumer must still be a member
            if group is None:
                return all_(ErrorCode.ILLEGAL_GENERATION)
            if member_id and member_id not in group.members:
                return all_(ErrorCode.UNKNOWN_MEMBER_ID)
            if generation >= 0 and generation != group.generation:
                return all_(ErrorCode.ILLEGAL_GENERATION)
        return await self._write_txn_offsets(group_id, producer_id, producer_epoch, commits, topic_exists)

    async def _write_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        commits: list[OffsetCommit],
        topic_exists: Callable[[str, int], bool],
    ) -> dict[tuple[str, int], ErrorCode]:
        now = self.now_ms()
        results, records, values = self._offset_records(group_id, commits, topic_exists, now)

        async def write() -> None:
            batch = build_batch(records, now, producer_id, producer_epoch)
            if await self._append_offsets(group_id, batch, values, results):
                self._pending_txn.setdefault(producer_id, {}).setdefault(group_id, {}).update(values)

        if records:
            await run_to_end(write())  # the COMMIT marker applies what the log holds
        return results

    def fetch_offsets(
        self,
        group_id: str,
        partitions: list[tuple[str, list[int]]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[ErrorCode, list[tuple[str, int, OffsetValue | None]]]:
        try:
            self.check_coordinator(group_id)
            if group_id in self.consumer.groups:
                self.consumer.validate_fetch(group_id, member_id, member_epoch)
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
            consumer = self.consumer.groups.get(gid)
            if consumer is not None:
                results[gid] = await run_to_end(self._delete_consumer_group(gid))
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
            results[gid] = await run_to_end(self._delete_classic_group(gid, group))
        return results

    async def _delete_classic_group(self, gid: str, group: Group | None) -> ErrorCode:
        """Tombstones for the group's offsets and metadata; then it is gone from memory too."""
        records = [(encode_key(OffsetKey(gid, t, p)), None) for t, p in self._offsets.get(gid, {})]
        records.append((encode_key(GroupKey(gid)), None))
        try:
            await self._log.append(self.partition_for(gid), build_batch(records, self.now_ms()))
        except KafkaError as e:
            return e.code
        self._offsets.pop(gid, None)
        if group is not None:
            group.transition(GroupState.DEAD, self.now_ms())
            self._groups.pop(gid, None)
        return ErrorCode.NONE

    async def _delete_consumer_group(self, group_id: str) -> ErrorCode:
        """Delete an empty consumer group: its offsets' tombstones, then the group's."""
        group = self.consumer.groups[group_id]
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        records: list[Record] = [
            (encode_key(OffsetKey(group_id, t, p)), None) for t, p in self._offsets.get(group_id, {})
        ]
        code = await self._write_records(group_id, records + self.consumer.store.tombstones(group))
        if code is ErrorCode.NONE:
            self._offsets.pop(group_id, None)
            self.consumer.drop([group_id])
        return code

    async def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        try:
            self.check_coordinator(group_id)
        except KafkaError as e:
            return e.code, {}
        group = self._groups.get(group_id)
        consumer = self.consumer.groups.get(group_id)
        if group is None and consumer is None and group_id not in self._offsets:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        subscribed = group.subscribed_topics() if group is not None and group.members else set()
        if consumer is not None:
            subscribed = set(consumer.subscription_metadata) if consumer.members else set()
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

        async def write() -> None:
            await self._log.append(self.partition_for(group_id), build_batch(records, self.now_ms()))
            offsets = self._offsets.get(group_id, {})
            for (t, p), code in results.items():
                if code is ErrorCode.NONE:
                    offsets.pop((t, p), None)

        if records:
            await run_to_end(write())  # tombstones written are offsets deleted, asked or not
        return ErrorCode.NONE, results

    async def expire_offsets(self) -> int:
        """Drop offsets of empty groups older than offsets.retention.minutes; returns how many."""
        horizon = self.now_ms() - self.settings.offsets_retention_minutes * 60_000
        removed = 0
        for gid, offsets in list(self._offsets.items()):
            if self._replaying(gid):
                continue
            group = self._groups.get(gid)
            consumer = self.consumer.groups.get(gid)
            if (group is not None and group.members) or (consumer is not None and consumer.members):
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
    async def _persist_group_async(self, group: Group) -> None:
        try:
            await self._log.append(
                self.partition_for(group.group_id), build_batch([group_record(group)], self.now_ms())
            )
        except KafkaError as e:
            log.warning("group %s: could not persist its metadata: %s", group.group_id, e)

    def _persist_group(self, group: Group) -> None:
        task = asyncio.get_running_loop().create_task(self._persist_group_async(group))
        self._background.add(task)  # keep a reference until it is done
        task.add_done_callback(self._background.discard)
