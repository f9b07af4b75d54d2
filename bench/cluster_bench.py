#!/usr/bin/env python
"""Brook cluster benchmark: etcd and 3 real broker processes, RF=3, figures printed (not a test).

    .venv/bin/python bench/cluster_bench.py [--quick] [--lease-ttl S] [--repeats N] [--failovers N]
                                            [--only throughput|failover] [--client-debug CONTEXTS] [--keep]

Starts etcd and 3 `brook broker` processes on loopback (tests/support/cluster.py's Cluster) with the
broker's production timings: --lease-ttl 6 (the CLI default; --lease-ttl changes it) and
--replica-lag-time-max-ms 30000 (the default). Then

  (a) throughput: a confluent-kafka producer, acks=all, enable.idempotence=true, into a topic with RF=3
      and min.insync.replicas=2 (one partition): 1,000,000 x 100 B and 100,000 x 1 KiB, linger.ms=5,
      batch.size=1 MB, no compression. MB/s, records/s, p50/p99 latency (produce() -> delivery report,
      librdkafka's per-message latency, under full load) and broker CPU-s per GB summed over the 3 broker
      processes (/proc/<pid>/stat). The same with acks=1 into an RF=1 topic on the same cluster, for context.
  (b) failover: a producer (acks=all, idempotent, linger.ms=0, otherwise librdkafka's defaults) sends
      one record every ~2 ms to one partition of an RF=3, min.insync.replicas=2 topic with 3 partitions;
      after 2 s that partition's leader gets kill -9. Every other run picks a partition led by the
      controller, so that the controller dies too. Measured: the time from the kill to the first
      successful delivery report of a record produced after the kill, and the longest gap between two
      successful delivery reports. An `etcdctl watch` on the cluster's keys splits that time into lease
      expiry (kill -> the dead broker's registration is deleted), election (-> the controller writes the
      partition's new leader; the controller's log line gives the same time) and client (-> the first
      delivery after the kill: the producer learns the new leader from its metadata refreshes and
      retries). The killed broker is restarted between runs and the next run waits until every ISR is
      whole again. At the end every acknowledged record is read back: none may be missing.

MB = 10^6 bytes, GB = 10^9 bytes; byte figures count record values (payload). Each produce run is preceded
by writing and deleting a file of twice the bytes the brokers will write (RF x payload), so that the page
cache grows into RAM the VM already backs (see broker_bench.warm_memory and docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import itertools
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined, unused-ignore]

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "services")]

from tests.support.cluster import Cluster  # noqa: E402

import raw  # noqa: E402
from broker_bench import (  # noqa: E402 - the sibling script (bench/ is on sys.path when run as a script)
    GB,
    MB,
    NCPU,
    delivery_producer,
    fmt_range,
    machine_busy_seconds,
    p50_p99_ms,
    proc_cpu_seconds,
    produce_all,
    self_cpu_seconds,
    warm_memory,
)
from brook.dev.etcd import find_etcd_binary  # noqa: E402

CLUSTER_NAME = "default"  # the brokers' --cluster-name: etcd keys live under /brook/default/


# ---------------------------------------------------------------------------------------------------
# The cluster


class BenchCluster:
    """tests/support/cluster.py's Cluster with production timings, plus what the benchmark asks of it."""

    def __init__(self, root: Path, lease_ttl: int) -> None:
        self.root = root
        self.lease_ttl = lease_ttl
        # Later flags win over Cluster's short test timings (argparse keeps the last value).
        self.cluster = Cluster(
            root,
            brokers=3,
            extra_args=[
                "--lease-ttl", str(lease_ttl),
                "--replica-lag-time-max-ms", "30000",
                "--controlled-shutdown-timeout", "10",
            ],
        )  # fmt: skip
        self.admin: AdminClient | None = None

    def start(self) -> BenchCluster:
        self.cluster.start()
        self.admin = AdminClient({"bootstrap.servers": self.cluster.bootstrap})
        return self

    def stop(self) -> None:
        self.cluster.stop()

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def pids(self) -> dict[int, int]:
        """broker id -> pid of every running broker."""
        out: dict[int, int] = {}
        for b in self.cluster.brokers:
            if b.proc is not None and b.proc.poll() is None:
                out[int(b.args[1])] = b.proc.pid
        return out

    def log_paths(self) -> dict[int, Path]:
        return {int(b.args[1]): b.log_path for b in self.cluster.brokers}

    def metadata(self, topic: str | None = None) -> Any:
        # A fresh client each time: librdkafka's cached view may lag, and a dead broker stays in it.
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return admin.list_topics(topic, timeout=10)

    def partition(self, topic: str, index: int = 0) -> tuple[int, list[int], list[int], int]:
        """(leader, replicas, isr, controller id) as the brokers report them."""
        md = self.metadata(topic)
        p = md.topics[topic].partitions[index]
        return int(p.leader), list(p.replicas), list(p.isrs), int(md.controller_id)

    def create_topic(self, name: str, rf: int, partitions: int = 1) -> None:
        assert self.admin is not None
        configs = {"min.insync.replicas": "2"} if rf >= 3 else {}
        futures = self.admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=rf, config=configs)]
        )
        for f in futures.values():
            f.result(30)

    def wait_isr(self, topic: str, size: int, timeout: float = 60.0, stable: float = 1.0) -> float:
        """Wait until every partition of the topic has a leader and `size` in-sync replicas, all of them
        registered brokers, for `stable` seconds on end; returns the seconds waited until that began.

        One look is not enough: while a broker is down, the leader of an idle partition puts it back in
        its ISR every 250 ms and the controller takes it out again a few ms later, and a metadata request
        can land in between (see docs/benchmarks.md, "Cluster (RF=3)")."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        last: Any = None
        since: float | None = None
        while time.monotonic() < deadline:
            try:
                md = self.metadata(topic)
                brokers = set(md.brokers)
                parts = md.topics[topic].partitions
                last = {i: (q.leader, list(q.isrs)) for i, q in parts.items()}
                whole = bool(parts) and all(
                    q.leader >= 0 and len(q.isrs) == size and set(q.isrs) <= brokers for q in parts.values()
                )
            except Exception as e:  # the cluster is moving; ask again
                last, whole = e, False
            now = time.monotonic()
            if not whole:
                since = None
            elif since is None:
                since = now
            elif now - since >= stable:
                return since - t0
            time.sleep(0.1)
        raise TimeoutError(f"{topic}: ISR not {size} replicas within {timeout} s; last {last!r}")

    def requests(self) -> dict[str, float]:
        """Requests answered so far, summed over the running brokers, by API name (their /metrics)."""
        out: dict[str, float] = {}
        running = self.pids()
        for broker_id, path in self.log_paths().items():
            if broker_id not in running:
                continue
            ports = re.findall(r"metrics on http://[^:]+:(\d+)/", path.read_text(errors="replace"))
            if not ports:
                continue
            with urllib.request.urlopen(f"http://127.0.0.1:{ports[-1]}/metrics", timeout=5) as resp:
                text = resp.read().decode()
            for api, value in re.findall(r'^brook_request_total\{api="([^"]+)"\} (\S+)$', text, re.M):
                out[api] = out.get(api, 0.0) + float(value)
        return out

    def isr_changes(self) -> int:
        """ISR changes the leaders have recorded so far (log lines `<topic>-<n>: ISR [..] -> [..]`)."""
        n = 0
        for path in self.log_paths().values():
            with contextlib.suppress(OSError):
                n += len(re.findall(r": ISR \[[^\]]*\] -> ", path.read_text(errors="replace")))
        return n


class EtcdWatch:
    """`etcdctl watch --prefix` on the cluster's keys; every event with the monotonic time it arrived."""

    def __init__(self, endpoint: str, prefix: str) -> None:
        etcdctl = find_etcd_binary().parent / "etcdctl"
        self.proc = subprocess.Popen(
            [str(etcdctl), "--endpoints", endpoint, "watch", "--prefix", prefix],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "ETCDCTL_API": "3"},
        )
        self.events: list[tuple[float, str, str, str]] = []  # (time, PUT/DELETE, key, value)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        time.sleep(0.3)  # the watch is open before anything it should see happens

    def _read(self) -> None:
        assert self.proc.stdout is not None
        lines: Iterator[bytes] = iter(self.proc.stdout.readline, b"")
        for kind in lines:
            t = time.monotonic()
            key = next(lines, b"")
            value = next(lines, b"")
            self.events.append((t, kind.decode().strip(), key.decode().strip(), value.decode().strip()))

    def first(self, after: float, kind: str, key: str, value_contains: str = "") -> float | None:
        for t, k, name, value in list(self.events):
            if t >= after and k == kind and name == key and value_contains in value:
                return t
        return None

    def stop(self) -> None:
        self.proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)


