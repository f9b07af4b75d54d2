"""A real etcd for tests: one process per test module on free loopback ports, a fresh cluster name
(so key prefix) per test, and a runner for async scenarios (the suite has no asyncio plugin).

In a test module:

    @pytest.fixture(scope="module")
    def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdProcess]:
        yield from etcd_process(tmp_path_factory)

    def test_x(etcd: EtcdProcess) -> None:
        async def scenario() -> None:
            async with EtcdClient(etcd.endpoint) as client: ...
        run(scenario())
"""

from __future__ import annotations

import asyncio
import io
import itertools
import os
import subprocess
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from brook.dev.etcd import EtcdProcess, ServerTls

T = TypeVar("T")
_names = itertools.count()

# Raft timings that let etcd grant 1 s leases (its minimum TTL is 1.5 x the election timeout).
HEARTBEAT_MS = 50
ELECTION_MS = 500


def etcd_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdProcess]:
    root = tmp_path_factory.mktemp("etcd")
    proc = EtcdProcess(
        root / "data", unsafe_no_fsync=True, heartbeat_ms=HEARTBEAT_MS, election_ms=ELECTION_MS
    ).start()
    try:
        yield proc
    finally:
        proc.stop()


def cluster_name(prefix: str = "t") -> str:
    """A cluster name no other test uses (tests share one etcd per module)."""
    return f"{prefix}{os.getpid()}-{next(_names)}"


def run(coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
    """Run an async scenario; past `timeout` fail with the stacks of every task (where it hangs)."""

    async def limited() -> T:
        task = asyncio.create_task(coro)
        done, _ = await asyncio.wait([task], timeout=timeout)
        if not done:
            stacks = io.StringIO()
            for t in asyncio.all_tasks():
                if t is not asyncio.current_task():
                    print(f"{t!r}:", file=stacks)
                    for line in _awaiting(t):
                        print(f"    {line}", file=stacks)
            task.cancel()
            await asyncio.wait([task], timeout=5)
            raise AssertionError(f"scenario did not finish within {timeout}s; tasks:\n{stacks.getvalue()}")
        return task.result()

    return asyncio.run(limited())


_FRAMES = ("cr_frame", "ag_frame", "gi_frame")
_AWAITS = ("cr_await", "ag_await", "gi_yieldfrom")


def _awaiting(task: asyncio.Task[Any]) -> list[str]:
    """Where a task waits: its coroutine and every coroutine it awaits, innermost last (Task's own
    stack shows only the outermost frame of a suspended coroutine)."""
    out: list[str] = []
    obj: Any = task.get_coro()
    for _ in range(40):
        frame = next((getattr(obj, a) for a in _FRAMES if getattr(obj, a, None)), None)
        if frame is None:
            if obj is not None:
                out.append(repr(obj)[:200])
            break
        out.append(f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        obj = next((getattr(obj, a) for a in _AWAITS if getattr(obj, a, None)), None)
    return out


async def eventually(predicate: Any, timeout: float, interval: float = 0.05) -> None:
    """Wait until an (async or sync) predicate is true, or fail."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if loop.time() >= deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)


class SecureEtcd:
    """A real etcd whose client port speaks TLS and requires client certificates (a trustme CA),
    optionally with etcd's authentication enabled: `root` (password `root_password`) and a user with
    read-write on Brook's keys only. `ctl()` runs etcdctl against it as root."""

    def __init__(self, root: Path, *, auth: bool) -> None:
        import trustme  # test-only dependency

        self.dir = root
        root.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        server = ca.issue_cert("127.0.0.1", "localhost")
        client = ca.issue_cert("brook")  # without a user, etcd takes the certificate's CN as the user
        self.ca = self._write("ca.crt", ca.cert_pem.bytes())
        self.other_ca = self._write("other-ca.crt", trustme.CA().cert_pem.bytes())
        self.server_cert = self._write("server.crt", server.cert_chain_pems[0].bytes())
        self.server_key = self._write("server.key", server.private_key_pem.bytes())
        self.client_cert = self._write("client.crt", client.cert_chain_pems[0].bytes())
        self.client_key = self._write("client.key", client.private_key_pem.bytes())
        tls = ServerTls(
            self.server_cert, self.server_key, self.ca, self.ca, self.client_cert, self.client_key
        )
        self.process = EtcdProcess(
            root / "data", unsafe_no_fsync=True, heartbeat_ms=HEARTBEAT_MS, election_ms=ELECTION_MS, tls=tls
        )
        self.auth = auth
        self.root_password = "root-secret"
        self.user, self.password = "brook", "brook-secret"
        self._auth_enabled = False

    def _write(self, name: str, data: bytes) -> Path:
        path = self.dir / name
        path.write_bytes(data)
        return path

    def start(self) -> SecureEtcd:
        self.process.start()
        if self.auth:
            self.ctl("user", "add", "root", f"--new-user-password={self.root_password}")
            self.ctl("user", "grant-role", "root", "root")
            self.ctl("role", "add", "brook")
            self.ctl("role", "grant-permission", "brook", "--prefix=true", "readwrite", "/brook/")
            self.ctl("user", "add", self.user, f"--new-user-password={self.password}")
            self.ctl("user", "grant-role", self.user, "brook")
            self.ctl("auth", "enable")
            self._auth_enabled = True
        return self

    def ctl(self, *args: str) -> str:
        binary = self.process.binary.parent / "etcdctl"
        cmd = [
            str(binary if binary.exists() else "etcdctl"),
            "--endpoints", self.process.client_url,
            "--cacert", str(self.ca), "--cert", str(self.client_cert), "--key", str(self.client_key),
        ]  # fmt: skip
        if self._auth_enabled:
            cmd += ["--user", f"root:{self.root_password}"]
        out = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise RuntimeError(f"etcdctl {' '.join(args)}: {out.stderr.strip()}")
        return out.stdout

    def broker_args(self, *, user: bool = True, ca: Path | None = None) -> list[str]:
        """`brook broker` flags to reach this etcd (the password in a file)."""
        out = [
            "--etcd-cacert", str(ca or self.ca),
            "--etcd-cert", str(self.client_cert), "--etcd-key", str(self.client_key),
        ]  # fmt: skip
        if user and self.auth:
            out += ["--etcd-user", self.user, "--etcd-password-file", str(self.password_file())]
        return out

    def password_file(self, password: str | None = None) -> Path:
        return self._write(f"password-{password or 'ok'}", (password or self.password).encode())

    def stop(self) -> None:
        self.process.stop()
