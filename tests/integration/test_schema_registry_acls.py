"""Subjects governed by their topics' Kafka ACLs: a broker with Kafka's StandardAuthorizer, SCRAM users and
the registry's basic auth. confluent-kafka's AvroSerializer registers as a user allowed to WRITE topic
`orders`, its AvroDeserializer reads as one allowed to READ it; everything else is refused with
Confluent's 403/40301 or left out of listings, and an ACL created through Kafka's API counts at once."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support.broker import BrokerProcess
from tests.support.ports import free_port

pytestmark = pytest.mark.slow

USERS = {
    "producer": "p-secret",
    "consumer": "c-secret",
    "ops": "o-secret",
    "nobody": "n-secret",
    "admin": "a-secret",
}
ORDER = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "int"}]})
ORDER_V2 = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "fields": [{"name": "id", "type": "int"}, {"name": "note", "type": "string", "default": ""}],
    }
)


@dataclass
class Env:
    broker: BrokerProcess
    url: str

    def client(self, user: str) -> SchemaRegistryClient:
        return SchemaRegistryClient({"url": self.url, "basic.auth.user.info": f"{user}:{USERS[user]}"})

    def grant(
        self, principal: str, rtype: ResourceType, name: str, *ops: AclOperation, prefixed: bool = False
    ) -> None:
        pattern = ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL
        bindings = [
            AclBinding(rtype, name, pattern, principal, "*", op, AclPermissionType.ALLOW) for op in ops
        ]
        admin = AdminClient({"bootstrap.servers": self.broker.bootstrap})  # ANONYMOUS: a super user
        for fut in admin.create_acls(bindings).values():
            fut.result(timeout=30)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("registry-acls")
    registry_port, sasl_port = free_port(), free_port()
    broker = BrokerProcess(tmp / "data")
    broker.args = [
        "--listeners",
        f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "--sasl-enabled-mechanisms",
        "SCRAM-SHA-512",
        "--authorizer-class-name",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        # ANONYMOUS: the PLAINTEXT listener the registry's own client and this test's admin use
        "--super-users",
        "User:admin;User:ANONYMOUS",
        "--schema-registry-host",
        "127.0.0.1",
        "--schema-registry-port",
        str(registry_port),
        "--schema-registry-basic-auth",
    ]
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for user, password in USERS.items():
            upsert = UserScramCredentialUpsertion(
                user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode()
            )
            for fut in admin.alter_user_scram_credentials([upsert]).values():
                fut.result(timeout=30)
        env = Env(broker, f"http://127.0.0.1:{registry_port}")
        env.grant("User:producer", ResourceType.TOPIC, "orders", AclOperation.WRITE)
        env.grant("User:consumer", ResourceType.TOPIC, "orders", AclOperation.READ)
        env.grant("User:ops", ResourceType.TOPIC, "orders", AclOperation.ALTER_CONFIGS, AclOperation.DELETE)
        _wait_ready(env)
        yield env
    finally:
        broker.stop()


def _wait_ready(env: Env) -> None:
    deadline = time.monotonic() + 90
    while True:
        try:
            env.client("admin").get_subjects()
            return
        except Exception:
            assert time.monotonic() < deadline, "the registry did not answer"
            time.sleep(0.2)


def _refused(call: object, *args: object) -> SchemaRegistryError:
    with pytest.raises(SchemaRegistryError) as refused:
        call(*args)  # type: ignore[operator]
    assert (refused.value.http_status_code, refused.value.error_code) == (403, 40301), refused.value
    return refused.value


def test_serializers_of_a_topics_producer_and_consumer(env: Env) -> None:
    ctx = SerializationContext("orders", MessageField.VALUE)
    data = AvroSerializer(env.client("producer"), ORDER)({"id": 7}, ctx)  # registers orders-value
    assert data is not None
    assert AvroDeserializer(env.client("consumer"))(data, ctx) == {"id": 7}
    # the consumer may read the topic, not write it: it may not register its schemas
    error = _refused(env.client("consumer").register_schema, "orders-value", Schema(ORDER_V2, "AVRO"))
    assert "Write" in error.error_message and "orders-value" in error.error_message
    # a user without ACLs on `orders` may not fetch the schema its records carry
    schema_id = int.from_bytes(data[1:5], "big")
    _refused(env.client("nobody").get_schema, schema_id)
    _refused(env.client("nobody").get_latest_version, "orders-value")


def test_a_producer_writes_only_its_topics_subjects(env: Env) -> None:
    producer = env.client("producer")
    assert producer.register_schema("orders-key", Schema('"string"', "AVRO")) >= 1
    _refused(producer.register_schema, "payments-value", Schema(ORDER, "AVRO"))
    _refused(producer.test_compatibility, "payments-value", Schema(ORDER, "AVRO"))
    _refused(producer.delete_subject, "orders-key")
    _refused(producer.set_compatibility, "orders-value", "FULL")


def test_listings_leave_out_what_a_user_may_not_read(env: Env) -> None:
    env.client("admin").register_schema("payments-value", Schema(ORDER, "AVRO"))
    env.client("producer").register_schema("orders-value", Schema(ORDER, "AVRO"))
    assert "payments-value" in env.client("admin").get_subjects()
    assert set(env.client("consumer").get_subjects()) <= {"orders-key", "orders-value"}
    assert "orders-value" in env.client("consumer").get_subjects()
    assert env.client("nobody").get_subjects() == []


def test_record_name_subjects_under_a_prefixed_acl(env: Env) -> None:
    subject = f"com.acme.{uuid.uuid4().hex[:6]}.Order"
    _refused(env.client("nobody").register_schema, subject, Schema(ORDER, "AVRO"))
    env.grant("User:nobody", ResourceType.TOPIC, "com.acme.", AclOperation.WRITE, prefixed=True)
    # the ACL counts on the next request: the registry asks the broker's authorizer each time
    assert env.client("nobody").register_schema(subject, Schema(ORDER, "AVRO")) >= 1
    _refused(env.client("nobody").register_schema, "orders-value", Schema(ORDER, "AVRO"))


def test_compatibility_settings_and_deletes(env: Env) -> None:
    env.client("admin").register_schema("orders-value", Schema(ORDER, "AVRO"))
    ops = env.client("ops")
    ops.set_compatibility("orders-value", "FULL")
    assert ops.get_compatibility("orders-value") == "FULL"  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    # the global level is the cluster's config: ALTER_CONFIGS on topic `orders` does not reach it
    _refused(ops.set_compatibility, None, "NONE")
    _refused(env.client("producer").get_compatibility, None)
    env.client("admin").set_compatibility(None, "BACKWARD")
    assert env.client("admin").get_compatibility() == "BACKWARD"
    assert ops.delete_subject("orders-value") != []
