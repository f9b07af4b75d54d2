"""Topic metadata (name, stable id, partition count, config overrides) and where it is kept.

`MetadataStore` is where a single node keeps it (LocalMetadataStore: a JSON file in the data
directory); a cluster keeps it in etcd (brook.metadata.EtcdMetadataStore). Neither is seen by handlers:
they ask the broker's metadata seam (cluster_metadata.py).
"""

from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from brook.metadata import AclKey, ScramCredential
from brook.protocol.errors import ErrorCode, KafkaError

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets"})


def topic_name_error(name: str | None) -> str | None:
    """Why a topic name is invalid (Kafka's rules), or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be '{name}'"
    if not _LEGAL.match(name):
        return f"topic name '{name}' is illegal: use at most 249 of [a-zA-Z0-9._-]"
    return None


def assignment_error(
    assignment: list[list[int]], brokers: set[int], replication_factor: int = -1
) -> str | None:
    """Why a manual replica assignment (one replica list per partition) cannot be used, or None: Kafka's
    rules (no empty list, no broker twice, registered brokers only, one replication factor)."""
    for replicas in assignment:
        if not replicas:
            return "the manual partition assignment includes an empty replica list"
        if len(set(replicas)) != len(replicas):
            return f"the manual partition assignment {replicas} includes a broker more than once"
        unknown = sorted(set(replicas) - brokers)
        if unknown:
            return f"the manual partition assignment includes broker {unknown[0]}, which is not registered"
        if replication_factor == -1:
            replication_factor = len(replicas)
        if len(replicas) != replication_factor:
            return (
                f"every partition must have {replication_factor} replicas, "
                f"but the manual partition assignment has {replicas}"
            )
    return None


@dataclass(slots=True)
class TopicMeta:
    name: str
    topic_id: bytes  # 16-byte UUID, stable for the topic's life (Fetch v13+ addresses topics by it)
    partitions: int
    replication_factor: int = 1
    configs: dict[str, str] = field(default_factory=dict)  # overrides only

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "id": str(uuid.UUID(bytes=self.topic_id)),
            "partitions": self.partitions,
            "replication_factor": self.replication_factor,
            "configs": self.configs,
        }

    @classmethod
    def from_json(cls, d: dict[str, object]) -> TopicMeta:
        return cls(
            name=str(d["name"]),
            topic_id=uuid.UUID(str(d["id"])).bytes,
            partitions=int(d["partitions"]),  # type: ignore[call-overload]
            replication_factor=int(d.get("replication_factor", 1)),  # type: ignore[call-overload]
            configs={str(k): str(v) for k, v in dict(d.get("configs", {})).items()},  # type: ignore[call-overload]
        )


def new_topic_id() -> bytes:
    return uuid.uuid4().bytes


class MetadataStore(Protocol):
    """Durable metadata of a single node (single_node.SingleNodeMetadata reads and changes it)."""

    def cluster_id(self) -> str: ...
    def topics(self) -> dict[str, TopicMeta]: ...
    def put_topic(self, topic: TopicMeta) -> None: ...
    def delete_topic(self, name: str) -> None: ...
    def allocate_producer_id(self) -> int: ...
    def entity_configs(self) -> dict[tuple[str, str], dict[str, str]]: ...
    def put_entity_configs(self, kind: str, name: str, configs: dict[str, str]) -> None: ...
    def scram(self) -> dict[str, dict[str, ScramCredential]]: ...
    def put_scram(self, user: str, credentials: dict[str, ScramCredential]) -> None: ...
    def acls(self) -> dict[AclKey, list[dict[str, Any]]]: ...
    def put_acls(self, acls: dict[AclKey, list[dict[str, Any]]]) -> None: ...


class LocalMetadataStore:
    """Single-node metadata in `<data_dir>/meta.json`, rewritten atomically (write, fsync, rename).

    A change is kept in memory only once it is on disk, so a failed write (OSError: a full disk)
    changes nothing."""

    _BLOCK = 1000  # producer ids reserved per write, so InitProducerId rarely touches the disk

    def __init__(self, data_dir: Path, cluster_id: str | None = None) -> None:
        self._path = data_dir / "meta.json"
        data_dir.mkdir(parents=True, exist_ok=True)
        self._topics: dict[str, TopicMeta] = {}
        self._next_pid = 0
        self._pid_limit = 0
        self._cluster_id = cluster_id or ""
        stored = ""
        # Dynamic configs by (kind, name) ("broker" with an id or "" for all, or "group"); SCRAM
        # credentials by user, then mechanism.
        self._configs: dict[tuple[str, str], dict[str, str]] = {}
        self._scram: dict[str, dict[str, ScramCredential]] = {}
        self._acls: dict[AclKey, list[dict[str, Any]]] = {}
        if self._path.exists():
            raw = json.loads(self._path.read_text())
            stored = str(raw["cluster_id"])
            self._cluster_id = cluster_id or stored
            self._topics = {t["name"]: TopicMeta.from_json(t) for t in raw.get("topics", [])}
            self._configs = {
                (str(e["kind"]), str(e["name"])): {str(k): str(v) for k, v in e["configs"].items()}
                for e in raw.get("entity_configs", [])
            }
            self._scram = {
                str(u): {str(m): ScramCredential.from_doc(c) for m, c in creds.items()}
                for u, creds in raw.get("scram", {}).items()
            }
            self._acls = {
                (str(a["resource_type"]), str(a["pattern_type"]), str(a["name"])): list(a["entries"])
                for a in raw.get("acls", [])
            }
            # Never hand out an id again after a crash: resume past the reserved block.
            self._next_pid = self._pid_limit = int(raw.get("producer_id_limit", 0))
        if not self._cluster_id:
            self._cluster_id = uuid.uuid4().hex[:22]
        if self._cluster_id != stored:  # a new store, or a new id: nothing to write otherwise (a full disk)
            self._save()

    def _save(
        self,
        topics: dict[str, TopicMeta] | None = None,
        pid_limit: int | None = None,
        configs: dict[tuple[str, str], dict[str, str]] | None = None,
        scram: dict[str, dict[str, ScramCredential]] | None = None,
        acls: dict[AclKey, list[dict[str, Any]]] | None = None,
    ) -> None:
        """Write the state with the given parts replaced; the caller keeps them only if this returns."""
        topics = self._topics if topics is None else topics
        configs = self._configs if configs is None else configs
        scram = self._scram if scram is None else scram
        acls = self._acls if acls is None else acls
        doc = {
            "cluster_id": self._cluster_id,
            "producer_id_limit": self._pid_limit if pid_limit is None else pid_limit,
            "topics": [t.to_json() for t in topics.values()],
            "entity_configs": [
                {"kind": kind, "name": name, "configs": c} for (kind, name), c in configs.items()
            ],
            "scram": {u: {m: c.to_doc() for m, c in creds.items()} for u, creds in scram.items()},
            "acls": [
                {"resource_type": t, "pattern_type": p, "name": n, "entries": e}
                for (t, p, n), e in acls.items()
            ],
        }
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)

    def cluster_id(self) -> str:
        return self._cluster_id

    def topics(self) -> dict[str, TopicMeta]:
        return dict(self._topics)

    def put_topic(self, topic: TopicMeta) -> None:
        topics = {**self._topics, topic.name: topic}
        self._save(topics)
        self._topics = topics

    def delete_topic(self, name: str) -> None:
        if name not in self._topics:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{name}' does not exist")
        topics = {k: v for k, v in self._topics.items() if k != name}
        self._save(topics)
        self._topics = topics

    def allocate_producer_id(self) -> int:
        if self._next_pid >= self._pid_limit:
            limit = self._next_pid + self._BLOCK
            self._save(pid_limit=limit)
            self._pid_limit = limit
        pid = self._next_pid
        self._next_pid += 1
        return pid

    def entity_configs(self) -> dict[tuple[str, str], dict[str, str]]:
        return {k: dict(v) for k, v in self._configs.items()}

    def put_entity_configs(self, kind: str, name: str, configs: dict[str, str]) -> None:
        entities = {k: v for k, v in self._configs.items() if k != (kind, name)}
        if configs:
            entities[(kind, name)] = dict(configs)
        self._save(configs=entities)
        self._configs = entities

    def scram(self) -> dict[str, dict[str, ScramCredential]]:
        return {u: dict(c) for u, c in self._scram.items()}

    def put_scram(self, user: str, credentials: dict[str, ScramCredential]) -> None:
        users = {u: c for u, c in self._scram.items() if u != user}
        if credentials:
            users[user] = dict(credentials)
        self._save(scram=users)
        self._scram = users

    def acls(self) -> dict[AclKey, list[dict[str, Any]]]:
        return {k: list(v) for k, v in self._acls.items()}

    def put_acls(self, acls: dict[AclKey, list[dict[str, Any]]]) -> None:
        """Replace the whole ACL table (patterns without entries are dropped)."""
        kept = {k: list(v) for k, v in acls.items() if v}
        self._save(acls=kept)
        self._acls = kept
