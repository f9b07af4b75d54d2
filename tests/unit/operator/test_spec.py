from __future__ import annotations

from typing import Any

import pytest

from brook_operator.spec import (
    Autoscaling,
    ClusterSpec,
    EtcdTls,
    EtcdUser,
    Listener,
    Metrics,
    SecretKey,
    SpecError,
    Storage,
    parse_cluster,
    parse_topic,
)

from .crd_defaults import apply_defaults, schema

ETCD = {"endpoints": ["http://etcd:2379"]}


def test_etcd_tls_and_auth_are_read_with_their_default_keys() -> None:
    s = parse_cluster(
        "demo",
        {
            "etcd": {
                "endpoints": ["https://etcd:2379"],
                "tls": {"caSecret": {"name": "ca"}, "clientCertificateSecret": "client"},
                "auth": {"user": "brook", "passwordSecret": {"name": "pw"}},
            }
        },
    )
    assert s.etcd is not None
    assert s.etcd.tls == EtcdTls(SecretKey("ca", "ca.crt"), "client")
    assert s.etcd.auth == EtcdUser("brook", SecretKey("pw", "password"))


def test_minimal_cluster_takes_the_defaults() -> None:
    s = parse_cluster("demo", {"etcd": ETCD})
    assert s.replicas == 3
    assert s.image is None
    assert s.storage == Storage()
    assert s.listener == Listener("plain", 9092, "internal")
    assert s.metrics == Metrics(True, 9308)
    assert s.autoscaling == Autoscaling()
    assert s.rack_topology_key is None


@pytest.mark.parametrize(
    "spec",
    [
        {"etcd": ETCD},
        {"etcd": {"managed": {}}},
        {"etcd": ETCD, "rack": {}, "autoscaling": {}, "metrics": {}, "storage": {}},
        {"replicas": 1},
        {
            "etcd": {
                "endpoints": ["https://etcd:2379"],
                "tls": {"caSecret": {"name": "ca"}, "clientCertificateSecret": "client"},
                "auth": {"user": "brook", "passwordSecret": {"name": "pw"}},
            }
        },
    ],
)
def test_python_defaults_equal_the_crd_defaults(spec: dict[str, Any]) -> None:
    """The API server's defaulting (from the CRD) and the operator's own give the same typed spec."""
    defaulted = apply_defaults(schema("clusters")["properties"]["spec"], spec)
    assert defaulted != spec  # the CRD did default something
    assert parse_cluster("demo", defaulted) == parse_cluster("demo", spec)


def test_topic_defaults_equal_the_crd_defaults() -> None:
    spec = {"cluster": "demo"}
    defaulted = apply_defaults(schema("topics")["properties"]["spec"], spec)
    assert parse_topic("orders", defaulted) == parse_topic("orders", spec)


def test_rack_defaults_to_the_zone_label() -> None:
    assert (
        parse_cluster("demo", {"etcd": ETCD, "rack": {}}).rack_topology_key == "topology.kubernetes.io/zone"
    )
    s = parse_cluster("demo", {"etcd": ETCD, "rack": {"topologyKey": "example.com/rack"}})
    assert s.rack_topology_key == "example.com/rack"


