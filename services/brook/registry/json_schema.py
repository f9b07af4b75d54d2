"""JSON Schema: parsing (jsonschema checks the schema against its draft's meta-schema) and the common
compatibility rules, read as "a reader schema accepts every document the writer schema accepts":

- types: the reader's types include the writer's (an integer is a number);
- objects: a property required by the reader is required by the writer; a property in both is checked
  recursively; a property the writer has and the reader lacks needs the reader's content model open
  (additionalProperties not false); a property the reader adds needs the writer's model closed
  (additionalProperties false), since an open writer may have written anything under that name;
- enums: the reader's values include the writer's; arrays: their items are checked recursively;
- numbers and strings: a reader bound (maximum, minimum, maxLength, minLength) no tighter than the writer's.

$ref, combinators (oneOf/anyOf/allOf) and conditionals are compared for equality only.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from .errors import invalid_schema


class JsonSchema:
    def __init__(self, text: str, references: list[str]) -> None:
        try:
            raw = json.loads(text)
        except ValueError as e:
            raise invalid_schema(f"{text[:200]}, details: not JSON: {e}") from e
        if not isinstance(raw, (dict, bool)):
            raise invalid_schema(f"{text[:200]}, details: a JSON Schema is an object or a boolean")
        try:
            jsonschema.validators.validator_for(raw, default=jsonschema.Draft7Validator).check_schema(raw)
        except jsonschema.exceptions.SchemaError as e:
            raise invalid_schema(f"{text[:200]}, details: {e.message}") from e
        self.raw: Any = raw
        self.text = json.dumps(raw, separators=(",", ":"))
        self.normalized = json.dumps(raw, separators=(",", ":"), sort_keys=True)


_COMBINATORS = ("$ref", "oneOf", "anyOf", "allOf", "not", "if", "then", "else")


def _types(s: dict[str, Any]) -> set[str] | None:
    t = s.get("type")
    if t is None:
        return None  # any type
    return {t} if isinstance(t, str) else set(t)


def _check(reader: Any, writer: Any, path: str, problems: list[str]) -> None:
    if reader is True or reader == {}:
        return
    if writer is True or writer == {} or not isinstance(reader, dict) or not isinstance(writer, dict):
        if reader != writer:
            problems.append(f"the reader restricts what the writer allows at {path or '/'}")
        return
    for key in _COMBINATORS:
        if reader.get(key) != writer.get(key):
            problems.append(f"'{key}' changed at {path or '/'}")
    rt, wt = _types(reader), _types(writer)
    if rt is not None:
        widened = rt | ({"integer"} if "number" in rt else set())
        if wt is None or not wt <= widened:
            problems.append(f"type narrowed from {sorted(wt or ['any'])} to {sorted(rt)} at {path or '/'}")
    if "enum" in reader and not set(map(json.dumps, writer.get("enum", [None]))) <= set(
        map(json.dumps, reader["enum"])
    ):
        problems.append(f"enum values removed at {path or '/'}")
    for key in ("maximum", "maxLength", "maxItems", "maxProperties"):
        if key in reader and (key not in writer or writer[key] > reader[key]):
            problems.append(f"'{key}' tightened at {path or '/'}")
    for key in ("minimum", "minLength", "minItems", "minProperties"):
        if key in reader and (key not in writer or writer[key] < reader[key]):
            problems.append(f"'{key}' tightened at {path or '/'}")
    if "items" in reader or "items" in writer:
        _check(reader.get("items", True), writer.get("items", True), f"{path}/items", problems)
    _check_object(reader, writer, path, problems)


def _check_object(reader: dict[str, Any], writer: dict[str, Any], path: str, problems: list[str]) -> None:
    rp, wp = reader.get("properties", {}), writer.get("properties", {})
    missing = set(reader.get("required", [])) - set(writer.get("required", []))
    if missing:
        problems.append(f"required properties added {sorted(missing)} at {path or '/'}")
    for name in sorted(set(rp) | set(wp)):
        at = f"{path}/properties/{name}"
        if name in rp and name in wp:
            _check(rp[name], wp[name], at, problems)
        elif name in wp:
            if reader.get("additionalProperties", True) is False:
                problems.append(f"property removed from a closed content model at {at}")
        elif writer.get("additionalProperties", True) is not False:
            problems.append(f"property added to an open content model at {at}")


def can_read(reader: JsonSchema, writer: JsonSchema) -> list[str]:
    problems: list[str] = []
    _check(reader.raw, writer.raw, "", problems)
    return problems
