"""Protobuf schemas, as Confluent's serializers send them: a base64 FileDescriptorProto (or .proto text,
kept as given). Descriptors are parsed with protobuf; compatibility compares them by Protobuf's wire rules:
a message or a field number present in both must keep its field's wire type (int32/int64/uint32/uint64/bool
and enums read each other, as do string/bytes/messages; sint*, fixed32*, fixed64* only their own group),
and a field number may not move in or out of a oneof. Text .proto schemas are compared for equality only.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from .errors import invalid_schema

_F = descriptor_pb2.FieldDescriptorProto
_WIRE_GROUPS: dict[int, str] = {
    **dict.fromkeys(
        (_F.TYPE_INT32, _F.TYPE_INT64, _F.TYPE_UINT32, _F.TYPE_UINT64, _F.TYPE_BOOL, _F.TYPE_ENUM), "varint"
    ),
    **dict.fromkeys((_F.TYPE_SINT32, _F.TYPE_SINT64), "zigzag"),
    **dict.fromkeys((_F.TYPE_FIXED32, _F.TYPE_SFIXED32, _F.TYPE_FLOAT), "fixed32"),
    **dict.fromkeys((_F.TYPE_FIXED64, _F.TYPE_SFIXED64, _F.TYPE_DOUBLE), "fixed64"),
    **dict.fromkeys((_F.TYPE_STRING, _F.TYPE_BYTES, _F.TYPE_MESSAGE), "length"),
    _F.TYPE_GROUP: "group",
}


class ProtobufSchema:
    def __init__(self, text: str, references: list[str]) -> None:
        self.descriptor: descriptor_pb2.FileDescriptorProto | None = None
        stripped = text.strip()
        if not stripped:
            raise invalid_schema("(empty), details: a Protobuf schema is a .proto file or its descriptor")
        if "syntax" in stripped or "message " in stripped or "enum " in stripped:
            self.text = text  # .proto text
        else:
            try:
                self.descriptor = descriptor_pb2.FileDescriptorProto.FromString(
                    base64.b64decode(stripped, validate=True)
                )
            except (binascii.Error, ValueError, DecodeError) as e:
                raise invalid_schema(
                    f"{text[:200]}, details: neither .proto text nor a descriptor: {e}"
                ) from e
            self.text = stripped
        self.normalized = (
            self.text
            if self.descriptor is None
            else base64.b64encode(self.descriptor.SerializeToString(deterministic=True)).decode()
        )


def _messages(fd: descriptor_pb2.FileDescriptorProto) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def walk(prefix: str, msgs: Any) -> None:
        for m in msgs:
            name = f"{prefix}.{m.name}"
            out[name] = m
            walk(name, m.nested_type)

    walk(fd.package, fd.message_type)
    return out


def can_read(reader: ProtobufSchema, writer: ProtobufSchema) -> list[str]:
    if reader.descriptor is None or writer.descriptor is None:
        return [] if reader.text.strip() == writer.text.strip() else ["the .proto text changed"]
    problems: list[str] = []
    rm, wm = _messages(reader.descriptor), _messages(writer.descriptor)
    for name in sorted(set(rm) & set(wm)):
        rf = {f.number: f for f in rm[name].field}
        wf = {f.number: f for f in wm[name].field}
        for number in sorted(set(rf) & set(wf)):
            r, w = rf[number], wf[number]
            if _WIRE_GROUPS.get(r.type) != _WIRE_GROUPS.get(w.type):
                problems.append(f"field {number} of {name} changed kind")
            if r.HasField("oneof_index") != w.HasField("oneof_index"):
                problems.append(f"field {number} of {name} moved in or out of a oneof")
    for name in sorted(set(wm) - set(rm)):
        problems.append(f"message {name} removed")
    return problems
