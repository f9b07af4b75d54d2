"""The `schema` value mode: values in the schema registry's wire format (magic byte 0, a 4-byte schema
id, the Avro body), decoded with the registry's schema for that id and typed from it.

Avro to Iceberg: boolean, int, long, float, double, string, bytes, enum (string), fixed (binary),
records (structs), arrays (lists), maps (maps), `[null, X]` (an optional X), other unions as their JSON
text; logical types timestamp-millis/-micros (timestamptz), date, decimal and uuid (string). A field new
in a later schema version becomes a new optional column; a value whose id is unknown, whose schema is
not Avro, or whose field types clash with the columns is kept as `value_raw` bytes.
"""

from __future__ import annotations

import io
import json
import logging
import urllib.request
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol
from uuid import UUID

import pyarrow as pa
from fastavro import parse_schema, schemaless_reader

from .rows import StructValues

log = logging.getLogger(__name__)

_PRIMITIVES = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}


class SchemaLookup(Protocol):
    def avro(self, schema_id: int) -> Any | None:
        """The Avro schema (parsed JSON) registered under the id; None if unknown or not Avro."""
        ...


class RegistryClient:
    """The registry's `GET /schemas/ids/{id}` (Confluent's API), each id fetched once (ids never change
    their schema). Blocking: called in the Iceberg worker process."""

    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._cache: dict[int, Any | None] = {}

    def avro(self, schema_id: int) -> Any | None:
        if schema_id not in self._cache:
            try:
                with urllib.request.urlopen(
                    f"{self.url}/schemas/ids/{schema_id}", timeout=self.timeout_s
                ) as r:
                    body = json.loads(r.read())
            except OSError as e:  # HTTPError 404 (unknown id) included: not cached when unreachable
                if getattr(e, "code", None) != 404:
                    raise
                body = {}
            kind = body.get("schemaType", "AVRO")
            self._cache[schema_id] = (
                json.loads(body["schema"]) if "schema" in body and kind == "AVRO" else None
            )
        return self._cache[schema_id]


def arrow_type(schema: Any, names: dict[str, pa.DataType]) -> pa.DataType | None:
    """The Arrow type of an Avro schema (None: null); `names` holds the named types seen so far."""
    if isinstance(schema, list):
        branches = [s for s in schema if s != "null"]
        return arrow_type(branches[0], names) if len(branches) == 1 else pa.string()
    if isinstance(schema, str):
        return None if schema == "null" else _PRIMITIVES.get(schema, names.get(schema, pa.string()))
    kind, logical = schema.get("type"), schema.get("logicalType")
    out: pa.DataType | None
    if logical in ("timestamp-millis", "timestamp-micros"):
        out = pa.timestamp("us", tz="UTC")
    elif logical == "date":
        out = pa.date32()
    elif logical == "decimal":
        out = pa.decimal128(int(schema["precision"]), int(schema.get("scale", 0)))
    elif logical == "uuid":
        out = pa.string()
    elif kind == "record":
        fields = [(f["name"], arrow_type(f["type"], names)) for f in schema["fields"]]
        out = pa.struct([pa.field(n, t) for n, t in fields if t is not None])
    elif kind == "enum":
        out = pa.string()
    elif kind == "fixed":
        out = pa.binary()
    elif kind == "array":
        item = arrow_type(schema["items"], names)
        out = pa.list_(item if item is not None else pa.string())
    elif kind == "map":
        value = arrow_type(schema["values"], names)
        out = pa.map_(pa.string(), value if value is not None else pa.string())
    else:
        out = arrow_type(kind, names)
    if kind in ("record", "enum", "fixed") and "name" in schema and out is not None:
        names[schema["name"]] = out
        if "namespace" in schema:
            names[f"{schema['namespace']}.{schema['name']}"] = out
    return out


def python_value(t: pa.DataType, v: Any) -> Any:
    """fastavro's value as pyarrow takes it for `t` (maps as pairs, other unions as JSON text)."""
    if v is None:
        return None
    if pa.types.is_struct(t):
        return {f.name: python_value(f.type, v.get(f.name)) for f in t}
    if pa.types.is_list(t):
        return [python_value(t.value_type, x) for x in v]
    if pa.types.is_map(t):
        return [(k, python_value(t.item_type, x)) for k, x in v.items()]
    if pa.types.is_string(t) and not isinstance(v, str):
        return str(v) if isinstance(v, UUID | Decimal) else json.dumps(v, default=str)
    return v


@dataclass
class _Parsed:
    parsed: Any
    fields: dict[str, pa.DataType]


@dataclass
class AvroValues(StructValues):
    registry: SchemaLookup | None = None
    _schemas: dict[int, _Parsed | None] = field(default_factory=dict)

    def _schema(self, schema_id: int) -> _Parsed | None:
        if schema_id not in self._schemas:
            raw = None if self.registry is None else self.registry.avro(schema_id)
            struct = arrow_type(raw, {}) if isinstance(raw, dict) and raw.get("type") == "record" else None
            if raw is None or struct is None:
                self._schemas[schema_id] = None
            else:
                self._schemas[schema_id] = _Parsed(parse_schema(raw), {f.name: f.type for f in struct})
        return self._schemas[schema_id]

    def decode(self, value: bytes) -> dict[str, Any] | None:
        if len(value) < 5 or value[0] != 0:
            return None
        schema = self._schema(int.from_bytes(value[1:5], "big"))
        if schema is None:
            return None
        if any(k in self.types and self.types[k] != t for k, t in schema.fields.items()):
            return None  # a type changed between versions (no compatible registry allows that)
        try:
            obj = schemaless_reader(io.BytesIO(value[5:]), schema.parsed, None)
        except Exception:  # fastavro raises what its decoders meet (EOFError, ValueError, ...)
            return None
        if not isinstance(obj, dict):
            return None
        for k, t in schema.fields.items():
            self.types.setdefault(k, t)
        return {k: python_value(t, obj.get(k)) for k, t in schema.fields.items()}
