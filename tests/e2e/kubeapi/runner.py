"""Run the emulator on a background thread (for synchronous tests) and write kubeconfigs for it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from .server import KubeApiServer

T = TypeVar("T")


def kubeconfig(url: str, namespace: str = "default", name: str = "kubeapi-emulator") -> dict[str, Any]:
    """A kubeconfig for plain HTTP without credentials (the emulator authorizes everything)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": url}}],
        "users": [{"name": name, "user": {}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: Path, url: str, namespace: str = "default") -> Path:
    """Write it as JSON (valid YAML, so kubectl, helm, kopf and the kubernetes client all read it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(kubeconfig(url, namespace), indent=2) + "\n")
    return path


class EmulatorThread:
    """The emulator's event loop on a daemon thread: `start()` returns once it listens."""

    def __init__(self, **server_kwargs: Any) -> None:
        self.server_kwargs = server_kwargs
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="kubeapi-emulator", daemon=True)
        self._server: KubeApiServer | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def server(self) -> KubeApiServer:
        assert self._server is not None, "not started"
        return self._server

    @property
    def url(self) -> str:
        return self.server.url

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def boot() -> None:
            self._server = KubeApiServer(**self.server_kwargs)
            await self._server.start()

        try:
            self.loop.run_until_complete(boot())
        except BaseException as e:  # reported to start()
            self._error = e
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()

    def start(self, timeout: float = 10.0) -> EmulatorThread:
        self.thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("the Kubernetes API emulator did not start")
        if self._error is not None:
            raise RuntimeError("the Kubernetes API emulator failed to start") from self._error
        return self

    def call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        """Run `fn` on the emulator's loop (to read or seed its state safely) and return its result."""

        async def wrapper() -> T:
            return fn()

        fut: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(wrapper(), self.loop)
        return fut.result(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        if self._server is not None and self.loop.is_running():
            fut = asyncio.run_coroutine_threadsafe(self._server.stop(), self.loop)
            try:
                fut.result(timeout)
            finally:
                self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout)
        if not self.loop.is_running() and not self.loop.is_closed():
            self.loop.close()
