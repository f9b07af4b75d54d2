"""A real kopf operator (subprocess, `kopf run --standalone -A`) against the emulator: handlers,
status, kopf's finalizer, its events, and garbage collection of what it created."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.kubeapi.harness import KubeApi

pytest.importorskip("kopf")
pytest.importorskip("kubernetes")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

OPERATOR = Path(__file__).parent / "operators" / "kopf_brookies.py"

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: brookies.e2e.brook.test
spec:
  group: e2e.brook.test
  scope: Namespaced
  names: {plural: brookies, singular: brookie, kind: Brookie}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, default: 1}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"""


def brookie(name: str, size: int) -> str:
    return json.dumps(
        {
            "apiVersion": "e2e.brook.test/v1",
            "kind": "Brookie",
            "metadata": {"name": name},
            "spec": {"size": size},
        }
    )


@pytest.fixture
def operator(kubeapi: KubeApi, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    kubeapi.kubectl("apply", "-f", "-", input=CRD)
    kubeapi.kubectl("wait", "--for=condition=Established", "crd/brookies.e2e.brook.test", "--timeout=10s")
    log = tmp_path / "kopf.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kopf",
                "run",
                "--standalone",
                "--all-namespaces",
                "--verbose",
                str(OPERATOR),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=kubeapi.env,
            cwd=tmp_path,
        )
    try:
        yield proc, log
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def get_json(kube: KubeApi, *args: str) -> Any:
    out = kube.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def test_kopf_operator_lifecycle(kubeapi: KubeApi, operator: tuple[subprocess.Popen[bytes], Path]) -> None:
    proc, log = operator
    kubeapi.kubectl("create", "namespace", "kopf-test")
    kubeapi.kubectl("apply", "-n", "kopf-test", "-f", "-", input=brookie("b1", 3))

    def ready() -> Any:
        assert proc.poll() is None, log.read_text()
        obj = get_json(kubeapi, "-n", "kopf-test", "brookie", "b1")
        return obj if obj and (obj.get("status") or {}).get("phase") == "Ready" else None

    cr = kubeapi.wait_for(ready, timeout=30, what="the Brookie to be Ready")
    assert cr["status"]["create_fn"] == {"configmap": "b1-config"}
    assert "e2e.brook.test/finalizer" in cr["metadata"]["finalizers"]
    cm = get_json(kubeapi, "-n", "kopf-test", "configmap", "b1-config")
    assert cm["data"] == {"size": "3"}
    owner = cm["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Brookie", "b1", cr["metadata"]["uid"])

    # kopf posts events about its handlers (core v1)
    kubeapi.wait_for(
        lambda: any(
            e["involvedObject"]["name"] == "b1"
            for e in get_json(kubeapi, "-n", "kopf-test", "events")["items"]
        ),
        timeout=15,
        what="kopf's events",
    )

    # a spec change reaches the update handler
    kubeapi.kubectl("patch", "-n", "kopf-test", "brookie", "b1", "--type=merge", "-p", '{"spec":{"size":5}}')
    kubeapi.wait_for(
        lambda: (
            (get_json(kubeapi, "-n", "kopf-test", "configmap", "b1-config") or {}).get("data")
            == {"size": "5"}
        ),
        timeout=30,
        what="the ConfigMap to follow spec.size",
    )

    # delete: kubectl waits for kopf's finalizer; the deletion handler runs; the owned ConfigMap is collected
    kubeapi.kubectl("delete", "-n", "kopf-test", "brookie", "b1", "--timeout=30s", timeout=40)
    assert get_json(kubeapi, "-n", "kopf-test", "brookie", "b1") is None
    audit = get_json(kubeapi, "-n", "kopf-test", "configmap", "brookie-audit")
    assert audit["data"] == {"b1": "deleted"}
    kubeapi.kubectl("wait", "-n", "kopf-test", "--for=delete", "configmap/b1-config", "--timeout=10s")

    assert proc.poll() is None
    text = log.read_text()
    assert "Traceback" not in text, text
    assert "[ERROR" not in text, text
