"""The CRDs (manifests/crds, the single source of the schemas): structural, valid, and the examples
and the chart's copies agree with them."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from openapi_schema_validator import OAS30Validator

from .support import CHART, KUBE_VERSIONS, MANIFESTS, cr_errors, crds, load_all, walk_schema

EXAMPLES = sorted((MANIFESTS / "examples").glob("*.yaml"))
VALUE_KEYWORDS_ONLY = {"required", "anyOf", "oneOf", "allOf", "not"}


def schema_of(kind: str) -> dict[str, Any]:
    s: dict[str, Any] = crds()[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return s


def test_both_crds_exist_with_names_and_categories() -> None:
    c = crds()
    assert set(c) == {"Cluster", "Topic", "User"}
    assert c["User"]["metadata"]["name"] == "users.brook.dev"
    assert c["Cluster"]["metadata"]["name"] == "clusters.brook.dev"
    assert c["Topic"]["metadata"]["name"] == "topics.brook.dev"
    for crd in c.values():
        assert crd["spec"]["group"] == "brook.dev"
        assert crd["spec"]["scope"] == "Namespaced"
        assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1"]
        assert crd["spec"]["names"]["shortNames"]
        assert crd["spec"]["names"]["categories"] == ["brook"]
        assert crd["spec"]["versions"][0]["subresources"]["status"] == {}


@pytest.mark.parametrize("version", KUBE_VERSIONS)
@pytest.mark.parametrize("path", sorted((MANIFESTS / "crds").glob("*.yaml")), ids=lambda p: p.name)
def test_crds_are_valid_kubernetes_objects(path: Path, version: str) -> None:
    for doc in load_all(path):
        kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("kind", ["Cluster", "Topic", "User"])
def test_schemas_are_structural(kind: str) -> None:
    for path, node in walk_schema(schema_of(kind)):
        if node.get("x-kubernetes-int-or-string"):
            assert "type" not in node, path
            continue
        assert "type" in node, f"{path} has no type"
        if node["type"] == "object":
            assert not ("properties" in node and "additionalProperties" in node), path
        for key in ("anyOf", "oneOf", "allOf"):
            for branch in node.get(key, []):
                assert set(branch) <= VALUE_KEYWORDS_ONLY, f"{path}.{key} may only hold value validations"


@pytest.mark.parametrize("kind", ["Cluster", "Topic"])
def test_defaults_are_valid_values(kind: str) -> None:
    for path, node in walk_schema(schema_of(kind)):
        if "default" in node:
            sub = {k: v for k, v in node.items() if k != "default"}
            errors = list(OAS30Validator(sub).iter_errors(node["default"]))
            assert not errors, f"{path}: default {node['default']!r}: {errors[0].message}"


def test_cluster_scale_subresource_and_status() -> None:
    v = crds()["Cluster"]["spec"]["versions"][0]
    assert v["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.labelSelector",
    }
    status = v["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    for field in (
        "conditions",
        "observedGeneration",
        "readyBrokers",
        "bootstrapServers",
        "controllerId",
        "underReplicatedPartitions",
        "replicas",
        "labelSelector",
    ):
        assert field in status, field
    cond = status["conditions"]["items"]["properties"]
    assert cond["type"]["enum"] == ["Ready", "Progressing", "Degraded"]
    assert {"status", "reason", "message", "lastTransitionTime", "observedGeneration"} <= set(cond)


def test_topic_status() -> None:
    status = schema_of("Topic")["properties"]["status"]["properties"]
    assert {"conditions", "observedGeneration", "topicId", "partitions", "topicName"} <= set(status)


def _resolves(schema: dict[str, Any], json_path: str) -> bool:
    node: dict[str, Any] = schema
    for part in re.sub(r"\[\?\(.*?\)\]", "[]", json_path).lstrip(".").split("."):
        name = part.split("[", 1)[0]
        props = node.get("properties") or {}
        if name not in props:
            return False
        node = props[name]
        if "[" in part:
            node = node.get("items") or {}
    return True


@pytest.mark.parametrize("kind", ["Cluster", "Topic"])
def test_printer_columns_point_at_schema_fields(kind: str) -> None:
    v = crds()[kind]["spec"]["versions"][0]
    cols = v["additionalPrinterColumns"]
    assert {"Ready", "Age"} <= {c["name"] for c in cols} or {"Status", "Age"} <= {c["name"] for c in cols}
    for c in cols:
        if c["jsonPath"].startswith(".metadata"):
            continue
        assert _resolves(v["schema"]["openAPIV3Schema"], c["jsonPath"]), c


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_validate_against_the_crds(path: Path) -> None:
    found = load_all(path)
    assert found
    for doc in found:
        assert cr_errors(doc) == [], doc["metadata"]["name"]


def test_examples_parse_in_the_operator() -> None:
    from brook_operator.spec import parse_cluster, parse_topic
    from brook_operator.user_spec import parse_user

    parsers = {"Cluster": parse_cluster, "Topic": parse_topic, "User": parse_user}
    for path in EXAMPLES:
        for doc in load_all(path):
            parsers[doc["kind"]](doc["metadata"]["name"], doc["spec"])


GOOD_CLUSTER = {
    "apiVersion": "brook.dev/v1alpha1",
    "kind": "Cluster",
    "metadata": {"name": "c"},
    "spec": {"replicas": 1},
}
GOOD_TOPIC = {
    "apiVersion": "brook.dev/v1alpha1",
    "kind": "Topic",
    "metadata": {"name": "t"},
    "spec": {"cluster": "c"},
}


def _with(base: dict[str, Any], **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(base)
    out["spec"].update(spec)
    return out


@pytest.mark.parametrize(
    ("obj", "fragment"),
    [
        (_with(GOOD_CLUSTER, replicas=0), "spec/replicas"),
        (_with(GOOD_CLUSTER, replicas="3"), "spec/replicas"),
        (_with(GOOD_CLUSTER, imagePullPolicy="Sometimes"), "spec/imagePullPolicy"),
        (_with(GOOD_CLUSTER, storage={"size": "lots"}), "spec/storage/size"),
        (_with(GOOD_CLUSTER, storage={"type": "tmpfs"}), "spec/storage/type"),
        (_with(GOOD_CLUSTER, unknownField=1), "spec: Additional properties"),
        (_with(GOOD_CLUSTER, etcd={"endpoints": ["http://a:1"], "managed": {}}), "spec/etcd"),
        (_with(GOOD_CLUSTER, etcd={}), "spec/etcd"),
        (_with(GOOD_CLUSTER, etcd={"managed": {"replicas": 2}}), "spec/etcd/managed/replicas"),
        (_with(GOOD_CLUSTER, etcd={"endpoints": ["etcd:2379"]}), "spec/etcd/endpoints/0"),
        (_with(GOOD_CLUSTER, listeners=[{"name": "plain", "port": 80}]), "spec/listeners/0/port"),
        (_with(GOOD_CLUSTER, listeners=[{"name": "Plain", "port": 9092}]), "spec/listeners/0/name"),
        (_with(GOOD_CLUSTER, metrics={"port": 99999}), "spec/metrics/port"),
        (
            _with(
                GOOD_CLUSTER,
                listeners=[
                    {
                        "name": "sso",
                        "port": 9092,
                        "authentication": "oauth",
                        "oauth": {"jwksEndpointUri": "idp/keys"},
                    }
                ],
            ),
            "spec/listeners/0/oauth/jwksEndpointUri",
        ),
        (
            _with(GOOD_CLUSTER, autoscaling={"prometheusUrl": "prometheus:9090"}),
            "spec/autoscaling/prometheusUrl",
        ),
        (_with(GOOD_CLUSTER, autoscaling={"targets": {}}), "spec/autoscaling/targets"),
        (_with(GOOD_CLUSTER, resources={"limits": {"memory": "lots"}}), "spec/resources/limits/memory"),
        (_with(GOOD_TOPIC, partitions=0), "spec/partitions"),
        (_with(GOOD_TOPIC, replicationFactor=0), "spec/replicationFactor"),
        (_with(GOOD_TOPIC, topicName="has space"), "spec/topicName"),
        (_with(GOOD_TOPIC, cluster="Upper"), "spec/cluster"),
        ({**GOOD_TOPIC, "spec": {"partitions": 3}}, "'cluster' is a required property"),
    ],
)
def test_invalid_resources_are_rejected(obj: dict[str, Any], fragment: str) -> None:
    errors = cr_errors(obj)
    assert any(fragment in e for e in errors), errors


def test_minimal_resources_are_accepted() -> None:
    assert cr_errors(GOOD_CLUSTER) == []
    assert cr_errors(GOOD_TOPIC) == []
    assert (
        cr_errors(_with(GOOD_CLUSTER, config={"retention.ms": 1, "auto.create.topics.enable": False})) == []
    )
    assert cr_errors(_with(GOOD_CLUSTER, resources={"requests": {"cpu": "500m", "memory": 1073741824}})) == []


def test_chart_crds_are_byte_identical_to_manifests() -> None:
    ours = sorted(p.name for p in (MANIFESTS / "crds").glob("*"))
    theirs = sorted(p.name for p in (CHART / "crds").glob("*"))
    assert ours == theirs
    for name in ours:
        assert (CHART / "crds" / name).read_bytes() == (MANIFESTS / "crds" / name).read_bytes(), (
            f"charts/brook/crds/{name} differs from manifests/crds/{name}: copy it over "
            f"(cp manifests/crds/*.yaml charts/brook/crds/)"
        )
