"""EtcdMetadataStore: the cluster's metadata in etcd (what `brook.broker.topics.LocalMetadataStore`
keeps in meta.json for a single node), with compare-and-swap writes fenced by the controller epoch, and a
typed change stream that survives etcd restarts.

Controller-only writes take `controller_epoch`: the transaction also requires `controller_epoch` in
etcd to equal it and the `controller` key to exist. Both are only ever written together by the
election (see election.py), so this holds exactly while the controller of that epoch holds its
lease; otherwise the write fails with FencedError.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from .changes import MetadataSnapshot, MetadataWatch
from .client import EtcdClient
from .errors import ConflictError, FencedError, MetadataError, TopicExistsError, UnknownTopicError
from .keys import KeyKind, KeyLayout
from .kv import Compare, Delete, Get, KeyValue, Op, Put, TxnResult
from .models import (
    AclKey,
    BrokerInfo,
    ControllerInfo,
    PartitionState,
    ProducerIdBlock,
    Reassignment,
    ScramCredential,
    TopicRecord,
    decode_acls,
    decode_configs,
    decode_scram,
    encode,
    encode_acls,
    encode_configs,
    encode_scram,
)

log = logging.getLogger(__name__)

MAX_TXN_OPS = 128  # etcd's default --max-txn-ops
MAX_BATCH = MAX_TXN_OPS - 8  # partition states per set_partition_states call


class EtcdMetadataStore:
    def __init__(self, client: EtcdClient, cluster_name: str = "default", *, root: str = "/brook") -> None:
        self.client = client
        self.layout = KeyLayout(cluster_name, root)
        self._cluster_id: str | None = None

    # ---- cluster id ----

    async def cluster_id(self, proposed: str | None = None) -> str:
        """The cluster id, created at the first start (`proposed`, else a random one)."""
        if self._cluster_id is None:
            new = proposed or uuid.uuid4().hex[:22]
            created, existing = await self.client.create_if_absent(self.layout.cluster_id, new.encode())
            self._cluster_id = new if created or existing is None else existing.value.decode()
        return self._cluster_id

    # ---- fencing ----

    def _fence(self, controller_epoch: int | None) -> list[Compare]:
        if controller_epoch is None:
            return []
        return [
            Compare.value_is(self.layout.controller_epoch, str(controller_epoch).encode()),
            Compare.exists(self.layout.controller),
        ]

    def _fence_gets(self) -> list[Op]:
        return [Get(self.layout.controller_epoch), Get(self.layout.controller)]

    def _check_fence(self, r: TxnResult, controller_epoch: int | None) -> None:
        """After a failed txn whose failure branch ended with _fence_gets(): raise FencedError if
        the fence is what failed."""
        if controller_epoch is None:
            return
        epoch_kv, ctrl_kv = r.gets[-2], r.gets[-1]
        epoch = int(epoch_kv[0].value) if epoch_kv else 0
        holder = ControllerInfo.from_json(ctrl_kv[0].value) if ctrl_kv else None
        if epoch != controller_epoch or holder is None:
            raise FencedError(controller_epoch, epoch, holder.broker_id if holder else None)

    # ---- reads ----

    async def controller(self) -> ControllerInfo | None:
        kv = await self.client.get(self.layout.controller)
        return ControllerInfo.from_json(kv.value) if kv else None

    async def brokers(self) -> dict[int, BrokerInfo]:
        rr = await self.client.get_prefix(self.layout.brokers)
        return {b.broker_id: b for kv in rr.kvs if (b := self._broker(kv)) is not None}

    async def topics(self) -> dict[str, TopicRecord]:
        rr = await self.client.get_prefix(self.layout.topics)
        return {t.name: t for kv in rr.kvs if (t := self._topic(kv)) is not None}

    async def get_topic(self, name: str) -> TopicRecord | None:
        kv = await self.client.get(self.layout.topic(name))
        return self._topic(kv) if kv else None

    async def get_partition_states(self, topic: str) -> dict[int, PartitionState]:
        rr = await self.client.get_prefix(self.layout.partitions_of(topic))
        out: dict[int, PartitionState] = {}
        for kv in rr.kvs:
            parsed = self.layout.parse(kv.key)
            if parsed is not None and parsed.partition is not None:
                out[parsed.partition] = PartitionState.from_json(kv.value, kv.mod_revision)
        return out

    async def get_partition_state(self, topic: str, partition: int) -> PartitionState | None:
        kv = await self.client.get(self.layout.partition(topic, partition))
        return PartitionState.from_json(kv.value, kv.mod_revision) if kv else None

    # ---- topics ----

    async def create_topic(
        self,
        topic: TopicRecord,
        *,
        initial_states: Mapping[int, PartitionState] | None = None,
        controller_epoch: int | None = None,
    ) -> TopicRecord:
        """Create a topic (TopicExistsError if the name is taken), with its partitions' first states
        when given. The topic and up to ~120 states are one transaction; more states follow in
        further transactions (each create-if-absent, fenced like the first). Returns the record with
        its version."""
        _validate_assignment(topic)
        states = sorted((initial_states or {}).items())
        for p, _ in states:
            if not 0 <= p < topic.partitions:
                raise ValueError(f"topic {topic.name} has no partition {p}")
        key = self.layout.topic(topic.name)
        first, rest = states[:MAX_BATCH], states[MAX_BATCH:]
        epoch = controller_epoch or 0
        r = await self.client.txn(
            [Compare.absent(key), *self._fence(controller_epoch)],
            [Put(key, topic.to_json()), *self._state_puts(topic.name, first, epoch)],
            [Get(key), *self._fence_gets()],
        )
        if not r.succeeded:
            self._check_fence(r, controller_epoch)
            raise TopicExistsError(f"topic '{topic.name}' already exists")
        created = replace(topic, version=r.revision)
        for i in range(0, len(rest), MAX_BATCH):
            chunk = rest[i : i + MAX_BATCH]
            keys = [self.layout.partition(topic.name, p) for p, _ in chunk]
            r = await self.client.txn(
                [*(Compare.absent(k) for k in keys), *self._fence(controller_epoch)],
                self._state_puts(topic.name, chunk, epoch),
                self._fence_gets(),
            )
            if not r.succeeded:
                self._check_fence(r, controller_epoch)
                # The controller gives a first state to every partition that has none (it does so for
                # CreatePartitions), and may have seen the topic before these: write the others alone.
                for p, state in chunk:
                    absent = Compare.absent(self.layout.partition(topic.name, p))
                    r = await self.client.txn(
                        [absent, *self._fence(controller_epoch)],
                        self._state_puts(topic.name, [(p, state)], epoch),
                        self._fence_gets(),
                    )
                    if not r.succeeded:
                        self._check_fence(r, controller_epoch)
        return created

    def _state_puts(self, topic: str, states: Sequence[tuple[int, PartitionState]], epoch: int) -> list[Op]:
        return [
            Put(self.layout.partition(topic, p), replace(s, controller_epoch=epoch).to_json())
            for p, s in states
        ]

    async def update_topic(self, topic: TopicRecord, *, controller_epoch: int | None = None) -> TopicRecord:
        """Change a topic's assignment or configs; `topic.version` is the version read (CAS). Its id
        and name cannot change and partitions cannot be removed."""
        _validate_assignment(topic)
        key = self.layout.topic(topic.name)
        current = await self.get_topic(topic.name)
        if current is None:
            raise UnknownTopicError(f"topic '{topic.name}' does not exist")
        if current.version != topic.version:
            raise ConflictError(
                f"topic '{topic.name}' changed since version {topic.version} (now {current.version})",
                current.version,
            )
        if current.topic_id != topic.topic_id:
            raise ConflictError(
                f"topic '{topic.name}' was deleted and created again (new id)", current.version
            )
        if topic.partitions < current.partitions:
            raise ValueError(
                f"topic '{topic.name}': partitions cannot be removed ({current.partitions} -> "
                f"{topic.partitions})"
            )
        r = await self.client.txn(
            [Compare.mod_revision(key, topic.version), *self._fence(controller_epoch)],
            [Put(key, topic.to_json())],
            [Get(key), *self._fence_gets()],
        )
        if not r.succeeded:
            self._check_fence(r, controller_epoch)
            now = r.gets[0][0].mod_revision if r.gets[0] else 0
            raise ConflictError(
                f"topic '{topic.name}' changed since version {topic.version} (now {now})", now
            )
        return replace(topic, version=r.revision)

    async def delete_topic(
        self, name: str, *, expected_version: int | None = None, controller_epoch: int | None = None
    ) -> None:
        """Delete a topic with its partition states and reassignments, in one transaction."""
        key = self.layout.topic(name)
        cond = (
            Compare.exists(key) if expected_version is None else Compare.mod_revision(key, expected_version)
        )
        r = await self.client.txn(
            [cond, *self._fence(controller_epoch)],
            [Delete(key), Delete(self.layout.partitions_of(name), prefix=True),
             Delete(self.layout.reassignments_of(name), prefix=True)],
            [Get(key), *self._fence_gets()],
        )  # fmt: skip
        if not r.succeeded:
            self._check_fence(r, controller_epoch)
            if not r.gets[0]:
                raise UnknownTopicError(f"topic '{name}' does not exist")
            now = r.gets[0][0].mod_revision
            raise ConflictError(f"topic '{name}' changed since version {expected_version} (now {now})", now)

    # ---- partition state (controller only) ----

    async def set_partition_state(
        self,
        topic: str,
        partition: int,
        state: PartitionState,
        *,
        expected_version: int,
        controller_epoch: int,
    ) -> PartitionState:
        """Write a partition's state if it is still at `expected_version` (0: not written yet) and
        `controller_epoch` is still the current controller's. Returns the state as written (with its
        controller_epoch and new version). FencedError / ConflictError otherwise."""
        written = await self.set_partition_states([(topic, partition, state, expected_version)],
                                                  controller_epoch=controller_epoch)  # fmt: skip
        return written[0]

    async def set_partition_states(
        self, updates: Sequence[tuple[str, int, PartitionState, int]], *, controller_epoch: int
    ) -> list[PartitionState]:
        """Several (topic, partition, state, expected_version) in one all-or-nothing transaction (at
        most MAX_BATCH)."""
        if not updates:
            return []
        if len(updates) > MAX_BATCH:
            raise ValueError(f"at most {MAX_BATCH} partition states per transaction, got {len(updates)}")
        keys = [self.layout.partition(t, p) for t, p, _, _ in updates]
        if len(set(keys)) != len(keys):
            raise ValueError("the same partition twice in one batch")
        new = [replace(s, controller_epoch=controller_epoch) for _, _, s, _ in updates]
        r = await self.client.txn(
            [*(Compare.mod_revision(k, v) for k, (_, _, _, v) in zip(keys, updates, strict=True)),
             *self._fence(controller_epoch)],
            [Put(k, s.to_json()) for k, s in zip(keys, new, strict=True)],
            [*(Get(k) for k in keys), *self._fence_gets()],
        )  # fmt: skip
        if not r.succeeded:
            self._check_fence(r, controller_epoch)
            for (t, p, _, expected), got in zip(updates, r.gets, strict=False):
                now = got[0].mod_revision if got else 0
                if now != expected:
                    raise ConflictError(
                        f"partition {t}-{p} changed since version {expected} (now {now})", now
                    )
            raise MetadataError("partition state transaction failed for no visible reason")
        return [replace(s, version=r.revision) for s in new]

    # ---- reassignments ----

    async def reassignments(self) -> dict[tuple[str, int], Reassignment]:
        rr = await self.client.get_prefix(self.layout.prefix + b"reassignments/")
        out: dict[tuple[str, int], Reassignment] = {}
        for kv in rr.kvs:
            parsed = self.layout.parse(kv.key)
            if parsed is not None and parsed.topic is not None and parsed.partition is not None:
                out[(parsed.topic, parsed.partition)] = Reassignment.from_json(
                    parsed.topic, parsed.partition, kv.value, kv.mod_revision
                )
        return out

    async def put_reassignment(self, topic: str, partition: int, target: Sequence[int]) -> Reassignment:
        """Ask for a partition's replicas to become `target` (replaces a pending request)."""
        if not target or len(set(target)) != len(target):
            raise ValueError(f"bad target replicas {list(target)}")
        if await self.get_topic(topic) is None:
            raise UnknownTopicError(f"topic '{topic}' does not exist")
        ra = Reassignment(topic, partition, tuple(target))
        rev = await self.client.put(self.layout.reassignment(topic, partition), ra.to_json())
        return replace(ra, version=rev)

    async def delete_reassignment(
        self, topic: str, partition: int, *, controller_epoch: int | None = None
    ) -> bool:
        """Finish or cancel one. False when there was none."""
        key = self.layout.reassignment(topic, partition)
        r = await self.client.txn(
            [Compare.exists(key), *self._fence(controller_epoch)],
            [Delete(key)],
            [Get(key), *self._fence_gets()],
        )
        if not r.succeeded:
            self._check_fence(r, controller_epoch)
            return False
        return True

    # ---- producer ids ----

    async def allocate_producer_id_block(self, size: int = 1000) -> ProducerIdBlock:
        """Reserve `size` producer ids no other call ever gets (compare-and-swap on the next free id).
        If etcd fails mid-call a block may be lost (skipped), never handed out twice."""
        if size < 1:
            raise ValueError("block size must be positive")
        key = self.layout.producer_id_block
        kv = await self.client.get(key)
        while True:
            first = _next_pid(kv)
            r = await self.client.compare_and_put(
                key, encode({"next": first + size}), expected_mod_revision=kv.mod_revision if kv else 0
            )
            if r.succeeded:
                return ProducerIdBlock(first, size)
            kv = r.gets[0][0] if r.gets and r.gets[0] else None

    # ---- dynamic configs and SCRAM credentials (last writer wins, as Kafka's config records) ----

    async def put_entity_configs(self, kind: str, name: str, configs: Mapping[str, str]) -> int:
        """Replace an entity's dynamic configs (none: the key goes); returns the write's revision, 0
        when there was nothing to delete (etcd would answer its current revision, which may be a
        write no watch of ours sees: waiting for it would never end)."""
        key = self.layout.configs(kind, name)
        if configs:
            return (await self.client.txn([], [Put(key, encode_configs(configs))])).revision
        r = await self.client.txn([Compare.exists(key)], [Delete(key)])
        return r.revision if r.succeeded else 0

    async def put_view_mark(self, broker_id: int, lease: int, view_revision: int) -> int:
        """Rewrite a broker's view mark under its lease; returns the write's revision."""
        mark = Put(self.layout.view(broker_id), b"%d" % view_revision, lease)
        return (await self.client.txn([], [mark])).revision

    async def put_scram(self, user: str, credentials: Mapping[str, ScramCredential]) -> int:
        """Replace a user's SCRAM credentials (none: the key goes); returns the write's revision."""
        key = self.layout.scram(user)
        if credentials:
            return (await self.client.txn([], [Put(key, encode_scram(credentials))])).revision
        r = await self.client.txn([Compare.exists(key)], [Delete(key)])
        return r.revision if r.succeeded else 0  # nothing deleted: see put_entity_configs

    async def update_acls(
        self, change: Callable[[dict[AclKey, list[dict[str, Any]]]], None], keys: Sequence[AclKey]
    ) -> int:
        """Read the ACL entries of `keys`, let `change` edit them in place, write the result in one
        transaction that fails if any of them changed meanwhile (ConflictError; the caller retries).
        Returns the write's revision (0: nothing to write)."""
        paths = {k: self.layout.acls(*k) for k in keys}
        current: dict[AclKey, list[dict[str, Any]]] = {}
        compares: list[Compare] = []
        for k, path in paths.items():
            kv = await self.client.get(path)
            current[k] = decode_acls(kv.value) if kv else []
            compares.append(Compare.mod_revision(path, kv.mod_revision if kv else 0))
        before = {k: list(v) for k, v in current.items()}
        change(current)
        ops: list[Op] = [
            Put(paths[k], encode_acls(v)) if v else Delete(paths[k])
            for k, v in current.items()
            if v != before[k]
        ]
        if not ops:
            return 0
        r = await self.client.txn(compares, ops)
        if not r.succeeded:
            raise ConflictError("ACLs changed meanwhile", 0)
        return r.revision

    # ---- snapshot and watch ----

    async def snapshot(self) -> MetadataSnapshot:
        rr = await self.client.get_prefix(self.layout.prefix)
        cluster_id: str | None = None
        brokers: dict[int, BrokerInfo] = {}
        controller: ControllerInfo | None = None
        epoch = 0
        topics: dict[str, TopicRecord] = {}
        partitions: dict[str, dict[int, PartitionState]] = {}
        reassignments: dict[tuple[str, int], Reassignment] = {}
        next_pid = 0
        entity_configs: dict[tuple[str, str], dict[str, str]] = {}
        scram: dict[str, dict[str, ScramCredential]] = {}
        acls: dict[AclKey, list[dict[str, Any]]] = {}
        for kv in rr.kvs:
            parsed = self.layout.parse(kv.key)
            if parsed is None:
                continue
            try:
                match parsed.kind:
                    case KeyKind.CLUSTER_ID:
                        cluster_id = kv.value.decode()
                    case KeyKind.BROKER:
                        assert parsed.broker_id is not None
                        brokers[parsed.broker_id] = BrokerInfo.from_json(kv.value, kv.create_revision)
                    case KeyKind.CONTROLLER:
                        controller = ControllerInfo.from_json(kv.value)
                    case KeyKind.CONTROLLER_EPOCH:
                        epoch = int(kv.value)
                    case KeyKind.TOPIC:
                        assert parsed.topic is not None
                        topics[parsed.topic] = TopicRecord.from_json(parsed.topic, kv.value, kv.mod_revision)
                    case KeyKind.PARTITION:
                        assert parsed.topic is not None and parsed.partition is not None
                        partitions.setdefault(parsed.topic, {})[parsed.partition] = PartitionState.from_json(
                            kv.value, kv.mod_revision
                        )
                    case KeyKind.REASSIGNMENT:
                        assert parsed.topic is not None and parsed.partition is not None
                        reassignments[(parsed.topic, parsed.partition)] = Reassignment.from_json(
                            parsed.topic, parsed.partition, kv.value, kv.mod_revision
                        )
                    case KeyKind.PRODUCER_ID_BLOCK:
                        next_pid = _next_pid(kv)
                    case KeyKind.CONFIGS:
                        assert parsed.entity_kind is not None and parsed.name is not None
                        entity_configs[(parsed.entity_kind, parsed.name)] = decode_configs(kv.value)
                    case KeyKind.SCRAM:
                        assert parsed.name is not None
                        scram[parsed.name] = decode_scram(kv.value)
                    case KeyKind.ACLS:
                        assert parsed.name is not None and parsed.pattern is not None
                        acls[(*parsed.pattern, parsed.name)] = decode_acls(kv.value)
            except (ValueError, KeyError, TypeError) as e:
                log.warning("ignoring unreadable metadata key %r: %s", kv.key, e)
        return MetadataSnapshot(
            rr.revision,
            cluster_id,
            brokers,
            controller,
            epoch,
            topics,
            partitions,
            reassignments,
            next_pid,
            rr.kvs,
            entity_configs,
            scram,
            acls,
        )

    def watch(self, since: MetadataSnapshot) -> MetadataWatch:
        """Every change after `since` (typed events), resuming across etcd restarts."""
        return MetadataWatch(self.client, self.layout, since)

    # ---- decoding ----

    def _broker(self, kv: KeyValue) -> BrokerInfo | None:
        try:
            return BrokerInfo.from_json(kv.value, kv.create_revision)
        except (ValueError, KeyError, TypeError) as e:
            log.warning("ignoring unreadable broker %r: %s", kv.key, e)
            return None

    def _topic(self, kv: KeyValue) -> TopicRecord | None:
        parsed = self.layout.parse(kv.key)
        if parsed is None or parsed.topic is None:
            return None
        try:
            return TopicRecord.from_json(parsed.topic, kv.value, kv.mod_revision)
        except (ValueError, KeyError, TypeError) as e:
            log.warning("ignoring unreadable topic %r: %s", kv.key, e)
            return None


def _next_pid(kv: KeyValue | None) -> int:
    return int(json.loads(kv.value)["next"]) if kv is not None else 0


def _validate_assignment(topic: TopicRecord) -> None:
    if len(topic.topic_id) != 16:
        raise ValueError("topic id must be 16 bytes (a UUID)")
    if not topic.assignment:
        raise ValueError(f"topic '{topic.name}' needs at least one partition")
    for p, replicas in enumerate(topic.assignment):
        if not replicas or len(set(replicas)) != len(replicas):
            raise ValueError(f"topic '{topic.name}' partition {p}: bad replica list {list(replicas)}")
