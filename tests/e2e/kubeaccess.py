"""What a test needs to talk to a Kubernetes API server: kubectl and helm (`KubeTools`), an
environment for subprocesses, and `KubeAccess` (kubectl()/helm()/client()/wait_for() on one
kubeconfig)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


@dataclass(frozen=True)
class KubeTools:
    """Where kubectl and helm are: $BROOK_KUBE_TOOLS (a bin dir) or <repo>/.tools/bin."""

    bin_dir: Path

    @property
    def kubectl(self) -> Path:
        return self.bin_dir / "kubectl"

    @property
    def helm(self) -> Path:
        return self.bin_dir / "helm"

    @classmethod
    def find(cls, install: bool = True) -> KubeTools:
        env_dir = os.environ.get("BROOK_KUBE_TOOLS")
        bin_dir = Path(env_dir) if env_dir else REPO / ".tools" / "bin"
        tools = cls(bin_dir)
        if not (tools.kubectl.exists() and tools.helm.exists()) and install and not env_dir:
            out = subprocess.run(
                [str(REPO / "scripts" / "install-kube-tools")], capture_output=True, text=True, timeout=300
            )
            if out.returncode != 0:
                raise RuntimeError(f"scripts/install-kube-tools failed:\n{out.stderr}")
        if not tools.kubectl.exists():
            raise RuntimeError(f"kubectl not found in {bin_dir} (run scripts/install-kube-tools)")
        return tools


def tool_env(workdir: Path, kubeconfig: Path, tools: KubeTools | None) -> dict[str, str]:
    """os.environ plus KUBECONFIG, a discovery cache and helm homes of this server's own, tools first."""
    env = dict(os.environ)
    env.update(
        KUBECONFIG=str(kubeconfig),
        KUBECACHEDIR=str(workdir / "kube-cache"),  # discovery cache per server, never a stale one
        HELM_CACHE_HOME=str(workdir / "helm" / "cache"),
        HELM_CONFIG_HOME=str(workdir / "helm" / "config"),
        HELM_DATA_HOME=str(workdir / "helm" / "data"),
    )
    if tools is not None:
        env["PATH"] = f"{tools.bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


class KubeAccess:
    """kubectl, helm and the Python client on `kubeconfig`, with `env` for every subprocess."""

    kubeconfig: Path
    tools: KubeTools | None
    env: dict[str, str]

    def run_tool(
        self, tool: Path, *args: str, input: str | None = None, check: bool = True, timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(tool), *args], input=input, capture_output=True, text=True, env=self.env, timeout=timeout
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{tool.name} {' '.join(args)} exited {proc.returncode}:\n"
                f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
            )
        return proc

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        assert self.tools is not None, "no kube tools given"
        return self.run_tool(self.tools.kubectl, *args, input=input, check=check, timeout=timeout)

    def helm(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        assert self.tools is not None, "no kube tools given"
        return self.run_tool(self.tools.helm, *args, input=input, check=check, timeout=timeout)

    def client(self) -> Any:
        """A `kubernetes.client.ApiClient` configured from the kubeconfig."""
        from kubernetes import config

        return config.new_client_from_config(  # type: ignore[no-untyped-call,unused-ignore]
            config_file=str(self.kubeconfig)
        )

    def wait_for(
        self,
        predicate: Callable[[], T],
        timeout: float = 10.0,
        interval: float = 0.05,
        what: str = "condition",
    ) -> T:
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            time.sleep(interval)
