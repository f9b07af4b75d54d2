"""Listeners of a secured Cluster: settings with Kafka's names, external Services, advertised
addresses, certificate Secrets and what the broker pods get."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from brook_operator import certs, resources, tls
from brook_operator.resources import listeners, security
from brook_operator.spec import parse_cluster

ETCD = {"endpoints": ["http://etcd:2379"]}
NOW = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)
SECURE = {
    "etcd": ETCD,
    "replicas": 2,
    "listeners": [
        {"name": "plain", "port": 9092},
        {"name": "tls", "port": 9093, "tls": True, "authentication": "tls"},
        {
            "name": "external",
            "port": 9094,
            "type": "nodeport",
            "tls": True,
            "authentication": "scram-sha-512",
            "nodePort": 31090,
        },
        {"name": "lb", "port": 9095, "type": "loadbalancer", "authentication": "plain"},
    ],
    "authorization": {"enabled": True, "superUsers": ["User:admin"]},
}


def test_kafka_listener_settings() -> None:
    spec = parse_cluster("demo", SECURE)
    assert listeners.listeners_setting(spec) == (
        "PLAIN://0.0.0.0:9092,TLS://0.0.0.0:9093,EXTERNAL://0.0.0.0:9094,LB://0.0.0.0:9095,"
        "REPLICATION://0.0.0.0:9091"
    )
    assert listeners.protocol_map_setting(spec) == (
        "PLAIN:PLAINTEXT,TLS:SSL,EXTERNAL:SASL_SSL,LB:SASL_PLAINTEXT,REPLICATION:SSL"
    )
    assert listeners.inter_broker_listener(spec) == "REPLICATION"
    assert listeners.client_auth_listeners(spec) == ["TLS", "REPLICATION"]
    assert listeners.sasl_mechanisms(spec) == ["PLAIN", "SCRAM-SHA-512"]
    cfg = security.config("demo", spec)
    assert cfg["BROOK_SUPER_USERS"] == "User:CN=demo-broker;User:CN=demo-operator;User:admin"
    assert cfg["BROOK_SSL_CLIENT_AUTH_LISTENERS"] == "TLS,REPLICATION"
    plain = parse_cluster("demo", {"etcd": ETCD})
    assert listeners.inter_broker_listener(plain) == "PLAIN" and security.config("demo", plain) == {}


def test_external_services_one_per_broker_with_node_ports() -> None:
    spec = parse_cluster("demo", SECURE)
    svcs = {s["metadata"]["name"]: s for s in listeners.external_services("demo", "kafka", spec, 2)}
    assert sorted(svcs) == [
        "demo-external-0",
        "demo-external-1",
        "demo-external-bootstrap",
        "demo-lb-0",
        "demo-lb-1",
        "demo-lb-bootstrap",
    ]
    assert svcs["demo-external-bootstrap"]["spec"]["ports"][0]["nodePort"] == 31090
    assert svcs["demo-external-1"]["spec"]["ports"][0]["nodePort"] == 31092
    assert svcs["demo-external-1"]["spec"]["selector"][listeners.BROKER_POD_LABEL] == "demo-broker-1"
    assert svcs["demo-lb-0"]["spec"]["type"] == "LoadBalancer"


def _lb(name: str, host: str | None) -> dict[str, Any]:
    status = {"loadBalancer": {"ingress": [{"ip": host}]}} if host else {}
    return {"metadata": {"name": name}, "spec": {"ports": [{"port": 9095}]}, "status": status}


def test_advertised_table_waits_for_load_balancer_addresses() -> None:
    spec = parse_cluster("demo", SECURE)
    services = {"demo-lb-0": _lb("demo-lb-0", "203.0.113.7"), "demo-lb-1": _lb("demo-lb-1", None)}
    table = listeners.advertised_table("demo", "kafka", spec, 2, services)
    assert list(table) == ["0"]  # broker 1's balancer has no address yet: its pod waits
    assert table["0"] == (
        "PLAIN://demo-broker-0.demo-brokers.kafka.svc:9092,TLS://demo-broker-0.demo-brokers.kafka.svc:9093,"
        "EXTERNAL://{node}:31091,LB://203.0.113.7:9095,REPLICATION://demo-broker-0.demo-brokers.kafka.svc:9091"
    )
    assert listeners.fill_node(table["0"], "10.0.0.5").count("EXTERNAL://10.0.0.5:31091") == 1
    node = {
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.5"},
                {"type": "Hostname", "address": "kind-worker"},
            ]
        }
    }
    assert listeners.node_address(node) == "10.0.0.5"


def test_given_hosts_win_over_service_addresses() -> None:
    spec = parse_cluster(
        "demo",
        {
            **SECURE,
            "listeners": [
                {"name": "plain", "port": 9092},
                {
                    "name": "lb",
                    "port": 9095,
                    "type": "loadbalancer",
                    "advertisedHosts": [
                        {"broker": 0, "host": "kafka-0.example.com"},
                        {"broker": 1, "host": "kafka-1.example.com"},
                    ],
                },
            ],
            "authorization": {},
        },
    )
    table = listeners.advertised_table("demo", "kafka", spec, 2, {})
    assert table["1"].endswith("LB://kafka-1.example.com:9095")


def _data(manifests: list[dict[str, Any]]) -> dict[str, dict[str, bytes]]:
    return {m["metadata"]["name"]: tls.secret_data(m) or {} for m in manifests}


def test_certificate_secrets_are_stable_then_renewed_in_the_window() -> None:
    spec = parse_cluster("demo", {**SECURE, "certificates": {"validityDays": 60, "renewBeforeDays": 10}})
    first = _data(tls.secrets("demo", "kafka", spec, {}, NOW))
    assert sorted(first) == ["demo-broker-tls", "demo-clients-ca", "demo-cluster-ca", "demo-operator-tls"]
    broker, cluster_ca = first["demo-broker-tls"], first["demo-cluster-ca"]
    assert certs.signed_by(broker["tls.crt"], cluster_ca["ca.crt"])
    assert "*.demo-brokers.kafka.svc" in certs.hosts_of(broker["tls.crt"])
    assert broker["ca.crt"] == cluster_ca["ca.crt"] + first["demo-clients-ca"]["ca.crt"]
    again = _data(tls.secrets("demo", "kafka", spec, first, NOW + dt.timedelta(days=30)))
    assert again == first  # steady state: nothing rewritten
    later = _data(tls.secrets("demo", "kafka", spec, first, NOW + dt.timedelta(days=55)))
    assert later["demo-broker-tls"]["tls.crt"] != broker["tls.crt"]  # inside renewBeforeDays
    assert later["demo-cluster-ca"]["ca.key"] == cluster_ca["ca.key"]  # same CA key: trust continues
    assert certs.signed_by(later["demo-broker-tls"]["tls.crt"], cluster_ca["ca.crt"])
    assert tls.secrets("demo", "kafka", parse_cluster("demo", {"etcd": ETCD}), {}, NOW) == []


def test_secured_broker_pods_mount_certificates_and_wait_for_their_addresses() -> None:
    spec = parse_cluster("demo", SECURE)
    built = resources.cluster_manifests("demo", "kafka", spec, default_image="brook:1", services={})
    by = {(m["kind"], m["metadata"]["name"]): m for m in built}
    table = json.loads(by[("ConfigMap", "demo-listeners")]["data"]["advertised.json"])
    assert table == {}  # no LoadBalancer address yet
    pod = by[("StatefulSet", "demo-broker")]["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["advertise"]
    init = pod["initContainers"][0]
    assert "--node" in init["args"]  # a nodeport listener advertises its node
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["tls"]["secret"]["secretName"] == "demo-broker-tls"
    assert "kube-api-access" in vols
    ports = [p["containerPort"] for p in pod["containers"][0]["ports"]]
    assert ports == [9092, 9308, 9093, 9094, 9095, 9091]
    cm = by[("ConfigMap", "demo-config")]["data"]
    assert cm["BROOK_ADVERTISED_LISTENERS_FILE"] == security.ADVERTISED_FILE
    assert cm["BROOK_AUTHORIZER_CLASS_NAME"] == security.AUTHORIZER


def test_advertise_init_refuses_until_its_entry_exists_then_fills_in_the_node(tmp_path: Any) -> None:
    import asyncio

    from brook_operator.rackinit import advertise

    from .fakes import FakeKube

    kube = FakeKube()
    kube.put(
        {
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {"addresses": [{"type": "InternalIP", "address": "172.18.0.3"}]},
        }
    )
    out = tmp_path / "out"
    with pytest.raises(SystemExit, match="not known yet"):  # the kubelet retries the init container
        asyncio.run(advertise("demo-broker-1", "{}", out, "n1", kube=kube))  # type: ignore[arg-type]
    assert not out.exists()
    table = json.dumps({"1": "PLAIN://p:9092,EXTERNAL://{node}:31092"})
    got = asyncio.run(advertise("demo-broker-1", table, out, "n1", kube=kube))  # type: ignore[arg-type]
    assert got == out.read_text() == "PLAIN://p:9092,EXTERNAL://172.18.0.3:31092"


OAUTH = {
    "jwksEndpointUri": "https://idp.example/keys",
    "validIssuerUri": "https://idp.example",
    "audience": "kafka",
}


def test_oauth_listeners_enable_oauthbearer_with_the_providers_settings() -> None:
    spec = parse_cluster(
        "demo",
        {
            "etcd": ETCD,
            "listeners": [
                {"name": "plain", "port": 9092},
                {"name": "sso", "port": 9093, "tls": True, "authentication": "oauth", "oauth": OAUTH},
                {"name": "scram", "port": 9094, "authentication": "scram-sha-512"},
            ],
        },
    )
    assert listeners.sasl_mechanisms(spec) == ["OAUTHBEARER", "SCRAM-SHA-512"]
    assert "SSO:SASL_SSL" in listeners.protocol_map_setting(spec)
    cfg = security.config("demo", spec)
    assert cfg["BROOK_SASL_ENABLED_MECHANISMS"] == "OAUTHBEARER,SCRAM-SHA-512"
    assert cfg["BROOK_SASL_OAUTHBEARER_JWKS_ENDPOINT_URL"] == "https://idp.example/keys"
    assert cfg["BROOK_SASL_OAUTHBEARER_EXPECTED_ISSUER"] == "https://idp.example"
    assert cfg["BROOK_SASL_OAUTHBEARER_EXPECTED_AUDIENCE"] == "kafka"
    assert "BROOK_SASL_OAUTHBEARER_SUB_CLAIM_NAME" not in cfg  # the default, sub


@pytest.mark.parametrize(
    ("listener", "message"),
    [
        ({"authentication": "oauth"}, "needs oauth.jwksEndpointUri"),
        (
            {"authentication": "oauth", "oauth": {"jwksEndpointUri": "idp:8080/keys"}},
            "must be an http(s) URL",
        ),
        ({"authentication": "plain", "oauth": OAUTH}, "applies to authentication oauth only"),
        ({"authentication": "oauth", "oauth": {**OAUTH, "userNameClaim": ""}}, "userNameClaim"),
    ],
)
def test_bad_oauth_listeners_are_refused(listener: dict[str, Any], message: str) -> None:
    from brook_operator.spec import SpecError

    with pytest.raises(SpecError) as e:
        parse_cluster("demo", {"etcd": ETCD, "listeners": [{"name": "sso", "port": 9092, **listener}]})
    assert message in str(e.value)


def test_oauth_listeners_must_agree() -> None:
    from brook_operator.spec import SpecError

    other = {**OAUTH, "audience": ["other"]}
    with pytest.raises(SpecError, match="same oauth settings"):
        parse_cluster(
            "demo",
            {
                "etcd": ETCD,
                "listeners": [
                    {"name": "a", "port": 9092, "authentication": "oauth", "oauth": OAUTH},
                    {"name": "b", "port": 9093, "authentication": "oauth", "oauth": other},
                ],
            },
        )
