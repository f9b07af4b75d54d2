"""Test-side handle on a running emulator: kubeconfig, environment, kubectl/helm runners, clients.

Used by tests/e2e/conftest.py's fixtures; usable directly from any test or script:

    with KubeApi.started(tmp_path) as kube:
        kube.kubectl("apply", "-f", "cr.yaml")
        core = kubernetes.client.CoreV1Api(kube.client())
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..kubeaccess import KubeAccess, KubeTools, tool_env
from .runner import EmulatorThread, write_kubeconfig
from .server import KubeApiServer

T = TypeVar("T")


@dataclass
class KubeApi(KubeAccess):
    """A running emulator plus everything a client needs to reach it."""

    emulator: EmulatorThread
    kubeconfig: Path
    home: Path
    tools: KubeTools | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.emulator.url

    @property
    def server(self) -> KubeApiServer:
        return self.emulator.server

    @classmethod
    def start(cls, workdir: Path, tools: KubeTools | None = None, **server_kwargs: Any) -> KubeApi:
        workdir.mkdir(parents=True, exist_ok=True)
        emulator = EmulatorThread(**server_kwargs).start()
        kubeconfig = write_kubeconfig(workdir / "kubeconfig", emulator.url)
        home = workdir / "home"
        home.mkdir(exist_ok=True)
        env = tool_env(workdir, kubeconfig, tools)
        return cls(emulator, kubeconfig, home, tools, env)

    @classmethod
    @contextlib.contextmanager
    def started(
        cls, workdir: Path, tools: KubeTools | None = None, **server_kwargs: Any
    ) -> Iterator[KubeApi]:
        kube = cls.start(workdir, tools, **server_kwargs)
        try:
            yield kube
        finally:
            kube.stop()

    def stop(self) -> None:
        self.emulator.stop()

    # ------------------------------------------------------------ state

    def call(self, fn: Callable[[], T]) -> T:
        """Run fn on the emulator's loop, e.g. `kube.call(lambda: kube.server.store.rv)`."""
        return self.emulator.call(fn)
