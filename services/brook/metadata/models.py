"""Typed values stored in etcd, their JSON encodings, and the change events a watch delivers.

`version` fields are the etcd mod_revision of the key the value was read from (0: never written); a
compare-and-swap passes it back as the expected version. etcd revisions are cluster-wide and only
grow, so a version is never reused, not even after a topic is deleted and created again.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

NO_LEADER = -1


def encode(doc: object) -> bytes:
    """Canonical JSON (sorted keys, no spaces): equal values give equal bytes."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _obj(data: bytes) -> dict[str, Any]:
    doc = json.loads(data)
    if not isinstance(doc, dict):
        raise ValueError(f"expected a JSON object, got {type(doc).__name__}")
    return doc


def _ints(v: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in v)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    rack: str | None = None
    # The etcd create revision of the registration (like Kafka's czxid): new and larger at every
    # (re-)registration, so a stale view of a broker is recognisable. 0 until registered.
    epoch: int = 0
    # Every listener's advertised (host, port) by listener name; host/port above are the inter-broker one.
    endpoints: tuple[tuple[str, str, int], ...] = ()
    # The partition replicas it may host (max.broker.partitions); None: not announced (not checked).
    max_partitions: int | None = None

    def to_json(self) -> bytes:
        doc: dict[str, Any] = {
            "broker_id": self.broker_id,
            "host": self.host,
            "port": self.port,
            "rack": self.rack,
        }
        if self.endpoints:
            doc["endpoints"] = [{"name": n, "host": h, "port": p} for n, h, p in self.endpoints]
        if self.max_partitions is not None:
            doc["max_partitions"] = self.max_partitions
        return encode(doc)

    def endpoint(self, listener: str | None) -> tuple[str, int]:
        for name, host, port in self.endpoints:
            if name == listener:
                return host, port
        return self.host, self.port

    @classmethod
    def from_json(cls, data: bytes, epoch: int = 0) -> BrokerInfo:
        d = _obj(data)
        rack = d.get("rack")
        endpoints = tuple((str(e["name"]), str(e["host"]), int(e["port"])) for e in d.get("endpoints", []))
        budget = d.get("max_partitions")
        return cls(
            int(d["broker_id"]),
            str(d["host"]),
            int(d["port"]),
            None if rack is None else str(rack),
            epoch,
            endpoints,
            None if budget is None else int(budget),
        )


@dataclass(frozen=True, slots=True)
class ControllerInfo:
    broker_id: int
    epoch: int

    def to_json(self) -> bytes:
        return encode({"broker_id": self.broker_id, "epoch": self.epoch})

    @classmethod
    def from_json(cls, data: bytes) -> ControllerInfo:
        d = _obj(data)
        return cls(int(d["broker_id"]), int(d["epoch"]))


