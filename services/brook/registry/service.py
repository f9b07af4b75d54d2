"""The registry's operations, as Confluent's Schema Registry defines them: reads answer from this node's
state; writes build their records from an up-to-date state inside SchemaStore.write (the one writer)."""

from __future__ import annotations

from typing import Any

from . import errors
from .schemas import DEFAULT_LEVEL, Parsed, check_level, incompatibilities, parse
from .state import (
    Reference,
    RegistryState,
    Version,
    config_key,
    delete_subject_key,
    mode_key,
    schema_key,
)
from .store import Record, SchemaStore

MODES = ("READWRITE", "READONLY", "IMPORT")
MAX_VERSION = 2**31 - 1


def parse_version(text: str) -> int | None:
    """A version in a path: a number in [1, 2^31-1], or "latest" (also -1): None."""
    if text in ("latest", "-1"):
        return None
    try:
        number = int(text)
    except ValueError:
        raise errors.invalid_version(text) from None
    if not 1 <= number <= MAX_VERSION:
        raise errors.invalid_version(text)
    return number


def version_json(v: Version) -> dict[str, Any]:
    out: dict[str, Any] = {"subject": v.subject, "version": v.version, "id": v.id}
    if v.schema_type != "AVRO":
        out["schemaType"] = v.schema_type
    if v.references:
        out["references"] = [r.as_json() for r in v.references]
    out["schema"] = v.schema
    return out


def schema_json(v: Version) -> dict[str, Any]:
    out: dict[str, Any] = {"schema": v.schema}
    if v.schema_type != "AVRO":
        out["schemaType"] = v.schema_type
    if v.references:
        out["references"] = [r.as_json() for r in v.references]
    return out


class Request:
    """A schema as POSTed: {"schema": ..., "schemaType": ..., "references": [...]}, checked."""

    def __init__(self, body: Any) -> None:
        if not isinstance(body, dict):
            raise errors.unprocessable("The request body is a JSON object")
        schema = body.get("schema")
        if not isinstance(schema, str):
            raise errors.invalid_schema('(null): the request has no "schema" string')
        self.schema = schema
        schema_type = body.get("schemaType") or "AVRO"
        if not isinstance(schema_type, str):
            raise errors.unprocessable("schemaType is a string")
        self.schema_type = schema_type.upper()
        refs = body.get("references") or []
        try:
            self.references = tuple(
                Reference(str(r["name"]), str(r["subject"]), int(r["version"])) for r in refs
            )
        except (KeyError, TypeError, ValueError) as e:
            raise errors.unprocessable(f"a reference has a name, a subject and a version ({e})") from None
        self.id: Any = body.get("id")
        self.version: Any = body.get("version")