# ---------------------------------------------------------------------------------------------------
# (a) throughput


@dataclass
class Sample:
    seconds: float
    payload_bytes: int
    records: int
    broker_cpu: dict[int, float]  # broker id -> CPU-s during the run
    leader: int
    client_cpu: float
    machine_busy: float
    isr_changes: int
    produce_requests: int
    fetch_requests: int
    p50_ms: float = 0.0
    p99_ms: float = 0.0

    @property
    def mb_s(self) -> float:
        return self.payload_bytes / MB / self.seconds

    @property
    def records_s(self) -> float:
        return self.records / self.seconds

    @property
    def cpu_total(self) -> float:
        return sum(self.broker_cpu.values())

    @property
    def cpu_per_gb(self) -> float:
        return self.cpu_total / (self.payload_bytes / GB)

    @property
    def leader_pct(self) -> float:
        return 100 * self.broker_cpu.get(self.leader, 0.0) / self.seconds

    @property
    def followers_pct(self) -> float:
        """The other two brokers together (the followers for RF=3; idle bystanders for RF=1)."""
        return 100 * (self.cpu_total - self.broker_cpu.get(self.leader, 0.0)) / self.seconds

    @property
    def client_pct(self) -> float:
        return 100 * self.client_cpu / self.seconds

    @property
    def other_pct(self) -> float:
        """Busy CPU of the machine not used by the brokers or this process (other work), % of a core."""
        return max(0.0, 100 * (self.machine_busy - self.cpu_total - self.client_cpu) / self.seconds)


