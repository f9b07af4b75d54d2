"""Records to Arrow rows: the table's columns and the value modes (brook.iceberg.value.mode).

Columns: `partition`, `offset`, `timestamp` (the record's, as an Iceberg timestamptz), `key`, `headers`
(a list of key/value structs), then the value: `value` bytes in `raw` mode; in `json` mode `value` is a
struct of the JSON object's fields, typed (boolean, long, double, string; nested objects and arrays as
their JSON text), and `value_raw` holds the bytes of a value that is not such an object or whose field
types clash with the columns' (nothing is dropped). A field seen for the first time becomes a new
optional column.

Pure functions of bytes: they run in a worker thread.
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


def _plain(t: pa.DataType) -> pa.DataType:
    """The type as JSON values are typed here (pyiceberg reads strings back as large_string)."""
    return pa.string() if pa.types.is_large_string(t) or pa.types.is_string_view(t) else t


def _fits(column: pa.DataType, v: object) -> bool:
    t = _json_type(v)
    return t is None or t == column or (column == pa.float64() and t == pa.int64())


def _cell(column: pa.DataType, v: object) -> object:
    if column == pa.string() and not isinstance(v, str) and v is not None:
        return json.dumps(v, separators=(",", ":"))
    if column == pa.float64() and isinstance(v, int):
        return float(v)
    return v


@dataclass
class JsonValues:
    """JSON objects as typed columns. `types`: the value struct's fields so far (the table's)."""

    types: dict[str, pa.DataType] = field(default_factory=dict)

    @classmethod
    def of_schema(cls, schema: pa.Schema | None) -> JsonValues:
        if schema is None or "value" not in schema.names:
            return cls()
        struct = schema.field("value").type
        return cls({f.name: _plain(f.type) for f in struct} if pa.types.is_struct(struct) else {})

    def columns(self, values: list[bytes | None]) -> list[tuple[pa.Field, pa.Array]]:
        objects: list[dict[str, Any] | None] = []
        raws: list[bytes | None] = []
        for value in values:
            obj = self._decode(value)
            objects.append(obj)
            raws.append(value if obj is None and value is not None else None)
        out: list[tuple[pa.Field, pa.Array]] = []
        if self.types:
            children = [
                pa.array([None if o is None else _cell(t, o.get(name)) for o in objects], t)
                for name, t in self.types.items()
            ]
            fields = [pa.field(n, t) for n, t in self.types.items()]
            mask = pa.array([o is None for o in objects], pa.bool_())
            struct = pa.StructArray.from_arrays(children, fields=fields, mask=mask)
            out.append((pa.field("value", struct.type), struct))
        out.append((pa.field("value_raw", pa.binary()), pa.array(raws, pa.binary())))
        return out

    def _decode(self, value: bytes | None) -> dict[str, Any] | None:
        """The object, with new fields added to `types`; None when it is no object or clashes."""
        if value is None:
            return None
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


def value_columns(mode: str, schema: pa.Schema | None) -> ValueColumns:
    """The value mode's columns, continuing from the table's schema (None: no table yet)."""
    if mode == "json":
        return JsonValues.of_schema(schema)
    return RawValues()


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
