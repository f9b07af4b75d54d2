"""`brook dev up`: a local cluster (a real etcd and N supervised broker processes) for development.

Each broker gets fixed ports (`--port`+i for Kafka, `--metrics-port`+i for /metrics, /healthz, /readyz;
0: free ports picked once) so a broker that dies is restarted where clients and the printed URLs expect
it, on its own data directory. With `--brokers 1` there is no etcd (metadata in the data directory).
SIGINT, SIGTERM and SIGHUP stop everything this command started; a second one kills at once.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

from brook.cli_exit import fail

from .etcd import EtcdNotFoundError, EtcdProcess
from .supervisor import BrokerSpec, Supervisor, exit_reason

START_TIMEOUT_S = 120.0  # a loaded 2-core laptop starting three interpreters
LOCK_FILE = "dev-up.lock"


class DevUpError(Exception):
    """A reason `brook dev up` cannot start, said in one line."""


def _say(line: str) -> None:
    print(line, flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ports(first: int, count: int, flag: str) -> list[int]:
    if first == 0:
        return [_free_port() for _ in range(count)]
    if not 1 <= first <= 65535 - count + 1:
        raise DevUpError(f"{flag} {first}: {count} ports from it must fit in 1-65535")
    return [first + i for i in range(count)]


def _check_free(port: int, what: str, flag: str) -> None:
    """Bind as the broker will (SO_REUSEADDR): fails only if something listens there already."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise DevUpError(f"port {port} ({what}): {e.strerror}") from None
            raise DevUpError(
                f"port {port} ({what}) is in use, perhaps by a `brook dev up` still running: stop it "
                f"(`ss -ltnp 'sport = :{port}'` shows the process) or choose another {flag}"
            ) from None


