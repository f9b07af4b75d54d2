"""Fixtures for end-to-end tests against a real Kubernetes control plane (tests/e2e/controlplane).

- `kube_tools` (session): kubectl and helm from <repo>/.tools/bin (installed by
  scripts/install-kube-tools when missing) or from $BROOK_KUBE_TOOLS.
- `kube` (session): the control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler;
  ~10 s to start) as its admin, with an environment for subprocesses (KUBECONFIG, KUBECACHEDIR,
  HELM_*_HOME, PATH) and kubectl()/helm()/client(); `kube.as_service_account()` for a ServiceAccount's
  token. Shared by the whole run: each module works in namespaces of its own. What it cost is printed
  in pytest's summary.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.e2e.controlplane import Kube
from tests.e2e.kubeaccess import KubeTools

_COST: dict[str, float] = {}


@pytest.fixture(scope="session")
def kube_tools() -> KubeTools:
    return KubeTools.find()


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory, kube_tools: KubeTools) -> Iterator[Kube]:
    with Kube.started(tmp_path_factory.mktemp("control-plane"), kube_tools) as k:
        _COST.update(k.plane.timings)
        yield k
        stopping = time.monotonic()
    _COST["stop"] = round(time.monotonic() - stopping, 1)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _COST:
        terminalreporter.write_line(
            f"control plane: started in {_COST.get('start')} s (API server ready at "
            f"{_COST.get('apiserver_ready')} s), stopped in {_COST.get('stop')} s"
        )
