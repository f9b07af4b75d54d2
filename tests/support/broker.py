"""A real `brook broker` process on a free 127.0.0.1 port, started and stopped by tests."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from .ports import free_port


class BrokerProcess:
    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        args: list[str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
        host: str = "127.0.0.1",
        wrap: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        """`preexec_fn` runs in the child before the broker starts (e.g. to set a resource limit).
        `wrap` goes before the command (e.g. `ip netns exec <ns>`: it execs, so the pid is the
        broker's), `env` is added to its environment (e.g. LD_PRELOAD)."""
        self.data_dir = data_dir
        self.host = host
        self.wrap = wrap or []
        self.env = env
        self.preexec_fn = preexec_fn
        self.port = port or free_port()
        self.args = args or []
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"broker-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 60.0) -> BrokerProcess:  # generous: a loaded 2-core machine
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [
            *self.wrap,
            sys.executable,
            "-m",
            "brook.cli",
            "--log-level",
            "INFO",
            "broker",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            *(["--host", self.host] if self.host != "127.0.0.1" else []),
            *self.args,
        ]
        log = open(self.log_path, "a")  # noqa: SIM115 - handed to the child process
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=log,
            preexec_fn=self.preexec_fn,
            env={**os.environ, **self.env} if self.env else None,
        )
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        buf = ""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"broker exited with {self.proc.returncode}; see {self.log_path}:\n"
                    + self.log_path.read_text()[-3000:]
                )
            with contextlib.suppress(BlockingIOError):
                buf += os.read(self.proc.stdout.fileno(), 4096).decode()
            if "bootstrap:" in buf:
                return self
            time.sleep(0.05)
        self.kill()
        raise TimeoutError(f"broker did not start within {timeout}s; see {self.log_path}")

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait: a clean shutdown. Returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        """kill -9: no shutdown work at all, like a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def log_text(self) -> str:
        return self.log_path.read_text()

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()
