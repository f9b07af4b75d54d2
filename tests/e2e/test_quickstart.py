"""The Kubernetes quick start's commands, run as the READMEs write them, against the real control plane
(tests/e2e/controlplane) with the real kubectl and helm: `kubectl apply -k manifests/` (namespace
first), the quick-start Cluster, Topic and client pod; the helm path with the quick-start values
(after the kubectl path's objects are removed, as a user switching would: both own the same names);
a wrong field refused."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.e2e.controlplane import Kube

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]


def offline_block() -> list[str]:
    """The kubectl/helm lines of operator/README.md's offline section, as written."""
    text = (REPO / "operator" / "README.md").read_text()
    section = text[text.index("### Trying the manifests offline") :]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return [
        ln.strip() for ln in block[1].splitlines() if ln.strip().startswith(("kubectl ", "#   or: helm "))
    ]


def run(kube: Kube, line: str) -> subprocess.CompletedProcess[str]:
    """One README line, from the repository root, with the control plane's kubeconfig and tools first."""
    assert kube.tools is not None
    argv = shlex.split(line)
    tool = {"kubectl": kube.tools.kubectl, "helm": kube.tools.helm}[argv[0]]
    r = subprocess.run(
        [str(tool), *argv[1:]], cwd=REPO, env=kube.env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, f"{line}\n{r.stdout}\n{r.stderr}"
    return r


def get(kube: Kube, *args: str) -> dict[str, object]:
    return json.loads(kube.kubectl("get", *args, "-o", "json").stdout)  # type: ignore[no-any-return]


def test_readme_kubectl_lines_apply_the_operator_and_the_quickstart(kube: Kube) -> None:
    lines = offline_block()
    kubectl_lines = [ln for ln in lines if ln.startswith("kubectl ")]
    assert kubectl_lines[:2] == [
        "kubectl apply -k manifests/",
        "kubectl apply -f manifests/examples/quickstart/",
    ]
    main_readme = (REPO / "README.md").read_text()
    assert "`kubectl apply -k manifests/`" in main_readme
    assert "`kubectl apply -f manifests/examples/quickstart/`" in main_readme
    for line in kubectl_lines:
        run(kube, line)

    assert (
        get(kube, "namespace", "brook-system")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
        == "restricted"
    )  # type: ignore[index]
    for crd in ("clusters.brook.dev", "topics.brook.dev", "users.brook.dev"):
        kube.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=30s")
    deploy = get(kube, "-n", "brook-system", "deployment", "brook-operator")
    assert deploy["spec"]["template"]["spec"]["serviceAccountName"] == "brook-operator"  # type: ignore[index]
    cluster = get(kube, "cluster", "quickstart")
    assert cluster["spec"]["replicas"] == 3 and "rack" not in cluster["spec"]  # type: ignore[index,operator]
    assert get(kube, "topic", "greetings")["spec"]["cluster"] == "quickstart"  # type: ignore[index]
    pod = get(kube, "pod", "quickstart-client")
    assert pod["spec"]["containers"][0]["image"] == "ghcr.io/brook-dev/brook:0.1.0"  # type: ignore[index]

    # The server refuses what the CRD schema refuses, as a real API server does.
    bad = yaml.safe_load((REPO / "manifests/examples/quickstart/cluster.yaml").read_text())
    bad["metadata"]["name"] = "wrong"
    bad["spec"]["replicas"] = "three"
    r = kube.kubectl("apply", "-f", "-", input=yaml.safe_dump(bad), check=False)
    assert r.returncode != 0 and "spec.replicas" in r.stderr, r.stderr


def test_the_helm_path_with_the_quickstart_values(kube: Kube) -> None:
    # What the kubectl path made and helm would own too (the CRDs stay: helm skips existing ones).
    run(kube, "kubectl delete -f manifests/examples/quickstart/ --ignore-not-found")
    run(kube, "kubectl delete -f manifests/operator.yaml -f manifests/rbac.yaml --ignore-not-found")
    (helm_line,) = [ln for ln in offline_block() if ln.startswith("#   or: helm ")]
    run(kube, helm_line.removeprefix("#   or: "))
    deploy = get(kube, "-n", "brook-system", "deployment", "brook-operator")
    assert deploy["spec"]["replicas"] == 1  # type: ignore[index]
    run(kube, "kubectl apply -f manifests/examples/quickstart/")
    etcd = get(kube, "cluster", "quickstart")["spec"]["etcd"]["managed"]  # type: ignore[index]
    assert etcd["replicas"] == 1 and etcd["storage"] == {"size": "256Mi"}  # type: ignore[index]
    run(kube, "kubectl delete -f manifests/examples/quickstart/")
    run(kube, "helm uninstall brook -n brook-system --wait")
