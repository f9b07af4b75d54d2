#!/usr/bin/env python
"""Share groups (KIP-932) on one broker: acknowledged records per second on one partition with 1, 4
and 16 ShareConsumer worker processes (confluent-kafka, implicit acknowledgement), counted by the
broker's own brook_share_records_acknowledged_total (figures printed, not a test).

    .venv/bin/python bench/share_bench.py [--records 50000] [--workers 1 4 16]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "services")]

from bench.raw import save  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from tests.integration.test_clients import create_topic  # noqa: E402
from tests.support.broker import BrokerProcess  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

WORKER = """
import signal, sys, threading
from confluent_kafka import ShareConsumer
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2]})
c.subscribe([sys.argv[3]])
while not stop.is_set():
    c.poll(0.2)
c.close()
"""


def acknowledged(metrics_port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "brook_share_records_acknowledged_total":
                return s.value
    return 0.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(b: BrokerProcess, metrics_port: int, workers: int, records: int) -> dict[str, float]:
    group = f"bench-{workers}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("group", group, incremental_configs=[entry])
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(15)
    assert b.proc is not None
    start_acked, start_cpu, start = acknowledged(metrics_port), cpu_seconds(b.proc.pid), time.perf_counter()
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, b.bootstrap, group, "q"]) for _ in range(workers)
    ]
    try:
        # Steady state: the rate between 10 % and 90 % of the records acknowledged (the workers'
        # start-up and the group's joins before, the last stragglers after, are not in it).
        deadline, marks = start + 600, {}
        while time.perf_counter() < deadline:
            done = acknowledged(metrics_port) - start_acked
            now = time.perf_counter()
            for q in (0.1, 0.9):
                if done >= q * records and q not in marks:
                    marks[q] = (now, done)
            if done >= records:
                break
            time.sleep(0.05)
        seconds = time.perf_counter() - start
        cpu = cpu_seconds(b.proc.pid) - start_cpu
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
    (t10, n10), (t90, n90) = marks[0.1], marks[0.9]
    steady = (n90 - n10) / max(t90 - t10, 1e-6)
    return {"workers": workers, "acknowledged": done, "seconds": seconds, "per_s": steady, "cpu_s": cpu}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 4, 16])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="share-bench-") as tmp:
        metrics_port = free_port()
        b = BrokerProcess(Path(tmp) / "data", args=["--metrics-port", str(metrics_port)]).start()
        try:
            create_topic(b.bootstrap, "q", 1)
            p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20})
            for i in range(args.records):
                p.produce("q", f"job-{i:08d}".encode() + b"x" * 90)
            assert p.flush(60) == 0
            rows = [run(b, metrics_port, w, args.records) for w in args.workers]
        finally:
            b.stop()
    load = os.getloadavg()
    machine = f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    print(f"{args.records} records of 100 B on one partition; {machine}")
    print(f"{'workers':>8} {'acked/s (10-90 %)':>18} {'total s':>8} {'broker CPU-s':>13}")
    for r in rows:
        print(f"{r['workers']:>8} {r['per_s']:>18.0f} {r['seconds']:>8.1f} {r['cpu_s']:>13.1f}")
    save("share_bench", machine, rows)


if __name__ == "__main__":
    main()
