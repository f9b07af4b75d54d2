"""charts/brook on a real control plane: `helm install`/`upgrade`/`uninstall` (the real garbage collector
removes what the release's Deployment owned), and the operator run with the chart's ServiceAccount and
ClusterRole, never as admin, so a verb missing from the chart's RBAC fails here: the real authorizer
answers every declared permission, and the running operator reconciles a Cluster without one 403."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from brook_operator.kube import API_SERVER_CHECKED, KOPF_PERMISSIONS, OPERATOR_PERMISSIONS
from tests.e2e.controlplane import Kube
from tests.e2e.operator_harness import tail

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CHART = str(REPO / "charts" / "brook")


def _get(kube: Kube, *args: str) -> Any:
    return json.loads(kube.kubectl("get", *args, "-o", "json").stdout)


@pytest.mark.timeout(180)
def test_helm_install_upgrade_uninstall(kube: Kube) -> None:
    ns = "cp-helm"
    # Everything the chart can render: its etcd, a Cluster and a User besides the operator.
    values = ["--set", "etcd.enabled=true", "--set", "cluster.enabled=true", "--set", "users[0].name=alice"]
    kube.helm("install", "hb", CHART, "-n", ns, "--create-namespace", *values, timeout=120)
    releases = json.loads(kube.helm("list", "-n", ns, "-o", "json").stdout)
    assert [(r["name"], r["status"], r["revision"]) for r in releases] == [("hb", "deployed", "1")]
    assert _get(kube, "deployment", "hb-brook-operator", "-n", ns)["spec"]["replicas"] == 2
    assert _get(kube, "cluster", "brook", "-n", ns)["spec"]["replicas"] == 3
    assert _get(kube, "statefulset", "hb-brook-etcd", "-n", ns)["spec"]["replicas"] == 3
    # The real Deployment controller acted on it: a ReplicaSet owned by the Deployment.
    kube.wait_for(
        lambda: _get(kube, "replicasets", "-n", ns)["items"], timeout=30, interval=0.5, what="a ReplicaSet"
    )

    more = ["--set", "operator.replicas=1", "--set", "cluster.spec.replicas=5"]
    kube.helm("upgrade", "hb", CHART, "-n", ns, *values, *more, timeout=120)
    assert _get(kube, "deployment", "hb-brook-operator", "-n", ns)["spec"]["replicas"] == 1
    assert _get(kube, "cluster", "brook", "-n", ns)["spec"]["replicas"] == 5
    assert json.loads(kube.helm("list", "-n", ns, "-o", "json").stdout)[0]["revision"] == "2"

    kube.helm("uninstall", "hb", "-n", ns, "--wait", "--timeout=60s", timeout=90)
    assert kube.kubectl("get", "clusterrole", "hb-brook-operator", check=False).returncode != 0
    # The garbage collector removes the ReplicaSets and pods the Deployment and StatefulSet owned.
    kube.wait_for(
        lambda: (
            not kube.kubectl("get", "replicasets,pods,clusters,users", "-n", ns, "-o", "name").stdout.strip()
        ),
        timeout=60,
        interval=0.5,
        what="the garbage collector to remove the release's ReplicaSets and pods",
    )
    # helm never deletes the CRDs of crds/ (documented in operator/README.md).
    assert kube.kubectl("get", "crd", "clusters.brook.dev", check=False).returncode == 0


# ---------------------------------------------------------------- the operator's RBAC, for real

RBAC_NS = "cp-rbac"
RELEASE = "rbac"  # names: rbac-brook-operator (ServiceAccount, ClusterRole), rbac-brook-broker-rack
OPERATOR = f"{RELEASE}-brook-operator"


@pytest.fixture(scope="module")
def operator_account(kube: Kube) -> Iterator[Kube]:
    """The chart installed (its operator pods stay unscheduled: no node runs this namespace); a handle
    that is the chart's ServiceAccount."""
    kube.helm("install", RELEASE, CHART, "-n", RBAC_NS, "--create-namespace", timeout=120)
    try:
        yield kube.as_service_account(RBAC_NS, OPERATOR)
    finally:
        kube.helm("uninstall", RELEASE, "-n", RBAC_NS, timeout=90, check=False)


def _can(account: Kube, verb: str, group: str, resource: str, namespace: str, name: str = "") -> bool:
    from kubernetes import client

    resource, _, sub = resource.partition("/")
    review = client.V1SelfSubjectAccessReview(
        spec=client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(
                verb=verb, group=group, resource=resource, subresource=sub or None, namespace=namespace,
                name=name or None,
            )
        )
    )  # fmt: skip
    with account.client() as api:
        out = client.AuthorizationV1Api(api).create_self_subject_access_review(review)
    return bool(out.status.allowed)


