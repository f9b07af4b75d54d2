"""`brook dev up` as a developer runs it (a subprocess with a real etcd and three broker processes): it
prints each broker's addresses, restarts a broker killed with -9 on its own data while the others keep
serving real clients, stops everything on SIGHUP/SIGINT, restarts on the same --data-dir, and refuses a
second run on a data directory or ports in use with one line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import eventually
from tests.support.ports import free_port

pytestmark = pytest.mark.slow

BROKER_LINE = re.compile(
    r"^broker (\d+): bootstrap (\S+) \(pid (\d+)\); metrics (\S+), health (\S+), ready (\S+)$"
)


class DevUp:
    """A running `brook dev up`; its stdout lines are collected by a thread and waited on."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "brook.cli", "dev", "up", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: list[str] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def wait_line(self, pattern: str, timeout: float = 180.0) -> re.Match[str]:
        def found() -> re.Match[str] | None:
            with self._lock:
                return next((m for ln in self.lines if (m := re.search(pattern, ln))), None)

        return eventually(found, timeout, f"a line matching {pattern!r}; got {self.lines}")  # type: ignore[no-any-return]

    def started(self) -> dict[int, re.Match[str]]:
        self.wait_line(r"^logs: ")
        with self._lock:
            return {int(m[1]): m for ln in self.lines if (m := BROKER_LINE.match(ln))}

    def pids(self) -> set[int]:
        with self._lock:
            text = "\n".join(self.lines)
        return {int(p) for p in re.findall(r"\(pid (\d+)", text)}

    def stop(self, sig: signal.Signals) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(120)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


@pytest.fixture
def dev_up() -> Iterator[list[DevUp]]:
    runs: list[DevUp] = []
    yield runs
    for r in runs:
        r.kill()  # its brokers and etcd get SIGTERM from the kernel (parent-death signal)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def processes_using(directory: Path) -> list[int]:
    """Pids of processes whose command line names `directory` (brokers, etcd)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(directory) in cmdline and alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 180_000})
    errors: list[object] = []
    for v in values:
        p.produce(topic, v.encode(), on_delivery=lambda err, _msg: err and errors.append(err))
    assert p.flush(200) == 0 and not errors, errors


def consume(bootstrap: str, topic: str, count: int, timeout: float = 180.0) -> list[str]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"t-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.append((m.value() or b"").decode())
    finally:
        c.close()
    return got


def get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as r:
        return int(r.status)


def test_a_killed_broker_comes_back_on_its_data_while_the_others_serve(
    tmp_path: Path, dev_up: list[DevUp]
) -> None:
    data = tmp_path / "dev"
    args = ("--brokers", "3", "--port", "0", "--metrics-port", "0", "--data-dir", str(data))
    up = DevUp(*args)
    dev_up.append(up)
    brokers = up.started()
    assert sorted(brokers) == [0, 1, 2], up.lines
    for m in brokers.values():
        assert eventually(lambda m=m: get(m[5]) == 200 and get(m[6]) == 200 and get(m[4]) == 200, 60)
    bootstrap = ",".join(m[2] for m in brokers.values())

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics(
        [NewTopic("solo", 1, -1, replica_assignment=[[1]]), NewTopic("shared", 1, replication_factor=3)]
    ).values():
        f.result(60)
    before = [f"before-{i}" for i in range(20)]
    produce(bootstrap, "solo", before)  # lives on broker 1 only
    produce(bootstrap, "shared", before)

    killed = int(brokers[1][3])
    os.kill(killed, signal.SIGKILL)
    up.wait_line(rf"^broker 1 \(pid {killed}\) killed by SIGKILL; restarting in \S+ on {data}/broker-1")

    others = f"{brokers[0][2]},{brokers[2][2]}"
    after = [f"after-{i}" for i in range(20)]
    produce(others, "shared", after)
    assert consume(others, "shared", 40) == before + after

    back = up.wait_line(r"^broker 1 is back \(pid (\d+)\): bootstrap (\S+)$")
    assert back[2] == brokers[1][2] and int(back[1]) != killed
    assert consume(brokers[1][2], "solo", 20) == before  # its data survived the kill

    pids = up.pids()
    assert len(pids) == 5  # etcd, three brokers, broker 1's second life
    assert up.stop(signal.SIGHUP) == 0
    assert not [p for p in pids if alive(p)] and not processes_using(data), up.lines

    # The same data again (as the README says): the records are still there.
    again = DevUp(*args)
    dev_up.append(again)
    restarted = again.started()
    assert consume(restarted[1][2], "solo", 20) == before
    assert consume(restarted[0][2], "shared", 40) == before + after
    pids = again.pids()
    assert again.stop(signal.SIGINT) == 0
    assert not [p for p in pids if alive(p)] and not processes_using(data), again.lines


def test_a_second_run_on_busy_ports_or_data_gets_one_line(tmp_path: Path, dev_up: list[DevUp]) -> None:
    port, metrics = free_port(), free_port()
    up = DevUp(
        "--brokers",
        "1",
        "--port",
        str(port),
        "--metrics-port",
        str(metrics),
        "--data-dir",
        str(tmp_path / "a"),
    )
    dev_up.append(up)
    up.started()

    def second(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "brook.cli", "dev", "up", "--brokers", "1", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    r = second("--port", str(port), "--metrics-port", "0", "--data-dir", str(tmp_path / "b"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"port {port} (broker 0) is in use" in r.stderr and "--port" in r.stderr, r.stderr
    r = second("--port", "0", "--metrics-port", "0", "--data-dir", str(tmp_path / "a"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"used by another `brook dev up` (pid {up.proc.pid})" in r.stderr, r.stderr
    assert up.proc.poll() is None
    assert up.stop(signal.SIGTERM) == 0
    assert not processes_using(tmp_path / "a")


def test_killing_dev_up_itself_leaves_no_broker_or_etcd(tmp_path: Path, dev_up: list[DevUp]) -> None:
    data = tmp_path / "dev"
    up = DevUp("--brokers", "2", "--port", "0", "--metrics-port", "0", "--data-dir", str(data))
    dev_up.append(up)
    assert sorted(up.started()) == [0, 1]
    children = up.pids()
    assert len(children) == 3 and all(alive(p) for p in children)
    up.kill()  # SIGKILL: no clean-up code of its own runs; the kernel's parent-death signal does it
    eventually(lambda: not processes_using(data), 90, f"no process left on {data}")
    assert not [p for p in children if alive(p)]