@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    topic_id: bytes  # 16-byte UUID, fixed at creation for the topic's life
    assignment: tuple[tuple[int, ...], ...]  # partition n -> its replicas, preferred leader first
    configs: Mapping[str, str] = field(default_factory=dict)  # overrides only
    version: int = 0

    @classmethod
    def new(
        cls, name: str, assignment: Sequence[Sequence[int]], configs: Mapping[str, str] | None = None
    ) -> TopicRecord:
        """A topic that does not exist yet, with a fresh random id."""
        return cls(name, uuid.uuid4().bytes, tuple(tuple(r) for r in assignment), dict(configs or {}))

    @property
    def partitions(self) -> int:
        return len(self.assignment)

    @property
    def replication_factor(self) -> int:
        return len(self.assignment[0]) if self.assignment else 0

    @property
    def topic_uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.topic_id)

    def replicas(self, partition: int) -> tuple[int, ...]:
        return self.assignment[partition]

    def to_json(self) -> bytes:
        return encode(
            {
                "id": str(self.topic_uuid),
                "partitions": {str(p): list(r) for p, r in enumerate(self.assignment)},
                "configs": dict(self.configs),
            }
        )

    @classmethod
    def from_json(cls, name: str, data: bytes, version: int = 0) -> TopicRecord:
        d = _obj(data)
        parts = {int(p): _ints(r) for p, r in dict(d["partitions"]).items()}
        if sorted(parts) != list(range(len(parts))):
            raise ValueError(f"topic {name}: partitions are not numbered 0..n-1: {sorted(parts)}")
        return cls(
            name=name,
            topic_id=uuid.UUID(str(d["id"])).bytes,
            assignment=tuple(parts[p] for p in range(len(parts))),
            configs={str(k): str(v) for k, v in dict(d.get("configs") or {}).items()},
            version=version,
        )


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: int  # broker id, NO_LEADER (-1) when none
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int = 0  # epoch of the controller that wrote it (set by the store on write)
    partition_epoch: int = 0  # bumped at every change of the partition's state
    version: int = 0

    @classmethod
    def initial(cls, replicas: Sequence[int], live: Sequence[int] | None = None) -> PartitionState:
        """A new partition: the first live replica leads, every live replica is in the ISR."""
        alive = [r for r in replicas if live is None or r in live]
        return cls(leader=alive[0] if alive else NO_LEADER, leader_epoch=0, isr=tuple(alive))

    def evolve(self, *, leader: int | None = None, isr: Sequence[int] | None = None) -> PartitionState:
        """The next state: leader epoch bumped when the leader changes, partition epoch always.
        `version` stays the one read, which is what the compare-and-swap expects."""
        new_leader = self.leader if leader is None else leader
        return replace(
            self,
            leader=new_leader,
            leader_epoch=self.leader_epoch + (1 if new_leader != self.leader else 0),
            isr=self.isr if isr is None else tuple(isr),
            partition_epoch=self.partition_epoch + 1,
        )

    def to_json(self) -> bytes:
        return encode(
            {
                "leader": self.leader,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
                "controller_epoch": self.controller_epoch,
                "partition_epoch": self.partition_epoch,
            }
        )

    @classmethod
    def from_json(cls, data: bytes, version: int = 0) -> PartitionState:
        d = _obj(data)
        return cls(
            leader=int(d["leader"]),
            leader_epoch=int(d["leader_epoch"]),
            isr=_ints(d["isr"]),
            controller_epoch=int(d.get("controller_epoch", 0)),
            partition_epoch=int(d.get("partition_epoch", 0)),
            version=version,
        )


@dataclass(frozen=True, slots=True)
class Reassignment:
    topic: str
    partition: int
    target: tuple[int, ...]  # the replica list wanted once the reassignment completes
    version: int = 0

    def to_json(self) -> bytes:
        return encode({"target": list(self.target)})

    @classmethod
    def from_json(cls, topic: str, partition: int, data: bytes, version: int = 0) -> Reassignment:
        return cls(topic, partition, _ints(_obj(data)["target"]), version)


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    first: int
    size: int

    @property
    def last(self) -> int:
        return self.first + self.size - 1


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a SCRAM server keeps of a password (RFC 5802 StoredKey and ServerKey), never the password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_doc(self) -> dict[str, object]:
        b64 = base64.b64encode
        return {
            "salt": b64(self.salt).decode(),
            "stored_key": b64(self.stored_key).decode(),
            "server_key": b64(self.server_key).decode(),
            "iterations": self.iterations,
        }

    @classmethod
    def from_doc(cls, d: Mapping[str, Any]) -> ScramCredential:
        b = base64.b64decode
        return cls(b(d["salt"]), b(d["stored_key"]), b(d["server_key"]), int(d["iterations"]))


def encode_configs(configs: Mapping[str, str]) -> bytes:
    return encode(dict(configs))


def decode_configs(data: bytes) -> dict[str, str]:
    return {str(k): str(v) for k, v in _obj(data).items()}


