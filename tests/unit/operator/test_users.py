"""The User resource: spec parsing, the Secret it gets, and the cluster brought to agree (with an
in-memory stand-in for the Kubernetes API and for the broker's admin API; the end-to-end test runs the
same flow against real brokers)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from brook_operator import certs, tls, users
from brook_operator.spec import SpecError, parse_cluster
from brook_operator.user_spec import AclRule, Quotas, parse_user

from .fakes import FakeKube

NOW = "2026-11-24T02:00:00Z"
CLUSTER_SPEC = {
    "replicas": 1,
    "listeners": [
        {"name": "plain", "port": 9092},
        {"name": "scram", "port": 9093, "tls": True, "authentication": "scram-sha-512"},
        {"name": "mtls", "port": 9094, "tls": True, "authentication": "tls"},
    ],
    "authorization": {"enabled": True},
}


class FakeAdmin:
    def __init__(self) -> None:
        self.scram: dict[str, str] = {}
        self.acls: dict[str, set[AclRule]] = {}
        self.quotas: dict[str, Quotas] = {}
        self.connections: list[tuple[str, Mapping[str, str] | None]] = []

    def __call__(self, bootstrap: str, security: Mapping[str, str] | None = None) -> FakeAdmin:
        self.connections.append((bootstrap, security))
        return self

    async def scram_users(self) -> set[str]:
        return set(self.scram)

    async def upsert_scram(self, user: str, password: str, iterations: int) -> None:
        self.scram[user] = password

    async def delete_scram(self, user: str) -> None:
        self.scram.pop(user, None)

    async def acls_of(self, principal: str) -> set[AclRule]:
        return set(self.acls.get(principal, set()))

    async def create_acls(self, principal: str, rules: Iterable[AclRule]) -> None:
        self.acls.setdefault(principal, set()).update(rules)

    async def delete_acls(self, principal: str, rules: Iterable[AclRule]) -> None:
        self.acls.setdefault(principal, set()).difference_update(rules)

    async def set_quotas(self, user: str, quotas: Quotas) -> None:
        self.quotas[user] = quotas


def _user(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "User",
        "metadata": {"name": name, "namespace": "kafka", "uid": f"u-{name}", "generation": 1},
        "spec": spec,
    }


def _kube_with_cluster() -> FakeKube:
    kube = FakeKube()
    kube.put({"kind": "Cluster", "metadata": {"name": "demo", "namespace": "kafka"}, "spec": CLUSTER_SPEC})
    spec = parse_cluster("demo", CLUSTER_SPEC)
    now = dt.datetime.fromisoformat(NOW)
    for m in tls.secrets("demo", "kafka", spec, {}, now):
        kube.put(m)
    return kube


def _reconcile(kube: FakeKube, admin: FakeAdmin, body: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(
        users.reconcile_user(
            body, kube=kube, admin_for=admin, template="{name}-bootstrap.{namespace}.svc:{port}", now=NOW
        )
    )


def test_parse_user_expands_operations_into_rules() -> None:
    u = parse_user(
        "alice",
        {
            "cluster": "demo",
            "authorization": {
                "acls": [
                    {
                        "resource": {"type": "topic", "name": "orders", "patternType": "prefix"},
                        "operations": ["Read", "Write"],
                    },
                    {"resource": {"type": "cluster"}, "operations": ["Describe"], "type": "deny"},
                ]
            },
            "quotas": {"producerByteRate": 1048576},
        },
    )
    assert u.principal == "User:alice" and u.authentication == "scram-sha-512"
    assert AclRule("topic", "orders", "prefix", "Write") in u.acls
    assert AclRule("cluster", "kafka-cluster", "literal", "Describe", "deny") in u.acls
    assert u.quotas.as_kafka()["producer_byte_rate"] == 1048576.0
    assert (
        parse_user("bob", {"cluster": "demo", "authentication": {"type": "tls"}}).principal == "User:CN=bob"
    )
    with pytest.raises(SpecError, match="'Fly' is not one of"):
        parse_user(
            "x",
            {
                "cluster": "demo",
                "authorization": {
                    "acls": [{"resource": {"type": "topic", "name": "t"}, "operations": ["Fly"]}]
                },
            },
        )
    with pytest.raises(SpecError, match="cluster is required"):
        parse_user("x", {})


def test_a_scram_user_gets_a_secret_a_credential_and_its_acls() -> None:
    kube, admin = _kube_with_cluster(), FakeAdmin()
    body = _user(
        "alice",
        {
            "cluster": "demo",
            "authorization": {
                "acls": [{"resource": {"type": "topic", "name": "orders"}, "operations": ["Read"]}]
            },
            "quotas": {"consumerByteRate": 2000000},
        },
    )
    st = _reconcile(kube, admin, body)
    assert st["conditions"][0]["status"] == "True", st
    secret = tls.secret_data(kube.objects[("Secret", "kafka", "alice")]) or {}
    password = secret["password"].decode()
    assert admin.scram["alice"] == password and len(password) >= 24
    assert secret["bootstrap.servers"] == b"demo-bootstrap.kafka.svc:9093"
    assert secret["security.protocol"] == b"SASL_SSL"
    assert f'password="{password}"' in secret["sasl.jaas.config"].decode()
    assert admin.acls["User:alice"] == {AclRule("topic", "orders", "literal", "Read")}
    assert admin.quotas["alice"].consumer_byte_rate == 2000000
    # The operator reached the cluster through its replication listener with its own certificate.
    bootstrap, security = admin.connections[0]
    assert bootstrap.endswith(":9091") and security and security["security.protocol"] == "SSL"
    # Steady state: the password is kept; an ACL dropped from the spec is removed from the cluster.
    body["spec"]["authorization"]["acls"][0]["operations"] = ["Describe"]
    _reconcile(kube, admin, body)
    assert (tls.secret_data(kube.objects[("Secret", "kafka", "alice")]) or {})[
        "password"
    ].decode() == password
    assert admin.acls["User:alice"] == {AclRule("topic", "orders", "literal", "Describe")}
    msg = asyncio.run(
        users.delete_user(
            body, kube=kube, admin_for=admin, template="{name}-bootstrap.{namespace}.svc:{port}"
        )
    )
    assert "removed" in msg and "alice" not in admin.scram and not admin.acls["User:alice"]
    assert ("Secret", "kafka", "alice") not in kube.objects


def test_a_tls_user_gets_a_client_certificate_of_the_clients_ca() -> None:
    kube, admin = _kube_with_cluster(), FakeAdmin()
    st = _reconcile(kube, admin, _user("bob", {"cluster": "demo", "authentication": {"type": "tls"}}))
    assert st["principal"] == "User:CN=bob"
    secret = tls.secret_data(kube.objects[("Secret", "kafka", "bob")]) or {}
    ca = tls.secret_data(kube.objects[("Secret", "kafka", "demo-clients-ca")]) or {}
    assert certs.signed_by(secret["user.crt"], ca["ca.crt"])
    assert secret["bootstrap.servers"] == b"demo-bootstrap.kafka.svc:9094" and "bob" not in admin.scram


@pytest.mark.parametrize(
    ("cluster_spec", "user_spec", "reason"),
    [
        (None, {"cluster": "demo"}, "ClusterNotFound"),
        ({"replicas": 1}, {"cluster": "demo"}, "NoListener"),
        (CLUSTER_SPEC, {"cluster": "demo", "quotas": {"producerByteRate": 0}}, "InvalidSpec"),
    ],
)
def test_users_that_cannot_be_served_say_why(
    cluster_spec: dict[str, Any] | None, user_spec: dict[str, Any], reason: str
) -> None:
    kube = FakeKube()
    if cluster_spec is not None:
        kube.put(
            {"kind": "Cluster", "metadata": {"name": "demo", "namespace": "kafka"}, "spec": cluster_spec}
        )
    st = _reconcile(kube, FakeAdmin(), _user("carol", user_spec))
    assert st["conditions"][0]["status"] == "False" and st["conditions"][0]["reason"] == reason


def test_with_cert_manager_the_certificates_are_asked_for() -> None:
    spec = {**CLUSTER_SPEC, "certificates": {"issuer": "cert-manager", "certManagerIssuer": "brook-ca"}}
    cs = parse_cluster("demo", spec)
    assert tls.secrets("demo", "kafka", cs, {}, dt.datetime.fromisoformat(NOW)) == []
    made = {c["metadata"]["name"]: c["spec"] for c in tls.certificates("demo", "kafka", cs)}
    assert sorted(made) == ["demo-broker-tls", "demo-operator-tls"]
    assert made["demo-broker-tls"]["issuerRef"] == {
        "name": "brook-ca",
        "kind": "ClusterIssuer",
        "group": "cert-manager.io",
    }
    assert "*.demo-brokers.kafka.svc" in made["demo-broker-tls"]["dnsNames"]
    assert "server auth" not in made["demo-operator-tls"]["usages"]
    kube = FakeKube()
    kube.put({"kind": "Cluster", "metadata": {"name": "demo", "namespace": "kafka"}, "spec": spec})
    st = _reconcile(kube, FakeAdmin(), _user("bob", {"cluster": "demo", "authentication": {"type": "tls"}}))
    assert st["conditions"][0]["status"] == "True", st
    cert = kube.objects[("Certificate", "kafka", "bob")]
    assert cert["spec"]["commonName"] == "bob" and cert["spec"]["secretName"] == "bob"