@contextlib.contextmanager
def _lock(directory: Path) -> Iterator[None]:
    """One `brook dev up` per data directory: two would run two brokers on the same logs."""
    path = directory / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise DevUpError(
                f"--data-dir {directory} is used by another `brook dev up` (pid {owner}): "
                f"stop it (kill {owner}) or choose another --data-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


class _Stop:
    """SIGINT/SIGTERM/SIGHUP: stop cleanly; a second one: SIGKILL every child at once (the clean stop's
    waits then return)."""

    def __init__(self) -> None:
        self.requested = 0
        self.children: Callable[[], list[int]] = list
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.requested += 1
        if self.requested > 1:
            for pid in self.children():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def dev_up(
    data_dir: Path | None,
    port: int,
    brokers: int,
    event_loop: str = "asyncio",
    metrics_port: int = 9308,
) -> None:
    if brokers < 1:
        fail(f"--brokers {brokers}: give 1 or more")
    directory = (data_dir or Path(tempfile.mkdtemp(prefix="brook-dev-"))).resolve()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        fail(f"--data-dir {directory}: {e.strerror}")
    stop = _Stop()
    try:
        with _lock(directory):
            _run(directory, port, metrics_port, brokers, event_loop, stop)
    except DevUpError as e:
        fail(str(e))


def _specs(
    directory: Path, port: int, metrics_port: int, brokers: int, event_loop: str, etcd: str
) -> list[BrokerSpec]:
    kafka_ports = _ports(port, brokers, "--port")
    http_ports = _ports(metrics_port, brokers, "--metrics-port")
    for i in range(brokers):
        _check_free(kafka_ports[i], f"broker {i}", "--port")
        _check_free(http_ports[i], f"broker {i} metrics", "--metrics-port")
    rf = str(min(3, brokers))
    # One embedded Iceberg catalog for all the brokers: a partition's table goes on after a failover.
    (directory / "iceberg").mkdir(exist_ok=True)
    iceberg_uri, iceberg_warehouse = iceberg_catalog(directory)
    specs = []
    for i in range(brokers):
        args = [
            "--node-id", str(i),
            "--port", str(kafka_ports[i]),
            "--metrics-host", "127.0.0.1",
            "--metrics-port", str(http_ports[i]),
            "--data-dir", str(directory / f"broker-{i}"),
            "--default-replication-factor", rf,
            "--offsets-topic-replication-factor", rf,
            "--event-loop", event_loop,
        ]  # fmt: skip
        if etcd:
            args += ["--etcd-endpoints", etcd]
        args += ["--iceberg-catalog-uri", iceberg_uri, "--iceberg-warehouse", iceberg_warehouse]
        log = directory / f"broker-{i}.log"
        specs.append(BrokerSpec(i, kafka_ports[i], http_ports[i], directory / f"broker-{i}", log, args))
    return specs


def iceberg_catalog(directory: Path) -> tuple[str, str]:
    """The catalog URI and warehouse of a dev cluster's Iceberg topics (docs/iceberg.md)."""
    return f"sqlite:///{directory / 'iceberg' / 'catalog.db'}", (directory / "iceberg" / "warehouse").as_uri()


def _run(directory: Path, port: int, metrics_port: int, brokers: int, event_loop: str, stop: _Stop) -> None:
    etcd: EtcdProcess | None = None
    supervisor: Supervisor | None = None
    try:
        if brokers > 1:
            try:
                etcd = EtcdProcess(directory / "etcd", log_path=directory / "etcd.log", die_with_parent=True)
            except EtcdNotFoundError as e:
                raise DevUpError(str(e)) from None
        specs = _specs(directory, port, metrics_port, brokers, event_loop, etcd.endpoint if etcd else "")
        _say(f"data: {directory}  (restart on the same data: ./scripts/up --data-dir {directory})")
        if etcd is not None:
            try:
                etcd.start(timeout=60)
            except (RuntimeError, TimeoutError) as e:
                raise DevUpError(f"etcd did not start: {str(e).splitlines()[0]}") from None
            assert etcd.proc is not None
            _say(f"etcd: {etcd.endpoint} (pid {etcd.proc.pid}, log {etcd.log_path})")
        supervisor = Supervisor(specs, _say)
        stop.children = lambda: [*supervisor.pids(), *([etcd.proc.pid] if etcd and etcd.proc else [])]
        supervisor.start()
        _wait_started(supervisor, stop)
        if stop.requested:
            return
        for s, pid in zip(specs, supervisor.pids(), strict=True):
            _say(f"broker {s.node_id}: bootstrap {s.bootstrap} (pid {pid}); {s.urls()}")
        _say(f"bootstrap: {','.join(s.bootstrap for s in specs)}")
        _say(f"iceberg catalog: {iceberg_catalog(directory)[0]} (of topics with brook.iceberg.enabled)")
        _say(f"logs: {directory}/broker-*.log; Ctrl-C stops the cluster")
        _supervise(supervisor, etcd, stop)
    finally:
        if supervisor is not None:
            if stop.requested:
                _say("stopping: brokers hand their leaderships over, then etcd")
            supervisor.stop()
        if etcd is not None:
            etcd.stop()


def _wait_started(supervisor: Supervisor, stop: _Stop) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not stop.requested and not supervisor.all_ready():
        if (failed := supervisor.failed_start()) is not None:
            spec, why = failed
            raise DevUpError(f"broker {spec.node_id} did not start: {why} (log: {spec.log})")
        if time.monotonic() > deadline:
            late = [c.spec for c in supervisor.children if not c.ready]
            raise DevUpError(
                f"broker {late[0].node_id} not serving after {START_TIMEOUT_S:g}s (log: {late[0].log})"
            )
        supervisor.read()
        time.sleep(0.1)


def _supervise(supervisor: Supervisor, etcd: EtcdProcess | None, stop: _Stop) -> None:
    etcd_retry_at: float | None = None
    while not stop.requested:
        supervisor.step()
        if etcd is not None and etcd.proc is not None and (code := etcd.proc.poll()) is not None:
            _say(f"etcd (pid {etcd.proc.pid}) {exit_reason(code)}; restarting it (log: {etcd.log_path})")
            etcd.proc = None
            etcd_retry_at = time.monotonic()
        if etcd is not None and etcd_retry_at is not None and time.monotonic() >= etcd_retry_at:
            try:
                etcd.start(timeout=60)
                etcd_retry_at = None
                _say(f"etcd is back: {etcd.endpoint}")
            except (RuntimeError, TimeoutError) as e:
                etcd.proc = None
                etcd_retry_at = time.monotonic() + 10
                _say(f"etcd did not restart ({str(e).splitlines()[0]}); trying again in 10s")
        time.sleep(0.2)
