"""Records to Arrow rows: the table's columns and the value modes (brook.iceberg.value.mode).

Columns: `partition`, `offset`, `timestamp` (the record's, as an Iceberg timestamptz), `key`, `headers`
(a list of key/value structs), then the value: `value` bytes in `raw` mode; in `json` mode `value` is a
struct of the JSON object's fields, typed (boolean, long, double, string; nested objects and arrays as
their JSON text), and `value_raw` holds the bytes of a value that is not such an object or whose field
types clash with the columns' (nothing is dropped). A field seen for the first time becomes a new
optional column.

Pure functions of bytes: they run in the Iceberg worker process (worker.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from brook.log.records import FullRecord

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def base_fields() -> list[pa.Field]:
    return [
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("key", pa.binary()),
        pa.field("headers", HEADERS_TYPE),
    ]


class ValueColumns(Protocol):
    """How a value mode turns values into columns (state: the value columns known so far)."""

    def columns(self, values: list[bytes | None]) -> list[tuple[pa.Field, pa.Array]]: ...


class RawValues:
    def columns(self, values: list[bytes | None]) -> list[tuple[pa.Field, pa.Array]]:
        return [(pa.field("value", pa.binary()), pa.array(values, pa.binary()))]


def _json_type(v: object) -> pa.DataType | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return pa.bool_()
    if isinstance(v, int):
        return pa.int64() if -(2**63) <= v < 2**63 else pa.string()
    if isinstance(v, float):
        return pa.float64()
    return pa.string()  # str, and nested objects or arrays as their JSON text


def plain_type(t: pa.DataType) -> pa.DataType:
    """The type without large_* variants or field metadata, as the value modes type columns (pyiceberg
    reads a table's strings back as large_string, with field ids in each field's metadata)."""
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(plain_type(t.value_type))
    if pa.types.is_map(t):
        return pa.map_(plain_type(t.key_type), plain_type(t.item_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, plain_type(f.type)) for f in t])
    return t


def _fits(column: pa.DataType, v: object) -> bool:
    t = _json_type(v)
    return t is None or t == column or (column == pa.float64() and t == pa.int64())


@dataclass
class StructValues:
    """Values decoded to objects, as the `value` struct's typed fields; `value_raw` holds the bytes of
    a value that does not decode or does not fit. `types`: the struct's fields so far (the table's)."""

    types: dict[str, pa.DataType] = field(default_factory=dict)

    def continue_from(self, schema: pa.Schema | None) -> None:
        if schema is not None and "value" in schema.names and pa.types.is_struct(schema.field("value").type):
            self.types = {f.name: plain_type(f.type) for f in schema.field("value").type}

    def columns(self, values: list[bytes | None]) -> list[tuple[pa.Field, pa.Array]]:
        objects: list[dict[str, Any] | None] = []
        raws: list[bytes | None] = []
        for value in values:
            obj = None if value is None else self.decode(value)
            objects.append(obj)
            raws.append(value if obj is None and value is not None else None)
        out: list[tuple[pa.Field, pa.Array]] = []
        if self.types:
            children = [
                pa.array([None if o is None else self.cell(t, o.get(name)) for o in objects], t)
                for name, t in self.types.items()
            ]
            fields = [pa.field(n, t) for n, t in self.types.items()]
            mask = pa.array([o is None for o in objects], pa.bool_())
            struct = pa.StructArray.from_arrays(children, fields=fields, mask=mask)
            out.append((pa.field("value", struct.type), struct))
        out.append((pa.field("value_raw", pa.binary()), pa.array(raws, pa.binary())))
        return out

    def decode(self, value: bytes) -> dict[str, Any] | None:
        """The object, with its new fields added to `types`; None when it does not decode or fit."""
        raise NotImplementedError

    def cell(self, column: pa.DataType, v: object) -> object:
        return v


class JsonValues(StructValues):
    """JSON objects: fields typed from their first non-null value."""

    def decode(self, value: bytes) -> dict[str, Any] | None:
        try:
            obj = json.loads(value)
        except ValueError:
            return None
        if not isinstance(obj, dict):
            return None
        if not all(_fits(self.types[k], v) for k, v in obj.items() if k in self.types):
            return None
        for k, v in obj.items():
            t = _json_type(v)
            if k not in self.types and t is not None:
                self.types[k] = t
        return obj

    def cell(self, column: pa.DataType, v: object) -> object:
        if column == pa.string() and not isinstance(v, str) and v is not None:
            return json.dumps(v, separators=(",", ":"))
        if column == pa.float64() and isinstance(v, int):
            return float(v)
        return v


def to_arrow(partition: int, records: Iterable[FullRecord], values: ValueColumns) -> pa.Table:
    recs = list(records)
    headers = [[{"key": k, "value": v} for k, v in r.headers] or None for r in recs]
    arrays: list[pa.Array] = [
        pa.array([partition] * len(recs), pa.int32()),
        pa.array([r.offset for r in recs], pa.int64()),
        pa.array([r.timestamp * 1000 if r.timestamp >= 0 else None for r in recs], pa.int64()).cast(
            pa.timestamp("us", tz="UTC")
        ),
        pa.array([r.key for r in recs], pa.binary()),
        pa.array(headers, HEADERS_TYPE),
    ]
    fields = base_fields()
    for f, a in values.columns([r.value for r in recs]):
        fields.append(f)
        arrays.append(a)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
