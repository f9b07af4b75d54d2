"""manifests/examples/autoscaling: the autoscaled Cluster, a consumer, and the consumer autoscalers
(KEDA ScaledObject, HPA on the consumer-lag external metric through prometheus-adapter) agree with
each other, with the CRDs, with the broker's recording rules and with Kubernetes' schemas.

That the adapter's query returns the real lag is checked against a real Prometheus and real clients in
tests/integration/test_autoscaling_prometheus.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from .support import KUBE_VERSIONS, MANIFESTS, REPO, cr_errors, load_all

DIR = MANIFESTS / "examples" / "autoscaling"
ALERTS = REPO / "services" / "brook" / "observability" / "assets" / "alerts.yaml"


def one(name: str, kind: str | None = None) -> dict[str, Any]:
    docs = [d for d in load_all(DIR / name) if kind is None or d["kind"] == kind]
    assert len(docs) == 1, (name, kind)
    return docs[0]


def test_the_files() -> None:
    assert {p.name for p in DIR.iterdir()} == {
        "README.md",
        "cluster.yaml",
        "consumer.yaml",
        "keda-scaledobject.yaml",
        "hpa-consumer-lag.yaml",
        "prometheus-adapter-values.yaml",
    }


def test_the_cluster_and_topic_validate_and_parse() -> None:
    from brook_operator.autoscaling.decide import Policy, config_errors
    from brook_operator.spec import parse_cluster, parse_topic

    for doc in load_all(DIR / "cluster.yaml"):
        assert cr_errors(doc) == [], doc["metadata"]["name"]
    cluster = one("cluster.yaml", "Cluster")
    spec = parse_cluster(cluster["metadata"]["name"], cluster["spec"])
    assert spec.autoscaling.enabled
    policy = Policy.from_spec(spec.autoscaling)
    rf = int(spec.config["default.replication.factor"])
    assert config_errors(policy, rf) == []
    assert policy.min_replicas >= rf  # never fewer brokers than the replication factor
    topic = one("cluster.yaml", "Topic")
    assert parse_topic(topic["metadata"]["name"], topic["spec"]).cluster == cluster["metadata"]["name"]


@pytest.mark.parametrize("version", KUBE_VERSIONS)
@pytest.mark.parametrize("name", ["consumer.yaml", "hpa-consumer-lag.yaml"])
def test_built_in_kinds_are_valid(name: str, version: str) -> None:
    for doc in load_all(DIR / name):
        kubernetes_validate.validate(doc, version, strict=True)


def _consumer() -> tuple[dict[str, Any], dict[str, str]]:
    dep = one("consumer.yaml", "Deployment")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return dep, {e["name"]: e["value"] for e in c["env"]}


def _bootstrap() -> str:
    cluster = one("cluster.yaml", "Cluster")
    port = (cluster["spec"].get("listeners") or [{"port": 9092}])[0]["port"]
    return f"{cluster['metadata']['name']}-bootstrap:{port}"  # the bootstrap Service, same namespace


def test_the_keda_scaled_object_targets_the_consumer_group_of_the_deployment() -> None:
    so = one("keda-scaledobject.yaml")
    assert so["apiVersion"] == "keda.sh/v1alpha1" and so["kind"] == "ScaledObject"
    dep, env = _consumer()
    assert so["spec"]["scaleTargetRef"] == {"name": dep["metadata"]["name"]}
    (trigger,) = so["spec"]["triggers"]
    assert trigger["type"] == "kafka"
    meta = trigger["metadata"]
    assert all(isinstance(v, str) for v in meta.values()), "KEDA trigger metadata values are strings"
    assert meta["bootstrapServers"] == env["BOOTSTRAP_SERVERS"] == _bootstrap()
    assert meta["consumerGroup"] == env["GROUP_ID"]
    assert meta["topic"] == env["TOPIC"] == one("cluster.yaml", "Topic")["metadata"]["name"]
    assert int(meta["lagThreshold"]) > 0 and int(meta["activationLagThreshold"]) >= 0
    assert meta["offsetResetPolicy"] in ("earliest", "latest")
    partitions = one("cluster.yaml", "Topic")["spec"]["partitions"]
    assert 1 <= so["spec"]["minReplicaCount"] <= so["spec"]["maxReplicaCount"] <= partitions


def test_the_hpa_reads_the_metric_the_adapter_serves_from_a_recorded_series() -> None:
    hpa = one("hpa-consumer-lag.yaml")
    dep, env = _consumer()
    assert hpa["spec"]["scaleTargetRef"]["name"] == dep["metadata"]["name"]
    (m,) = hpa["spec"]["metrics"]
    ext = m["external"]
    values = yaml.safe_load((DIR / "prometheus-adapter-values.yaml").read_text())
    (rule,) = values["rules"]["external"]
    assert values["rules"]["default"] is False
    assert ext["metric"]["name"] == rule["name"]["as"]
    # The adapter's series is a rule Brook's PrometheusRule records, with the labels the HPA selects by.
    series = rule["seriesQuery"].split("{")[0]
    recorded = {
        r["record"]: r
        for g in yaml.safe_load(ALERTS.read_text())["groups"]
        for r in g["rules"]
        if "record" in r
    }
    assert series in recorded
    assert "sum by (namespace, job, group)" in recorded[series]["expr"]
    assert set(ext["metric"]["selector"]["matchLabels"]) <= {"namespace", "job", "group"}
    assert ext["metric"]["selector"]["matchLabels"]["group"] == env["GROUP_ID"]
    cluster = one("cluster.yaml", "Cluster")["metadata"]["name"]
    assert ext["metric"]["selector"]["matchLabels"]["job"] == f"{cluster}-brokers"  # ServiceMonitor job
    assert rule["resources"] == {"namespaced": False}
    assert "<<.Series>>" in rule["metricsQuery"] and "<<.LabelMatchers>>" in rule["metricsQuery"]
    assert ext["target"]["type"] == "AverageValue"
    partitions = one("cluster.yaml", "Topic")["spec"]["partitions"]
    assert hpa["spec"]["maxReplicas"] <= partitions


def test_the_readme_names_every_file() -> None:
    text = (DIR / "README.md").read_text()
    for p in Path(DIR).glob("*.yaml"):
        assert p.name in text, p.name