@dataclass
class Measurement:
    name: str
    samples: list[Sample] = field(default_factory=list)


def produce_run(bc: BenchCluster, topic: str, count: int, size: int, acks: str, idempotent: bool) -> Sample:
    producer, latencies, failed = delivery_producer(
        {
            "bootstrap.servers": bc.bootstrap,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "acks": acks,
            "enable.idempotence": idempotent,
            "compression.type": "none",
        }
    )
    # One record first, outside the measurement: connected, metadata known and, for an idempotent
    # producer, its producer id acquired (librdkafka retries that on a 500 ms timer when no connection is
    # up yet when it first tries, which alone would put ~500 ms on every record of a short run).
    producer.produce(topic, b"warm-up", partition=0)
    producer.flush(30)
    if failed or len(latencies) != 1:
        raise RuntimeError(f"producer warm-up failed: {failed}")
    latencies.clear()
    leader = bc.partition(topic)[0]
    pids = bc.pids()
    isr0 = bc.isr_changes()
    req0 = bc.requests()
    t0 = time.perf_counter()
    cpu0 = {b: proc_cpu_seconds(pid) for b, pid in pids.items()}
    c0 = self_cpu_seconds()
    m0, _ = machine_busy_seconds()
    produce_all(producer, topic, os.urandom(size), count)
    left = producer.flush(300)
    seconds = time.perf_counter() - t0
    cpu = {b: proc_cpu_seconds(pid) - cpu0[b] for b, pid in pids.items()}
    client = self_cpu_seconds() - c0
    busy = machine_busy_seconds()[0] - m0
    req = bc.requests()
    p50, p99 = p50_p99_ms(latencies, failed, left, count)
    return Sample(
        seconds=seconds,
        payload_bytes=count * size,
        records=count,
        broker_cpu=cpu,
        leader=leader,
        client_cpu=client,
        machine_busy=busy,
        isr_changes=bc.isr_changes() - isr0,
        produce_requests=round(req.get("Produce", 0) - req0.get("Produce", 0)),
        fetch_requests=round(req.get("FetchFollower", 0) - req0.get("FetchFollower", 0)),
        p50_ms=p50,
        p99_ms=p99,
    )


