"""The Kubernetes quick start (operator/README.md), offline: `kubectl apply -k manifests/` applies the
namespace first and everything the operator needs; the quick-start helm values render valid objects;
the laptop-sized Cluster, its Topic and the client pod are valid, fit together, and need no zone
labels."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import kubernetes_validate
import pytest
import yaml

from .support import CHART, KUBE_VERSIONS, MANIFESTS, cr_errors, docs, ensure_helm, load_all

QUICKSTART = MANIFESTS / "examples" / "quickstart"
VALUES = CHART / "values-quickstart.yaml"
Render = Callable[..., str]


def key(d: dict[str, Any]) -> str:
    return f"{d['kind']}/{d['metadata']['name']}"


def objects(name: str) -> dict[str, dict[str, Any]]:
    return {key(d): d for d in load_all(QUICKSTART / name)}


def test_kustomization_applies_the_namespace_first_and_every_operator_object() -> None:
    kubectl = ensure_helm().parent / "kubectl"  # scripts/install-kube-tools installs both
    out = subprocess.run(
        [str(kubectl), "kustomize", str(MANIFESTS)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    rendered = [key(d) for d in docs(out)]
    files = ["namespace.yaml", *(f"crds/{p.name}" for p in sorted((MANIFESTS / "crds").glob("*.yaml")))]
    files += ["rbac.yaml", "operator.yaml"]
    assert sorted(rendered) == sorted(key(d) for f in files for d in load_all(MANIFESTS / f))
    assert rendered[0] == "Namespace/brook-system"
    assert all(k.startswith("CustomResourceDefinition/") for k in rendered[1:4]), rendered
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert kustomization["resources"] == files


def test_quickstart_values_render_valid_objects(render: Render) -> None:
    objs = docs(render("-f", str(VALUES)))
    assert objs
    for obj in objs:
        for version in KUBE_VERSIONS:
            kubernetes_validate.validate(obj, version, strict=True)
    (dep,) = [o for o in objs if o["kind"] == "Deployment"]
    assert dep["spec"]["replicas"] == 1
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert c["image"] == "ghcr.io/brook-dev/brook:0.1.0" and c["imagePullPolicy"] == "IfNotPresent"
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["BROOK_DEFAULT_IMAGE"] == c["image"]  # the brokers run the image loaded into the nodes


def test_quickstart_cluster_topic_and_client() -> None:
    from brook_operator.resources.names import bootstrap_service
    from brook_operator.spec import parse_cluster, parse_topic

    cluster = objects("cluster.yaml")["Cluster/quickstart"]
    topic = objects("topic.yaml")["Topic/greetings"]
    pod = objects("client.yaml")["Pod/quickstart-client"]
    assert sorted(p.name for p in QUICKSTART.glob("*.yaml")) == ["client.yaml", "cluster.yaml", "topic.yaml"]
    assert cr_errors(cluster) == [] and cr_errors(topic) == []
    for version in KUBE_VERSIONS:
        kubernetes_validate.validate(pod, version, strict=True)

    spec = parse_cluster("quickstart", cluster["spec"])
    assert 1 <= spec.replicas <= 3 and spec.rack_topology_key is None  # no zone labels needed
    assert spec.etcd is not None and spec.etcd.managed is not None and spec.etcd.managed.replicas == 1
    requests = cluster["spec"]["resources"]["requests"]
    assert requests["cpu"].endswith("m") and int(requests["cpu"][:-1]) <= 250
    t = parse_topic("greetings", topic["spec"])
    assert topic["spec"]["cluster"] == "quickstart" and t.replication_factor <= spec.replicas

    (c,) = pod["spec"]["containers"]
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["BROOK_BOOTSTRAP"] == f"{bootstrap_service('quickstart')}:{spec.listeners[0].port}"
    assert "brook produce greetings" in c["args"][0] and "brook consume greetings" in c["args"][0]
    values = yaml.safe_load(VALUES.read_text())
    assert c["image"] == f"{values['image']['repository']}:{values['image']['tag']}"


@pytest.mark.parametrize("readme", ["README.md", "operator/README.md"])
def test_readmes_point_at_the_quickstart(readme: str) -> None:
    text = (MANIFESTS.parent / readme).read_text()
    assert "kubectl apply -k manifests/" in text
    assert "manifests/examples/quickstart/" in text
