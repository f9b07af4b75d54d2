"""The schema registry on a broker without a PLAINTEXT listener: its own client reaches the broker through
the inter-broker listener (SSL with the broker's certificate, required by the listener), and basic-auth
logins go to the SASL_SSL listener, the only SCRAM one. A SCRAM user registers and reads back."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError

from tests.support.broker import BrokerProcess
from tests.support.ports import free_port

pytestmark = pytest.mark.slow

SCHEMA = json.dumps({"type": "record", "name": "Tls", "fields": [{"name": "a", "type": "int"}]})


@dataclass
class Env:
    url: str

    def client(self, user_info: str) -> SchemaRegistryClient:
        return SchemaRegistryClient({"url": self.url, "basic.auth.user.info": user_info})


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp: Path = tmp_path_factory.mktemp("registry-tls-only")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(tmp / "broker.pem"))
    port, sasl_port, registry_port = free_port(), free_port(), free_port()
    broker = BrokerProcess(tmp / "data", port=port)
    broker.args = [
        "--listeners",
        f"BROKER://127.0.0.1:{port},CLIENTS://127.0.0.1:{sasl_port}",
        "--listener-security-protocol-map",
        "BROKER:SSL,CLIENTS:SASL_SSL",
        "--inter-broker-listener-name",
        "BROKER",
        "--ssl-keystore-location",
        str(tmp / "broker.pem"),
        "--ssl-truststore-location",
        str(tmp / "ca.pem"),
        "--ssl-client-auth",
        "required",
        "--sasl-enabled-mechanisms",
        "SCRAM-SHA-512",
        "--schema-registry-host",
        "127.0.0.1",
        "--schema-registry-port",
        str(registry_port),
        "--schema-registry-basic-auth",
    ]
    broker.start()
    try:
        admin = AdminClient(  # as the broker itself: the SSL listener requires a certificate
            {
                "bootstrap.servers": broker.bootstrap,
                "security.protocol": "SSL",
                "ssl.ca.location": str(tmp / "ca.pem"),
                "ssl.certificate.location": str(tmp / "broker.pem"),
                "ssl.key.location": str(tmp / "broker.pem"),
            }
        )
        upsert = UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret"
        )
        for fut in admin.alter_user_scram_credentials([upsert]).values():
            fut.result(timeout=30)
        yield Env(f"http://127.0.0.1:{registry_port}")
    finally:
        broker.stop()


def test_registers_without_a_plaintext_listener(env: Env) -> None:
    alice = env.client("alice:alice-secret")
    deadline = time.monotonic() + 90
    while True:  # the registry starts once it has read `_schemas` over SSL
        try:
            schema_id = alice.register_schema("tls-value", Schema(SCHEMA, "AVRO"))
            break
        except Exception:
            assert time.monotonic() < deadline, "the registry did not register over SSL"
            time.sleep(0.5)
    assert json.loads(alice.get_schema(schema_id).schema_str or "") == json.loads(SCHEMA)
    assert alice.get_subjects() == ["tls-value"]


def test_logins_are_checked_on_the_sasl_ssl_listener(env: Env) -> None:
    with pytest.raises(SchemaRegistryError) as refused:
        env.client("alice:wrong").get_subjects()
    assert (refused.value.http_status_code, refused.value.error_code) == (401, 401)
