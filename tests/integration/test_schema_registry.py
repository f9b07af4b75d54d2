"""The schema registry served by a broker (`--schema-registry-port`), driven by confluent-kafka-python's
SchemaRegistryClient and its Avro, JSON Schema and Protobuf serializers: records produced and consumed
through the broker with the registry's ids, schemas evolved, incompatible changes refused with 409, and
Confluent's error bodies for bad input."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tests.support.broker import BrokerProcess
from tests.support.registry import serving_broker

pytestmark = pytest.mark.slow


class Served:
    def __init__(self, broker: BrokerProcess, url: str) -> None:
        self.broker, self.url = broker, url
        self.client = SchemaRegistryClient({"url": url})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving_broker(tmp_path_factory.mktemp("registry") / "data") as (broker, url):
        yield Served(broker, url)


def avro_record(name: str, fields: list[dict[str, Any]]) -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "brook.test", "fields": fields})


def round_trip(
    bootstrap: str,
    topic: str,
    serialize: Callable[[Any, SerializationContext], bytes],
    values: list[Any],
    before: int = 0,
) -> list[bytes]:
    """Produce the serialized values and consume the topic back (raw bytes, for the deserializers):
    `before` records already there, then these."""
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, serialize(v, SerializationContext(topic, MessageField.VALUE)))
    assert p.flush(30) == 0
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}", "auto.offset.reset": "earliest"}
    )
    c.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(300):
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value())
            if len(got) == before + len(values):
                break
    finally:
        c.close()
    assert len(got) == before + len(values)
    return got[before:]


def test_avro_round_trip_evolution_and_incompatible_change(served: Served) -> None:
    topic = f"avro-{uuid.uuid4().hex[:8]}"
    v1 = avro_record("User", [{"name": "name", "type": "string"}])
    ser1 = AvroSerializer(served.client, v1)
    raw = round_trip(served.broker.bootstrap, topic, ser1, [{"name": "ada"}, {"name": "grace"}])
    schema_id = int.from_bytes(raw[0][1:5], "big")
    assert raw[0][0] == 0 and schema_id >= 1  # Confluent's framing: magic byte 0, then the registry's id
    latest = served.client.get_latest_version(f"{topic}-value")
    assert (latest.version, latest.schema_id) == (1, schema_id)

    # Evolve: a field with a default is BACKWARD compatible; old records read with the new schema.
    v2 = avro_record(
        "User", [{"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": -1}]
    )
    ser2 = AvroSerializer(served.client, v2)
    raw += round_trip(served.broker.bootstrap, topic, ser2, [{"name": "alan", "age": 41}], before=2)
    assert served.client.get_versions(f"{topic}-value") == [1, 2]
    reader = AvroDeserializer(served.client, v2)
    ctx = SerializationContext(topic, MessageField.VALUE)
    assert [reader(r, ctx) for r in raw] == [
        {"name": "ada", "age": -1},
        {"name": "grace", "age": -1},
        {"name": "alan", "age": 41},
    ]
    assert AvroDeserializer(served.client)(raw[2], ctx) == {"name": "alan", "age": 41}  # writer's schema

    # A new field without a default cannot read the old records: refused with Confluent's 409.
    bad = avro_record("User", [{"name": "name", "type": "string"}, {"name": "email", "type": "string"}])
    with pytest.raises(SchemaRegistryError) as refused:
        served.client.register_schema(f"{topic}-value", Schema(bad, "AVRO"))
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    assert "email" in refused.value.error_message
    assert served.client.get_versions(f"{topic}-value") == [1, 2]
    assert not served.client.test_compatibility(f"{topic}-value", Schema(bad, "AVRO"))


def test_json_schema_round_trip(served: Served) -> None:
    topic = f"json-{uuid.uuid4().hex[:8]}"
    schema = json.dumps(
        {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
            "required": ["id"],
            "additionalProperties": False,
        }
    )
    ser = JSONSerializer(schema, served.client)
    values = [{"id": 1, "tags": ["a"]}, {"id": 2, "tags": []}]
    raw = round_trip(served.broker.bootstrap, topic, ser, values)
    de = JSONDeserializer(schema, schema_registry_client=served.client)
    assert [de(r, SerializationContext(topic, MessageField.VALUE)) for r in raw] == values
    registered = served.client.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "JSON"
    # A newly required property: data written without it would not validate.
    stricter = json.loads(schema)
    stricter["properties"]["name"] = {"type": "string"}
    stricter["required"] = ["id", "name"]
    with pytest.raises(SchemaRegistryError) as refused:
        served.client.register_schema(f"{topic}-value", Schema(json.dumps(stricter), "JSON"))
    assert refused.value.error_code == 409


def user_message_class(fields: list[tuple[str, int, int]]) -> Any:
    fdp = descriptor_pb2.FileDescriptorProto(name=f"u{uuid.uuid4().hex[:6]}.proto", package="brooktest")
    fdp.syntax = "proto3"
    msg = fdp.message_type.add(name="User")
    for name, number, kind in fields:
        msg.field.add(
            name=name, number=number, type=kind, label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
        )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("brooktest.User"))


def test_protobuf_round_trip_and_a_changed_field_kind(served: Served) -> None:
    topic = f"proto-{uuid.uuid4().hex[:8]}"
    F = descriptor_pb2.FieldDescriptorProto
    user = user_message_class([("name", 1, F.TYPE_STRING), ("age", 2, F.TYPE_INT32)])
    ser = ProtobufSerializer(user, served.client, {"use.deprecated.format": False})
    raw = round_trip(served.broker.bootstrap, topic, ser, [user(name="ada", age=36)])
    got = ProtobufDeserializer(user, {"use.deprecated.format": False})(
        raw[0], SerializationContext(topic, MessageField.VALUE)
    )
    assert (got.name, got.age) == ("ada", 36)
    registered = served.client.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "PROTOBUF"
    # Field 2 turned from a varint into a string: old bytes no longer parse.
    changed = user_message_class([("name", 1, F.TYPE_STRING), ("age", 2, F.TYPE_STRING)])
    with pytest.raises(Exception) as refused:
        ProtobufSerializer(changed, served.client, {"use.deprecated.format": False})(
            changed(name="x", age="y"), SerializationContext(topic, MessageField.VALUE)
        )
    assert "409" in str(refused.value)
