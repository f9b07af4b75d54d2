"""SASL/OAUTHBEARER with real clients: confluent-kafka (librdkafka) fetching tokens from a real OIDC token
endpoint (client credentials) and the broker checking them against that provider's JWKS; librdkafka's
unsigned development tokens against a broker that accepts them; expired, foreign and malformed tokens
refused; the token's subject is the principal ACLs apply to."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from tests.support.broker import BrokerProcess
from tests.support.oidc import IdentityProvider
from tests.support.ports import free_port
from tests.support.raw import RawClient

pytestmark = pytest.mark.slow
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def start_broker(root: Path, *oauth_args: str) -> tuple[BrokerProcess, int]:
    port, sasl_port = free_port(), free_port()
    b = BrokerProcess(
        root,
        port=port,
        args=[
            *("--listeners", f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"),
            *("--sasl-enabled-mechanisms", "OAUTHBEARER"),
            *("--authorizer-class-name", AUTHORIZER, "--allow-everyone-if-no-acl-found", "true"),
            *oauth_args,
        ],
    ).start()
    return b, sasl_port


@pytest.fixture(scope="module")
def idp() -> Iterator[IdentityProvider]:
    with IdentityProvider(audience="brook", issuer="brook-test-idp") as p:
        yield p


@pytest.fixture(scope="module")
def oidc_broker(tmp_path_factory: pytest.TempPathFactory, idp: IdentityProvider) -> Iterator[tuple[str, int]]:
    b, sasl_port = start_broker(
        tmp_path_factory.mktemp("oauth") / "data",
        *("--sasl-oauthbearer-jwks-endpoint-url", idp.jwks_url),
        *(
            "--sasl-oauthbearer-expected-audience",
            "brook",
            "--sasl-oauthbearer-expected-issuer",
            "brook-test-idp",
        ),
    )
    try:
        yield b.bootstrap, sasl_port
    finally:
        b.stop()


def oidc_client(
    sasl_port: int, idp: IdentityProvider, client_id: str, path: str = "/token"
) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"127.0.0.1:{sasl_port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": client_id,
        "sasl.oauthbearer.client.secret": "secret",
        "sasl.oauthbearer.token.endpoint.url": idp.base + path,
    }


def deliver(conf: dict[str, Any], topic: str) -> KafkaError | None:
    errors: list[KafkaError | None] = []
    p = Producer({**conf, "message.timeout.ms": 15_000})
    p.produce(topic, b"v", on_delivery=lambda err, _m: errors.append(err))
    p.flush(30)
    assert len(errors) == 1, "no delivery report"
    return errors[0]


def create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # referenced until its futures resolve
    for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        fut.result(30)


def test_oidc_tokens_produce_and_consume(oidc_broker: tuple[str, int], idp: IdentityProvider) -> None:
    bootstrap, sasl_port = oidc_broker
    create(bootstrap, "oidc-events")
    conf = oidc_client(sasl_port, idp, "svc-orders")
    assert deliver(conf, "oidc-events") is None
    c = Consumer({**conf, "group.id": "oidc-g", "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["oidc-events"])
        msg = None
        deadline = time.monotonic() + 30
        while msg is None and time.monotonic() < deadline:
            m = c.poll(1.0)
            msg = m if m is not None and m.error() is None else None
        assert msg is not None and msg.value() == b"v"
    finally:
        c.close()
    assert "svc-orders" in idp.issued


def test_the_tokens_subject_is_the_principal(oidc_broker: tuple[str, int], idp: IdentityProvider) -> None:
    bootstrap, sasl_port = oidc_broker
    create(bootstrap, "oidc-audit")
    deny = AclBinding(
        ResourceType.TOPIC, "oidc-audit", ResourcePatternType.LITERAL, "User:svc-intruder", "*",
        AclOperation.WRITE, AclPermissionType.DENY,
    )  # fmt: skip
    allow = AclBinding(
        ResourceType.TOPIC, "oidc-audit", ResourcePatternType.LITERAL, "User:svc-audit", "*",
        AclOperation.ALL, AclPermissionType.ALLOW,
    )  # fmt: skip
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_acls([deny, allow]).values():
        fut.result(30)
    assert deliver(oidc_client(sasl_port, idp, "svc-audit"), "oidc-audit") is None
    err = deliver(oidc_client(sasl_port, idp, "svc-intruder"), "oidc-audit")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def raw_oauth(sasl_port: int, token: str) -> tuple[Any, Any]:
    """One OAUTHBEARER exchange on the wire (SaslHandshake v1, SaslAuthenticate v2), so that only the
    broker judges the token (librdkafka checks a token's expiry itself and never sends an expired one).
    Returns the broker's first answer and, after a refusal's error challenge, its answer to the client's
    ^A (RFC 7628); then None when the broker accepted the token at once."""
    with RawClient(f"127.0.0.1:{sasl_port}") as raw:
        assert raw.request(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0
        first = raw.request(
            SaslAuthenticateRequest(auth_bytes=f"n,,\x01auth=Bearer {token}\x01\x01".encode()), 2
        )
        if first.error_code or not first.auth_bytes:
            return first, None
        return first, raw.request(SaslAuthenticateRequest(auth_bytes=b"\x01"), 2)


def assert_refused(sasl_port: int, token: str) -> None:
    first, second = raw_oauth(sasl_port, token)
    assert first.error_code == 0 and json.loads(first.auth_bytes)["status"] == "invalid_token", first
    assert second is not None and second.error_code == 58, second  # SASL_AUTHENTICATION_FAILED
    assert "Authentication failed" in second.error_message, second


def test_valid_raw_token_is_accepted(oidc_broker: tuple[str, int], idp: IdentityProvider) -> None:
    first, second = raw_oauth(oidc_broker[1], idp.token("svc-raw"))
    assert first.error_code == 0 and first.auth_bytes == b"" and second is None, first


@pytest.mark.parametrize("kind", ["expired", "malformed", "wrong-audience", "unsigned"])
def test_bad_tokens_are_refused_by_the_broker(
    oidc_broker: tuple[str, int], idp: IdentityProvider, kind: str
) -> None:
    token = {
        "expired": lambda: idp.token("svc-late", expires_in=-3600),
        "malformed": lambda: "not-a-jwt",
        "wrong-audience": lambda: idp.token("svc-elsewhere", aud="someone-else"),
        "unsigned": lambda: jwt.encode(
            {"sub": "svc-none", "exp": int(time.time()) + 600}, None, algorithm="none"
        ),
    }[kind]()
    assert_refused(oidc_broker[1], token)


def test_a_token_from_another_provider_is_refused(oidc_broker: tuple[str, int]) -> None:
    with IdentityProvider(audience="brook", issuer="brook-test-idp") as other:  # same claims, other key
        assert_refused(oidc_broker[1], other.token("svc-forged"))


def test_unsigned_development_tokens_only_where_allowed(tmp_path: Path) -> None:
    unsigned = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.config": "principal=dev-alice",  # librdkafka's unsecured JWT (alg none)
        "enable.sasl.oauthbearer.unsecure.jwt": True,
    }
    b, sasl_port = start_broker(tmp_path / "dev", "--sasl-oauthbearer-unsecured", "true")
    try:
        create(b.bootstrap, "dev-topic")
        assert deliver({**unsigned, "bootstrap.servers": f"127.0.0.1:{sasl_port}"}, "dev-topic") is None
    finally:
        b.stop()
    with IdentityProvider() as idp:
        b, sasl_port = start_broker(tmp_path / "prod", "--sasl-oauthbearer-jwks-endpoint-url", idp.jwks_url)
        try:
            # The same unsigned token, on the wire: refused where only signed tokens are accepted.
            token = jwt.encode({"sub": "dev-alice", "exp": int(time.time()) + 600}, None, algorithm="none")
            assert_refused(sasl_port, token)
        finally:
            b.stop()


def test_oauthbearer_without_keys_or_unsecured_does_not_start(tmp_path: Path) -> None:
    listener = f"SASL_PLAINTEXT://127.0.0.1:{free_port()}"
    r = subprocess.run(
        [sys.executable, "-m", "brook.cli", "broker", "--data-dir", str(tmp_path / "d"),
         "--listeners", listener, "--sasl-enabled-mechanisms", "OAUTHBEARER"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and "--sasl-oauthbearer-jwks-endpoint-url" in r.stderr, r.stderr
