"""Schema types and compatibility levels: one parser per type (AVRO, JSON, PROTOBUF) and the level's
rule for which registered versions a new schema is checked against, and in which direction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from . import avro, json_schema, protobuf
from .errors import invalid_compatibility_level, invalid_schema

TYPES = ("JSON", "PROTOBUF", "AVRO")  # as Confluent lists them at /schemas/types
LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
DEFAULT_LEVEL = "BACKWARD"


class Parsed(Protocol):
    text: str  # as stored and served
    normalized: str  # what normalize=true stores and compares


def parse(schema_type: str, text: str, references: Sequence[str] = ()) -> Parsed:
    """The schema parsed (42201 when it is not a valid schema of its type); `references` are the texts
    of the schemas it references, in order."""
    if not isinstance(text, str):
        raise invalid_schema("(not a string)")
    refs = list(references)
    if schema_type == "AVRO":
        return avro.AvroSchema(text, refs)
    if schema_type == "JSON":
        return json_schema.JsonSchema(text, refs)
    if schema_type == "PROTOBUF":
        return protobuf.ProtobufSchema(text, refs)
    raise invalid_schema(f"of unknown type {schema_type!r} (known: {', '.join(TYPES)})")


def check_level(level: object) -> str:
    if not isinstance(level, str) or level.upper() not in LEVELS:
        raise invalid_compatibility_level(level)
    return level.upper()


def _can_read(reader: Parsed, writer: Parsed) -> list[str]:
    if isinstance(reader, avro.AvroSchema) and isinstance(writer, avro.AvroSchema):
        return avro.can_read(reader, writer)
    if isinstance(reader, json_schema.JsonSchema) and isinstance(writer, json_schema.JsonSchema):
        return json_schema.can_read(reader, writer)
    if isinstance(reader, protobuf.ProtobufSchema) and isinstance(writer, protobuf.ProtobufSchema):
        return protobuf.can_read(reader, writer)
    return ["the schema type changed"]


def incompatibilities(level: str, new: Parsed, existing: Sequence[Parsed]) -> list[str]:
    """Why `new` may not follow `existing` (oldest first) at `level`; empty when it may. BACKWARD: the
    new schema reads data of the previous one; FORWARD: the previous reads the new; FULL: both. The
    _TRANSITIVE levels check every existing version, the others the latest only."""
    if level == "NONE" or not existing:
        return []
    against = existing if level.endswith("_TRANSITIVE") else existing[-1:]
    base = level.removesuffix("_TRANSITIVE")
    problems: list[str] = []
    for old in reversed(against):
        if base in ("BACKWARD", "FULL"):
            problems += [f"BACKWARD: {p}" for p in _can_read(new, old)]
        if base in ("FORWARD", "FULL"):
            problems += [f"FORWARD: {p}" for p in _can_read(old, new)]
        if problems:
            break
    return problems
