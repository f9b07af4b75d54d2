"""Iceberg topics in the resources: a Topic's spec.iceberg becomes its brook.iceberg.* configs, a
Cluster's spec.iceberg the brokers' BROOK_ICEBERG_* environment."""

from __future__ import annotations

from typing import Any

import pytest

from brook_operator.resources.broker import broker_container, broker_env_config
from brook_operator.spec import SpecError, parse_cluster, parse_topic

from .crd_defaults import schema


def test_a_topics_iceberg_field_sets_its_configs() -> None:
    t = parse_topic(
        "orders",
        {
            "cluster": "demo",
            "config": {"retention.ms": "1000"},
            "iceberg": {"enabled": True, "valueMode": "json", "commitIntervalMs": 5000, "table": "orders_v1"},
        },
    )
    assert t.config == {
        "retention.ms": "1000",
        "brook.iceberg.enabled": "true",
        "brook.iceberg.value.mode": "json",
        "brook.iceberg.commit.interval.ms": "5000",
        "brook.iceberg.table": "orders_v1",
    }


@pytest.mark.parametrize(
    ("iceberg", "fragment"),
    [
        ({"valueMode": "avro"}, "brook.iceberg.value.mode must be one of raw, json, schema"),
        ({"commitIntervalMs": 10}, "brook.iceberg.commit.interval.ms must be an integer from 100"),
        ({"enabled": True, "format": "delta"}, "spec.iceberg: unknown fields format"),
        ({"enabled": [True]}, "spec.iceberg.enabled must be a string, a number or a boolean"),
    ],
)
def test_bad_iceberg_fields_of_a_topic_are_reported(iceberg: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SpecError, match=fragment):
        parse_topic("orders", {"cluster": "demo", "iceberg": iceberg})


def test_a_config_set_twice_is_refused() -> None:
    spec = {"cluster": "demo", "config": {"brook.iceberg.enabled": "false"}, "iceberg": {"enabled": True}}
    with pytest.raises(
        SpecError, match=r"spec\.config sets brook\.iceberg\.enabled, which spec\.iceberg sets"
    ):
        parse_topic("orders", spec)


def test_a_clusters_catalog_reaches_the_brokers_environment() -> None:
    spec = parse_cluster(
        "demo",
        {
            "replicas": 1,
            "schemaRegistry": {"enabled": True, "port": 8081},
            "iceberg": {
                "catalogUri": "http://polaris:8181/api/catalog",
                "warehouse": "s3://lake/brook",
                "properties": {"s3.endpoint": "http://minio:9000", "s3.region": "eu-west-1"},
            },
        },
    )
    env = broker_env_config("demo", "ns", spec, [])
    assert {k: v for k, v in env.items() if k.startswith("BROOK_ICEBERG")} == {
        "BROOK_ICEBERG_CATALOG_URI": "http://polaris:8181/api/catalog",
        "BROOK_ICEBERG_WAREHOUSE": "s3://lake/brook",
        "BROOK_ICEBERG_SCHEMA_REGISTRY_URL": "http://127.0.0.1:8081",  # each broker's own registry
        "BROOK_ICEBERG_CATALOG_PROPERTY": "s3.endpoint=http://minio:9000 s3.region=eu-west-1",
    }
    plain = broker_env_config("demo", "ns", parse_cluster("demo", {"replicas": 1}), [])
    assert not any(k.startswith("BROOK_ICEBERG") for k in plain)
    with pytest.raises(SpecError, match=r"spec.iceberg.properties must map names to strings"):
        parse_cluster("demo", {"replicas": 1, "iceberg": {"properties": {"s3.region": 3}}})


def test_the_crds_know_the_fields() -> None:
    topic = schema("topics")["properties"]["spec"]["properties"]["iceberg"]["properties"]
    assert set(topic) == {"enabled", "namespace", "table", "commitIntervalMs", "valueMode", "partitionSpec"}
    cluster = schema("clusters")["properties"]["spec"]["properties"]["iceberg"]["properties"]
    assert set(cluster) == {"catalogUri", "warehouse", "schemaRegistryUrl", "properties", "secretProperties"}
    ref = cluster["secretProperties"]["additionalProperties"]
    assert ref["required"] == ["name", "key"] and set(ref["properties"]) == {"name", "key"}


def test_secret_properties_reach_the_broker_from_the_secret() -> None:
    """An S3 key or a REST catalog token comes from a Secret into the broker container's environment
    under pyiceberg's name for the property of the catalog `brook`, never into the ConfigMap."""
    spec = parse_cluster(
        "demo",
        {
            "replicas": 1,
            "iceberg": {
                "warehouse": "s3://lake/brook",
                "secretProperties": {
                    "s3.access-key-id": {"name": "lake", "key": "id"},
                    "s3.secret-access-key": {"name": "lake", "key": "secret"},
                    "token": {"name": "polaris", "key": "token"},
                },
            },
        },
    )
    env = {e["name"]: e for e in broker_container("demo", "ns", spec, "brook:dev")["env"]}
    assert env["PYICEBERG_CATALOG__BROOK__S3__ACCESS_KEY_ID"]["valueFrom"] == {
        "secretKeyRef": {"name": "lake", "key": "id"}
    }
    assert env["PYICEBERG_CATALOG__BROOK__S3__SECRET_ACCESS_KEY"]["valueFrom"] == {
        "secretKeyRef": {"name": "lake", "key": "secret"}
    }
    assert env["PYICEBERG_CATALOG__BROOK__TOKEN"]["valueFrom"] == {
        "secretKeyRef": {"name": "polaris", "key": "token"}
    }
    assert not any("secret" in v.lower() for v in broker_env_config("demo", "ns", spec, []).values())


def test_pyiceberg_reads_the_variables_as_the_properties(monkeypatch: pytest.MonkeyPatch) -> None:
    """The variable names are the ones pyiceberg's own configuration turns back into the properties."""
    from pyiceberg.utils.config import Config

    spec = parse_cluster(
        "demo",
        {"replicas": 1, "iceberg": {"secretProperties": {"s3.secret-access-key": {"name": "s", "key": "k"}}}},
    )
    for e in spec.iceberg.secret_env():
        monkeypatch.setenv(e["name"], "from-the-secret")
    assert Config().get_catalog_config("brook") == {"s3.secret-access-key": "from-the-secret"}


@pytest.mark.parametrize(
    ("secret_properties", "fragment"),
    [
        ({"S3.Key": {"name": "s", "key": "k"}}, "'S3.Key' is not a catalog property name"),
        ({"token": {"name": "s"}}, r"secretProperties.token must be \{name: <Secret>, key: <key in it>\}"),
        ({"token": "s/k"}, r"secretProperties.token must be"),
        ({"s3.region": {"name": "s", "key": "k"}}, "s3.region is also in properties"),
    ],
)
def test_bad_secret_properties_are_reported(secret_properties: dict[str, Any], fragment: str) -> None:
    iceberg = {"properties": {"s3.region": "eu"}, "secretProperties": secret_properties}
    with pytest.raises(SpecError, match=fragment):
        parse_cluster("demo", {"replicas": 1, "iceberg": iceberg})
