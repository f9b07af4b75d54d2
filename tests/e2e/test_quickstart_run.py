"""The Kubernetes quick start run to its end on the real control plane: the quick-start Cluster (three
brokers, a managed etcd), its Topic and its client pod, applied as the README writes them; the client
pod, which knows only `quickstart-bootstrap:9092` (a short Service name), produces three records and
consumes them back. The operator runs as its own ServiceAccount (as a process: the pod runner has no
cluster DNS for the names it computes at run time); the client's output is read from the pod runner's
container log (it serves no kubelet API for `kubectl logs`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.controlplane import Kube
from tests.e2e.operator_harness import (
    install_operator,
    operator_account,
    operator_process,
    start_runner,
    tail,
)

REPO = Path(__file__).resolve().parents[2]
NS = "quickstart"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_quickstart_client_pod_produces_and_consumes_back(kube: Kube, tmp_path: Path) -> None:
    install_operator(kube, NS)
    runner = start_runner(kube, tmp_path, NS, max_grace_seconds=10)
    log = tmp_path / "operator.log"
    try:
        with operator_process(operator_account(kube), NS, log, kube):
            examples = REPO / "manifests/examples/quickstart"
            kube.kubectl(
                "apply", "-n", NS, "-f", str(examples / "cluster.yaml"), "-f", str(examples / "topic.yaml")
            )
            # The client after its topic (it would retry, after its 60 s delivery timeout).
            kube.kubectl(
                "wait", "-n", NS, "topic/greetings", "--for=condition=Ready", "--timeout=150s", timeout=160
            )  # fmt: skip
            kube.kubectl("apply", "-n", NS, "-f", str(examples / "client.yaml"))
            # operator/README.md's own wait, in the test's namespace.
            r = kube.kubectl(
                "wait", "-n", NS, "pod/quickstart-client", "--for=jsonpath={.status.phase}=Succeeded",
                "--timeout=200s", check=False, timeout=210,
            )  # fmt: skip
            logs = "".join(
                f.read_text() for f in tmp_path.glob(f"pods/{NS}/quickstart-client-*/logs/client.log")
            )
            assert r.returncode == 0, f"{r.stderr}\nclient:\n{logs}\noperator:\n{tail(log)}"
            got = sorted(
                ln.split(" ", 1)[1] for ln in logs.splitlines() if re.fullmatch(r"\d/\d+ \S+=\S+", ln)
            )
            assert got == ["k1=hello", "k2=from", "k3=kubernetes"], logs
    finally:
        runner.stop(grace=5)
        kube.kubectl("delete", "namespace", NS, "--wait=false", check=False)
