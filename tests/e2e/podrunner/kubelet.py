"""The kubelet part: one `PodWorker` per pod bound to one of the runner's nodes.

A worker gives the pod its host ports (annotations `podrunner.brook.dev/port-<name>` and status.podIP
127.0.0.1), prepares its volumes, runs the init containers to completion one by one, then the
containers as local processes (own session, output appended to `<workdir>/pods/<ns>/<pod>-<uid>/
<container>.log`), restarts them per restartPolicy with a capped back-off, runs the startup, liveness
and readiness probes (httpGet, tcpSocket, exec) and writes the pod's status (phase, conditions,
containerStatuses with restartCount and ready).

Probes sample every min(periodSeconds, max_probe_period) seconds and scale failureThreshold so the
same wall time (failureThreshold x periodSeconds) is allowed: faster reactions, same tolerance.

Deletion (deletionTimestamp set): Ready turns False at once, every process gets SIGTERM, then SIGKILL
after the grace period (deletionGracePeriodSeconds), and the Pod object is deleted with
gracePeriodSeconds 0 (uid precondition), as a kubelet does.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from . import probes, volumes
from .api import Api, ApiError
from .podspec import POD_IP, Image, Launch, LaunchError, build_launch
from .ports import PortAllocator

log = logging.getLogger("podrunner.kubelet")
JSON = dict[str, Any]
PORT_ANNOTATION = "podrunner.brook.dev/port-"


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_libc: Any = None
with contextlib.suppress(OSError):
    _libc = ctypes.CDLL(None, use_errno=True)
_prctl = getattr(_libc, "prctl", None)


def _die_with_parent() -> None:  # runs in the child between fork and exec: no locks, no imports
    if _prctl is not None:
        _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: a crashed test leaves no orphans


@dataclass(frozen=True)
class Event:
    at: float  # time.monotonic()
    kind: str  # created, started, exited, ready, unready, terminating, killed, deleted
    namespace: str
    pod: str
    uid: str
    detail: str = ""


class Host(Protocol):
    """What a worker needs from the runner."""

    api: Api
    ports: PortAllocator
    workdir: Path
    kubeconfig: Path
    commands: Mapping[str, str]
    images: Mapping[str, Image]
    base_env: Mapping[str, str]
    max_probe_period: float | None
    max_backoff: float
    volume_sync_seconds: float  # how often mounted ConfigMaps and Secrets follow their objects

    def record(self, kind: str, pod: Mapping[str, Any], detail: str = "") -> None: ...

    async def pod_credentials(self, pod: JSON, source: JSON, directory: Path) -> tuple[str, Path]:
        """(token, kubeconfig) for a projected serviceAccountToken `source` of `pod`."""
        ...


class Container:
    """One container's processes over the pod's life (restarts included)."""

    def __init__(self, worker: PodWorker, spec: JSON, init: bool) -> None:
        self.worker = worker
        self.spec = spec
        self.name = str(spec["name"])
        self.init = init
        self.restart_count = 0
        self.state: JSON = {"waiting": {"reason": "PodInitializing" if not init else "ContainerCreating"}}
        self.last_state: JSON = {}
        self.ready = False
        self.started = False
        self.proc: asyncio.subprocess.Process | None = None
        self.stopping = False
        self.launch: Launch | None = None
        self.succeeded = False

    def stopped(self) -> bool:
        return self.stopping

    def status(self) -> JSON:
        out: JSON = {
            "name": self.name,
            "image": str(self.spec.get("image", "")),
            "imageID": "",
            "ready": self.ready,
            "restartCount": self.restart_count,
            "state": self.state,
            "lastState": self.last_state,
        }
        if not self.init:
            out["started"] = self.started
        if self.proc is not None:
            out["containerID"] = f"podrunner://{self.proc.pid}"
        return out

    async def run(self, restart_policy: str) -> bool:
        """Run until it succeeds (init), or until stopped; True when it completed successfully."""
        backoff = 1.0
        while not self.stopped():
            started_at = time.monotonic()
            try:
                code, why = await self._run_once()
            except (LaunchError, ApiError, OSError, aiohttp.ClientError) as e:
                reason = e.reason if isinstance(e, LaunchError) else "RunContainerError"
                self.state = {"waiting": {"reason": reason, "message": str(e)}}
                self.worker.changed()
                log.warning("%s/%s: %s", self.worker.name, self.name, e)
                code, why = None, "launch"
            if self.stopped():
                return False
            if code == 0 and (self.init or restart_policy != "Always"):
                self.succeeded = True
                return True
            if code is not None and restart_policy == "Never":
                return False
            if code is not None:
                self.restart_count += 1
                if why != "exited":
                    log.warning("%s/%s restarted: %s", self.worker.name, self.name, why)
            if time.monotonic() - started_at > 10 * self.worker.host.max_backoff:
                backoff = 1.0
            if code is not None:
                self.state = {"waiting": {"reason": "CrashLoopBackOff"}}
                self.worker.changed()
            await self.worker.sleep_unless_stopping(backoff)
            backoff = min(backoff * 2, self.worker.host.max_backoff)
        return False

    async def _run_once(self) -> tuple[int | None, str]:
        w = self.worker
        self.launch = await w.launch(self.spec)
        if self.stopped():
            return None, "stopped"
        w.logs_dir.mkdir(parents=True, exist_ok=True)
        logfile = w.logs_dir / f"{self.name}.log"
        with open(logfile, "ab") as out:
            out.write(f"--- {now_iso()} start #{self.restart_count}: {' '.join(self.launch.argv)}\n".encode())
            out.flush()
            self.launch.cwd.mkdir(parents=True, exist_ok=True)
            self.proc = await asyncio.create_subprocess_exec(
                *self.launch.argv,
                env=self.launch.env,
                cwd=str(self.launch.cwd),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        started = now_iso()
        self.state = {"running": {"startedAt": started}}
        self.started = False
        self.ready = False
        w.host.record("started", w.pod, f"{self.name} pid {self.proc.pid}")
        w.changed()
        why = "exited"
        if self.init:
            code = await self.proc.wait()
        else:
            probes = asyncio.create_task(self._probe())
            waiter = asyncio.create_task(self.proc.wait())
            done, _ = await asyncio.wait({probes, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if probes in done and not waiter.done():
                why = probes.result()
                await self._end_process(time.monotonic() + w.grace)
            else:
                probes.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await probes
            code = await waiter
        self.ready = False
        self.started = False
        terminated = {
            "terminated": {
                "exitCode": code,
                "reason": "Completed" if code == 0 else "Error",
                "startedAt": started,
                "finishedAt": now_iso(),
            }
        }
        self.state = terminated
        self.last_state = terminated
        w.host.record("exited", w.pod, f"{self.name} code {code} ({why})")
        w.changed()
        return code, why

    async def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    async def stop(self, deadline: float) -> None:
        self.stopping = True
        self.ready = False
        await self._end_process(deadline)

    async def _end_process(self, deadline: float) -> None:
        """SIGTERM, then SIGKILL at the deadline."""
        if self.proc is None or self.proc.returncode is not None:
            return
        await self.signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.proc.wait(), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            self.worker.host.record("killed", self.worker.pod, f"{self.name} after the grace period")
            await self.signal(signal.SIGKILL)
            await self.proc.wait()

    # ------------------------------------------------------------ probes

    def _timing(self, probe: JSON) -> tuple[float, int, int, float, float]:
        return probes.timing(probe, self.worker.host.max_probe_period)

    async def _probe(self) -> str:
        """Returns why the container must be restarted (startup or liveness failure)."""
        startup = self.spec.get("startupProbe")
        if startup is not None:
            period, failures, _, delay, _ = self._timing(startup)
            await asyncio.sleep(delay)
            bad = 0
            while not await self._check(startup):
                bad += 1
                if bad >= failures:
                    return "startup probe failed"
                await asyncio.sleep(period)
        self.started = True
        self.worker.changed()
        readiness = self.spec.get("readinessProbe")
        liveness = self.spec.get("livenessProbe")
        tasks = []
        if readiness is not None:
            tasks.append(asyncio.create_task(self._readiness(readiness)))
        else:
            self._set_ready(True)
        if liveness is not None:
            tasks.append(asyncio.create_task(self._liveness(liveness)))
        if not tasks:
            await asyncio.Event().wait()
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            return next(iter(done)).result()
        finally:
            for t in tasks:
                t.cancel()

    def _set_ready(self, ready: bool) -> None:
        if ready != self.ready:
            self.ready = ready
            self.worker.changed()

    async def _readiness(self, probe: JSON) -> str:
        period, failures, successes, delay, _ = self._timing(probe)
        await asyncio.sleep(delay)
        good = bad = 0
        while True:
            if await self._check(probe):
                good, bad = good + 1, 0
                if good >= successes:
                    self._set_ready(True)
            else:
                good, bad = 0, bad + 1
                if bad >= failures or not self.ready:
                    self._set_ready(False)
            await asyncio.sleep(period)

    async def _liveness(self, probe: JSON) -> str:
        period, failures, _, delay, _ = self._timing(probe)
        await asyncio.sleep(delay)
        bad = 0
        while True:
            bad = 0 if await self._check(probe) else bad + 1
            if bad >= failures:
                return "liveness probe failed"
            await asyncio.sleep(period)

    async def _check(self, probe: JSON) -> bool:
        w = self.worker
        return await probes.check(
            probe,
            w.pod,
            lambda number: w.host.ports.pod_port(w.namespace, w.name, number),
            w.host.api.session,
            w.host.commands,
            self.launch.env if self.launch is not None else None,
        )


class PodWorker:
    def __init__(self, host: Host, pod: JSON) -> None:
        self.host = host
        self.pod = pod
        meta = pod["metadata"]
        self.namespace = str(meta["namespace"])
        self.name = str(meta["name"])
        self.uid = str(meta["uid"])
        self.dir = host.workdir / "pods" / self.namespace / f"{self.name}-{self.uid[:8]}"
        self.logs_dir = self.dir / "logs"
        spec = pod.get("spec") or {}
        self.restart_policy = str(spec.get("restartPolicy", "Always"))
        self.grace = float(spec.get("terminationGracePeriodSeconds", 30))
        self.inits = [Container(self, c, True) for c in spec.get("initContainers") or []]
        self.containers = [Container(self, c, False) for c in spec.get("containers") or []]
        self.mount_dirs: dict[str, Path] = {}
        self.token, self.kubeconfig = "", host.kubeconfig  # the service-account token, if mounted
        self.conditions: dict[str, tuple[str, str]] = {"PodScheduled": ("True", now_iso())}
        self.phase = "Pending"
        self.start_time = now_iso()
        self.terminating = False
        self.deleted = False
        self._stop = asyncio.Event()
        self._dirty = asyncio.Event()
        self._idle = asyncio.Event()
        self._writer = asyncio.create_task(self._status_writer())
        self._termination: asyncio.Task[None] | None = None
        self.task = asyncio.create_task(self._run())
        self.changed()

    # ------------------------------------------------------------ lifecycle

    async def _run(self) -> None:
        try:
            await self._prepare()
            for c in self.inits:
                if not await c.run("OnFailure" if self.restart_policy == "Always" else self.restart_policy):
                    if not self.terminating:
                        self.phase = "Failed"
                        self.changed()
                    return
            self._condition("Initialized", True)
            # As the kubelet does (its sync period), mounted ConfigMaps and Secrets follow their objects
            # while the pod runs: a renewed certificate reaches the files a broker reloads.
            sync = asyncio.create_task(self._sync_volumes())
            self.phase = "Running"
            self.changed()
            try:
                results = await asyncio.gather(*(c.run(self.restart_policy) for c in self.containers))
            finally:
                sync.cancel()
            if not self.terminating and self.restart_policy != "Always":
                self.phase = "Succeeded" if all(results) else "Failed"
                self.changed()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("pod %s/%s failed", self.namespace, self.name)
            self.phase = "Failed"
            self.changed()

    async def _sync_volumes(self) -> None:
        while not self._stop.is_set():
            await self.sleep_unless_stopping(self.host.volume_sync_seconds)
            try:
                config_maps = {
                    c["metadata"]["name"]: c
                    for c in await self.host.api.list("v1", "configmaps", self.namespace)
                }
                secrets = {
                    s["metadata"]["name"]: s
                    for s in await self.host.api.list("v1", "secrets", self.namespace)
                }
            except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as e:
                log.warning("volume sync of %s/%s: %s", self.namespace, self.name, e)
                continue
            await self._write_config_volumes(config_maps, secrets)

    async def sleep_unless_stopping(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    async def _prepare(self) -> None:
        ports: dict[str, int] = {}
        for c in (self.pod.get("spec") or {}).get("containers") or []:
            for p in c.get("ports") or []:
                number = int(p["containerPort"])
                ports[str(p.get("name") or number)] = self.host.ports.pod_port(
                    self.namespace, self.name, number
                )
        annotations = {f"{PORT_ANNOTATION}{k}": str(v) for k, v in sorted(ports.items())}
        if annotations:
            try:
                self.pod = await self.host.api.patch(
                    "v1", "pods", self.namespace, self.name, {"metadata": {"annotations": annotations}}
                )
            except ApiError as e:
                log.warning("cannot annotate %s/%s: %s", self.namespace, self.name, e)
        await self._credentials()
        self._volumes()
        self.host.record("scheduled", self.pod, " ".join(f"{k}={v}" for k, v in sorted(ports.items())))

    async def _credentials(self) -> None:
        for vol in (self.pod.get("spec") or {}).get("volumes") or []:
            for src in (vol.get("projected") or {}).get("sources") or []:
                if "serviceAccountToken" in src:
                    self.token, self.kubeconfig = await self.host.pod_credentials(
                        self.pod, src["serviceAccountToken"], self.dir
                    )
                    return

    def _volumes(self) -> None:
        self.mount_dirs = volumes.prepare(self.pod, self.host.workdir, self.dir, self.token)

    async def _write_config_volumes(
        self, config_maps: Mapping[str, JSON], secrets: Mapping[str, JSON]
    ) -> list[str]:
        return volumes.write_config_files(self.pod, self.mount_dirs, config_maps, secrets)

    async def launch(self, container: JSON) -> Launch:
        config_maps = {
            c["metadata"]["name"]: c for c in await self.host.api.list("v1", "configmaps", self.namespace)
        }
        secrets = {
            s["metadata"]["name"]: s for s in await self.host.api.list("v1", "secrets", self.namespace)
        }
        missing = await self._write_config_volumes(config_maps, secrets)
        if missing:
            raise LaunchError("ContainerCreating", "; ".join(missing))
        mounts: dict[str, Path] = {}
        for m in container.get("volumeMounts") or []:
            base = self.mount_dirs.get(str(m["name"]))
            if base is None:
                raise LaunchError("CreateContainerConfigError", f"volume {m['name']} not found")
            local = base / str(m["subPath"]) if m.get("subPath") else base
            local.mkdir(parents=True, exist_ok=True)
            mounts[str(m["mountPath"])] = local
        return build_launch(
            self.pod,
            container,
            config_maps=config_maps,
            secrets=secrets,
            mounts=mounts,
            addresses=self.host.ports,
            commands=self.host.commands,
            images=self.host.images,
            base_env=self.host.base_env,
            kubeconfig=self.kubeconfig,
            cwd=self.dir / "cwd",
            services={
                str(s["metadata"]["name"]) for s in await self.host.api.list("v1", "services", self.namespace)
            },
        )

    # ------------------------------------------------------------ termination

    def terminate(self, grace: float) -> None:
        if self._termination is None:
            self._termination = asyncio.create_task(self._terminate(grace))

    async def _terminate(self, grace: float) -> None:
        self.terminating = True
        self._stop.set()
        self.host.record("terminating", self.pod, f"grace {grace:g}s")
        for c in self.inits + self.containers:
            c.ready = False
        self._condition("ContainersReady", False)
        self.changed()
        deadline = time.monotonic() + grace
        await self._stop_all(deadline)
        await self.close_status()
        with contextlib.suppress(Exception):
            await self.host.api.delete("v1", "pods", self.namespace, self.name, grace_seconds=0, uid=self.uid)
        self.deleted = True
        self.host.record("deleted", self.pod)

    async def kill(self, grace: float = 10.0) -> None:
        """The runner stops (or the pod object vanished): stop the processes, leave the API alone."""
        self.terminating = True
        self._stop.set()
        await self._stop_all(time.monotonic() + grace)
        await self.close_status()

    async def _stop_all(self, deadline: float) -> None:
        everything = self.inits + self.containers
        await asyncio.gather(*(c.stop(deadline) for c in everything))
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        for c in everything:  # a process spawned while the task was being cancelled
            if c.proc is not None and c.proc.returncode is None:
                await c.signal(signal.SIGKILL)
                await c.proc.wait()

    @property
    def finished(self) -> bool:
        return self.deleted

    # ------------------------------------------------------------ status

    def changed(self) -> None:
        self._dirty.set()

    def _condition(self, kind: str, value: bool) -> None:
        text = "True" if value else "False"
        old = self.conditions.get(kind)
        if old is None or old[0] != text:
            self.conditions[kind] = (text, now_iso())

    def status(self) -> JSON:
        init_done = all(c.succeeded for c in self.inits)
        self._condition("Initialized", init_done)
        ready = not self.terminating and bool(self.containers) and all(c.ready for c in self.containers)
        self._condition("ContainersReady", ready)
        self._condition("Ready", ready)
        conditions = [
            {"type": k, "status": v[0], "lastTransitionTime": v[1], "lastProbeTime": None}
            for k, v in self.conditions.items()
        ]
        out: JSON = {
            "phase": self.phase,
            "conditions": conditions,
            "hostIP": POD_IP,
            "hostIPs": [{"ip": POD_IP}],
            "podIP": POD_IP,
            "podIPs": [{"ip": POD_IP}],
            "startTime": self.start_time,
            "containerStatuses": [c.status() for c in self.containers],
            # The API server computes it at creation and refuses a change.
            "qosClass": (self.pod.get("status") or {}).get("qosClass") or "Burstable",
        }
        if self.inits:
            out["initContainerStatuses"] = [c.status() for c in self.inits]
        return out

    async def _status_writer(self) -> None:
        was_ready: bool | None = None
        while True:
            self._idle.set()
            await self._dirty.wait()
            self._idle.clear()
            self._dirty.clear()
            status = self.status()
            ready = status["conditions"] and any(
                c["type"] == "Ready" and c["status"] == "True" for c in status["conditions"]
            )
            try:
                await self.host.api.patch(
                    "v1", "pods", self.namespace, self.name, {"status": status}, "status"
                )
            except ApiError as e:
                if e.status == 404:
                    return
                log.warning("status of %s/%s: %s", self.namespace, self.name, e)
                await asyncio.sleep(0.2)
                self._dirty.set()
                continue
            except (aiohttp.ClientError, OSError, TimeoutError) as e:
                log.warning("status of %s/%s: %s", self.namespace, self.name, e)
                await asyncio.sleep(0.2)
                self._dirty.set()
                continue
            if ready != was_ready:
                self.host.record("ready" if ready else "unready", self.pod)
                was_ready = bool(ready)

    async def close_status(self) -> None:
        """Write the last status (not ready) and stop writing: the object may be gone next."""
        if not self._writer.done():
            # let pending writes go out first (so watchers see Ready=False before the delete)
            deadline = time.monotonic() + 2
            while (self._dirty.is_set() or not self._idle.is_set()) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
