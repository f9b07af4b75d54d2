"""Decoding of the Kubernetes protobuf envelope for the few kinds kubectl's typed clients send.

kubectl's imperative `create` commands (`create namespace|configmap|secret|serviceaccount`) and
helm (release Secrets, DeleteOptions on uninstall) send request bodies as
`application/vnd.kubernetes.protobuf`: the 4-byte magic `k8s\\0`, then a
runtime.Unknown wrapping the object's own message. Responses are always JSON (the clients accept it).
Field numbers are those of k8s.io/api/core/v1 and apimachinery's generated.proto.
"""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

JSON = dict[str, Any]
MAGIC = b"k8s\x00"

# field number -> (json name, type, repeated); types: str, int, bool, int0, bool0, time, map_ss, map_sb,
# rawbytes or a nested schema
Schema = dict[int, tuple[str, Any, bool]]

OWNER_REF: Schema = {
    1: ("kind", "str", False),
    3: ("name", "str", False),
    4: ("uid", "str", False),
    5: ("apiVersion", "str", False),
    6: ("controller", "bool", False),
    7: ("blockOwnerDeletion", "bool", False),
}
OBJECT_META: Schema = {
    1: ("name", "str", False),
    2: ("generateName", "str", False),
    3: ("namespace", "str", False),
    5: ("uid", "str", False),
    6: ("resourceVersion", "str", False),
    7: ("generation", "int", False),
    8: ("creationTimestamp", "time", False),
    9: ("deletionTimestamp", "time", False),
    10: ("deletionGracePeriodSeconds", "int", False),
    11: ("labels", "map_ss", False),
    12: ("annotations", "map_ss", False),
    13: ("ownerReferences", OWNER_REF, True),
    14: ("finalizers", "str", True),
}
LOCAL_REF: Schema = {1: ("name", "str", False)}
OBJECT_REF: Schema = {
    1: ("kind", "str", False),
    2: ("namespace", "str", False),
    3: ("name", "str", False),
    4: ("uid", "str", False),
    5: ("apiVersion", "str", False),
}

KINDS: dict[str, Schema] = {
    "ConfigMap": {
        1: ("metadata", OBJECT_META, False),
        2: ("data", "map_ss", False),
        3: ("binaryData", "map_sb", False),
        4: ("immutable", "bool", False),
    },
    "Secret": {
        1: ("metadata", OBJECT_META, False),
        2: ("data", "map_sb", False),
        3: ("type", "str", False),
        4: ("stringData", "map_ss", False),
        5: ("immutable", "bool", False),
    },
    "Namespace": {1: ("metadata", OBJECT_META, False), 2: ("spec", {1: ("finalizers", "str", True)}, False)},
    "ServiceAccount": {
        1: ("metadata", OBJECT_META, False),
        2: ("secrets", OBJECT_REF, True),
        3: ("imagePullSecrets", LOCAL_REF, True),
        4: ("automountServiceAccountToken", "bool", False),
    },
}
KINDS["DeleteOptions"] = {
    1: ("gracePeriodSeconds", "int0", False),
    2: ("preconditions", {1: ("uid", "str", False), 2: ("resourceVersion", "str", False)}, False),
    3: ("orphanDependents", "bool0", False),
    4: ("propagationPolicy", "str", False),
    5: ("dryRun", "str", True),
}
TIME: Schema = {1: ("seconds", "int", False), 2: ("nanos", "int", False)}
UNKNOWN: Schema = {
    1: ("typeMeta", {1: ("apiVersion", "str", False), 2: ("kind", "str", False)}, False),
    2: ("raw", "rawbytes", False),
}


class ProtobufError(Exception):
    pass


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, int, Any]]:
    out = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        num, wire = key >> 3, key & 7
        val: Any
        if wire == 0:
            val, pos = _varint(buf, pos)
        elif wire == 2:
            n, pos = _varint(buf, pos)
            val, pos = buf[pos : pos + n], pos + n
        elif wire == 1:
            val, pos = buf[pos : pos + 8], pos + 8
        elif wire == 5:
            val, pos = buf[pos : pos + 4], pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        out.append((num, wire, val))
    return out


def _decode(buf: bytes, schema: Schema) -> JSON:
    obj: JSON = {}
    for num, _, val in _fields(buf):
        if num not in schema:
            continue
        name, typ, repeated = schema[num]
        value: Any
        if typ == "str":
            value = val.decode()
        elif typ == "rawbytes":
            value = val
        elif typ in ("int", "int0"):
            value = val - (1 << 64) if val >= 1 << 63 else val
        elif typ in ("bool", "bool0"):
            value = bool(val)
        elif typ == "time":
            t = _decode(val, TIME)
            if not t.get("seconds"):
                continue
            value = dt.datetime.fromtimestamp(t["seconds"], dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        elif typ in ("map_ss", "map_sb"):
            entry = {n: v for n, _, v in _fields(val)}
            k = entry.get(1, b"").decode()
            v = entry.get(2, b"")
            obj.setdefault(name, {})[k] = v.decode() if typ == "map_ss" else base64.b64encode(v).decode()
            continue
        else:
            value = _decode(val, typ)
        if repeated:
            obj.setdefault(name, []).append(value)
        elif typ in ("int0", "bool0") or isinstance(value, dict) or value not in ("", 0, False):
            obj[name] = value  # int0/bool0: optional pointers, where an explicit zero means something
    return obj


def decode(body: bytes) -> JSON:
    """A protobuf request body as the JSON object it stands for; ProtobufError for unsupported kinds."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic prefix")
    envelope = _decode(body[len(MAGIC) :], UNKNOWN)
    tm = envelope.get("typeMeta") or {}
    kind = tm.get("kind", "")
    if kind not in KINDS:
        raise ProtobufError(f"protobuf bodies of kind {kind!r} are not supported by the emulator (send JSON)")
    obj = _decode(envelope.get("raw", b""), KINDS[kind])
    meta = obj.get("metadata") or {}
    obj = {"apiVersion": tm.get("apiVersion", "v1"), "kind": kind, **obj}
    obj["metadata"] = meta
    return obj
