#!/usr/bin/env python
"""Idle cost of partitions: each broker's CPU while nothing is produced (figures printed, not a test).

    .venv/bin/python bench/idle_cpu.py [--partitions 300,1500] [--seconds 30] [--settle 10]
        [--profile DIR] [--kafka]

Starts etcd and 3 brokers (bench/cluster_bench.py's cluster, production timings), then for each
partition count creates topics (RF=3, at most 500 partitions each) up to that many partitions in all,
waits for every ISR to be whole and `--settle` seconds more, and measures each broker's utime+stime
from /proc over `--seconds` (and counts its open files). This is the followers' replication fetches
(and the leaders' answers) with nothing new to fetch, plus the brokers' timers. With `--profile` it
also runs `py-spy record` (raw collapsed stacks) on broker 0 for the measured period. With `--kafka`
the same on 3 nodes of Apache Kafka 4.4 in KRaft mode (tests/support/kafka_peer.py, each broker and
controller, -Xmx1g, Kafka's defaults otherwise): the same topics, the same wait, the same measure.
Raw results go to bench/results/idle_cpu-<time>.json (idle_cpu_kafka-<time>.json with --kafka).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "services"), str(REPO / "bench")]

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import raw  # noqa: E402
from broker_bench import NCPU, machine_busy_seconds, proc_cpu_seconds  # noqa: E402
from cluster_bench import BenchCluster  # noqa: E402


class KafkaIdleCluster(BenchCluster):
    """3 Kafka nodes with what this script asks of BenchCluster: create_topic, wait_isr (inherited: it
    asks only `metadata`), pids, stop."""

    def __init__(self, root: Path) -> None:  # no Brook cluster: not BenchCluster's __init__
        from tests.support.kafka_peer import KafkaPeer

        self.peer = KafkaPeer(root, nodes=3, heap="1g")

    def start(self) -> KafkaIdleCluster:
        self.peer.start()
        return self

    def stop(self) -> None:
        self.peer.stop()

    @property
    def bootstrap(self) -> str:
        return self.peer.bootstrap

    def pids(self) -> dict[int, int]:
        return self.peer.pids()

    def metadata(self, topic: str | None = None) -> Any:
        return AdminClient({"bootstrap.servers": self.peer.bootstrap}).list_topics(topic, timeout=10)

    def create_topic(self, name: str, rf: int, partitions: int = 1) -> None:
        admin = AdminClient({"bootstrap.servers": self.peer.bootstrap})
        topic = NewTopic(
            name, num_partitions=partitions, replication_factor=rf, config={"min.insync.replicas": "2"}
        )
        admin.create_topics([topic])[name].result(60)


def _py_spy() -> str:
    """py-spy from PATH, else the one installed beside this Python (the project's venv)."""
    beside = Path(sys.executable).parent / "py-spy"
    return shutil.which("py-spy") or (str(beside) if beside.exists() else "py-spy")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", default="300,1500", help="total partition counts to measure, ascending")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--settle", type=float, default=10.0)
    ap.add_argument("--profile", type=Path, default=None, help="a directory for py-spy's raw stacks")
    ap.add_argument("--kafka", action="store_true", help="3 nodes of Apache Kafka 4.4 instead of Brook")
    a = ap.parse_args()
    totals = [int(x) for x in a.partitions.split(",")]
    root = Path(tempfile.mkdtemp(prefix="idle-"))
    bc = KafkaIdleCluster(root).start() if a.kafka else BenchCluster(root, lease_ttl=6).start()
    results: list[dict[str, object]] = []
    have = 0
    try:
        for total in totals:
            t0 = time.monotonic()
            names = []
            while have < total:  # topics of at most 500 partitions: one request each stays short
                n = min(500, total - have)
                names.append(f"idle-{have}-{n}")
                bc.create_topic(names[-1], rf=3, partitions=n)
                have += n
            created = time.monotonic() - t0
            for name in names:
                bc.wait_isr(name, 3, timeout=600)
            time.sleep(a.settle)
            pids = bc.pids()
            spy = None
            if a.profile is not None:
                a.profile.mkdir(parents=True, exist_ok=True)
                out = a.profile / f"idle-{total}-b0.txt"
                spy = subprocess.Popen(
                    [_py_spy(), "record", "--pid", str(pids[0]), "--format", "raw",
                     "--duration", str(int(a.seconds)), "--rate", "200", "-o", str(out)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
            cpu0 = {b: proc_cpu_seconds(pid) for b, pid in pids.items()}
            busy0, _ = machine_busy_seconds()
            t0 = time.monotonic()
            time.sleep(a.seconds)
            cpu1 = {b: proc_cpu_seconds(pid) for b, pid in pids.items()}
            busy1, _ = machine_busy_seconds()
            wall = time.monotonic() - t0
            if spy is not None:
                spy.wait(60)
            pct = {b: 100 * (cpu1[b] - cpu0[b]) / wall for b in pids}
            # Open files bound the partitions a broker can host (max.broker.partitions).
            fds = {b: len(os.listdir(f"/proc/{pid}/fd")) for b, pid in pids.items()}
            other = max(0.0, 100 * ((busy1 - busy0) - sum(cpu1[b] - cpu0[b] for b in pids)) / wall)
            results.append(
                {
                    "partitions": total,
                    "create_s": created,
                    "broker_pct": pct,
                    "broker_open_files": fds,
                    "other_pct": other,
                    "seconds": wall,
                }
            )
            print(
                f"{total} partitions RF=3: broker CPU "
                + " ".join(f"b{b}:{v:.1f}%" for b, v in sorted(pct.items()))
                + f"; other {other:.0f}%; created in {created:.1f} s; open files "
                + " ".join(f"b{b}:{n}" for b, n in sorted(fds.items())),
                flush=True,
            )
    except BaseException:
        keep = Path(tempfile.mkdtemp(prefix="idle-logs-"))
        for log in root.rglob("*.log"):
            shutil.copy(log, keep / log.name)
        print(f"failed; the brokers' and etcd's logs are in {keep}", file=sys.stderr)
        raise
    finally:
        bc.stop()
        shutil.rmtree(root, ignore_errors=True)
    who = "3 Kafka 4.4 nodes" if a.kafka else "3 Brook brokers"
    machine = f"{time.strftime('%Y-%m-%d')} {NCPU} cores, {who}, load {os.getloadavg()[0]:.2f}"
    print(machine)
    raw.save("idle_cpu_kafka" if a.kafka else "idle_cpu", machine, results)


if __name__ == "__main__":
    main()
