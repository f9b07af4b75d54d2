"""charts/brook: helm lint --strict, helm template, the rendered output validated (built-in kinds with
kubernetes-validate --strict, custom resources against the CRDs), values.schema.json rejections, and
the chart rendering the same operator as manifests/."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from typing import Any

import kubernetes_validate
import pytest
import yaml

from .conftest import Helm
from .rbac import expected, grants
from .support import CHART, KUBE_VERSIONS, MANIFESTS, OBJECT_FILES, REPO, cr_errors, docs, load_all

Render = Callable[..., str]


def _sets(*values: str) -> tuple[str, ...]:
    return tuple(a for v in values for a in ("--set", v))


ALL_ON = _sets(
    "etcd.enabled=true",
    "cluster.enabled=true",
    "operator.podAnnotations.a=b",
    "operator.nodeSelector.kubernetes\\.io/os=linux",
    "imagePullSecrets[0].name=regcred",
    "etcd.storage.storageClassName=fast",
    "etcd.resources.requests.cpu=100m",
)
VARIANTS = {
    "defaults": (),
    "everything": ALL_ON,
    "no-leader-election": _sets("operator.leaderElection.enabled=false", "operator.replicas=1"),
    "other-release-name": ("--set", "fullnameOverride=kafka-platform"),
    "cluster-with-managed-etcd": _sets("cluster.enabled=true", "cluster.spec.etcd.managed.replicas=3"),
}


def by_key(rendered: str) -> dict[str, dict[str, Any]]:
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in docs(rendered)}


@pytest.mark.parametrize("args", [(), ALL_ON], ids=["defaults", "everything"])
def test_helm_lint_strict(helm: Helm, args: tuple[str, ...]) -> None:
    out = helm("lint", "--strict", str(CHART), *args).stdout
    assert "1 chart(s) linted, 0 chart(s) failed" in out


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_rendered_output_is_valid(render: Render, variant: str) -> None:
    objs = docs(render(*VARIANTS[variant]))
    assert objs
    for obj in objs:
        if obj["apiVersion"].startswith("brook.dev/"):
            assert cr_errors(obj) == [], obj["metadata"]["name"]
        else:
            for version in KUBE_VERSIONS:
                kubernetes_validate.validate(obj, version, strict=True)


def test_default_render(render: Render) -> None:
    objs = by_key(render())
    assert set(objs) == {
        "ServiceAccount/brook-operator",
        "ClusterRole/brook-operator",
        "ClusterRoleBinding/brook-operator",
        "Role/brook-operator-leader-election",
        "RoleBinding/brook-operator-leader-election",
        "ClusterRole/brook-broker-rack",
        "Deployment/brook-operator",
    }
    for obj in objs.values():
        if obj["kind"] in ("ServiceAccount", "Deployment", "Role", "RoleBinding"):
            assert obj["metadata"]["namespace"] == "brook-system"


def test_everything_render(render: Render) -> None:
    objs = by_key(render(*ALL_ON))
    assert {
        "Service/brook-etcd",
        "StatefulSet/brook-etcd",
        "PodDisruptionBudget/brook-etcd",
        "Cluster/brook",
    } <= set(objs)
    cluster = objs["Cluster/brook"]
    assert cluster["spec"]["etcd"] == {
        "endpoints": [f"http://brook-etcd-{i}.brook-etcd.brook-system.svc:2379" for i in range(3)]
    }
    etcd = objs["StatefulSet/brook-etcd"]["spec"]
    args = etcd["template"]["spec"]["containers"][0]["args"]
    assert (
        "--initial-cluster="
        + ",".join(f"brook-etcd-{i}=http://brook-etcd-{i}.brook-etcd.brook-system.svc:2380" for i in range(3))
    ) in args
    assert etcd["volumeClaimTemplates"][0]["spec"]["storageClassName"] == "fast"


def test_chart_renders_the_same_operator_as_manifests(render: Render) -> None:
    chart = by_key(render())
    ours = {f"{d['kind']}/{d['metadata']['name']}": d for f in OBJECT_FILES for d in load_all(f)}
    for key in (
        "ClusterRole/brook-operator",
        "Role/brook-operator-leader-election",
        "ClusterRole/brook-broker-rack",
    ):
        assert grants(chart[key]["rules"]) == grants(ours[key]["rules"]), key
    for key in ("ClusterRoleBinding/brook-operator", "RoleBinding/brook-operator-leader-election"):
        assert (
            chart[key]["subjects"] == ours[key]["subjects"] and chart[key]["roleRef"] == ours[key]["roleRef"]
        )
    dep, mine = chart["Deployment/brook-operator"], ours["Deployment/brook-operator"]
    assert dep["spec"]["selector"] == mine["spec"]["selector"]
    assert dep["spec"]["replicas"] == mine["spec"]["replicas"]
    assert dep["spec"]["template"]["spec"] == mine["spec"]["template"]["spec"]


def test_chart_rbac_follows_its_names(render: Render) -> None:
    objs = by_key(render("--set", "fullnameOverride=kafka-platform"))
    want = expected(lease_name="kafka-platform-operator", rack_role="kafka-platform-broker-rack")
    assert grants(objs["ClusterRole/kafka-platform-operator"]["rules"]) == want["ClusterRole"]
    assert grants(objs["Role/kafka-platform-operator-leader-election"]["rules"]) == want["Role"]
    assert grants(objs["ClusterRole/kafka-platform-broker-rack"]["rules"]) == want["RackClusterRole"]
    (c,) = objs["Deployment/kafka-platform-operator"]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["BROOK_OPERATOR_LEASE_NAME"] == "kafka-platform-operator"
    assert env["BROOK_OPERATOR_RACK_CLUSTER_ROLE"] == "kafka-platform-broker-rack"


def test_no_leader_election_drops_the_lease_role(render: Render) -> None:
    objs = by_key(render(*VARIANTS["no-leader-election"]))
    assert "Role/brook-operator-leader-election" not in objs
    (c,) = objs["Deployment/brook-operator"]["spec"]["template"]["spec"]["containers"]
    assert {e["name"]: e.get("value") for e in c["env"]}["BROOK_OPERATOR_LEADER_ELECTION"] == "false"


def test_include_crds_renders_the_manifests_crds(render: Render) -> None:
    crds = [d for d in docs(render("--include-crds")) if d["kind"] == "CustomResourceDefinition"]
    ours = [d for f in sorted((MANIFESTS / "crds").glob("*.yaml")) for d in load_all(f)]
    assert sorted(crds, key=lambda d: d["metadata"]["name"]) == ours


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--set", "operator.replicas=0"), "/operator/replicas"),
        (("--set", "operator.logLevel=LOUD"), "/operator/logLevel"),
        (("--set", "image.pullPolicy=Sometimes"), "/image/pullPolicy"),
        (("--set", "etcd.replicas=2"), "/etcd/replicas"),
        (("--set", "etcd.storage.size=big"), "/etcd/storage/size"),
        (("--set", "cluster.name=Bad_Name"), "/cluster/name"),
        (("--set", "cluster.spec.replicas=0"), "/cluster/spec/replicas"),
        (("--set", "operator.leaderElection.leaseSeconds=1"), "/operator/leaderElection/leaseSeconds"),
        (("--set", "unknownTopLevel=1"), "unknownTopLevel"),
        (("--set", "operator.resources.limits.memory=lots"), "/operator/resources/limits/memory"),
    ],
)
def test_values_schema_rejects_bad_values(helm: Helm, args: tuple[str, ...], fragment: str) -> None:
    p = helm("template", "brook", str(CHART), *args, check=False)
    assert p.returncode != 0
    assert fragment in p.stderr, p.stderr


def test_a_multi_broker_cluster_without_etcd_fails_to_render(helm: Helm) -> None:
    p = helm("template", "brook", str(CHART), "--set", "cluster.enabled=true", check=False)
    assert p.returncode != 0 and "needs etcd" in p.stderr


def test_notes(helm: Helm) -> None:
    out = helm(
        "install", "brook", str(CHART), "--dry-run=client", "--namespace", "brook-system", *ALL_ON
    ).stdout
    notes = out.split("NOTES:", 1)[1]
    assert "Lease brook-system/brook-operator" in notes
    assert "kubectl -n brook-system wait cluster/brook --for=condition=Ready" in notes
    assert "http://brook-etcd-0.brook-etcd.brook-system.svc:2379" in notes
    assert "keep-topic-on-delete" in notes


def test_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert chart["apiVersion"] == "v2" and chart["name"] == "brook"
    assert chart["appVersion"] == version
    assert (CHART / "values.schema.json").exists() and (CHART / "templates" / "NOTES.txt").exists()
