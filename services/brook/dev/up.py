"""`brook dev up`: a local cluster (a real etcd and N broker processes) for development.

With `--brokers 1` it is a single broker in this process, its metadata in the data directory.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

from brook.broker.settings import BrokerSettings
from brook.server.runner import run

from .etcd import EtcdProcess


def dev_up(data_dir: Path | None, port: int, brokers: int, event_loop: str = "asyncio") -> None:
    directory = data_dir or Path(tempfile.mkdtemp(prefix="brook-dev-"))
    directory.mkdir(parents=True, exist_ok=True)
    print(f"data: {directory}", flush=True)
    if brokers <= 1:
        settings = BrokerSettings(
            node_id=0, host="127.0.0.1", port=port, data_dir=directory / "broker-0", event_loop=event_loop
        )
        run(settings, lambda server: print(f"bootstrap: 127.0.0.1:{server.port}", flush=True))
        return
    _cluster(directory, port, brokers, event_loop)


def _cluster(directory: Path, port: int, brokers: int, event_loop: str) -> None:
    etcd = EtcdProcess(directory / "etcd")
    etcd.start()
    print(f"etcd: {etcd.endpoint}", flush=True)
    procs: list[subprocess.Popen[bytes]] = []
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        for i in range(brokers):
            log = open(directory / f"broker-{i}.log", "ab")  # noqa: SIM115 - the child owns it
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "brook.cli",
                        "broker",
                        "--node-id",
                        str(i),
                        "--port",
                        str(port + i),
                        "--data-dir",
                        str(directory / f"broker-{i}"),
                        "--etcd-endpoints",
                        etcd.endpoint,
                        "--default-replication-factor",
                        str(min(3, brokers)),
                        "--event-loop",
                        event_loop,
                    ],
                    stdout=subprocess.PIPE,
                    stderr=log,
                    start_new_session=True,
                )
            )
        for i, proc in enumerate(procs):
            assert proc.stdout is not None
            line = proc.stdout.readline().decode().strip()
            if not line.startswith("bootstrap:"):
                raise SystemExit(f"broker {i} did not start; see {directory / f'broker-{i}.log'}")
            print(line, flush=True)
        print(f"logs: {directory}/broker-*.log; Ctrl-C stops the cluster", flush=True)
        while not stopping and all(p.poll() is None for p in procs):
            time.sleep(0.2)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(30)
            if p.poll() is None:
                p.kill()
        etcd.stop()
