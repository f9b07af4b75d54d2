"""Test-side handles on a real control plane: `Kube` is kubectl/helm/the Python client on one
kubeconfig (the admin's, or a ServiceAccount's token via the TokenRequest API)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..kubeaccess import KubeAccess, KubeTools, tool_env
from .server import ControlPlane, write_kubeconfig


@dataclass
class Kube(KubeAccess):
    plane: ControlPlane
    kubeconfig: Path
    workdir: Path
    tools: KubeTools | None
    env: dict[str, str]

    @property
    def url(self) -> str:
        return self.plane.url

    @classmethod
    @contextlib.contextmanager
    def started(cls, workdir: Path, tools: KubeTools | None) -> Iterator[Kube]:
        plane = ControlPlane(workdir / "plane").start()
        try:
            yield cls(
                plane,
                plane.admin_kubeconfig,
                workdir,
                tools,
                tool_env(workdir, plane.admin_kubeconfig, tools),
            )
        finally:
            plane.stop()

    def as_service_account(self, namespace: str, name: str, duration: str = "2h") -> Kube:
        """A handle that authenticates as system:serviceaccount:<namespace>:<name> (a bound token from
        `kubectl create token`, as a pod's projected token), never as admin."""
        token = self.kubectl(
            "create", "token", name, "-n", namespace, f"--duration={duration}"
        ).stdout.strip()
        stem = re.sub(r"[^a-z0-9.-]", "-", f"sa-{namespace}-{name}")
        home = self.workdir / stem
        home.mkdir(parents=True, exist_ok=True)
        kubeconfig = write_kubeconfig(
            home / "kubeconfig", self.plane.url, self.plane.ca, token=token, namespace=namespace
        )
        return Kube(self.plane, kubeconfig, home, self.tools, tool_env(home, kubeconfig, self.tools))
