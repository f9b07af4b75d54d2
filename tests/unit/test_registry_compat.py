"""Compatibility rules of brook.registry: Avro's schema resolution (as Confluent's checker applies it),
the JSON Schema and Protobuf rules, and which versions each level checks against."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from google.protobuf import descriptor_pb2

from brook.registry.errors import RegistryError
from brook.registry.schemas import incompatibilities, parse


def avro(s: Any) -> Any:
    return parse("AVRO", json.dumps(s))


def rec(*fields: dict[str, Any], name: str = "R", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def f(name: str, t: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": t, **extra}


# (reader, writer, readable?) — can the reader schema read data written with the writer schema
AVRO_CASES = [
    pytest.param("int", "int", True, id="same primitive"),
    pytest.param("long", "int", True, id="int promoted to long"),
    pytest.param("double", "float", True, id="float promoted to double"),
    pytest.param("int", "long", False, id="long not narrowed to int"),
    pytest.param("bytes", "string", True, id="string read as bytes"),
    pytest.param("string", "int", False, id="unrelated primitives"),
    pytest.param(rec(f("a", "int")), rec(f("a", "int"), f("b", "string")), True, id="writer field dropped"),
    pytest.param(
        rec(f("a", "int"), f("b", "string")), rec(f("a", "int")), False, id="added field, no default"
    ),
    pytest.param(
        rec(f("a", "int"), f("b", "string", default="")), rec(f("a", "int")), True, id="with default"
    ),
    pytest.param(rec(f("b", "int", aliases=["a"])), rec(f("a", "int")), True, id="field renamed with alias"),
    pytest.param(rec(f("a", "int"), name="S"), rec(f("a", "int")), False, id="record renamed"),
    pytest.param(rec(f("a", "int"), name="S", aliases=["R"]), rec(f("a", "int")), True, id="record alias"),
    pytest.param(["null", "int"], "int", True, id="reader union has the writer's type"),
    pytest.param("int", ["null", "int"], False, id="writer union branch unreadable"),
    pytest.param(["null", "long"], ["null", "int"], True, id="union branches promoted"),
    pytest.param(
        {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]},
        {"type": "enum", "name": "E", "symbols": ["A", "B"]},
        True,
        id="enum symbol added",
    ),
    pytest.param(
        {"type": "enum", "name": "E", "symbols": ["A"]},
        {"type": "enum", "name": "E", "symbols": ["A", "B"]},
        False,
        id="enum symbol removed",
    ),
    pytest.param(
        {"type": "enum", "name": "E", "symbols": ["A", "Z"], "default": "Z"},
        {"type": "enum", "name": "E", "symbols": ["A", "B"]},
        True,
        id="enum default covers the unknown",
    ),
    pytest.param(
        {"type": "fixed", "name": "F", "size": 4},
        {"type": "fixed", "name": "F", "size": 8},
        False,
        id="fixed size",
    ),
    pytest.param(
        {"type": "array", "items": "long"}, {"type": "array", "items": "int"}, True, id="array items"
    ),
    pytest.param(
        {"type": "map", "values": "int"}, {"type": "map", "values": "string"}, False, id="map values"
    ),
    pytest.param(
        rec(f("next", ["null", "R"]), f("v", "long")),
        rec(f("next", ["null", "R"]), f("v", "int")),
        True,
        id="recursive record",
    ),
    pytest.param({"type": "int", "logicalType": "date"}, "int", True, id="logical type read as its base"),
]


@pytest.mark.parametrize(("reader", "writer", "readable"), AVRO_CASES)
def test_avro_resolution(reader: Any, writer: Any, readable: bool) -> None:
    problems = incompatibilities("BACKWARD", avro(reader), [avro(writer)])
    assert (not problems) == readable, problems


def test_levels_direction_and_transitivity() -> None:
    v1 = avro(rec(f("a", "int")))
    v2 = avro(rec(f("a", "int", default=0), f("b", "int", default=0)))
    v3 = avro(rec(f("b", "int", default=0)))  # drops a: v2 reads it (a's default), v1 cannot
    assert incompatibilities("FORWARD", v3, [v1, v2]) == []  # against the latest only
    assert incompatibilities("FORWARD_TRANSITIVE", v3, [v1, v2])
    assert incompatibilities("BACKWARD", v3, [v1, v2]) == []
    assert incompatibilities("NONE", avro("string"), [v1]) == []
    assert incompatibilities("FULL", avro(rec(f("a", "long"))), [v1])  # long → int not readable
    assert incompatibilities("BACKWARD", avro(rec(f("a", "long"))), [v1]) == []


def test_avro_invalid_schemas_are_42201() -> None:
    for bad in ['{"type": "record", "name": "R"}', '"nope"', "{", '{"type": "fixed", "name": "F"}']:
        with pytest.raises(RegistryError) as e:
            parse("AVRO", bad)
        assert e.value.code == 42201


def test_avro_normalized_form_ignores_spelling() -> None:
    a = parse(
        "AVRO", json.dumps({"type": "record", "name": "N", "namespace": "x", "fields": [f("a", "int")]})
    )
    b = parse("AVRO", json.dumps({"fields": [{"type": "int", "name": "a"}], "name": "x.N", "type": "record"}))
    assert a.normalized == b.normalized and a.text != b.text


def js(s: dict[str, Any]) -> Any:
    return parse("JSON", json.dumps(s))


OBJ = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}


@pytest.mark.parametrize(
    ("new", "readable"),
    [
        pytest.param({**OBJ, "properties": {"id": {"type": "number"}}}, True, id="integer widened to number"),
        pytest.param({**OBJ, "properties": {"id": {"type": "string"}}}, False, id="type changed"),
        pytest.param({**OBJ, "required": ["id", "x"]}, False, id="required added"),
        pytest.param({**OBJ, "required": []}, True, id="required dropped"),
        pytest.param(
            {**OBJ, "properties": {"id": {"type": "integer"}, "n": {"type": "string"}}},
            False,
            id="property added to an open model",
        ),
        pytest.param(
            {**OBJ, "properties": {}, "additionalProperties": False},
            False,
            id="property removed from a closed model",
        ),
    ],
)
def test_json_schema_backward(new: dict[str, Any], readable: bool) -> None:
    problems = incompatibilities("BACKWARD", js(new), [js(OBJ)])
    assert (not problems) == readable, problems


def proto(*fields: tuple[str, int, int]) -> Any:
    fdp = descriptor_pb2.FileDescriptorProto(name="a.proto", package="p")
    m = fdp.message_type.add(name="M")
    for name, number, kind in fields:
        m.field.add(name=name, number=number, type=kind)
    return parse("PROTOBUF", base64.b64encode(fdp.SerializeToString()).decode())


def test_protobuf_wire_rules() -> None:
    F = descriptor_pb2.FieldDescriptorProto
    base = proto(("a", 1, F.TYPE_INT32))
    assert incompatibilities("FULL", proto(("a", 1, F.TYPE_INT64)), [base]) == []  # both varints
    assert incompatibilities("FULL", proto(("a", 1, F.TYPE_INT32), ("b", 2, F.TYPE_STRING)), [base]) == []
    assert incompatibilities("FULL", proto(("a", 1, F.TYPE_STRING)), [base])
    assert incompatibilities("FULL", proto(("a", 1, F.TYPE_SINT32)), [base])
