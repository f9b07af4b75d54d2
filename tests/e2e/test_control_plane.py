"""Brook's manifests against a real kube-apiserver (tests/e2e/controlplane), as no offline check can
judge them: `kubectl apply -k manifests/` and the examples under strict field validation, the CRDs'
OpenAPI schemas and CEL rules as the API server compiles and enforces them, Pod Security admission
of the operator's pods, and authentication/RBAC being on at all (a ServiceAccount is refused what it
was not granted)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.controlplane import Kube

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]
CRDS = ("clusters.brook.dev", "topics.brook.dev", "users.brook.dev")
NS = "cp-validation"


@pytest.fixture(scope="module")
def manifests(kube: Kube) -> Kube:
    """`kubectl apply -k manifests/` once for the module, CRDs established, and a namespace to work in."""
    kube.kubectl("apply", "-k", str(REPO / "manifests"), timeout=60)
    kube.kubectl("wait", "--for=condition=Established", *(f"crd/{c}" for c in CRDS), "--timeout=30s")
    kube.kubectl("create", "namespace", NS)
    return kube


def _get(kube: Kube, *args: str) -> Any:
    return json.loads(kube.kubectl("get", *args, "-o", "json").stdout)


def test_the_control_plane_is_the_pinned_release_with_rbac_on(kube: Kube) -> None:
    version = json.loads(kube.kubectl("version", "-o", "json").stdout)["serverVersion"]
    go_mod = (REPO / "tests" / "e2e" / "kube" / "go.mod").read_text()
    assert f"k8s.io/kubernetes {version['gitVersion']}\n" in go_mod, version
    # A ServiceAccount with no bindings may do nothing: RBAC and token authentication are real.
    kube.kubectl("create", "namespace", "cp-nobody")
    kube.kubectl("create", "serviceaccount", "nobody", "-n", "cp-nobody")
    nobody = kube.as_service_account("cp-nobody", "nobody")
    r = nobody.kubectl("get", "pods", "-n", "cp-nobody", check=False)
    assert r.returncode != 0 and "forbidden" in r.stderr, r.stderr
    assert "system:serviceaccount:cp-nobody:nobody" in r.stderr
    # ... and the controller-manager's controllers work: the namespace got its default ServiceAccount.
    assert _get(kube, "serviceaccount", "default", "-n", "cp-nobody")["metadata"]["name"] == "default"


def test_kubectl_apply_k_manifests_establishes_the_crds(manifests: Kube) -> None:
    kube = manifests
    for crd in CRDS:
        conditions = {c["type"]: c["status"] for c in _get(kube, "crd", crd)["status"]["conditions"]}
        assert conditions.get("Established") == "True" and conditions.get("NamesAccepted") == "True", (
            conditions
        )
    # The CEL rules compiled (a rule the server cannot compile, or one over its cost budget, refuses the
    # whole CRD): every rule is served back as written.
    served = _get(kube, "crd", "clusters.brook.dev")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert "x-kubernetes-validations" in served
    # The real Deployment controller made the operator's ReplicaSet, and the restricted Pod Security level
    # of brook-system admitted its pods (a refused pod shows as ReplicaFailure on the ReplicaSet).
    selector = "app.kubernetes.io/name=brook-operator"

    def replica_set() -> Any:
        items = _get(kube, "replicasets", "-n", "brook-system", "-l", selector)["items"]
        return items[0] if items and items[0].get("status", {}).get("observedGeneration") else None

    rs = kube.wait_for(replica_set, timeout=30, interval=0.5, what="the operator's ReplicaSet")
    failures = [c for c in rs["status"].get("conditions") or [] if c["type"] == "ReplicaFailure"]
    assert not failures, failures
    pods = _get(kube, "pods", "-n", "brook-system", "-l", selector)["items"]
    assert pods and all(p["spec"]["serviceAccountName"] == "brook-operator" for p in pods)


def _examples() -> list[Path]:
    examples = REPO / "manifests" / "examples"
    autoscaling = [
        examples / "autoscaling" / f for f in ("cluster.yaml", "consumer.yaml", "hpa-consumer-lag.yaml")
    ]
    return sorted(examples.glob("*.yaml")) + sorted((examples / "quickstart").glob("*.yaml")) + autoscaling


@pytest.mark.parametrize(
    "path", _examples(), ids=lambda p: str(p.relative_to(REPO / "manifests" / "examples"))
)
def test_examples_are_accepted_with_strict_field_validation(manifests: Kube, path: Path) -> None:
    kube = manifests
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc:
            continue
        doc.setdefault("metadata", {})["namespace"] = NS
        r = kube.kubectl(
            "create", "--dry-run=server", "--validate=strict", "-f", "-", "-o", "name",
            input=json.dumps(doc), check=False,
        )  # fmt: skip
        assert r.returncode == 0, f"{path.name}: {doc['kind']}/{doc['metadata'].get('name')}\n{r.stderr}"


CLUSTER: dict[str, Any] = {
    "apiVersion": "brook.dev/v1alpha1",
    "kind": "Cluster",
    "metadata": {"name": "c"},
    "spec": {"replicas": 1},
}
TOPIC: dict[str, Any] = {
    "apiVersion": "brook.dev/v1alpha1",
    "kind": "Topic",
    "metadata": {"name": "t"},
    "spec": {"cluster": "c"},
}
USER: dict[str, Any] = {
    "apiVersion": "brook.dev/v1alpha1",
    "kind": "User",
    "metadata": {"name": "alice"},
    "spec": {"cluster": "c"},
}


def _with(base: dict[str, Any], name: str | None = None, **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(base)
    out["spec"].update(spec)
    if name is not None:
        out["metadata"]["name"] = name
    return out


INTERNAL = {"name": "plain", "port": 9092}
INVALID: list[tuple[str, dict[str, Any], str]] = [
    (
        "replicas-zero",
        _with(CLUSTER, replicas=0),
        "spec.replicas in body should be greater than or equal to 1",
    ),
    (
        "replicas-string",
        _with(CLUSTER, replicas="3"),
        'spec.replicas in body must be of type integer: "string"',
    ),
    (
        "pull-policy",
        _with(CLUSTER, imagePullPolicy="Sometimes"),
        'spec.imagePullPolicy: Unsupported value: "Sometimes"',
    ),
    ("unknown-field", _with(CLUSTER, unknownField=1), 'unknown field "spec.unknownField"'),
    ("name-too-long", _with(CLUSTER, name="c" * 46), "a Cluster name has at most 45 characters"),
    ("managed-etcd-even", _with(CLUSTER, etcd={"managed": {"replicas": 2}}), "spec.etcd.managed.replicas"),
    ("listener-port", _with(CLUSTER, listeners=[{"name": "plain", "port": 80}]), "spec.listeners[0].port"),
    (
        "no-internal-listener",
        _with(CLUSTER, listeners=[{"name": "ext", "port": 9094, "type": "nodeport"}]),
        "listeners needs an internal listener",
    ),
    (
        "mtls-without-tls",
        _with(CLUSTER, listeners=[{**INTERNAL, "authentication": "tls"}]),
        "authentication tls (client certificates) needs tls true",
    ),
    (
        "autoscaling-incomplete",
        _with(CLUSTER, autoscaling={"enabled": True}),
        "autoscaling.enabled needs maxReplicas, prometheusUrl and targets",
    ),
    (
        "iceberg-secret-without-key",
        _with(CLUSTER, iceberg={"secretProperties": {"token": {"name": "polaris"}}}),
        "spec.iceberg.secretProperties.token.key: Required value",
    ),
    ("topic-partitions", _with(TOPIC, partitions=0), "spec.partitions: Invalid value: 0"),
    ("topic-name", _with(TOPIC, topicName="has space"), "spec.topicName"),
    ("topic-cluster-required", {**TOPIC, "spec": {"partitions": 3}}, "spec.cluster: Required value"),
    ("user-name", _with(USER, name="al:ice"), "metadata.name"),
]


@pytest.mark.parametrize(("case", "obj", "message"), INVALID, ids=[c for c, *_ in INVALID])
def test_invalid_specs_are_refused_by_the_api_server(
    manifests: Kube, case: str, obj: dict[str, Any], message: str
) -> None:
    kube = manifests
    r = kube.kubectl("create", "--dry-run=server", "-n", NS, "-f", "-", input=json.dumps(obj), check=False)
    assert r.returncode != 0, f"{case}: accepted"
    assert message in r.stderr, r.stderr


def test_valid_specs_are_accepted_and_defaulted(manifests: Kube) -> None:
    kube = manifests
    config = {"retention.ms": 1, "num.partitions": 3, "auto.create.topics.enable": False}
    for obj in (CLUSTER, TOPIC, USER, _with(CLUSTER, listeners=[INTERNAL], config=config)):
        kube.kubectl("create", "--dry-run=server", "-n", NS, "-f", "-", input=json.dumps(obj))
    # Defaults apply inside a defaulted value on requests (the CEL rules' has() guards cover only the
    # server's check of the defaults themselves).
    out = kube.kubectl(
        "create", "--dry-run=server", "-n", NS, "-f", "-", "-o", "json", input=json.dumps(CLUSTER)
    )
    spec = json.loads(out.stdout)["spec"]
    assert spec["listeners"] == [
        {"name": "plain", "port": 9092, "type": "internal", "tls": False, "authentication": "none"}
    ]
    assert spec["certificates"]["renewBeforeDays"] == 30 and spec["autoscaling"]["enabled"] is False
    # Kept, not pruned: the operator reads these from the stored object.
    secret = {"s3.secret-access-key": {"name": "lake", "key": "secret"}}
    registry = {"enabled": True, "port": 8081, "tls": True, "basicAuth": True}
    cluster = _with(
        CLUSTER,
        iceberg={"warehouse": "s3://lake/brook", "secretProperties": secret},
        schemaRegistry=registry,
    )
    out = kube.kubectl(
        "create", "--dry-run=server", "-n", NS, "-f", "-", "-o", "json", input=json.dumps(cluster)
    )
    stored = json.loads(out.stdout)["spec"]
    assert stored["iceberg"]["secretProperties"] == secret and stored["schemaRegistry"] == registry


def test_immutable_fields_are_refused_on_update(manifests: Kube) -> None:
    """CEL transition rules (self == oldSelf) only run on updates, which a dry run of a create misses."""
    kube = manifests
    topic = _with(TOPIC, name="renamed", topicName="orders")
    kube.kubectl("apply", "-n", NS, "-f", "-", input=json.dumps(topic))
    r = kube.kubectl(
        "apply", "-n", NS, "-f", "-", input=json.dumps(_with(topic, topicName="orders-2")), check=False
    )
    assert r.returncode != 0 and "topicName cannot change" in r.stderr, r.stderr
    cluster = _with(CLUSTER, name="etcd-fixed", etcd={"managed": {"replicas": 3}})
    kube.kubectl("apply", "-n", NS, "-f", "-", input=json.dumps(cluster))
    r = kube.kubectl(
        "apply", "-n", NS, "-f", "-", input=json.dumps(_with(cluster, etcd={"managed": {"replicas": 5}})),
        check=False,
    )  # fmt: skip
    assert r.returncode != 0 and "managed etcd replicas cannot change after creation" in r.stderr, r.stderr
    # No operator runs in this namespace: nothing holds a finalizer, so the deletes go through at once.
    kube.kubectl("delete", "-n", NS, "topic/renamed", "cluster/etcd-fixed", "--wait=true")


SPARK = REPO / "spark-on-k8s"


def test_spark_on_k8s_manifests_are_accepted_and_the_spark_account_may_submit(kube: Kube) -> None:
    """spark-on-k8s/README.md's apply lines (the trimmed SparkApplication CRD standing in for the Spark
    Operator's chart), and the real authorizer granting the `spark` account what spark-submit's
    Kubernetes scheduler calls in cluster mode (executor pods, the driver's Service, ConfigMaps, claims,
    the driver's NetworkPolicy), and nothing outside its namespace."""
    crd = SPARK / "crd" / "sparkapplications.sparkoperator.k8s.io.trimmed.yaml"
    kube.kubectl("apply", "-f", str(crd))
    kube.kubectl("wait", "--for=condition=Established", "crd/sparkapplications.sparkoperator.k8s.io")
    manifests = SPARK / "manifests"
    files = ("namespace.yaml", "rbac.yaml", "checkpoint-pvc.yaml", "create-topics-job.yaml")
    kube.kubectl("apply", *(a for f in files for a in ("-f", str(manifests / f))))
    for app in ("page-view-counts.yaml", "page-view-report.yaml"):
        kube.kubectl("apply", "--dry-run=server", "-f", str(manifests / app))
    spark = kube.as_service_account("spark", "spark")

    def can(*args: str) -> bool:
        return spark.kubectl("auth", "can-i", *args, check=False).stdout.strip() == "yes"

    needed = [
        (verb, resource)
        for resource in (
            "pods",
            "services",
            "configmaps",
            "persistentvolumeclaims",
            "networkpolicies.networking.k8s.io",
        )
        for verb in ("create", "get", "list", "watch", "delete")
    ]
    refused = [(verb, resource) for verb, resource in needed if not can(verb, resource, "-n", "spark")]
    assert not refused, refused
    assert not can("create", "pods", "-n", "default") and not can("list", "secrets", "-n", "spark")
    kube.kubectl("delete", "namespace", "spark", "--wait=false")
