"""What the cluster's metadata looks like at one etcd revision (MetadataSnapshot) and the typed changes
after it (MetadataWatch), decoded from etcd's key-value events. EtcdMetadataStore (store.py) reads the
snapshot and starts the watch; the broker applies both."""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from .client import EtcdClient
from .keys import KeyKind, KeyLayout
from .kv import EventType, KeyValue, WatchEvent
from .models import (
    AclKey,
    AclsChanged,
    BrokerInfo,
    BrokerJoined,
    BrokerLeft,
    ControllerChanged,
    ControllerInfo,
    EntityConfigsChanged,
    MetadataEvent,
    PartitionState,
    PartitionStateChanged,
    PartitionStateDeleted,
    Reassignment,
    ReassignmentChanged,
    ScramChanged,
    ScramCredential,
    TopicChanged,
    TopicCreated,
    TopicDeleted,
    TopicRecord,
    ViewMarked,
    decode_acls,
    decode_configs,
    decode_scram,
)
from .watch import PrefixWatch, watch_prefix

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MetadataSnapshot:
    """Everything under the cluster's prefix, read at one revision."""

    revision: int
    cluster_id: str | None
    brokers: dict[int, BrokerInfo]
    controller: ControllerInfo | None
    controller_epoch: int
    topics: dict[str, TopicRecord]
    partitions: dict[str, dict[int, PartitionState]]
    reassignments: dict[tuple[str, int], Reassignment]
    next_producer_id: int
    kvs: list[KeyValue] = field(default_factory=list, repr=False, compare=False)
    entity_configs: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    scram: dict[str, dict[str, ScramCredential]] = field(default_factory=dict)
    acls: dict[AclKey, list[dict[str, Any]]] = field(default_factory=dict)


class MetadataWatch:
    """Typed changes after a snapshot. Created/changed topics are told apart by topic id, so a topic
    deleted and created again under the same name is a TopicDeleted then a TopicCreated even when
    a compaction hid the steps in between."""

    def __init__(self, client: EtcdClient, layout: KeyLayout, since: MetadataSnapshot) -> None:
        self._layout = layout
        self._topic_ids = {name: t.topic_id for name, t in since.topics.items()}
        self._brokers = set(since.brokers)
        self._pending: deque[MetadataEvent] = deque()
        self._watch: PrefixWatch = watch_prefix(client, layout.prefix, since.revision + 1, since.kvs)

    @property
    def revision(self) -> int:
        return self._watch.revision

    @property
    def reconnects(self) -> int:
        return self._watch.reconnects

    @property
    def resyncs(self) -> int:
        return self._watch.resyncs

    def __aiter__(self) -> MetadataWatch:
        return self

    async def __anext__(self) -> MetadataEvent:
        while not self._pending:
            ev = await self._watch.__anext__()
            try:
                self._decode(ev)
            except (ValueError, KeyError, TypeError) as e:
                log.warning("ignoring unreadable change of %r: %s", ev.key, e)
        return self._pending.popleft()

    def _decode(self, ev: WatchEvent) -> None:
        parsed = self._layout.parse(ev.key)
        if parsed is None:
            return
        put = ev.type is EventType.PUT
        rev, rs = ev.revision, ev.resync
        match parsed.kind:
            case KeyKind.BROKER:
                assert parsed.broker_id is not None
                if put:
                    self._brokers.add(parsed.broker_id)
                    self._pending.append(
                        BrokerJoined(BrokerInfo.from_json(ev.value, ev.create_revision), rev, rs)
                    )
                elif parsed.broker_id in self._brokers:
                    self._brokers.discard(parsed.broker_id)
                    self._pending.append(BrokerLeft(parsed.broker_id, rev, rs))
            case KeyKind.VIEW:
                assert parsed.broker_id is not None
                if put:
                    self._pending.append(ViewMarked(parsed.broker_id, rev, rs))
            case KeyKind.CONTROLLER:
                self._pending.append(
                    ControllerChanged(ControllerInfo.from_json(ev.value) if put else None, rev, rs)
                )
            case KeyKind.TOPIC:
                name = parsed.topic
                assert name is not None
                known = self._topic_ids.get(name)
                if not put:
                    self._topic_ids.pop(name, None)
                    old_id = TopicRecord.from_json(name, ev.value).topic_id if ev.value else known
                    self._pending.append(TopicDeleted(name, old_id, rev, rs))
                    return
                topic = TopicRecord.from_json(name, ev.value, ev.revision)
                self._topic_ids[name] = topic.topic_id
                if known is not None and known != topic.topic_id:
                    self._pending.append(TopicDeleted(name, known, rev, rs))
                    known = None
                self._pending.append((TopicCreated if known is None else TopicChanged)(topic, rev, rs))
            case KeyKind.PARTITION:
                assert parsed.topic is not None and parsed.partition is not None
                if put:
                    state = PartitionState.from_json(ev.value, ev.revision)
                    self._pending.append(
                        PartitionStateChanged(parsed.topic, parsed.partition, state, rev, rs)
                    )
                else:
                    self._pending.append(PartitionStateDeleted(parsed.topic, parsed.partition, rev, rs))
            case KeyKind.REASSIGNMENT:
                assert parsed.topic is not None and parsed.partition is not None
                ra = (
                    Reassignment.from_json(parsed.topic, parsed.partition, ev.value, ev.revision)
                    if put
                    else None
                )
                self._pending.append(ReassignmentChanged(parsed.topic, parsed.partition, ra, rev, rs))
            case KeyKind.CONFIGS:
                assert parsed.entity_kind is not None and parsed.name is not None
                configs = decode_configs(ev.value) if put else {}
                self._pending.append(EntityConfigsChanged(parsed.entity_kind, parsed.name, configs, rev, rs))
            case KeyKind.SCRAM:
                assert parsed.name is not None
                creds = decode_scram(ev.value) if put else {}
                self._pending.append(ScramChanged(parsed.name, creds, rev, rs))
            case KeyKind.ACLS:
                assert parsed.name is not None and parsed.pattern is not None
                entries = decode_acls(ev.value) if put else []
                self._pending.append(AclsChanged((*parsed.pattern, parsed.name), entries, rev, rs))
            case _:
                pass  # cluster_id, controller_epoch, producer_id_block: no event

    async def aclose(self) -> None:
        await self._watch.aclose()

    async def __aenter__(self) -> MetadataWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
