"""Broker processes kept running: each is started, watched, reported when it dies and restarted with
backoff on the same ports and data directory, and stopped cleanly (SIGTERM, then SIGKILL) at the end.

Children run in their own session (a terminal's Ctrl-C reaches only the supervisor, which stops them in
order) and get SIGTERM from the kernel if the supervisor itself dies (PR_SET_PDEATHSIG), so even a
`kill -9` of the supervisor leaves no broker behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PR_SET_PDEATHSIG = 1
BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
STABLE_S = 60.0  # a broker up this long before it dies restarts with the shortest backoff again


def die_with_parent(sig: signal.Signals = signal.SIGTERM) -> None:
    """preexec_fn: send this child `sig` when its parent dies (Linux; elsewhere nothing)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)


def exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def last_error(log: Path) -> str:
    """The line of a broker's log that says why it stopped: its one-line start-up error, else the last."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    for line in reversed(lines[-50:]):
        if line.startswith("brook: "):
            return line.removeprefix("brook: ")
    return lines[-1] if lines else ""


@dataclass
class BrokerSpec:
    node_id: int
    port: int
    metrics_port: int
    data_dir: Path
    log: Path
    args: list[str]  # `brook broker` flags

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def urls(self) -> str:
        base = f"http://127.0.0.1:{self.metrics_port}"
        return f"metrics {base}/metrics, health {base}/healthz, ready {base}/readyz"


@dataclass
class _Child:
    spec: BrokerSpec
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    ready: bool = False
    buffer: bytes = b""
    failures: int = 0
    restart_at: float | None = None
    restarts: int = 0


class Supervisor:
    """Runs `brook broker` children; `step()` does one round of watching (call it in a loop)."""

    def __init__(self, specs: list[BrokerSpec], say: Callable[[str], None]) -> None:
        self.children = [_Child(s) for s in specs]
        self.say = say

    def _spawn(self, c: _Child) -> None:
        s = c.spec
        s.data_dir.mkdir(parents=True, exist_ok=True)
        with open(s.log, "ab") as log:
            c.proc = subprocess.Popen(
                [sys.executable, "-m", "brook.cli", "broker", *s.args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
                preexec_fn=die_with_parent,  # one prctl syscall; dev up runs no threads
            )
        assert c.proc.stdout is not None
        os.set_blocking(c.proc.stdout.fileno(), False)
        c.started_at = time.monotonic()
        c.ready = False
        c.buffer = b""
        c.restart_at = None

    def start(self) -> None:
        for c in self.children:
            self._spawn(c)

    def pids(self) -> list[int]:
        return [c.proc.pid for c in self.children if c.proc is not None and c.proc.poll() is None]

    def all_ready(self) -> bool:
        return all(c.ready for c in self.children)

    def read(self) -> None:
        """Take in what every child printed (marks those that serve)."""
        for c in self.children:
            self._read(c)

    def _read(self, c: _Child) -> None:
        """Drain the child's stdout; its `bootstrap:` line says it serves."""
        if c.proc is None or c.proc.stdout is None or c.proc.stdout.closed:
            return
        with contextlib.suppress(BlockingIOError, OSError):
            while chunk := os.read(c.proc.stdout.fileno(), 65536):
                c.buffer = (c.buffer + chunk)[-4096:]
        if not c.ready and b"bootstrap:" in c.buffer:
            c.ready = True
            if c.restarts:
                self.say(f"broker {c.spec.node_id} is back (pid {c.proc.pid}): bootstrap {c.spec.bootstrap}")

    def failed_start(self) -> tuple[BrokerSpec, str] | None:
        """A child that exited before serving (during the first start): its spec and why."""
        for c in self.children:
            if c.proc is not None and not c.ready and c.proc.poll() is not None:
                self._read(c)
                if not c.ready:
                    return c.spec, last_error(c.spec.log) or exit_reason(c.proc.returncode)
        return None

    def step(self) -> None:
        """Read output, report deaths and schedule restarts, restart those whose backoff is over."""
        now = time.monotonic()
        for c in self.children:
            self._read(c)
            if c.proc is not None and c.restart_at is None and (code := c.proc.poll()) is not None:
                if c.proc.stdout is not None:
                    c.proc.stdout.close()
                ran = now - c.started_at
                c.failures = 0 if ran >= STABLE_S else c.failures + 1
                delay = BACKOFF_S[min(max(c.failures - 1, 0), len(BACKOFF_S) - 1)]
                why = exit_reason(code)
                detail = last_error(c.spec.log) if code > 0 else ""
                self.say(
                    f"broker {c.spec.node_id} (pid {c.proc.pid}) {why}"
                    + (f": {detail}" if detail else "")
                    + f"; restarting in {delay:g}s on {c.spec.data_dir} (log: {c.spec.log})"
                )
                c.restart_at = now + delay
            if c.restart_at is not None and now >= c.restart_at:
                c.restarts += 1
                self._spawn(c)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM every child (a clean shutdown hands leaderships over), SIGKILL what outlives `timeout`."""
        live = [c.proc for c in self.children if c.proc is not None and c.proc.poll() is None]
        for p in live:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for p in live:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(max(0.0, deadline - time.monotonic()))
        self.kill()

    def kill(self) -> None:
        for c in self.children:
            p = c.proc
            if p is not None and p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(10)
            if p is not None and p.stdout is not None:
                p.stdout.close()