@pytest.mark.timeout(120)
def test_the_api_server_grants_the_chart_account_every_permission_the_operator_declares(
    operator_account: Kube,
) -> None:
    needed = sorted(OPERATOR_PERMISSIONS | KOPF_PERMISSIONS | API_SERVER_CHECKED)
    refused = []
    for group, resource, verb in needed:
        namespace, name = "some-namespace", ""
        if verb == "bind":  # granted on the chart's rack ClusterRole by name only
            name = f"{RELEASE}-brook-broker-rack"
        if resource == "leases":  # the leader-election Lease: a Role in the release namespace, by name
            namespace, name = RBAC_NS, ("" if verb == "create" else OPERATOR)
        if not _can(operator_account, verb, group, resource, namespace, name):
            refused.append((group, resource, verb))
    assert not refused, f"the chart's ClusterRole lacks: {refused}"
    # Least privilege holds on the real authorizer too: not a cluster admin, no secrets listing.
    assert not _can(operator_account, "list", "", "secrets", "some-namespace")
    assert not _can(operator_account, "update", "coordination.k8s.io", "leases", "some-namespace", OPERATOR)
    assert not _can(
        operator_account, "bind", "rbac.authorization.k8s.io", "clusterroles", "", "cluster-admin"
    )


@contextlib.contextmanager
def _operator(account: Kube, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`brook-operator run` as the chart's Deployment runs it (all namespaces, leader election on its
    Lease), authenticated as the chart's ServiceAccount."""
    env = dict(
        account.env,
        BROOK_OPERATOR_NAMESPACE=RBAC_NS,
        BROOK_OPERATOR_POD_NAME="rbac-test",
        BROOK_OPERATOR_LEADER_ELECTION="true",
        BROOK_OPERATOR_LEASE_NAME=OPERATOR,
        BROOK_OPERATOR_RACK_CLUSTER_ROLE=f"{RELEASE}-brook-broker-rack",
        BROOK_OPERATOR_CLUSTER_RESYNC_SECONDS="2",
        BROOK_OPERATOR_KAFKA_TIMEOUT="2",
        BROOK_OPERATOR_HEALTH_PORT="0",
    )
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "brook-operator"), "run"],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


# A 403 as the API server's status (kopf logs "403, message='Forbidden'"), not a timestamp's ms (",403").
FORBIDDEN = re.compile(r"\b403[,:]| 403 |orbidden")


@pytest.mark.timeout(240)
def test_the_operator_reconciles_with_the_charts_service_account(
    kube: Kube, operator_account: Kube, tmp_path: Path
) -> None:
    ns = "cp-rbac-apps"
    kube.kubectl("create", "namespace", ns)
    doc = yaml.safe_load((REPO / "manifests" / "examples" / "cluster.yaml").read_text())
    doc["metadata"]["namespace"] = ns
    log = tmp_path / "operator.log"
    with _operator(operator_account, log):
        kube.kubectl("apply", "-f", "-", input=json.dumps(doc))

        def reconciled() -> bool:
            names = kube.kubectl("get", "statefulsets,services,poddisruptionbudgets,configmaps", "-n", ns,
                                 "-o", "name").stdout.split()  # fmt: skip
            status = _get(kube, "cluster", "demo", "-n", ns).get("status") or {}
            return (
                "statefulset.apps/demo-broker" in names
                and "statefulset.apps/demo-etcd" in names
                and "poddisruptionbudget.policy/demo-broker" in names
                and bool(status.get("conditions"))
            )

        try:
            kube.wait_for(
                reconciled, timeout=90, interval=1, what="the operator to create the Cluster's objects"
            )
            # The operator reports a refused request in the Cluster's conditions (ReconcileFailed).
            conditions = _get(kube, "cluster", "demo", "-n", ns)["status"]["conditions"]
            refused = [c["message"] for c in conditions if FORBIDDEN.search(c.get("message", ""))]
            assert not refused, refused
            # rack awareness: the operator bound its brokers' ServiceAccount to the chart's rack role
            crbs = _get(kube, "clusterrolebindings")["items"]
            assert any(c["roleRef"]["name"] == f"{RELEASE}-brook-broker-rack" for c in crbs)
            # leader election on the chart's Lease, with the Role the chart gives
            assert _get(kube, "lease", OPERATOR, "-n", RBAC_NS)["spec"]["holderIdentity"] == "rbac-test"
            kube.kubectl("delete", "cluster", "demo", "-n", ns, "--timeout=60s", timeout=70)
        finally:
            text = log.read_text(errors="replace")
            denied = [ln for ln in text.splitlines() if FORBIDDEN.search(ln)]
            assert not denied, (
                "the API server refused the operator:\n" + "\n".join(denied[:10]) + "\n" + tail(log)
            )
