#!/usr/bin/env python
"""How long a large group takes to settle after a member joins or leaves: the consumer group protocol
(KIP-848) against the classic one (figures printed, not a test).

    .venv/bin/python bench/rebalance_bench.py [--members 50] [--partitions 1000] [--repeats 3]
        [--protocols consumer,classic] [--classic-assignor cooperative-sticky] [--kafka]

Starts one broker (`brook broker` with its default group timings, or Apache Kafka 4.4 with
`--kafka`), creates a topic of `--partitions` partitions and runs `--members` confluent-kafka consumers
of one group in threads of this process (`group.protocol=consumer`, or classic with
`--classic-assignor`). Once the group is settled, a member joins and then leaves again, `--repeats`
times. Settled: the members' own assignments (what their rebalance callbacks were given) cover every
partition exactly once, each member owning some, and the broker describes the group as Stable. Each
row gives the time from the join (subscribe) or the leave (close) to settled, and the broker's CPU
over that time.
Raw results go to bench/results/rebalance-<time>.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "services"), str(REPO / "bench")]

from confluent_kafka import Consumer, ConsumerGroupState  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import raw  # noqa: E402
from broker_bench import BrokerProcess, machine_info, proc_cpu_seconds  # noqa: E402

TOPIC = "rebalance"


class Member:
    """One consumer in its own thread, polling; `owned` follows its rebalance callbacks."""

    def __init__(self, conf: dict[str, Any]) -> None:
        self.owned: set[int] = set()
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._conf = conf
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _assigned(self, _c: Any, parts: list[Any]) -> None:
        with self.lock:
            self.owned.update(p.partition for p in parts)

    def _revoked(self, _c: Any, parts: list[Any]) -> None:
        with self.lock:
            self.owned.difference_update(p.partition for p in parts)

    def _run(self) -> None:
        c = Consumer(self._conf)
        c.subscribe([TOPIC], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked)
        while not self._stop.is_set():
            c.poll(0.05)
        c.close()  # leaves the group
        with self.lock:
            self.owned.clear()

    def leave(self) -> None:
        self._stop.set()
        self._thread.join(60)


@dataclass
class Row:
    protocol: str
    event: str
    seconds: list[float] = field(default_factory=list)
    broker_cpu_s: list[float] = field(default_factory=list)


def settled(members: list[Member], partitions: int, admin: AdminClient, group: str) -> bool:
    """Every member owns a share (there are more partitions than members), together every partition
    once, and the broker says Stable."""
    owned = []
    for m in members:
        with m.lock:
            owned.append(set(m.owned))
    if not all(owned) or sum(len(o) for o in owned) != partitions or len(set().union(*owned)) != partitions:
        return False
    desc = admin.describe_consumer_groups([group])[group].result(timeout=10)
    return bool(desc.state == ConsumerGroupState.STABLE)


def wait_settled(
    members: list[Member], partitions: int, admin: AdminClient, group: str, limit: float
) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if settled(members, partitions, admin, group):
            return time.monotonic() - t0
        time.sleep(0.05)
    raise TimeoutError(f"group {group} not settled within {limit} s")


def run_protocol(
    bootstrap: str, broker_pid: int, protocol: str, a: argparse.Namespace, rows: list[Row]
) -> None:
    group = f"bench-{protocol}-{time.monotonic_ns()}"
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf["partition.assignment.strategy"] = a.classic_assignor
    admin = AdminClient({"bootstrap.servers": bootstrap})
    members = [Member(conf) for _ in range(a.members)]
    start = Row(protocol, f"{a.members} members start")
    cpu0 = proc_cpu_seconds(broker_pid)
    start.seconds.append(wait_settled(members, a.partitions, admin, group, a.limit))
    start.broker_cpu_s.append(proc_cpu_seconds(broker_pid) - cpu0)
    join, leave = Row(protocol, "1 member joins"), Row(protocol, "1 member leaves")
    try:
        for _ in range(a.repeats):
            cpu0 = proc_cpu_seconds(broker_pid)
            members.append(Member(conf))
            join.seconds.append(wait_settled(members, a.partitions, admin, group, a.limit))
            join.broker_cpu_s.append(proc_cpu_seconds(broker_pid) - cpu0)
            cpu0 = proc_cpu_seconds(broker_pid)
            members.pop().leave()
            leave.seconds.append(wait_settled(members, a.partitions, admin, group, a.limit))
            leave.broker_cpu_s.append(proc_cpu_seconds(broker_pid) - cpu0)
    finally:
        for m in members:
            m.leave()
    rows += [start, join, leave]


@contextmanager
def broker(root: Path, kafka: bool) -> Any:
    """(bootstrap, pid) of a fresh broker."""
    if kafka:
        from tests.support.kafka_peer import KafkaPeer

        k = KafkaPeer(root / "kafka", nodes=1, heap="1g").start()
        try:
            yield k.bootstrap, k.pids()[1]
        finally:
            k.stop()
        return
    b = BrokerProcess(root / "brook").start()
    try:
        yield b.bootstrap, b.pid
    finally:
        b.stop()


def fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=50)
    ap.add_argument("--partitions", type=int, default=1000, help="more than --members")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--protocols", default="consumer,classic")
    ap.add_argument("--classic-assignor", default="cooperative-sticky")
    ap.add_argument("--limit", type=float, default=180.0, help="seconds to wait for a group to settle")
    ap.add_argument("--kafka", action="store_true", help="Apache Kafka 4.4 instead of Brook")
    a = ap.parse_args()
    machine = machine_info()
    print(machine, flush=True)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="rebalance-") as tmp, broker(Path(tmp), a.kafka) as (boot, pid):
        admin = AdminClient({"bootstrap.servers": boot})
        admin.create_topics([NewTopic(TOPIC, a.partitions, 1)])[TOPIC].result(60)
        for protocol in a.protocols.split(","):
            run_protocol(boot, pid, protocol, a, rows)
    name = "Kafka 4.4" if a.kafka else "Brook"
    print(f"\n{name}: {a.members} members, {a.partitions} partitions; seconds to settle, median (range)")
    print(f"{'protocol':<10} {'event':<22} {'seconds':<20} broker CPU-s")
    for r in rows:
        print(f"{r.protocol:<10} {r.event:<22} {fmt(r.seconds):<20} {fmt(r.broker_cpu_s)}")
    raw.save("rebalance", machine, {"broker": name, "rows": rows})


if __name__ == "__main__":
    main()
