"""Apache Kafka's Java clients against a secured Brook broker: SASL_SSL with SCRAM-SHA-512 and PLAIN,
mutual TLS with the principal from the client certificate, OAUTHBEARER against a real token endpoint,
and ACLs: a wrong password is SaslAuthenticationException, a missing ACL Topic- or
GroupAuthorizationException, in seconds."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from tests.support.broker import BrokerProcess
from tests.support.jvm import JavaClients, JavaError
from tests.support.oidc import IdentityProvider
from tests.support.ports import free_port

pytestmark = pytest.mark.slow
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
CERT_PRINCIPAL_CN = "java-client"


@dataclass
class Env:
    broker: BrokerProcess
    ports: dict[str, int]
    ca_pem: str
    client_cert_pem: str
    client_key_pkcs8: str
    cert_principal: str
    idp: IdentityProvider

    def tls(self) -> dict[str, str]:
        # Kafka's PEM trust and key stores, given inline: no JKS files to make.
        return {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": self.ca_pem}

    def sasl(self, mechanism: str, user: str, password: str) -> dict[str, str]:
        module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
        return {
            "bootstrap.servers": f"127.0.0.1:{self.ports['SASL_SSL']}",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism,
            "sasl.jaas.config": f'org.apache.kafka.common.security.{module} required username="{user}" '
            f'password="{password}";',
            **self.tls(),
        }

    def mtls(self) -> dict[str, str]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.ports['SSL']}",
            "security.protocol": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": self.client_cert_pem,
            "ssl.keystore.key": self.client_key_pkcs8,
            **self.tls(),
        }

    def oauth(self, client_id: str) -> dict[str, str]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.ports['SASL_SSL']}",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": self.idp.token_url,
            "sasl.login.callback.handler.class": "org.apache.kafka.common.security.oauthbearer."
            "OAuthBearerLoginCallbackHandler",
            "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
            f'required clientId="{client_id}" clientSecret="s3cret";',
            **self.tls(),
        }


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("jsecurity")
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("java@example.com", common_name=CERT_PRINCIPAL_CN)
    server.private_key_and_cert_chain_pem.write_to_path(str(tmp / "server.pem"))
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    key = serialization.load_pem_private_key(client.private_key_pem.bytes(), password=None)
    pkcs8 = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    ports = {name: free_port() for name in ("SSL", "SASL_SSL")}
    idp = IdentityProvider(audience="brook", issuer="brook-test-idp").start()
    broker = BrokerProcess(tmp / "data")
    ports["PLAINTEXT"] = broker.port
    broker.args = [
        *("--listeners", ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())),
        *(
            "--ssl-keystore-location",
            str(tmp / "server.pem"),
            "--ssl-truststore-location",
            str(tmp / "ca.pem"),
        ),
        *("--ssl-client-auth-listeners", "SSL"),
        *("--sasl-enabled-mechanisms", "PLAIN,SCRAM-SHA-512,OAUTHBEARER"),
        *("--sasl-oauthbearer-jwks-endpoint-url", idp.jwks_url),
        *(
            "--sasl-oauthbearer-expected-audience",
            "brook",
            "--sasl-oauthbearer-expected-issuer",
            "brook-test-idp",
        ),
        *("--authorizer-class-name", AUTHORIZER, "--super-users", "User:ANONYMOUS"),
        *("--num-partitions", "1", "--group-initial-rebalance-delay-ms", "0"),
    ]
    broker.start()
    with JavaClients(tmp / "setup.log") as java:
        java.call("admin", name="a", config={"bootstrap.servers": broker.bootstrap})
        for user, password in USERS.items():
            assert java.call("alter_scram", name="a", upserts=[[user, "SCRAM-SHA-512", password, 4096]]) == {
                user: "ok"
            }
        made = java.call("create_topics", name="a", topics=[{"name": "sec", "partitions": 1}])
        assert made == {"sec": "ok"}
        cert_principal = f"User:CN={CERT_PRINCIPAL_CN},OU="  # trustme adds an OU; completed below
        acls = []
        for principal in ("User:alice", "User:oauth-app", "CERT"):
            for op in ("WRITE", "READ", "DESCRIBE"):
                acls.append(
                    {
                        "resource_type": "TOPIC",
                        "resource_name": "sec",
                        "principal": principal,
                        "operation": op,
                    }
                )
            acls.append(
                {
                    "resource_type": "GROUP",
                    "resource_name": "g-sec",
                    "principal": principal,
                    "operation": "READ",
                }
            )
        subject = client.cert_chain_pems[0].bytes()
        from cryptography import x509

        name = x509.load_pem_x509_certificate(subject).subject.rfc4514_string()
        cert_principal = f"User:{name}"
        for acl in acls:
            if acl["principal"] == "CERT":
                acl["principal"] = cert_principal
        created = java.call("create_acls", name="a", acls=acls)
        assert set(created.values()) == {"ok"}, created
    try:
        yield Env(
            broker, ports, ca.cert_pem.bytes().decode(), client.cert_chain_pems[0].bytes().decode(), pkcs8,
            cert_principal, idp,
        )  # fmt: skip
    finally:
        broker.stop()
        idp.stop()


@pytest.fixture
def java(tmp_path: Path, env: Env) -> Iterator[JavaClients]:
    # Kafka 4 refuses token endpoints not named in this property (its allow list of URLs).
    allowed = f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={env.idp.token_url}"
    with JavaClients(tmp_path / "java.log", [allowed]) as j:
        yield j


# A refusal answered at once, against a client that would otherwise give up only after 60 s of
# retries (its timeouts below): far apart, so a slow JVM on a loaded machine is not read as either.
REFUSED_WITHIN_S = 25


def roundtrip(java: JavaClients, conf: dict[str, Any], tag: str) -> None:
    java.call(
        "producer", name=f"p-{tag}", config={**conf, "max.block.ms": "15000", "delivery.timeout.ms": "40000"}
    )
    out = java.call("send", name=f"p-{tag}", topic="sec", records=[{"key": tag, "value": f"from {tag}"}])
    assert "error" not in out[0], out
    java.call(
        "consumer",
        name=f"c-{tag}",
        config={
            **conf,
            "group.id": "g-sec",
            "auto.offset.reset": "earliest",
            "default.api.timeout.ms": "15000",
        },
    )
    java.call("assign", name=f"c-{tag}", partitions=[["sec", 0]])
    java.call("seek", name=f"c-{tag}", partition=["sec", 0], offset=out[0]["offset"])
    got = java.call("poll", name=f"c-{tag}", count=1, timeout_ms=15000)
    assert [(r["key"], r["value"]) for r in got] == [(tag, f"from {tag}")]
    java.call("commit_sync", name=f"c-{tag}")  # the group ACL


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_sasl_ssl(env: Env, java: JavaClients, mechanism: str) -> None:
    roundtrip(java, env.sasl(mechanism, "alice", USERS["alice"]), mechanism)


def test_mutual_tls_principal_from_certificate(env: Env, java: JavaClients) -> None:
    roundtrip(java, env.mtls(), "mtls")


def test_no_client_certificate_refused_as_kafka_refuses(env: Env, java: JavaClients) -> None:
    """A listener that requires a certificate refuses a client without one in the TLS handshake, and the
    alert reaches the client (SslAuthenticationException at once, not a timeout after retries)."""
    no_cert = {k: v for k, v in env.mtls().items() if not k.startswith("ssl.keystore")}
    java.call(
        "admin",
        name="a",
        config={**no_cert, "default.api.timeout.ms": "60000", "request.timeout.ms": "30000"},
    )
    start = time.monotonic()
    with pytest.raises(JavaError) as e:
        java.call("list_topics", name="a")
    assert e.value.kind == "SslAuthenticationException", e.value
    assert time.monotonic() - start < REFUSED_WITHIN_S


def test_oauthbearer(env: Env, java: JavaClients) -> None:
    roundtrip(java, env.oauth("oauth-app"), "oauth")
    assert "oauth-app" in env.idp.issued


def test_wrong_password_refused_fast(env: Env, java: JavaClients) -> None:
    conf = env.sasl("SCRAM-SHA-512", "alice", "not-her-password")
    java.call("admin", name="a", config={**conf, "default.api.timeout.ms": "60000"})
    start = time.monotonic()
    with pytest.raises(JavaError) as e:
        java.call("list_topics", name="a")
    assert e.value.kind == "SaslAuthenticationException", e.value
    # The broker's refusal (Kafka's words), not the client's own check of the server's signature.
    assert "due to invalid credentials with SASL mechanism SCRAM-SHA-512" in e.value.message, e.value
    assert time.monotonic() - start < REFUSED_WITHIN_S


def test_missing_acls_refused(env: Env, java: JavaClients) -> None:
    bob = env.sasl("SCRAM-SHA-512", "bob", USERS["bob"])
    java.call("producer", name="p", config={**bob, "max.block.ms": "60000"})
    start = time.monotonic()
    out = java.call("send", name="p", topic="sec", records=[{"value": "x"}])
    assert out[0]["error"] == "TopicAuthorizationException", out
    assert time.monotonic() - start < REFUSED_WITHIN_S
    # alice may read the topic but not as group "g-other"
    alice = env.sasl("SCRAM-SHA-512", "alice", USERS["alice"])
    java.call("consumer", name="c", config={**alice, "group.id": "g-other", "auto.offset.reset": "earliest"})
    java.call("subscribe", name="c", topics=["sec"])
    with pytest.raises(JavaError) as e:
        java.call("poll", name="c", count=1, timeout_ms=10000)
    assert e.value.kind == "GroupAuthorizationException", e.value


def test_acls_and_authorized_operations_through_the_admin(env: Env, java: JavaClients) -> None:
    """describeAcls/deleteAcls with filters, and KIP-430's authorized operations as the user sees them."""
    java.call("admin", name="root", config={"bootstrap.servers": env.broker.bootstrap})
    alices = java.call("describe_acls", name="root", filter={"principal": "User:alice"})
    assert sorted((b["pattern"]["resourceType"], b["entry"]["operation"]) for b in alices) == [
        ("GROUP", "READ"),
        ("TOPIC", "DESCRIBE"),
        ("TOPIC", "READ"),
        ("TOPIC", "WRITE"),
    ], alices
    java.call("admin", name="alice", config=env.sasl("SCRAM-SHA-512", "alice", USERS["alice"]))
    ops = java.call("describe_topics", name="alice", topics=["sec"], authorized_operations=True)["sec"]
    assert sorted(ops["authorizedOperations"]) == ["DESCRIBE", "READ", "WRITE"], ops
    grant = {"resource_type": "TOPIC", "resource_name": "sec", "principal": "User:carol", "operation": "READ"}
    assert set(java.call("create_acls", name="root", acls=[grant]).values()) == {"ok"}
    deleted = java.call("delete_acls", name="root", filters=[{"principal": "User:carol"}])
    assert [b["entry"]["principal"] for b in deleted] == ["User:carol"], deleted
    assert java.call("describe_acls", name="root", filter={"principal": "User:carol"}) == []
    with pytest.raises(JavaError) as e:  # alice may not describe ACLs (no DESCRIBE on the cluster)
        java.call("describe_acls", name="alice", filter={})
    assert e.value.kind == "ClusterAuthorizationException", e.value
