"""Fixtures for end-to-end tests against the in-repo Kubernetes API emulator (tests/e2e/kubeapi).

- `kube_tools` (session): kubectl and helm from <repo>/.tools/bin (installed by
  scripts/install-kube-tools when missing) or from $BROOK_KUBE_TOOLS.
- `kubeapi` (module): a fresh emulator on a free 127.0.0.1 port, with a kubeconfig, an environment
  for subprocesses (KUBECONFIG, KUBECACHEDIR, HELM_*_HOME, PATH) and kubectl()/helm()/client().
- `kube_api_factory` (function): start more emulators with other settings (bookmark interval, history).
- `kube` (session): a real control plane (tests/e2e/controlplane: etcd, kube-apiserver,
  kube-controller-manager, kube-scheduler; ~15 s to start) as its admin; `kube.as_service_account()`
  for a ServiceAccount's token. Shared by the whole run: tests use namespaces of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.controlplane import Kube
from tests.e2e.kubeaccess import KubeTools
from tests.e2e.kubeapi.harness import KubeApi


@pytest.fixture(scope="session")
def kube_tools() -> KubeTools:
    return KubeTools.find()


@pytest.fixture(scope="module")
def kubeapi(tmp_path_factory: pytest.TempPathFactory, kube_tools: KubeTools) -> Iterator[KubeApi]:
    with KubeApi.started(tmp_path_factory.mktemp("kubeapi"), kube_tools, bookmark_interval=1.0) as kube:
        yield kube


@pytest.fixture
def kube_api_factory(tmp_path: Path, kube_tools: KubeTools) -> Iterator[Callable[..., KubeApi]]:
    started: list[KubeApi] = []

    def start(**server_kwargs: Any) -> KubeApi:
        kube = KubeApi.start(tmp_path / f"kubeapi-{len(started)}", kube_tools, **server_kwargs)
        started.append(kube)
        return kube

    yield start
    for kube in started:
        kube.stop()


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory, kube_tools: KubeTools) -> Iterator[Kube]:
    with Kube.started(tmp_path_factory.mktemp("control-plane"), kube_tools) as k:
        print(f"\ncontrol plane: {k.url}, started in {k.plane.timings}")
        yield k
