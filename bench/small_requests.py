#!/usr/bin/env python
"""Broker CPU per small Produce request: librdkafka's C load generator against one broker (not a test).

    .venv/bin/python bench/small_requests.py [--records 200000] [--repeats 3] [--only a1 aall parts]
        [--batch 5] [--size 100] [--partitions 4] [--profile DIR] [--perf PATH]

Starts `python -m brook.cli broker` (bench/broker_bench.py's BrokerProcess, with its metrics port) and
runs librdkafka's `rdkafka_performance` (a C producer: no Python client in the way) with small batches,
`batch.num.messages=5`, `linger.ms=0`, records of 100 B, into a fresh topic per run:

  a1     acks=1, one partition (`-p 0`): every request carries one batch of a few records;
  aall   acks=all, one partition (one broker: the commit is the leader's own append);
  parts  acks=1, `--partitions` partitions, librdkafka's random partitioner (a request may carry
         batches of several partitions).

For each run it prints records/s (rdkafka_performance's own figure), Produce requests/s (counted by the
broker: `brook_request_total{api="Produce"}` on its /metrics port, before and after), records per
request, and the figure to compare: **broker CPU per request in µs**, the broker's utime+stime from
/proc/<pid>/stat over the run divided by the requests it answered. On a machine shared with other work the
rates are noisy but CPU per request stays meaningful; the load average (/proc/loadavg) and the rest of
the machine's busy time ("other", % of a core) are printed with each run. Best (lowest µs/request) of
`--repeats` runs, with the spread. With `--profile DIR`, one more run per variant under
`py-spy record --format raw` (its figures are not counted: py-spy pauses the broker to sample it).

rdkafka_performance comes from /work/shared/conformance/librdkafka/build (see its README); `--perf`
or $RDKAFKA_PERFORMANCE point elsewhere. Raw results: bench/results/small_requests-<time>.json.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined, unused-ignore]

import raw  # the sibling modules (bench/ is on sys.path when run as a script)
from broker_bench import (
    NCPU,
    BrokerProcess,
    children_cpu_seconds,
    free_port,
    machine_busy_seconds,
    machine_info,
    proc_cpu_seconds,
)

DEFAULT_PERF = Path.home() / ".cache/brook-conformance/librdkafka-2.15.0/examples/rdkafka_performance"
_RATE = re.compile(r"(\d+) delivered .*? in (\d+)ms: (\d+) msgs/s")
_PRODUCE = re.compile(r'^brook_request_total\{api="Produce"\} (\S+)$', re.M)


@dataclass
class Run:
    seconds: float  # wall time of rdkafka_performance, start to exit
    records: int  # delivered, by rdkafka_performance
    records_s: float  # rdkafka_performance's own msgs/s (its timer excludes start-up)
    requests: int  # Produce requests the broker answered during the run
    broker_cpu: float
    client_cpu: float
    machine_busy: float
    load: str  # /proc/loadavg at the end

    @property
    def us_per_request(self) -> float:
        return 1e6 * self.broker_cpu / max(1, self.requests)

    @property
    def requests_s(self) -> float:
        return self.requests / self.seconds

    @property
    def broker_pct(self) -> float:
        return 100 * self.broker_cpu / self.seconds

    @property
    def other_pct(self) -> float:
        return max(0.0, 100 * (self.machine_busy - self.broker_cpu - self.client_cpu) / self.seconds)


@dataclass
class Variant:
    name: str
    detail: str
    acks: str
    partitions: int
    runs: list[Run] = field(default_factory=list)


def produce_requests(metrics_port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    m = _PRODUCE.search(text)
    return int(float(m.group(1))) if m else 0


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)]).values():
        f.result(30)


def perf_command(a: argparse.Namespace, bootstrap: str, topic: str, v: Variant) -> list[str]:
    cmd = [str(a.perf), "-P", "-t", topic, "-s", str(a.size), "-c", str(a.records), "-b", bootstrap]
    if v.partitions == 1:
        cmd += ["-p", "0"]
    return [*cmd, "-X", f"batch.num.messages={a.batch}", "-X", "linger.ms=0", "-a", v.acks, "-q"]


def produce_run(
    a: argparse.Namespace, broker: BrokerProcess, metrics_port: int, topic: str, v: Variant
) -> Run:
    create_topic(broker.bootstrap, topic, v.partitions)
    r0, b0, c0 = produce_requests(metrics_port), proc_cpu_seconds(broker.pid), children_cpu_seconds()
    m0, _ = machine_busy_seconds()
    t0 = time.perf_counter()
    out = subprocess.run(
        perf_command(a, broker.bootstrap, topic, v), capture_output=True, text=True, timeout=600
    )
    seconds = time.perf_counter() - t0
    b1, c1 = proc_cpu_seconds(broker.pid), children_cpu_seconds()
    m1, _ = machine_busy_seconds()
    requests = produce_requests(metrics_port) - r0
    match = _RATE.search(out.stdout + out.stderr)
    if out.returncode != 0 or match is None:
        raise RuntimeError(
            f"rdkafka_performance failed ({out.returncode}): {out.stdout[-800:]}{out.stderr[-800:]}"
        )
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    return Run(seconds, int(match.group(1)), float(match.group(3)), requests, b1 - b0, c1 - c0, m1 - m0, load)


def profile_run(
    a: argparse.Namespace, broker: BrokerProcess, metrics_port: int, topic: str, v: Variant, out: Path
) -> None:
    """One more run with py-spy recording the broker (raw collapsed stacks, for reading, not timing)."""
    out.mkdir(parents=True, exist_ok=True)
    beside = Path(sys.executable).parent / "py-spy"
    py_spy = shutil.which("py-spy") or str(beside)
    path = out / f"{v.name}.txt"
    spy = subprocess.Popen(
        [py_spy, "record", "--pid", str(broker.pid), "--format", "raw", "--rate", "200", "-o", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)  # py-spy attaches
    try:
        r = produce_run(a, broker, metrics_port, topic, v)
    finally:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)
    print(f"  {v.name} profiled run: {r.requests:,} requests, {r.us_per_request:.0f} µs/request -> {path}")


def summary(v: Variant) -> str:
    us = [r.us_per_request for r in v.runs]
    rates = [r.records_s for r in v.runs]
    best = min(v.runs, key=lambda r: r.us_per_request)
    return (
        f"| {v.detail} | {best.us_per_request:.0f} ({min(us):.0f}-{max(us):.0f}) | "
        f"{best.records_s:,.0f} ({min(rates):,.0f}-{max(rates):,.0f}) | "
        f"{best.requests_s:,.0f} | {best.records / max(1, best.requests):.1f} | {best.broker_pct:.0f} % | "
        f"{statistics.mean(r.other_pct for r in v.runs):.0f} % | {best.load} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000, help="records per run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", nargs="*", choices=["a1", "aall", "parts"], default=None)
    ap.add_argument("--batch", type=int, default=5, help="batch.num.messages")
    ap.add_argument("--size", type=int, default=100, help="record size, bytes")
    ap.add_argument("--partitions", type=int, default=4, help="partitions of the `parts` variant")
    ap.add_argument("--profile", type=Path, default=None, help="a directory for py-spy's raw stacks")
    ap.add_argument("--perf", type=Path, default=Path(os.environ.get("RDKAFKA_PERFORMANCE", DEFAULT_PERF)))
    ap.add_argument("--tmp", default=None, help="parent of the temporary data directory")
    a = ap.parse_args()
    if not a.perf.exists():
        raise SystemExit(
            f"{a.perf} not found: run /work/shared/conformance/librdkafka/build (or pass --perf)"
        )
    variants = [
        Variant("a1", "acks=1, 1 partition", "1", 1),
        Variant("aall", "acks=all, 1 partition", "-1", 1),
        Variant("parts", f"acks=1, {a.partitions} partitions", "1", a.partitions),
    ]
    variants = [v for v in variants if not a.only or v.name in a.only]
    work = Path(tempfile.mkdtemp(prefix="small-requests-", dir=a.tmp))
    metrics_port = free_port()
    broker = BrokerProcess(work / "data", extra_args=("--metrics-port", str(metrics_port)))
    machine = machine_info()
    print(machine, flush=True)
    try:
        broker.start()
        print(f"broker pid {broker.pid} on {broker.bootstrap}, metrics :{metrics_port}", flush=True)
        create_topic(broker.bootstrap, "warm-up", 1)  # connections, metadata, first segment: not measured
        subprocess.run(
            perf_command(a, broker.bootstrap, "warm-up", variants[0]), capture_output=True, timeout=600
        )
        for r in range(a.repeats):
            for v in variants:
                run = produce_run(a, broker, metrics_port, f"{v.name}-{r}", v)
                v.runs.append(run)
                print(
                    f"  {v.detail} run {r + 1}: {run.records_s:,.0f} records/s, "
                    f"{run.requests_s:,.0f} requests/s ({run.records / max(1, run.requests):.1f} each), "
                    f"broker {run.broker_cpu:.2f} CPU-s "
                    f"= {run.us_per_request:.1f} µs/request ({run.broker_pct:.0f} % of a core), "
                    f"other {run.other_pct:.0f} %, load {run.load}",
                    flush=True,
                )
        if a.profile is not None:
            for v in variants:
                profile_run(a, broker, metrics_port, f"{v.name}-profile", v, a.profile)
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"{machine}  ({NCPU} cores; 100 % = one core)")
    print(
        f"{a.records:,} x {a.size} B per run, batch.num.messages={a.batch}, linger.ms=0; best of {a.repeats}"
    )
    print(
        "| variant | broker µs/request best (spread) | records/s best-run (spread) | requests/s | "
        "records/request | broker CPU | other | load |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for v in variants:
        print(summary(v))
    raw.save("small_requests", machine, variants)


if __name__ == "__main__":
    main()
