"""The registry's state as the records of the `_schemas` topic build it, in Confluent's formats (so a
topic written by Confluent's registry or Karapace reads the same):

  key {"keytype": "SCHEMA", "subject": s, "version": v, "magic": 1}
      value {"subject", "version", "id", "schema", "deleted", ["schemaType"], ["references"]}, or null:
      the version permanently deleted
  key {"keytype": "CONFIG", "subject": s or null, "magic": 0}  value {"compatibilityLevel": L} or null
  key {"keytype": "MODE", "subject": s or null, "magic": 0}    value {"mode": M} or null
  key {"keytype": "DELETE_SUBJECT", "subject": s, "magic": 0}  value {"subject": s, "version": v}: every
      version up to v soft-deleted
  key {"keytype": "NOOP", "magic": 0}: nothing (Confluent's read barrier); anything unknown is skipped.

Pure: no I/O; the store applies records in topic order and the service reads it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class Version:
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    deleted: bool = False

    def value(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "subject": self.subject,
            "version": self.version,
            "id": self.id,
            "schema": self.schema,
            "deleted": self.deleted,
        }
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.as_json() for r in self.references]
        return out

    def content(self) -> tuple[str, str, tuple[Reference, ...]]:
        """What makes two registrations the same schema (and so the same id)."""
        return (self.schema_type, self.schema, self.references)


def schema_key(subject: str, version: int) -> dict[str, Any]:
    return {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}


def config_key(subject: str | None) -> dict[str, Any]:
    return {"keytype": "CONFIG", "subject": subject, "magic": 0}


def mode_key(subject: str | None) -> dict[str, Any]:
    return {"keytype": "MODE", "subject": subject, "magic": 0}


def delete_subject_key(subject: str) -> dict[str, Any]:
    return {"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0}


def encode(obj: dict[str, Any] | None) -> bytes | None:
    return None if obj is None else json.dumps(obj, separators=(",", ":")).encode()


@dataclass
class RegistryState:
    subjects: dict[str, dict[int, Version]] = field(default_factory=dict)
    by_id: dict[int, Version] = field(default_factory=dict)  # the first registration of each id
    configs: dict[str | None, str] = field(default_factory=dict)  # None: the global level
    modes: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0

    def apply(self, key_bytes: bytes | None, value_bytes: bytes | None) -> None:
        try:
            key = json.loads(key_bytes) if key_bytes else None
            value = json.loads(value_bytes) if value_bytes else None
            if isinstance(key, dict):
                self._apply(key, value)
        except (ValueError, KeyError, TypeError) as e:
            log.warning("skipping a malformed _schemas record (%s): key %r", e, key_bytes)

    def _apply(self, key: dict[str, Any], value: Any) -> None:
        kind, subject = key.get("keytype"), str(key.get("subject"))
        if kind == "SCHEMA":
            if value is None:
                self._forget(subject, int(key["version"]))
                return
            v = Version(
                subject=value["subject"],
                version=int(value["version"]),
                id=int(value["id"]),
                schema=value["schema"],
                schema_type=value.get("schemaType") or "AVRO",
                references=tuple(
                    Reference(r["name"], r["subject"], int(r["version"]))
                    for r in value.get("references") or []
                ),
                deleted=bool(value.get("deleted", False)),
            )
            self.subjects.setdefault(v.subject, {})[v.version] = v
            self.by_id.setdefault(v.id, v)
            self.max_id = max(self.max_id, v.id)
        elif kind == "CONFIG":
            scope = key.get("subject")  # null: the global level
            self._set(self.configs, scope, None if value is None else value["compatibilityLevel"])
        elif kind == "MODE":
            scope = key.get("subject")
            self._set(self.modes, scope, None if value is None else value["mode"])
        elif kind == "DELETE_SUBJECT" and value is not None:
            upto = int(value["version"])
            for number, v in list(self.subjects.get(subject, {}).items()):
                if number <= upto and not v.deleted:
                    self.subjects[subject][number] = Version(**{**v.__dict__, "deleted": True})

    @staticmethod
    def _set(table: dict[str | None, str], subject: str | None, value: str | None) -> None:
        if value is None:
            table.pop(subject, None)
        else:
            table[subject] = value

    def _forget(self, subject: str, version: int) -> None:
        versions = self.subjects.get(subject, {})
        gone = versions.pop(version, None)
        if not versions:
            self.subjects.pop(subject, None)
        if gone is not None and not any(
            v.id == gone.id for vs in self.subjects.values() for v in vs.values()
        ):
            self.by_id.pop(gone.id, None)

    # Reads

    def live(self, subject: str, deleted: bool = False) -> list[Version]:
        """The subject's versions, oldest first; soft-deleted ones only with `deleted`."""
        versions = self.subjects.get(subject, {})
        return [versions[n] for n in sorted(versions) if deleted or not versions[n].deleted]

    def subject_names(self, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.subjects if self.live(s, deleted))

    def find_id(self, content: tuple[str, str, tuple[Reference, ...]]) -> int | None:
        for v in self.by_id.values():
            if v.content() == content:
                return v.id
        for vs in self.subjects.values():
            for v in vs.values():
                if v.content() == content:
                    return v.id
        return None

    def uses_of(self, schema_id: int, deleted: bool = False) -> list[Version]:
        return [v for s in sorted(self.subjects) for v in self.live(s, deleted) if v.id == schema_id]

    def referenced_by(self, subject: str, version: int) -> list[int]:
        return sorted(
            {
                v.id
                for vs in self.subjects.values()
                for v in vs.values()
                if not v.deleted and any(r.subject == subject and r.version == version for r in v.references)
            }
        )
