"""The key layout under `/brook/<cluster-name>/`.

    cluster_id                     the cluster id (plain text), created once
    brokers/<id>                   BrokerInfo JSON, attached to the broker's lease
    controller                     ControllerInfo JSON, attached to the controller's lease
    controller_epoch               decimal integer, bumped in the same txn that creates `controller`
    topics/<name>                  TopicRecord JSON (id, replica assignment, config overrides)
    partitions/<topic>/<n>         PartitionState JSON (leader, leader epoch, ISR, ...)
    reassignments/<topic>/<n>      Reassignment JSON (target replicas) while one is in progress
    producer_id_block              {"next": first free producer id}
    configs/<kind>/<name>          dynamic configs of a broker (name: its id, or <default> for all), a
                                   group (kind "group") or a client quota entity (kind "quota", name
                                   e.g. user=alice,client-id=<default>); names percent-encoded; JSON
                                   {name: value}
    scram/<user>                   a user's SCRAM credentials (user percent-encoded), JSON by mechanism
    acls/<type>/<pattern>/<name>   the ACL entries of one resource pattern (type TOPIC, GROUP ...; pattern
                                   LITERAL or PREFIXED; name percent-encoded), a JSON list
    views/<id>                     a broker's view mark (decimal: the revision its view had reached),
                                   rewritten every second under its lease; its own watch seeing the
                                   write proves its view current (brook.broker.view_freshness)

Topic names never contain '/', so `partitions/<topic>/` prefixes never overlap between topics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from urllib.parse import quote, unquote

_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
BROKER_DEFAULT = "<default>"  # the key name of the cluster-wide broker configs (as in Kafka's ZooKeeper)


class KeyKind(Enum):
    CLUSTER_ID = "cluster_id"
    BROKER = "broker"
    CONTROLLER = "controller"
    CONTROLLER_EPOCH = "controller_epoch"
    TOPIC = "topic"
    PARTITION = "partition"
    REASSIGNMENT = "reassignment"
    PRODUCER_ID_BLOCK = "producer_id_block"
    CONFIGS = "configs"
    SCRAM = "scram"
    ACLS = "acls"
    VIEW = "view"


@dataclass(frozen=True, slots=True)
class ParsedKey:
    kind: KeyKind
    topic: str | None = None
    partition: int | None = None
    broker_id: int | None = None
    entity_kind: str | None = None  # CONFIGS: "broker" or "group"
    name: str | None = None  # CONFIGS: the entity's name; SCRAM: the user; ACLS: the resource name
    pattern: tuple[str, str] | None = None  # ACLS: (resource type, pattern type)


class KeyLayout:
    def __init__(self, cluster_name: str, root: str = "/brook") -> None:
        if not _NAME.match(cluster_name):
            raise ValueError(f"cluster name {cluster_name!r} must be 1-249 of [a-zA-Z0-9._-]")
        self.cluster_name = cluster_name
        self.prefix = f"{root.rstrip('/')}/{cluster_name}/".encode()

    def _k(self, rest: str) -> bytes:
        return self.prefix + rest.encode()

    @property
    def cluster_id(self) -> bytes:
        return self._k("cluster_id")

    @property
    def brokers(self) -> bytes:
        return self._k("brokers/")

    def broker(self, broker_id: int) -> bytes:
        return self._k(f"brokers/{broker_id}")

    def view(self, broker_id: int) -> bytes:
        return self._k(f"views/{broker_id}")

    @property
    def controller(self) -> bytes:
        return self._k("controller")

    @property
    def controller_epoch(self) -> bytes:
        return self._k("controller_epoch")

    @property
    def topics(self) -> bytes:
        return self._k("topics/")

    def topic(self, name: str) -> bytes:
        _check_topic(name)
        return self._k(f"topics/{name}")

    @property
    def partitions(self) -> bytes:
        return self._k("partitions/")

    def partitions_of(self, topic: str) -> bytes:
        _check_topic(topic)
        return self._k(f"partitions/{topic}/")

    def partition(self, topic: str, partition: int) -> bytes:
        return self.partitions_of(topic) + str(int(partition)).encode()

    def reassignments_of(self, topic: str) -> bytes:
        _check_topic(topic)
        return self._k(f"reassignments/{topic}/")

    def reassignment(self, topic: str, partition: int) -> bytes:
        return self.reassignments_of(topic) + str(int(partition)).encode()

    @property
    def producer_id_block(self) -> bytes:
        return self._k("producer_id_block")

    def configs(self, kind: str, name: str) -> bytes:
        """Dynamic configs of an entity; the broker default (name "") is <default>."""
        if kind not in ("broker", "group", "quota"):
            raise ValueError(f"unknown config entity kind {kind!r}")
        if kind == "broker":
            return self._k(f"configs/broker/{name or BROKER_DEFAULT}")
        return self._k(f"configs/{kind}/{quote(name, safe='')}")

    def scram(self, user: str) -> bytes:
        return self._k(f"scram/{quote(user, safe='')}")

    def acls(self, resource_type: str, pattern_type: str, name: str) -> bytes:
        return self._k(f"acls/{resource_type}/{pattern_type}/{quote(name, safe='')}")

    def parse(self, key: bytes) -> ParsedKey | None:
        """What a key under this cluster's prefix is; None for keys this version does not know."""
        if not key.startswith(self.prefix):
            return None
        parts = key[len(self.prefix) :].decode(errors="replace").split("/")
        try:
            match parts:
                case ["cluster_id"]:
                    return ParsedKey(KeyKind.CLUSTER_ID)
                case ["controller"]:
                    return ParsedKey(KeyKind.CONTROLLER)
                case ["controller_epoch"]:
                    return ParsedKey(KeyKind.CONTROLLER_EPOCH)
                case ["producer_id_block"]:
                    return ParsedKey(KeyKind.PRODUCER_ID_BLOCK)
                case ["brokers", b]:
                    return ParsedKey(KeyKind.BROKER, broker_id=int(b))
                case ["views", b]:
                    return ParsedKey(KeyKind.VIEW, broker_id=int(b))
                case ["topics", t]:
                    return ParsedKey(KeyKind.TOPIC, topic=t)
                case ["partitions", t, p]:
                    return ParsedKey(KeyKind.PARTITION, topic=t, partition=int(p))
                case ["reassignments", t, p]:
                    return ParsedKey(KeyKind.REASSIGNMENT, topic=t, partition=int(p))
                case ["configs", "broker", b]:
                    name = "" if b == BROKER_DEFAULT else str(int(b))
                    return ParsedKey(KeyKind.CONFIGS, entity_kind="broker", name=name)
                case ["configs", ("group" | "quota") as kind, g]:
                    return ParsedKey(KeyKind.CONFIGS, entity_kind=kind, name=unquote(g))
                case ["scram", u]:
                    return ParsedKey(KeyKind.SCRAM, name=unquote(u))
                case ["acls", rtype, ptype, n]:
                    return ParsedKey(KeyKind.ACLS, name=unquote(n), pattern=(rtype, ptype))
        except ValueError:
            return None
        return None


def _check_topic(name: str) -> None:
    if not _NAME.match(name) or name in (".", ".."):
        raise ValueError(f"illegal topic name {name!r}")