def test_config_values_are_normalized_to_kafka_strings() -> None:
    s = parse_cluster(
        "demo",
        {
            "etcd": ETCD,
            "config": {
                "retention.ms": 60000,
                "auto.create.topics.enable": False,
                "min.cleanable.dirty.ratio": 0.25,
            },
        },
    )
    assert s.config == {
        "auto.create.topics.enable": "false",
        "min.cleanable.dirty.ratio": "0.25",
        "retention.ms": "60000",
    }


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({"replicas": 0}, "spec.replicas must be >= 1"),
        ({"replicas": "3"}, "spec.replicas must be an integer"),
        ({"replicas": 3}, "spec.etcd is required"),
        ({"replicas": 1, "etcd": {}}, "exactly one of endpoints or managed"),
        ({"replicas": 1, "etcd": {"endpoints": ["etcd:2379"]}}, "must look like http://host:port"),
        ({"replicas": 1, "etcd": {"managed": {"replicas": 2}}}, "must be 1, 3 or 5"),
        (
            {"replicas": 1, "etcd": {"managed": {}, "auth": {"user": "u", "passwordSecret": {"name": "p"}}}},
            "are for external endpoints, not a managed etcd",
        ),
        ({"replicas": 1, "etcd": {**ETCD, "auth": {"user": "u"}}}, "needs user and passwordSecret"),
        ({"replicas": 1, "etcd": {**ETCD, "tls": {"caSecret": {}}}}, "tls.caSecret.name is required"),
        ({"replicas": 1, "metrics": {"host": "127.0.0.1"}}, "metrics.host must be one of 0.0.0.0, ::"),
        ({"replicas": 1, "storage": {"size": "ten"}}, "spec.storage.size 'ten' is not valid"),
        ({"replicas": 1, "storage": {"type": "tmpfs"}}, "spec.storage.type must be one of"),
        ({"replicas": 1, "imagePullPolicy": "Sometimes"}, "imagePullPolicy must be one of"),
        ({"replicas": 1, "config": {"retention.ms": "soon"}}, "retention.ms must be an integer"),
        ({"replicas": 1, "config": {"no.such.setting": 1}}, "unknown broker config 'no.such.setting'"),
        ({"replicas": 1, "config": {"broker.id": 3}}, "broker.id is set by the operator"),
        ({"replicas": 1, "config": {"num.partitions": 0}}, "num.partitions=0: must be an integer from 1 to"),
        ({"replicas": 1, "config": {"auto.create.topics.enable": "maybe"}}, "must be one of true, false"),
        ({"replicas": 1, "config": {"retention.ms": {"a": 1}}}, "must be a string, number or boolean"),
        (
            {"replicas": 1, "listeners": [{"name": "a", "port": 9092}, {"name": "b", "port": 9092}]},
            "names and ports must be unique",
        ),
        (
            {"replicas": 1, "listeners": [{"name": "ext", "port": 9094, "type": "nodeport"}]},
            "needs an internal listener",
        ),
        (
            {"replicas": 1, "listeners": [{"name": "a", "port": 9092, "authentication": "tls"}]},
            "needs tls: true",
        ),
        (
            {"replicas": 1, "listeners": [{"name": "a", "port": 9092, "authentication": "kerberos"}]},
            "must be one of none, scram-sha-512, plain, tls",
        ),
        (
            {"replicas": 1, "listeners": [{"name": "replication", "port": 9095}]},
            "the operator's replication listener",
        ),
        (
            {"replicas": 1, "listeners": [{"name": "a", "port": 9092, "nodePort": 31000}]},
            "nodePort applies to type nodeport only",
        ),
        ({"replicas": 1, "authorization": {"enabled": True}}, "needs a listener with authentication"),
        (
            {"replicas": 1, "authorization": {"superUsers": ["admin"]}},
            "must be a principal like User:admin",
        ),
        (
            {"replicas": 1, "certificates": {"validityDays": 30, "renewBeforeDays": 30}},
            "renewBeforeDays must be less than validityDays",
        ),
        ({"replicas": 1, "certificates": {"issuer": "cert-manager"}}, "certManagerIssuer is required"),
        ({"replicas": 1, "listeners": [{"name": "plain", "port": 80}]}, "between 1024 and 65535"),
        ({"replicas": 1, "metrics": {"port": 9092}}, "must differ from the listener port"),
        (
            {"replicas": 1, "schemaRegistry": {"enabled": True, "port": 9308}},
            "schemaRegistry.port must differ from the listener and metrics ports",
        ),
        (
            {"replicas": 1, "schemaRegistry": {"enabled": True, "tls": True}},
            "schemaRegistry.tls uses the brokers' certificate: give a listener tls true",
        ),
        (
            {
                "replicas": 1,
                "schemaRegistry": {"enabled": True, "basicAuth": True},
                "listeners": [{"name": "plain", "port": 9092}, {"name": "tls", "port": 9093, "tls": True}],
            },
            "schemaRegistry.basicAuth needs a listener with authentication scram-sha-512",
        ),
        ({"replicas": 1, "autoscaling": {"enabled": True}}, "needs maxReplicas and prometheusUrl"),
        (
            {
                "replicas": 1,
                "autoscaling": {"enabled": True, "maxReplicas": 3, "prometheusUrl": "http://p:9090"},
            },
            "targets needs bytesInPerBroker or partitionsPerBroker",
        ),
        ({"replicas": 1, "autoscaling": {"minReplicas": 5, "maxReplicas": 3}}, "must not exceed maxReplicas"),
    ],
)
def test_invalid_cluster_specs_are_reported(spec: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_cluster("demo", spec)
    assert any(fragment in err for err in e.value.errors), e.value.errors


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(SpecError) as e:
        parse_cluster("demo", {"replicas": 0, "storage": {"size": "x"}, "imagePullPolicy": "x", "etcd": ETCD})
    assert len(e.value.errors) == 3


def test_long_cluster_names_are_refused() -> None:
    with pytest.raises(SpecError, match="at most 45 characters"):
        parse_cluster("x" * 46, {"replicas": 1})


def test_topic_name_defaults_to_the_resource_name() -> None:
    t = parse_topic("orders", {"cluster": "demo", "partitions": 3, "config": {"retention.ms": 1000}})
    assert (t.cluster, t.topic_name, t.partitions, t.replication_factor) == ("demo", "orders", 3, None)
    assert t.config == {"retention.ms": "1000"}
    assert parse_topic("x", {"cluster": "demo", "topicName": "Orders.V2"}).topic_name == "Orders.V2"


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({}, "spec.cluster is required"),
        ({"cluster": "Demo"}, "spec.cluster 'Demo' is not valid"),
        ({"cluster": "demo", "topicName": "a b"}, "not a valid Kafka topic name"),
        ({"cluster": "demo", "partitions": 0}, "spec.partitions must be >= 1"),
        ({"cluster": "demo", "replicationFactor": 0}, "replicationFactor must be between 1 and 32767"),
        ({"cluster": "demo", "config": {"cleanup.policy": "forever"}}, "cleanup.policy must be"),
        ({"cluster": "demo", "config": {"nope": "1"}}, "unknown topic config 'nope'"),
    ],
)
def test_invalid_topic_specs_are_reported(spec: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_topic("orders", spec)
    assert any(fragment in err for err in e.value.errors), e.value.errors


def test_cluster_spec_is_a_value() -> None:
    assert parse_cluster("a", {"replicas": 1}) == ClusterSpec(replicas=1)


def test_listeners_authorization_and_certificates() -> None:
    s = parse_cluster(
        "demo",
        {
            "etcd": ETCD,
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
                    "advertisedHosts": [{"broker": 0, "host": "kafka-0.example.com"}],
                },
            ],
            "authorization": {"enabled": True, "superUsers": ["User:admin"]},
            "certificates": {"validityDays": 90, "renewBeforeDays": 10},
        },
    )
    assert [li.security_protocol for li in s.listeners] == ["PLAINTEXT", "SSL", "SASL_SSL"]
    assert s.listener.name == "plain" and s.secured
    ext = s.listeners[2]
    assert ext.external and ext.node_port == 31090 and ext.advertised_hosts == {0: "kafka-0.example.com"}
    assert s.authorization.super_users == ("User:admin",)
    assert (s.certificates.validity_days, s.certificates.renew_before_days) == (90, 10)
    assert not parse_cluster("demo", {"etcd": ETCD}).secured


def test_secure_spec_defaults_equal_the_crd_defaults() -> None:
    spec = {
        "etcd": ETCD,
        "listeners": [
            {"name": "plain", "port": 9092},
            {
                "name": "ext",
                "port": 9094,
                "type": "loadbalancer",
                "tls": True,
                "authentication": "scram-sha-512",
            },
        ],
        "authorization": {"enabled": True},
        "certificates": {"issuer": "cert-manager", "certManagerIssuer": "ca"},
    }
    defaulted = apply_defaults(schema("clusters")["properties"]["spec"], spec)
    assert parse_cluster("demo", defaulted) == parse_cluster("demo", spec)