class Registry:
    def __init__(self, store: SchemaStore) -> None:
        self.store = store

    @property
    def state(self) -> RegistryState:
        return self.store.state

    # Subjects and versions

    def versions(self, subject: str, deleted: bool = False) -> list[Version]:
        live = self.state.live(subject, deleted)
        if not live:
            raise errors.subject_not_found(subject)
        return live

    def version(self, subject: str, version: str, deleted: bool = False) -> Version:
        number = parse_version(version)
        live = self.versions(subject, deleted=deleted or number is not None)
        if number is None:
            if not deleted:
                live = [v for v in live if not v.deleted]
            if not live:
                raise errors.subject_not_found(subject)
            return live[-1]
        found = next((v for v in live if v.version == number), None)
        if found is None or (found.deleted and not deleted):
            raise errors.version_not_found(number)
        return found

    def by_id(self, schema_id: int) -> Version:
        v = self.state.by_id.get(schema_id)
        if v is None:
            raise errors.schema_not_found(f"Schema {schema_id} not found")
        return v

    def level(self, subject: str | None) -> str:
        return self.state.configs.get(subject) or self.state.configs.get(None) or DEFAULT_LEVEL

    def mode(self, subject: str | None) -> str:
        return self.state.modes.get(subject) or self.state.modes.get(None) or "READWRITE"

    def _parse(self, state: RegistryState, req: Request) -> Parsed:
        return parse(req.schema_type, req.schema, self._reference_texts(state, req.references, set()))

    def _reference_texts(
        self, state: RegistryState, refs: tuple[Reference, ...], seen: set[Reference]
    ) -> list[str]:
        """The referenced schemas' texts, dependencies first (what a parser must know before)."""
        out: list[str] = []
        for ref in refs:
            if ref in seen:
                continue
            seen.add(ref)
            target = state.subjects.get(ref.subject, {}).get(ref.version)
            if target is None or target.deleted:
                raise errors.invalid_schema(
                    f"reference {ref.name} to subject '{ref.subject}' version {ref.version} not found"
                )
            out += self._reference_texts(state, target.references, seen)
            out.append(target.schema)
        return out

    def _same(self, state: RegistryState, v: Version, req: Request, parsed: Parsed, normalize: bool) -> bool:
        if v.schema_type != req.schema_type or v.references != req.references:
            return False
        if v.schema in (parsed.text, req.schema):
            return True
        if not normalize:
            return False
        try:
            existing = parse(v.schema_type, v.schema, self._reference_texts(state, v.references, set()))
        except errors.RegistryError:
            return False
        return existing.normalized == parsed.normalized

    def lookup(self, subject: str, body: Any, normalize: bool, deleted: bool) -> Version:
        req = Request(body)
        live = self.versions(subject, deleted)
        parsed = self._parse(self.state, req)
        for v in reversed(live):
            if self._same(self.state, v, req, parsed, normalize):
                return v
        raise errors.schema_not_found("Schema not found")

    def incompatibilities(self, subject: str, body: Any, version: str | None, normalize: bool) -> list[str]:
        """Why the schema may not be registered under `subject` (against `version`, or per the level)."""
        req = Request(body)
        parsed = self._parse(self.state, req)
        level = self.level(subject)
        if version is None or parse_version(version) is None:
            against = self.state.live(subject)
            if version is not None and not against:
                raise errors.subject_not_found(subject)
        else:
            against = [self.version(subject, version)]
            level = level if level.endswith("_TRANSITIVE") or level == "NONE" else level + "_TRANSITIVE"
        return incompatibilities(level, parsed, [self._parsed(v) for v in against])

    def _parsed(self, v: Version) -> Parsed:
        return parse(v.schema_type, v.schema, self._reference_texts(self.state, v.references, set()))

    async def register(self, subject: str, body: Any, normalize: bool) -> dict[str, Any]:
        req = Request(body)
        result: dict[str, Any] = {}

        def build(state: RegistryState) -> list[Record]:
            mode = self.mode(subject)
            if mode == "READONLY":
                raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")
            if req.id is not None and mode != "IMPORT":
                raise errors.operation_not_permitted(f"Subject {subject} is not in import mode")
            parsed = self._parse(state, req)
            text = parsed.normalized if normalize else parsed.text
            everything = state.live(subject, deleted=True)
            live = [v for v in everything if not v.deleted]
            for v in reversed(live):
                if self._same(state, v, req, parsed, normalize):
                    result.update(id=v.id, version=v.version)
                    return []
            if mode != "IMPORT":
                problems = incompatibilities(self.level(subject), parsed, [self._parsed(v) for v in live])
                if problems:
                    raise errors.incompatible(subject, problems)
            content = (req.schema_type, text, req.references)
            schema_id = self._import_id(state, req, content) if mode == "IMPORT" else None
            if schema_id is None:
                schema_id = state.find_id(content) or state.max_id + 1
            number = (everything[-1].version if everything else 0) + 1
            if mode == "IMPORT" and isinstance(req.version, int) and req.version > 0:
                number = req.version
            v = Version(subject, number, schema_id, text, req.schema_type, req.references)
            result.update(id=schema_id, version=number)
            return [(schema_key(subject, number), v.value())]

        await self.store.write(build)
        return {"id": result["id"], "version": result["version"]}

    @staticmethod
    def _import_id(state: RegistryState, req: Request, content: tuple[Any, ...]) -> int | None:
        if req.id is None:
            return None
        if not isinstance(req.id, int) or req.id < 1:
            raise errors.unprocessable(f"id {req.id!r} is not a positive integer")
        taken = state.by_id.get(req.id)
        if taken is not None and taken.content() != content:
            raise errors.RegistryError(
                422, 42207, f"Overwrite new schema with id {req.id} is not permitted (the id is in use)"
            )
        return int(req.id)

    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        result: list[int] = []

        def build(state: RegistryState) -> list[Record]:
            everything, live = self._deletable(state, subject)
            self._not_referenced(state, everything)
            if permanent:
                if live:
                    raise errors.subject_not_soft_deleted(subject)
                result.extend(v.version for v in everything)
                return [(schema_key(subject, v.version), None) for v in everything]
            if not live:
                raise errors.subject_soft_deleted(subject)
            result.extend(v.version for v in live)
            deleted = [Version(**{**v.__dict__, "deleted": True}) for v in live]
            return [(schema_key(subject, v.version), v.value()) for v in deleted] + [
                (delete_subject_key(subject), {"subject": subject, "version": live[-1].version})
            ]

        await self.store.write(build)
        return result

    async def delete_version(self, subject: str, version: str, permanent: bool) -> int:
        number = parse_version(version)
        result: list[int] = []

        def build(state: RegistryState) -> list[Record]:
            everything, live = self._deletable(state, subject)
            if number is None:
                if not live:
                    raise errors.subject_not_found(subject)
                target = live[-1]
            else:
                found = next((v for v in everything if v.version == number), None)
                if found is None:
                    raise errors.version_not_found(number)
                target = found
            self._not_referenced(state, [target])
            result.append(target.version)
            if permanent:
                if not target.deleted:
                    raise errors.version_not_soft_deleted(subject, target.version)
                return [(schema_key(subject, target.version), None)]
            if target.deleted:
                raise errors.version_soft_deleted(subject, target.version)
            return [
                (schema_key(subject, target.version), Version(**{**target.__dict__, "deleted": True}).value())
            ]

        await self.store.write(build)
        return result[0]

    def _deletable(self, state: RegistryState, subject: str) -> tuple[list[Version], list[Version]]:
        """The subject's versions, soft-deleted included, and the live ones; 40401 when it has none."""
        if self.mode(subject) == "READONLY":
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")
        everything = state.live(subject, deleted=True)
        if not everything:
            raise errors.subject_not_found(subject)
        return everything, [v for v in everything if not v.deleted]

    @staticmethod
    def _not_referenced(state: RegistryState, versions: list[Version]) -> None:
        for v in versions:
            users = state.referenced_by(v.subject, v.version)
            if users:
                raise errors.reference_exists(
                    "One or more references exist to the schema "
                    f"{{subject={v.subject}, version={v.version}}} (schema ids {users})"
                )

    # Config and mode

    async def set_config(self, subject: str | None, body: Any) -> str:
        level = check_level(body.get("compatibility") if isinstance(body, dict) else None)
        await self.store.write(lambda state: [(config_key(subject), {"compatibilityLevel": level})])
        return level

    async def delete_config(self, subject: str | None) -> str:
        previous = self.level(subject)
        if subject is not None and subject not in self.state.configs and not self.state.live(subject, True):
            raise errors.subject_not_found(subject)
        await self.store.write(lambda state: [(config_key(subject), None)])
        return previous

    async def set_mode(self, subject: str | None, body: Any) -> str:
        mode = body.get("mode") if isinstance(body, dict) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode(mode)
        mode = mode.upper()
        await self.store.write(lambda state: [(mode_key(subject), {"mode": mode})])
        return mode

    async def delete_mode(self, subject: str) -> str:
        previous = self.mode(subject)
        await self.store.write(lambda state: [(mode_key(subject), None)])
        return previous
