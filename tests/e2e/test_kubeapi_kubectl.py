"""The real kubectl (from .tools/bin) against the emulator: apply, get (JSON and tables), patch in
all three formats, scale, delete and wait, schema errors, namespaces, discovery and explain."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest

from tests.e2e.kubeapi.harness import KubeApi

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.kubectl.test
spec:
  group: kubectl.test
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wdg]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas,
              labelSelectorPath: .status.selector}
    additionalPrinterColumns:
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Image, type: string, jsonPath: .spec.image, priority: 1}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [image]
            properties:
              image: {type: string, pattern: '^[a-z0-9./:-]+$'}
              replicas: {type: integer, minimum: 0, maximum: 10, default: 1}
              mode: {type: string, enum: [fast, safe], default: safe}
              labels: {type: object, additionalProperties: {type: string}}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
"""

STS = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: main
        image: busybox:1
        ports: [{containerPort: 80, name: http}]
        env: [{name: A, value: "1"}, {name: B, value: "2"}]
      - name: side
        image: busybox:1
"""


def widget(name: str, **spec: Any) -> str:
    return json.dumps(
        {"apiVersion": "kubectl.test/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}
    )


def get(kube: KubeApi, *args: str) -> Any:
    return json.loads(kube.kubectl("get", *args, "-o", "json").stdout)


@pytest.fixture(scope="module")
def crd(kubeapi: KubeApi) -> str:
    out = kubeapi.kubectl("apply", "-f", "-", input=CRD)
    assert "customresourcedefinition.apiextensions.k8s.io/widgets.kubectl.test created" in out.stdout
    kubeapi.kubectl("wait", "--for=condition=Established", "crd/widgets.kubectl.test", "--timeout=10s")
    return "widgets.kubectl.test"


def test_version_and_discovery(kubeapi: KubeApi, crd: str) -> None:
    version = json.loads(kubeapi.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"].startswith("v1.")
    resources = kubeapi.kubectl("api-resources").stdout
    for line in ("widgets", "statefulsets", "customresourcedefinitions", "leases", "networkpolicies"):
        assert line in resources
    assert "wdg" in kubeapi.kubectl("api-resources", "--api-group=kubectl.test").stdout
    explained = kubeapi.kubectl("explain", "widgets.spec").stdout
    assert "replicas" in explained and "image" in explained


def test_apply_get_and_reapply_custom_resource(kubeapi: KubeApi, crd: str) -> None:
    out = kubeapi.kubectl(
        "apply", "-f", "-", input=widget("w1", image="busybox:1", labels={"a": "1", "b": "2"})
    )
    assert "widget.kubectl.test/w1 created" in out.stdout
    w = get(kubeapi, "widget", "w1")
    assert w["spec"] == {"image": "busybox:1", "labels": {"a": "1", "b": "2"}, "replicas": 1, "mode": "safe"}
    assert w["metadata"]["generation"] == 1
    assert "kubectl.kubernetes.io/last-applied-configuration" in w["metadata"]["annotations"]

    table = kubeapi.kubectl("get", "widgets").stdout.splitlines()
    assert table[0].split() == ["NAME", "REPLICAS", "AGE"]
    assert table[1].split()[:2] == ["w1", "1"]
    wide = kubeapi.kubectl("get", "wdg", "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "REPLICAS", "IMAGE", "AGE"]
    assert kubeapi.kubectl("get", "widget", "w1", "-o", "name").stdout.strip() == "widget.kubectl.test/w1"

    # re-apply with a change and a removed map key: kubectl's 3-way merge patch removes it
    out = kubeapi.kubectl(
        "apply", "-f", "-", input=widget("w1", image="busybox:2", labels={"a": "1"}, replicas=2)
    )
    assert "widget.kubectl.test/w1 configured" in out.stdout
    w = get(kubeapi, "widget", "w1")
    assert w["spec"] == {"image": "busybox:2", "labels": {"a": "1"}, "replicas": 2, "mode": "safe"}
    assert w["metadata"]["generation"] == 2
    out = kubeapi.kubectl(
        "apply", "-f", "-", input=widget("w1", image="busybox:2", labels={"a": "1"}, replicas=2)
    )
    assert "widget.kubectl.test/w1 unchanged" in out.stdout
    assert get(kubeapi, "widget", "w1")["metadata"]["resourceVersion"] == w["metadata"]["resourceVersion"]


def test_invalid_custom_resource_is_rejected_with_the_schema_error(kubeapi: KubeApi, crd: str) -> None:
    out = kubeapi.kubectl("apply", "-f", "-", input=widget("bad", replicas=20, mode="slow"), check=False)
    assert out.returncode != 0
    assert 'The Widget "bad" is invalid' in out.stderr
    assert "spec.image: Required value" in out.stderr
    assert 'spec.mode: Unsupported value: "slow": supported values: "fast", "safe"' in out.stderr
    assert (
        "spec.replicas: Invalid value: 20: spec.replicas in body should be less than or equal to 10"
        in out.stderr
    )

    out = kubeapi.kubectl("apply", "-f", "-", input=widget("bad", image="x", bogus=1), check=False)
    assert out.returncode != 0 and 'unknown field "spec.bogus"' in out.stderr
    out = kubeapi.kubectl("apply", "--validate=false", "-f", "-", input=widget("pruned", image="x", bogus=1))
    assert "bogus" not in get(kubeapi, "widget", "pruned")["spec"]


def test_scale_custom_resource_and_statefulset(kubeapi: KubeApi, crd: str) -> None:
    kubeapi.kubectl("apply", "-f", "-", input=widget("sc", image="busybox"))
    assert "scaled" in kubeapi.kubectl("scale", "widget", "sc", "--replicas=4").stdout
    assert get(kubeapi, "widget", "sc")["spec"]["replicas"] == 4
    out = kubeapi.kubectl("scale", "widget", "sc", "--replicas=40", check=False)
    assert out.returncode != 0 and "less than or equal to 10" in out.stderr
    out = kubeapi.kubectl("scale", "widget", "sc", "--current-replicas=3", "--replicas=5", check=False)
    assert out.returncode != 0

    kubeapi.kubectl("apply", "-f", "-", input=STS)
    kubeapi.kubectl("scale", "statefulset", "web", "--replicas=3")
    sts = get(kubeapi, "sts", "web")
    assert sts["spec"]["replicas"] == 3 and sts["metadata"]["generation"] == 2
    header, row = kubeapi.kubectl("get", "sts", "web").stdout.splitlines()
    assert header.split() == ["NAME", "READY", "AGE"] and row.split()[:2] == ["web", "0/3"]


def test_strategic_merge_apply_of_builtin_kinds(kubeapi: KubeApi) -> None:
    kubeapi.kubectl("apply", "-f", "-", input=STS.replace("name: web", "name: smp"))
    changed = (
        STS.replace("name: web", "name: smp")
        .replace('env: [{name: A, value: "1"}, {name: B, value: "2"}]', 'env: [{name: B, value: "3"}]')
        .replace(
            "ports: [{containerPort: 80, name: http}]",
            "ports: [{containerPort: 80, name: http}, {containerPort: 81, name: admin}]",
        )
        .replace("      - name: side\n        image: busybox:1\n", "")
    )
    assert "configured" in kubeapi.kubectl("apply", "-f", "-", input=changed).stdout
    pod = get(kubeapi, "sts", "smp")["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["main"]
    assert pod["containers"][0]["env"] == [{"name": "B", "value": "3"}]
    assert [(p["containerPort"], p["protocol"]) for p in pod["containers"][0]["ports"]] == [
        (80, "TCP"),
        (81, "TCP"),
    ]

    out = kubeapi.kubectl(
        "apply", "-f", "-", input=changed.replace("serviceName: web", "serviceName: other"), check=False
    )
    assert out.returncode != 0 and "updates to statefulset spec for fields other than" in out.stderr

    svc = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "svc"},
            "spec": {
                "selector": {"app": "web"},
                "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}],
            },
        }
    )
    kubeapi.kubectl("apply", "-f", "-", input=svc)
    ip = get(kubeapi, "svc", "svc")["spec"]["clusterIP"]
    kubeapi.kubectl("apply", "-f", "-", input=svc.replace(', {"name": "b", "port": 81}', ""))
    s = get(kubeapi, "svc", "svc")
    assert s["spec"]["clusterIP"] == ip and [p["port"] for p in s["spec"]["ports"]] == [80]


def test_patch_json_merge_and_strategic(kubeapi: KubeApi, crd: str) -> None:
    kubeapi.kubectl("apply", "-f", "-", input=widget("p1", image="busybox"))
    kubeapi.kubectl("patch", "widget", "p1", "--type=merge", "-p", '{"spec":{"replicas":3}}')
    kubeapi.kubectl(
        "patch",
        "widget",
        "p1",
        "--type=json",
        "-p",
        '[{"op":"test","path":"/spec/replicas","value":3},{"op":"replace","path":"/spec/image","value":"x"}]',
    )
    assert get(kubeapi, "widget", "p1")["spec"]["image"] == "x"
    out = kubeapi.kubectl(
        "patch",
        "widget",
        "p1",
        "--type=json",
        "-p",
        '[{"op":"test","path":"/spec/replicas","value":9}]',
        check=False,
    )
    assert (
        out.returncode != 0 and "the server rejected our request due to an error in our request" in out.stderr
    )
    out = kubeapi.kubectl(
        "patch", "widget", "p1", "--type=strategic", "-p", '{"spec":{"replicas":1}}', check=False
    )
    assert out.returncode != 0 and "application/strategic-merge-patch+json is not supported" in out.stderr
    out = kubeapi.kubectl(
        "patch", "widget", "p1", "--type=merge", "-p", '{"spec":{"replicas":-1}}', check=False
    )
    assert out.returncode != 0 and "greater than or equal to 0" in out.stderr

    kubeapi.kubectl("apply", "-f", "-", input=STS.replace("name: web", "name: pt"))
    kubeapi.kubectl(
        "patch",
        "sts",
        "pt",
        "-p",
        '{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"busybox:9"}]}}}}',
    )
    containers = get(kubeapi, "sts", "pt")["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("main", "busybox:9"), ("side", "busybox:1")]
    assert containers[0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    kubeapi.kubectl(
        "patch",
        "sts",
        "pt",
        "-p",
        '{"spec":{"template":{"spec":{"containers":[{"name":"side","$patch":"delete"}]}}}}',
    )
    assert [c["name"] for c in get(kubeapi, "sts", "pt")["spec"]["template"]["spec"]["containers"]] == [
        "main"
    ]
    kubeapi.kubectl("label", "sts", "pt", "tier=db")
    kubeapi.kubectl("annotate", "sts", "pt", "note=hi")
    meta = get(kubeapi, "sts", "pt")["metadata"]
    assert meta["labels"] == {"tier": "db"} and meta["annotations"]["note"] == "hi"


def test_delete_wait_and_finalizers(kubeapi: KubeApi, crd: str) -> None:
    kubeapi.kubectl("apply", "-f", "-", input=widget("d1", image="busybox"))
    assert 'widget.kubectl.test "d1" deleted' in kubeapi.kubectl("delete", "widget", "d1").stdout
    kubeapi.kubectl("wait", "--for=delete", "widget/d1", "--timeout=5s")

    kubeapi.kubectl("create", "configmap", "held", "--from-literal=a=b")
    kubeapi.kubectl("patch", "configmap", "held", "-p", '{"metadata":{"finalizers":["e2e.test/hold"]}}')
    kubeapi.kubectl("delete", "configmap", "held", "--wait=false")
    assert get(kubeapi, "configmap", "held")["metadata"]["deletionTimestamp"]
    out = kubeapi.kubectl("wait", "--for=delete", "configmap/held", "--timeout=1s", check=False)
    assert out.returncode != 0
    # a kubectl wait that is already watching when the last finalizer goes
    assert kubeapi.tools is not None
    cmd = [str(kubeapi.tools.kubectl), "wait", "--for=delete", "configmap/held", "--timeout=10s"]
    with subprocess.Popen(cmd, env=kubeapi.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as waiter:
        time.sleep(0.5)
        kubeapi.kubectl(
            "patch",
            "configmap",
            "held",
            "--type=json",
            "-p",
            '[{"op":"remove","path":"/metadata/finalizers"}]',
        )
        stdout, stderr = waiter.communicate(timeout=15)
        assert waiter.returncode == 0, stderr
        assert b"condition met" in stdout
    out = kubeapi.kubectl("get", "configmap", "held", check=False)
    assert out.returncode != 0 and 'configmaps "held" not found' in out.stderr


def test_namespace_deletion_removes_its_contents(kubeapi: KubeApi, crd: str) -> None:
    kubeapi.kubectl("create", "namespace", "doomed")
    kubeapi.kubectl("apply", "-n", "doomed", "-f", "-", input=widget("in-ns", image="busybox"))
    kubeapi.kubectl("create", "-n", "doomed", "configmap", "cm")
    kubeapi.kubectl("delete", "namespace", "doomed", "--timeout=10s")
    out = kubeapi.kubectl("get", "namespace", "doomed", check=False)
    assert out.returncode != 0 and "NotFound" in out.stderr
    assert get(kubeapi, "widgets", "-A")["items"] == [] or all(
        w["metadata"]["namespace"] != "doomed" for w in get(kubeapi, "widgets", "-A")["items"]
    )
    out = kubeapi.kubectl("create", "-n", "doomed", "configmap", "late", check=False)
    assert out.returncode != 0 and 'namespaces "doomed" not found' in out.stderr
