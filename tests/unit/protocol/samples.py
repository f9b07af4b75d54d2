"""Sample values for any kafka-python message schema, for round-trip tests.

`sample(struct_field, version)` returns a plain dict with every field present in `version` set to a
non-default value (so tagged fields are written), nested arrays holding two elements.
"""

from __future__ import annotations

import uuid
import zlib
from typing import Any

_INTS = {"int8": 1, "int16": 2, "int32": 3, "int64": 4, "uint16": 5}


def _seed(name: str) -> int:
    return zlib.crc32(name.encode())


def _simple(type_str: str, name: str, uuids_as_bytes: bool) -> Any:
    if type_str in _INTS:
        return _INTS[type_str] + _seed(name) % 50
    if type_str == "float64":
        return 1.5
    if type_str == "bool":
        return True
    if type_str == "string":
        return f"s-{name}"
    if type_str in ("bytes", "records"):
        return b"b-" + name.encode()
    if type_str == "uuid":
        u = uuid.UUID(int=_seed(name) + 1)
        return u.bytes if uuids_as_bytes else u
    if type_str == "bitfield":
        return {3, 8}
    raise AssertionError(f"no sample for {type_str}")


def sample(struct_field: Any, version: int, uuids_as_bytes: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in struct_field._fields:
        if not f.for_version_q(version):
            continue
        if f.is_struct_array():
            out[f.name] = [sample(f.array_of, version, uuids_as_bytes) for _ in range(2)]
        elif f.is_struct():
            out[f.name] = sample(f, version, uuids_as_bytes)
        elif f.is_array():
            t = f.array_of.type_str
            out[f.name] = [_simple(t, f.name + str(i), uuids_as_bytes) for i in range(2)]
        else:
            out[f.name] = _simple(f.type_str, f.name, uuids_as_bytes)
    return out


def normalize(value: Any) -> Any:
    """Decoded values in comparable form: bytes-likes as bytes."""
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return value
