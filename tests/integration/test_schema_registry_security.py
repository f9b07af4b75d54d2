"""The schema registry over HTTPS with HTTP basic auth against the cluster's SCRAM users: confluent-kafka's
SchemaRegistryClient with the CA and a user's password registers; a wrong password, an unknown user or no
credentials get Confluent's 401; a password changed through Kafka's API takes over for new logins."""

from __future__ import annotations

import http.client
import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from click.testing import Result
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from typer.testing import CliRunner

from brook.console import app
from tests.support.broker import BrokerProcess
from tests.support.ports import free_port

pytestmark = pytest.mark.slow

SCHEMA = json.dumps({"type": "record", "name": "Secure", "fields": [{"name": "a", "type": "int"}]})


class Env:
    def __init__(self, broker: BrokerProcess, url: str, ca: str) -> None:
        self.broker, self.url, self.ca = broker, url, ca

    def client(self, user_info: str | None) -> SchemaRegistryClient:
        conf = {"url": self.url, "ssl.ca.location": self.ca}
        if user_info is not None:
            conf["basic.auth.user.info"] = user_info
        return SchemaRegistryClient(conf)


def set_password(bootstrap: str, user: str, password: str) -> None:
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode()
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})  # referenced until its futures resolve
    for fut in admin.alter_user_scram_credentials([upsert]).values():
        fut.result(timeout=30)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("registry-security")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.cert_chain_pems[0].write_to_path(str(tmp / "cert.pem"))
    for extra in cert.cert_chain_pems[1:]:
        extra.write_to_path(str(tmp / "cert.pem"), append=True)
    cert.private_key_pem.write_to_path(str(tmp / "key.pem"))
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    registry_port, sasl_port = free_port(), free_port()
    broker = BrokerProcess(tmp / "data")
    broker.args = [
        "--listeners",
        f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "--sasl-enabled-mechanisms",
        "SCRAM-SHA-512",
        "--schema-registry-host",
        "127.0.0.1",
        "--schema-registry-port",
        str(registry_port),
        "--schema-registry-ssl-certfile",
        str(tmp / "cert.pem"),
        "--schema-registry-ssl-keyfile",
        str(tmp / "key.pem"),
        "--schema-registry-basic-auth",
    ]
    broker.start()
    try:
        set_password(broker.bootstrap, "alice", "alice-secret")
        url = f"https://127.0.0.1:{registry_port}"
        context = ssl.create_default_context(cafile=str(tmp / "ca.pem"))
        _wait_https(url, context)
        yield Env(broker, url, str(tmp / "ca.pem"))
    finally:
        broker.stop()


def _wait_https(url: str, context: ssl.SSLContext) -> None:
    def answers() -> bool:
        try:
            urllib.request.urlopen(f"{url}/subjects", timeout=5, context=context)
        except urllib.error.HTTPError as e:
            return e.code == 401
        except OSError:
            return False
        return True

    deadline = time.monotonic() + 90
    while not answers():
        assert time.monotonic() < deadline, "the registry did not answer over HTTPS"
        time.sleep(0.2)


def test_scram_user_registers_over_https(env: Env) -> None:
    registered = env.client("alice:alice-secret").register_schema("secure-value", Schema(SCHEMA, "AVRO"))
    assert registered >= 1
    assert env.client("alice:alice-secret").get_subjects() == ["secure-value"]


@pytest.mark.parametrize("user_info", ["alice:wrong", "mallory:alice-secret", None])
def test_bad_credentials_get_401(env: Env, user_info: str | None) -> None:
    started = time.monotonic()
    with pytest.raises(SchemaRegistryError) as refused:
        env.client(user_info).get_subjects()
    assert (refused.value.http_status_code, refused.value.error_code) == (401, 401)
    # refused as soon as the SASL listener says so, not after the registry's 10 s login timeout
    assert time.monotonic() - started < 5


def test_a_new_password_logs_in(env: Env) -> None:
    set_password(env.broker.bootstrap, "bob", "first")
    assert env.client("bob:first").get_subjects() is not None
    set_password(env.broker.bootstrap, "bob", "second")
    assert env.client("bob:second").get_subjects() is not None


def test_plain_http_is_not_served(env: Env) -> None:
    with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
        urllib.request.urlopen(env.url.replace("https://", "http://") + "/subjects", timeout=10)


def test_brook_schema_commands_with_https_and_basic_auth(env: Env, tmp_path: Path) -> None:
    (tmp_path / "s.avsc").write_text(SCHEMA)
    registry = {"BROOK_SCHEMA_REGISTRY": env.url, "BROOK_SCHEMA_REGISTRY_CA": env.ca}

    def brook(*args: str, user: str) -> Result:
        return CliRunner().invoke(
            app, ["schema", *args], env={**registry, "BROOK_SCHEMA_REGISTRY_USER_INFO": user}
        )

    ok = brook("register", "cli-secure-value", str(tmp_path / "s.avsc"), user="alice:alice-secret")
    assert ok.exit_code == 0 and ok.stdout.startswith("registered cli-secure-value: id "), ok.stderr
    refused = brook("list", user="alice:wrong")
    assert refused.exit_code == 1 and "Unauthorized (error_code 401)" in refused.stderr
