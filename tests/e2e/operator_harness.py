"""What the operator end-to-end tests share on the real control plane: manifests/ and a namespace, the
pod runner with test timings, and the operator itself as a subprocess (as its own ServiceAccount,
never as admin)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.e2e.controlplane import Kube
from tests.e2e.kubeaccess import KubeAccess
from tests.e2e.podrunner import RunnerConfig, RunnerThread

REPO = Path(__file__).resolve().parents[2]


def install_operator(kube: KubeAccess, namespace: str) -> None:
    """`kubectl apply -k manifests/` (CRDs, the operator's ServiceAccount and RBAC, its Deployment,
    whose pods no runner of a test namespace runs) and the test namespace."""
    kube.kubectl("apply", "-k", str(REPO / "manifests"), timeout=60)
    kube.kubectl("wait", "--for=condition=Established", "crd/clusters.brook.dev", "crd/topics.brook.dev",
                 "crd/users.brook.dev")  # fmt: skip
    kube.kubectl("create", "namespace", namespace)


def operator_account(kube: Kube) -> Kube:
    """The operator's ServiceAccount from manifests/ (install_operator): what it runs as, never admin."""
    return kube.as_service_account("brook-system", "brook-operator")


def start_runner(kube: KubeAccess, workdir: Path, namespace: str, **config: Any) -> RunnerThread:
    """The pod runner, probing at least every 0.5 s and restarting crashed containers within 2 s."""
    settings: dict[str, Any] = {"max_probe_period": 0.5, "max_backoff": 2.0, **config}
    return RunnerThread(
        RunnerConfig(kubeconfig=kube.kubeconfig, workdir=workdir, namespace=namespace, **settings)
    ).start()


@contextlib.contextmanager
def operator_process(
    kube: KubeAccess, namespace: str, log_path: Path, admin: KubeAccess | None = None, **env: str
) -> Iterator[subprocess.Popen[bytes]]:
    """`brook-operator run` for one namespace with fast resyncs; brokers are reached at 127.0.0.1:<port>.
    With `admin`, the namespace's Topics, Users and Clusters are deleted before the operator stops, so
    its finalizers go with them (else they hold the namespace in Terminating on a real server)."""
    argv = [
        str(Path(sys.executable).parent / "brook-operator"),
        "run",
        "--namespace",
        namespace,
        "--leader-election",
        "false",
        "--health-port",
        "0",
        "--bootstrap-template",
        "127.0.0.1:{port}",
    ]
    full_env = dict(
        kube.env,
        BROOK_OPERATOR_CLUSTER_RESYNC_SECONDS="2",
        BROOK_OPERATOR_TOPIC_RESYNC_SECONDS="5",
        BROOK_OPERATOR_KAFKA_TIMEOUT="5",
        **env,
    )
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(argv, env=full_env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        if admin is not None:
            for kinds in ("topics,users", "clusters"):  # topics while their brokers still run
                admin.kubectl(
                    "delete", kinds, "--all", "-n", namespace, "--timeout=60s", check=False, timeout=70
                )
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"({path} missing)"