def run_throughput(bc: BenchCluster, sz: Sizes, repeats: int) -> list[Measurement]:
    specs = [
        # (tag, replication factor, count, size, acks, idempotent)
        ("rf3-small", 3, sz.small_count, sz.small_size, "all", True),
        ("rf1-small", 1, sz.small_count, sz.small_size, "1", False),
        ("rf3-large", 3, sz.large_count, sz.large_size, "all", True),
        ("rf1-large", 1, sz.large_count, sz.large_size, "1", False),
    ]
    results: dict[str, Measurement] = {}
    for tag, rf, count, size, _acks, _idem in specs:
        what = "acks=all, idempotent, RF=3, min.insync=2" if rf == 3 else "acks=1, RF=1"
        results[tag] = Measurement(f"{count:,} x {size} B, {what}")
        for r in range(repeats):
            bc.create_topic(f"{tag}-{r}", rf)
    for r in range(repeats):  # interleaved, so that contention from other work spreads over all rows
        for tag, rf, count, size, acks, idem in specs:
            topic = f"{tag}-{r}"
            if rf == 3:
                bc.wait_isr(topic, 3)
            warm_memory(bc.root, max(64 << 20, 2 * rf * count * size))
            s = produce_run(bc, topic, count, size, acks, idem)
            m = results[tag]
            m.samples.append(s)
            per_broker = ", ".join(f"{b}: {c:.2f}" for b, c in sorted(s.broker_cpu.items()))
            isr_now = bc.partition(topic)[2]
            print(
                f"  {m.name} run {len(m.samples)}: {s.mb_s:.1f} MB/s, {s.records_s:,.0f} rec/s, "
                f"p50 {s.p50_ms:.1f} ms, p99 {s.p99_ms:.1f} ms, {s.seconds:.2f} s; broker CPU-s "
                f"{{{per_broker}}} (leader {s.leader}) = {s.cpu_per_gb:.2f} CPU-s/GB; client "
                f"{s.client_pct:.0f} %, other {s.other_pct:.0f} %; {s.produce_requests} Produce requests "
                f"({s.payload_bytes / max(1, s.produce_requests) / 1000:.0f} kB each), {s.fetch_requests} "
                f"follower Fetch requests; ISR changes {s.isr_changes}, ISR now {isr_now}",
                flush=True,
            )
    return list(results.values())


def print_throughput(results: list[Measurement]) -> None:
    cols = [
        "measurement", "MB/s best", "MB/s median (spread)", "records/s best", "p50 ms", "p99 ms",
        "broker CPU-s/GB, 3 brokers: best (spread)", "leader %", "others %", "client %", "other %",
        "kB/Produce", "Fetch/Produce", "ISR changes",
    ]  # fmt: skip
    rows = [cols]
    for r in results:
        if not r.samples:
            continue
        ss = r.samples
        best = max(ss, key=lambda s: s.mb_s)
        cpu = [s.cpu_per_gb for s in ss]
        rows.append(
            [
                r.name,
                f"{best.mb_s:.1f}",
                f"{statistics.median(s.mb_s for s in ss):.1f} ({fmt_range([s.mb_s for s in ss], 1)})",
                f"{best.records_s:,.0f}",
                fmt_range([s.p50_ms for s in ss], 1),
                fmt_range([s.p99_ms for s in ss], 1),
                f"{min(cpu):.2f} ({fmt_range(cpu, 2)})",
                fmt_range([s.leader_pct for s in ss], 0),
                fmt_range([s.followers_pct for s in ss], 0),
                fmt_range([s.client_pct for s in ss], 0),
                fmt_range([s.other_pct for s in ss], 0),
                fmt_range([s.payload_bytes / max(1, s.produce_requests) / 1000 for s in ss], 0),
                fmt_range([s.fetch_requests / max(1, s.produce_requests) for s in ss], 1),
                str(sum(s.isr_changes for s in ss)),
            ]
        )
    print_rows(rows)
    print(
        f"%: CPU time over wall time, 100 % = one core of {NCPU}. leader: the partition leader's process; "
        "others: the other two brokers; other: the rest of the machine's busy time (other work)."
    )