def encode_scram(credentials: Mapping[str, ScramCredential]) -> bytes:
    """A user's credentials by mechanism name (SCRAM-SHA-256, SCRAM-SHA-512)."""
    return encode({m: c.to_doc() for m, c in credentials.items()})


def decode_scram(data: bytes) -> dict[str, ScramCredential]:
    return {str(m): ScramCredential.from_doc(d) for m, d in _obj(data).items()}


# ---- change events (what `EtcdMetadataStore.watch` yields) ----
# `revision` is the etcd revision of the change. `resync` is True for events made up after etcd had
# compacted the history a watch needed: the watch re-listed and reported the difference (a deletion
# then carries the re-list's revision, and values changed several times are reported once).


@dataclass(frozen=True, slots=True)
class BrokerJoined:
    broker: BrokerInfo
    revision: int
    resync: bool = False


@dataclass(frozen=True, slots=True)
class BrokerLeft:
    broker_id: int
    revision: int
    resync: bool = False


@dataclass(frozen=True, slots=True)
class ControllerChanged:
    controller: ControllerInfo | None  # None: the controller is gone, an election is under way
    revision: int
    resync: bool = False


@dataclass(frozen=True, slots=True)
class TopicCreated:
    topic: TopicRecord
    revision: int
    resync: bool = False


@dataclass(frozen=True, slots=True)
class TopicChanged:
    topic: TopicRecord
    revision: int
    resync: bool = False


@dataclass(frozen=True, slots=True)
class TopicDeleted:
    name: str
    topic_id: bytes | None  # None only when unknown (a resync of a topic never seen)
    revision: int
    resync: bool = False


@dataclass(frozen=True, slots=True)
class PartitionStateChanged:
    topic: str
    partition: int
    state: PartitionState
    revision: int
    resync: bool = False


@dataclass(frozen=True, slots=True)
class PartitionStateDeleted:
    topic: str
    partition: int
    revision: int
    resync: bool = False


@dataclass(frozen=True, slots=True)
class ReassignmentChanged:
    topic: str
    partition: int
    reassignment: Reassignment | None  # None: finished or cancelled (the key was deleted)
    revision: int
    resync: bool = False


@dataclass(frozen=True, slots=True)
class EntityConfigsChanged:
    kind: str  # "broker" (name: an id, "" for the cluster default) or "group"
    name: str
    configs: dict[str, str]  # empty: removed
    revision: int
    resync: bool = False


@dataclass(frozen=True, slots=True)
class ScramChanged:
    user: str
    credentials: dict[str, ScramCredential]  # empty: removed
    revision: int
    resync: bool = False


# An ACL resource pattern as stored: (resource type, pattern type, name), e.g. ("TOPIC", "LITERAL", "t").
AclKey = tuple[str, str, str]


def encode_acls(entries: Sequence[Mapping[str, Any]]) -> bytes:
    return json.dumps(list(entries), sort_keys=True).encode()


def decode_acls(data: bytes) -> list[dict[str, Any]]:
    docs = json.loads(data)
    if not isinstance(docs, list):
        raise ValueError("ACL entries must be a JSON list")
    return [dict(d) for d in docs]


@dataclass(frozen=True, slots=True)
class AclsChanged:
    key: AclKey
    entries: list[dict[str, Any]]  # empty: the pattern has no ACLs any more
    revision: int
    resync: bool = False


@dataclass(frozen=True, slots=True)
class ViewMarked:
    """A broker rewrote its view mark (keys.py `views/<id>`)."""

    broker_id: int
    revision: int
    resync: bool = False


MetadataEvent = (
    BrokerJoined
    | BrokerLeft
    | ControllerChanged
    | TopicCreated
    | TopicChanged
    | TopicDeleted
    | PartitionStateChanged
    | PartitionStateDeleted
    | ReassignmentChanged
    | EntityConfigsChanged
    | ScramChanged
    | AclsChanged
    | ViewMarked
)