def print_rows(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    print()
    print("| " + " | ".join(c.ljust(w) for c, w in zip(rows[0], widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows[1:]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
    print()


# ---------------------------------------------------------------------------------------------------
# (b) failover


@dataclass
class Failover:
    killed: int
    killed_was_controller: bool
    new_leader: int
    to_first_success: float  # kill -> first successful delivery of a record produced after the kill
    gap: float  # the longest time between two successful deliveries
    lease: float | None  # kill -> the dead broker's registration deleted in etcd
    controller: float | None  # kill -> a new controller key (when the controller was killed)
    election: float | None  # kill -> the partition's new leader written by the controller
    election_logged: float | None  # the same from the controller's log line
    errors: int
    produced: int
    rejoin: float  # restart of the killed broker -> ISR whole again
    pre_p50_ms: float

    @property
    def client(self) -> float | None:
        return None if self.election is None else self.to_first_success - self.election


LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def logged_times(paths: list[Path], pattern: str, after_wall: float) -> list[tuple[float, str]]:
    """(wall-clock time, line) of every broker log line matching `pattern` logged after `after_wall`."""
    out: list[tuple[float, str]] = []
    rx = re.compile(pattern)
    for path in paths:
        with contextlib.suppress(OSError):
            for line in path.read_text(errors="replace").splitlines():
                m = LOG_TIME.match(line)
                if m is None or not rx.search(line):
                    continue
                t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                if t >= after_wall - 0.001:
                    out.append((t, line))
    return sorted(out)


def pick_partition(bc: BenchCluster, topic: str, kill_controller: bool) -> int:
    """A partition whose leader is (or is not) the controller, if there is one."""
    md = bc.metadata(topic)
    parts = sorted(md.topics[topic].partitions.items())
    for i, q in parts:
        if (q.leader == md.controller_id) == kill_controller:
            return int(i)
    return int(parts[0][0])


def failover_run(
    bc: BenchCluster,
    watch: EtcdWatch,
    topic: str,
    run: int,
    acked: set[bytes],
    client_debug: str,
) -> Failover:
    # Every other run kills the controller too (when it leads a partition): its own lease must expire
    # and a new controller be elected before any partition gets a new leader.
    bc.wait_isr(topic, 3)
    part = pick_partition(bc, topic, kill_controller=run % 2 == 1)
    leader, _, isr, controller = bc.partition(topic, part)
    assert leader >= 0 and len(isr) == 3, (leader, isr)
    produced_at: list[float] = []
    delivered_at: dict[int, float] = {}
    errors: list[str] = []
    latencies: list[float] = []
    kill_at = [0.0]  # monotonic time of the kill, once done
    first_after: list[float] = []  # the first successful delivery of a record produced after the kill

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        now = time.monotonic()
        seq = int(msg.value().split(b":")[1])
        if err is not None:
            errors.append(str(err))
            return
        delivered_at[seq] = now
        acked.add(msg.value())
        latencies.append(msg.latency())
        if kill_at[0] and not first_after and produced_at[seq] > kill_at[0]:
            first_after.append(now)

    conf: dict[str, Any] = {
        "bootstrap.servers": bc.bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 0,
        "on_delivery": on_delivery,
    }
    if client_debug:
        conf["debug"] = client_debug  # librdkafka's log lines go to stderr with Unix times
    producer = Producer(conf)
    producer.list_topics(topic, timeout=10)
    interval = 0.002
    warmup = 2.0
    t_start = time.monotonic()
    t_kill = wall_kill = 0.0
    deadline = t_start + 120.0
    seq = 0
    while True:
        now = time.monotonic()
        if t_kill == 0.0 and now - t_start >= warmup:
            pre_p50 = 1000 * statistics.median(latencies) if latencies else float("nan")
            wall_kill, t_kill = time.time(), time.monotonic()
            kill_at[0] = t_kill
            bc.cluster.broker(leader).kill()
            print(
                f"  failover run {run}: kill -9 broker {leader} (leader of {topic}-{part}"
                f"{', and the controller' if leader == controller else ''}) after {seq} records",
                flush=True,
            )
        if first_after and now - first_after[0] >= 1.0:
            break
        if now > deadline:
            raise RuntimeError(
                f"failover run {run}: no delivery after the kill within 120 s; errors {errors[:3]}"
            )
        producer.produce(topic, f"{run}:{seq}".encode(), partition=part)
        produced_at.append(time.monotonic())
        seq += 1
        next_at = t_start + seq * interval
        producer.poll(max(0.0, next_at - time.monotonic()))
    left = producer.flush(60)
    if left:
        errors.append(f"{left} undelivered after flush")
    ok = sorted(delivered_at.values())
    gap = max((b - a for a, b in itertools.pairwise(ok)), default=0.0)

    # Where the time went, from the etcd watch (same clock) and the controller's log.
    lease_t = watch.first(t_kill, "DELETE", f"/brook/{CLUSTER_NAME}/brokers/{leader}")
    ctrl_t = None
    if leader == controller:
        ctrl_t = watch.first(t_kill, "PUT", f"/brook/{CLUSTER_NAME}/controller")
    elect_t = None
    for t, kind, key, value in list(watch.events):
        if t >= t_kill and kind == "PUT" and key == f"/brook/{CLUSTER_NAME}/partitions/{topic}/{part}":
            m = re.search(r'"leader":(-?\d+)', value)
            if m and int(m.group(1)) not in (leader, -1):
                elect_t = t
                break
    lines = logged_times(
        list(bc.log_paths().values()), rf"controller: {re.escape(topic)}-{part} leader", wall_kill
    )
    elect_logged = lines[0][0] - wall_kill if lines else None
    new_leader, _, _, _ = bc.partition(topic, part)

    # Restart the killed broker and wait until it is back in the ISR.
    t_restart = time.monotonic()
    bc.cluster.broker(leader).start(timeout=60)
    started = time.monotonic() - t_restart
    rejoin = started + bc.wait_isr(topic, 3, timeout=120)

    def rel(t: float | None) -> float | None:
        return None if t is None else t - t_kill

    f = Failover(
        killed=leader,
        killed_was_controller=leader == controller,
        new_leader=new_leader,
        to_first_success=first_after[0] - t_kill,
        gap=gap,
        lease=rel(lease_t),
        controller=rel(ctrl_t),
        election=rel(elect_t),
        election_logged=elect_logged,
        errors=len(errors),
        produced=seq,
        rejoin=rejoin,
        pre_p50_ms=pre_p50,
    )
    print(
        f"  failover run {run}: first success after kill {f.to_first_success:.3f} s, longest gap "
        f"{f.gap:.3f} s; lease expired {fmt_s(f.lease)}, new controller {fmt_s(f.controller)}, new leader "
        f"{f.new_leader} written {fmt_s(f.election)} (controller's log: {fmt_s(f.election_logged)}), "
        f"client {fmt_s(f.client)} more; {f.errors} errors {errors[:2]}; {seq} records; restart -> ISR "
        f"whole {rejoin:.1f} s; pre-kill p50 latency {pre_p50:.1f} ms",
        flush=True,
    )
    for _t, line in lines[:3]:
        print(f"    {line}")
    return f


def fmt_s(v: float | None) -> str:
    return "?" if v is None else f"{v:.3f} s"


def verify(bc: BenchCluster, topic: str, partitions: int, acked: set[bytes]) -> tuple[int, int, int]:
    """Read the topic back: (records read, acknowledged records missing, values read more than once)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bc.bootstrap,
            "group.id": "brook-cluster-bench-unused",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    seen: dict[bytes, int] = {}
    try:
        tps = [TopicPartition(topic, i, 0) for i in range(partitions)]
        total = sum(consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps)
        consumer.assign(tps)
        read = 0
        deadline = time.monotonic() + 60
        while read < total and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=10_000, timeout=1.0):
                if msg.error() is None:
                    read += 1
                    v = msg.value() or b""
                    seen[v] = seen.get(v, 0) + 1
    finally:
        consumer.close()
    missing = sum(1 for v in acked if v not in seen)
    dups = sum(1 for n in seen.values() if n > 1)
    return read, missing, dups


def run_failover(bc: BenchCluster, runs: int, client_debug: str = "") -> list[Failover]:
    topic, partitions = "failover", 3
    bc.create_topic(topic, 3, partitions)
    bc.wait_isr(topic, 3)
    watch = EtcdWatch(bc.cluster.etcd.endpoint, f"/brook/{CLUSTER_NAME}/")
    acked: set[bytes] = set()
    out: list[Failover] = []
    try:
        for r in range(runs):
            out.append(failover_run(bc, watch, topic, r, acked, client_debug))
    finally:
        watch.stop()
    read, missing, dups = verify(bc, topic, partitions, acked)
    print(
        f"  read back {read} records: {len(acked)} acknowledged, {missing} of them missing, "
        f"{dups} values twice",
        flush=True,
    )
    if missing or dups:  # an idempotent acks=all producer: none may be missing or duplicated
        raise SystemExit(f"failover: {missing} acknowledged records missing, {dups} duplicated")
    return out


def print_failover(runs: list[Failover], ttl: int) -> None:
    cols = [
        "run", "killed (controller?)", "new leader", "kill -> lease expired", "-> new controller",
        "-> new leader written (log)", "-> first success (client part)", "longest gap", "errors",
        "restart -> ISR whole",
    ]  # fmt: skip
    rows = [cols]
    for i, f in enumerate(runs):
        rows.append(
            [
                str(i),
                f"{f.killed} ({'yes' if f.killed_was_controller else 'no'})",
                str(f.new_leader),
                fmt_s(f.lease),
                fmt_s(f.controller) if f.killed_was_controller else "-",
                f"{fmt_s(f.election)} ({fmt_s(f.election_logged)})",
                f"{f.to_first_success:.3f} s ({fmt_s(f.client)})",
                f"{f.gap:.3f} s",
                str(f.errors),
                f"{f.rejoin:.1f} s",
            ]
        )
    print_rows(rows)
    firsts = [f.to_first_success for f in runs]
    gaps = [f.gap for f in runs]
    print(
        f"lease TTL {ttl} s. kill -> first success: min {min(firsts):.3f} s, median "
        f"{statistics.median(firsts):.3f} s, max {max(firsts):.3f} s; longest gap: min {min(gaps):.3f} s, "
        f"median {statistics.median(gaps):.3f} s, max {max(gaps):.3f} s"
    )


# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    small_count: int
    small_size: int
    large_count: int
    large_size: int


FULL = Sizes(1_000_000, 100, 100_000, 1024)
QUICK = Sizes(200_000, 100, 20_000, 1024)


def machine_info() -> str:
    model = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    import confluent_kafka

    return (
        f"{datetime.date.today()}  {NCPU} cores  {model}  Python {platform.python_version()}  "
        f"confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})  "
        f"load average {os.getloadavg()[0]:.2f}"
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="reduced sizes, one run each (a smoke check, < 60 s)")
    p.add_argument("--lease-ttl", type=int, default=6, help="the brokers' --lease-ttl in seconds (default 6)")
    p.add_argument(
        "--repeats", type=int, default=0, help="throughput runs per row (default 3, 1 with --quick)"
    )
    p.add_argument("--failovers", type=int, default=0, help="failover runs (default 5, 1 with --quick)")
    p.add_argument("--only", choices=("throughput", "failover"), default=None)
    p.add_argument(
        "--client-debug",
        default="",
        metavar="CONTEXTS",
        help="librdkafka debug contexts for the failover producer, e.g. metadata,broker,msg (to stderr)",
    )
    p.add_argument("--tmp", default=None, help="parent of the cluster's temporary directory")
    p.add_argument("--keep", action="store_true", help="keep the cluster directory (etcd and broker logs)")
    args = p.parse_args(argv)
    sz = QUICK if args.quick else FULL
    repeats: int = args.repeats or (1 if args.quick else 3)
    failovers: int = args.failovers or (1 if args.quick else 5)
    machine = machine_info()
    print(machine, flush=True)
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="brook-cluster-bench-", dir=args.tmp))
    bc = BenchCluster(root, args.lease_ttl)
    throughput: list[Measurement] = []
    failover: list[Failover] = []
    try:
        bc.start()
        print(
            f"cluster in {root}: brokers {bc.pids()} on {bc.bootstrap}, lease TTL {args.lease_ttl} s",
            flush=True,
        )
        if args.only in (None, "throughput"):
            throughput = run_throughput(bc, sz, repeats)
        if args.only in (None, "failover"):
            failover = run_failover(bc, failovers, args.client_debug)
    finally:
        t_stop = time.monotonic()
        bc.stop()
        print(f"cluster stopped in {time.monotonic() - t_stop:.1f} s", flush=True)
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    if throughput:
        print_throughput(throughput)
    if failover:
        print_failover(failover, args.lease_ttl)
    raw.save("cluster_bench", machine, {"throughput": throughput, "failover": failover})
    print(f"total {time.monotonic() - started:.0f} s; load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
