#!/usr/bin/env python
"""Brook beside Apache Kafka 4.4 on the same machine, with the same clients, in one run (not a test).

    .venv/bin/python bench/side_by_side.py [--rounds 3] [--quick] [--only single|omb] [--omb-rate 5|max]
                                           [--with-tansu]

Rounds alternate which broker goes first (round 1: Brook then Kafka, round 2: Kafka then Brook, ...),
and every figure is the median over the rounds, so a load that comes and goes on this shared machine
falls on both. --with-tansu adds Tansu 0.6.0 (bench/tansu.py: memory-only storage) to the single-broker
rounds, the order rotating over the three; a step it cannot serve is recorded as "fails" with why.
Each round, for each broker, on a fresh single broker (Brook: `brook broker` with its defaults; Kafka:
one KRaft node, broker and controller, -Xmx1g -Xms1g and Kafka's own G1 options), a topic of 1
partition:

- Java clients: kafka-producer-perf-test (acks=1, linger.ms=5, batch.size=1 MB, as fast as it goes)
  then kafka-consumer-perf-test reading it all back, 1 KiB records;
- librdkafka's rdkafka_performance (built by scripts/conformance): the same producer settings and a
  consumer (fetch.queue.backoff.ms=10), 1 KiB and 100 B records;

after a warm-up of 200 MB produced and consumed (not measured: a JVM compiles its hot paths first),
with the broker's CPU-seconds per GB of record values (utime+stime from /proc, during the step) and its
resident set (VmRSS after the round, VmHWM its peak). Then the OMB shape (bench/omb.py: 3 brokers, one
topic of 100 partitions, RF=3, min.insync.replicas=2, acks=all, idempotent, 1 KiB records) at
--omb-rate MB/s (or `max`: as fast as the producers go) with librdkafka's C clients (20 s warm-up, 30 s
measured), on etcd + 3 Brook brokers and on 3 Kafka nodes (`omb.py --kafka`). The clients and both
brokers share this machine's cores: the figures compare Brook with Kafka here, not with Kafka's
published runs.
Raw results: bench/results/side_by_side-*.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "services"), str(REPO / "bench")]

from tests.support.jvm import TOOLS, classpath, java_bin  # noqa: E402
from tests.support.kafka_peer import KafkaPeer  # noqa: E402

import raw  # noqa: E402
import tansu  # noqa: E402
from broker_bench import NCPU, BrokerProcess, machine_busy_seconds, proc_cpu_seconds  # noqa: E402
from omb import DEFAULT_PERF  # noqa: E402

# The perf tools' JVM as bin/kafka-run-class.sh gives it (full JIT; the tests' JVM_OPTS stop at C1).
TOOL_JVM = ["-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]  # fmt: skip
PRODUCER = ["acks=1", "linger.ms=5", "batch.size=1000000"]


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


@contextmanager
def single_broker(kind: str, root: Path) -> Iterator[tuple[str, int]]:
    """(bootstrap, pid) of a fresh single broker of `kind` (brook, kafka or tansu)."""
    if kind == "tansu":
        t = tansu.TansuProcess(root / "tansu").start()
        try:
            yield t.bootstrap, t.pid
        finally:
            t.stop()
        return
    if kind == "brook":
        b = BrokerProcess(root / "brook" / "data").start()
        try:
            yield b.bootstrap, b.pid
        finally:
            b.stop()
        return
    k = KafkaPeer(root / "kafka", nodes=1, heap="1g").start()
    try:
        yield k.bootstrap, k.pids()[1]
    finally:
        k.stop()


def create_topic(bootstrap: str, name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(60)
    time.sleep(1)  # Kafka's broker takes the leadership from the controller's metadata just after


def java_tool(tool: str, *args: str) -> str:
    cmd = [java_bin(), *TOOL_JVM, "-cp", classpath(), TOOLS[tool], *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"{tool} exited {r.returncode}: {r.stderr[-2000:]}")
    return r.stdout


def java_produce(bootstrap: str, topic: str, n: int, size: int) -> float:
    out = java_tool(
        "kafka-producer-perf-test", "--topic", topic, "--num-records", str(n), "--record-size", str(size),
        "--throughput", "-1", "--command-property", f"bootstrap.servers={bootstrap}", *PRODUCER,
    )  # fmt: skip
    m = re.search(r"(\d+) records sent, [\d.]+ records/sec \(([\d.]+) MB/sec\)", out.strip().splitlines()[-1])
    assert m, out
    if int(m.group(1)) < n:
        raise RuntimeError(f"the Java producer sent {m.group(1)} of {n} records")
    return float(m.group(2)) * 1.048576  # its MB is 2^20 bytes


def java_consume(bootstrap: str, topic: str, n: int, size: int) -> float:
    out = java_tool("kafka-consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic,
                    "--num-records", str(n), "--timeout", "60000")  # fmt: skip
    cols = out.strip().splitlines()[-1].split(", ")
    if int(cols[4]) < n:
        raise RuntimeError(f"the Java consumer read {cols[4]} of {n} records in 60 s")
    return float(cols[8]) * 1.048576  # fetch.MB.sec: without the group's join, 2^20-byte MB


def java_probe(bootstrap: str, topic: str) -> tuple[str | None, str | None]:
    """Why Kafka's Java producer, and its consumer, cannot move 1,000 records here within ~15 s (None:
    it can). Run before the Java steps on Tansu: a client that cannot talk to a broker retries until its
    2-minute delivery timeout, and longer for 300,000 records. `topic` holds records already."""
    out = java_tool(
        "kafka-producer-perf-test", "--topic", topic, "--num-records", "1000", "--record-size", "1024",
        "--throughput", "-1", "--command-property", f"bootstrap.servers={bootstrap}", *PRODUCER,
        "delivery.timeout.ms=15000", "request.timeout.ms=10000", "max.block.ms=15000",
    )  # fmt: skip
    m = re.search(r"(\d+) records sent", out.strip().splitlines()[-1])
    sent = int(m.group(1)) if m else 0
    out = java_tool("kafka-consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic,
                    "--num-records", "1000", "--timeout", "15000")  # fmt: skip
    read = int(out.strip().splitlines()[-1].split(", ")[4])
    return (
        None if sent >= 1000 else f"Kafka 4.4's Java producer sent {sent} of 1,000 records in 15 s",
        None if read >= 1000 else f"Kafka 4.4's Java consumer read {read} of 1,000 records in 15 s",
    )


def rdkafka(args: list[str]) -> float:
    r = subprocess.run([str(DEFAULT_PERF), *args], capture_output=True, text=True, timeout=900)
    text = r.stdout + r.stderr
    found = re.findall(r"\(\d+ bytes\)[^\n]*? in (\d+)ms", text)
    nbytes = re.findall(r"\((\d+) bytes\)", text)
    if r.returncode != 0 or not found:
        raise RuntimeError(f"rdkafka_performance {args} failed: {text[-2000:]}")
    return int(nbytes[-1]) / (int(found[-1]) / 1000) / 1e6


def rd_produce(bootstrap: str, topic: str, n: int, size: int) -> float:
    return rdkafka(["-P", "-t", topic, "-p", "0", "-s", str(size), "-c", str(n), "-b", bootstrap, "-a", "1",
                    "-X", "linger.ms=5", "-X", "batch.size=1000000"])  # fmt: skip


def rd_consume(bootstrap: str, topic: str, n: int, size: int) -> float:
    return rdkafka(["-C", "-t", topic, "-p", "0", "-o", "beginning", "-c", str(n), "-b", bootstrap,
                    "-X", "fetch.queue.backoff.ms=10"])  # fmt: skip


Step = tuple[str, Callable[[str, str, int, int], float], str, int, int]


def steps(quick: bool) -> list[Step]:
    """(name, run, topic, records, size): each consume step reads its topic's produce step back."""
    k = 10 if quick else 1
    return [
        ("java produce 1 KiB", java_produce, "java-1k", 300_000 // k, 1024),
        ("java consume 1 KiB", java_consume, "java-1k", 300_000 // k, 1024),
        ("rdkafka produce 1 KiB", rd_produce, "rd-1k", 1_000_000 // k, 1024),
        ("rdkafka consume 1 KiB", rd_consume, "rd-1k", 1_000_000 // k, 1024),
        ("rdkafka produce 100 B", rd_produce, "rd-100", 3_000_000 // k, 100),
        ("rdkafka consume 100 B", rd_consume, "rd-100", 3_000_000 // k, 100),
    ]


def single_round(kind: str, root: Path, quick: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    t0 = time.monotonic()
    with single_broker(kind, root) as (bootstrap, pid):
        out["start_s"] = time.monotonic() - t0
        for topic in {s[2] for s in steps(quick)} | {"warm-up"}:
            create_topic(bootstrap, topic)
        # Not measured: Kafka's JVM compiles its hot paths during the first hundreds of MB.
        rd_produce(bootstrap, "warm-up", 200_000, 1024)
        rd_consume(bootstrap, "warm-up", 200_000, 1024)
        probe = java_probe(bootstrap, "warm-up") if kind == "tansu" else (None, None)
        fails: dict[Callable[[str, str, int, int], float], str | None] = {
            java_produce: probe[0],
            java_consume: probe[1],
        }
        for name, run, topic, n, size in steps(quick):
            if fails.get(run):
                out[name] = {"fails": fails[run]}
                print(f"  {kind:5} {name:22} fails: {fails[run]}", flush=True)
                continue
            cpu0, busy0 = proc_cpu_seconds(pid), machine_busy_seconds()[0]
            t = time.monotonic()
            try:
                mb_s = run(bootstrap, topic, n, size)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                out[name] = {"fails": str(e).splitlines()[0][:300]}
                print(f"  {kind:5} {name:22} fails: {out[name]['fails']}", flush=True)
                continue
            wall = time.monotonic() - t
            cpu = proc_cpu_seconds(pid) - cpu0
            other = machine_busy_seconds()[0] - busy0 - cpu
            out[name] = {"MB/s": mb_s, "CPU-s/GB": cpu / (n * size / 1e9), "other %": 100 * other / wall}
            print(
                f"  {kind:5} {name:22} {mb_s:7.1f} MB/s  {cpu / (n * size / 1e9):5.2f} CPU-s/GB", flush=True
            )
        out["rss_mib"] = status_kib(pid, "VmRSS") / 1024
        out["peak_rss_mib"] = status_kib(pid, "VmHWM") / 1024
    shutil.rmtree(root, ignore_errors=True)
    return out


def omb_round(kind: str, rate: str, quick: bool, partitions: int = 100) -> dict[str, Any]:
    cmd = [sys.executable, str(REPO / "bench" / "omb.py"), "--client", "c", "--rates", rate]
    cmd += ["--partitions", str(partitions)]
    cmd += ["--quick"] if quick else ["--warmup", "20", "--duration", "30"]
    cmd += ["--kafka"] if kind == "kafka" else []
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=REPO)
    m = re.search(r"raw results: (\S+)", r.stdout)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"omb.py ({kind}) failed:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    print(
        "  " + kind + ": " + next(ln for ln in r.stdout.splitlines() if ln.startswith("target")), flush=True
    )
    res: dict[str, Any] = json.loads(Path(m.group(1)).read_text())["results"][-1]
    return res


NAMES = {"brook": "Brook", "kafka": "Kafka", "tansu": "Tansu"}


def median_table(rounds: dict[str, list[dict[str, Any]]], keys: list[str]) -> list[str]:
    """Medians per broker, and Brook's figure over each other broker's; a step that failed on a
    broker in any round shows "fails" there (its reason in the raw results)."""
    kinds = [k for k in NAMES if rounds.get(k)]
    others = [k for k in kinds if k != "brook"]
    head = [NAMES[k] for k in kinds] + [f"Brook / {NAMES[k]}" for k in others]
    lines = ["| step | " + " | ".join(head) + " |", "|---" * (1 + len(head)) + "|"]

    def median(kind: str, key: str, metric: str | None) -> float | None:
        runs = rounds[kind]
        if metric is None:
            return float(statistics.median(r[key] for r in runs))
        if any("fails" in r[key] for r in runs):
            return None
        return float(statistics.median(r[key][metric] for r in runs))

    def row(label: str, key: str, metric: str | None, fmt: str) -> str:
        m = {k: median(k, key, metric) for k in kinds}
        cells = ["fails" if m[k] is None else format(m[k], fmt) for k in kinds]
        b = m["brook"]
        for k in others:
            v = m[k]
            cells.append("" if b is None or v is None else f"{b / v:.2f}")
        return f"| {label} | " + " | ".join(cells) + " |"

    for key in keys:
        for metric in ("MB/s", "CPU-s/GB"):
            lines.append(row(f"{key}, {metric}", key, metric, ".2f"))
    for metric, fmt in (("start_s", ".2f"), ("rss_mib", ".1f"), ("peak_rss_mib", ".1f")):
        lines.append(row(metric, metric, None, fmt))
    fails = {(k, key, r[key]["fails"]) for k in kinds for r in rounds[k] for key in keys if "fails" in r[key]}
    lines += [f"{NAMES[k]}, {key}: fails: {why}" for k, key, why in sorted(fails)]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="a tenth of the records; OMB's --quick")
    ap.add_argument("--only", choices=["single", "omb"], default=None)
    ap.add_argument(
        "--with-tansu", action="store_true", help="Tansu too in the single-broker part (bench/tansu.py)"
    )
    ap.add_argument(
        "--omb-rate", default="5", help="MB/s of the OMB shape (default 5), or max: as fast as producers go"
    )
    ap.add_argument(
        "--omb-partitions", default="100", help="partition counts of the OMB topic, e.g. 3,100 (default 100)"
    )
    a = ap.parse_args()
    if not DEFAULT_PERF.exists():
        sys.exit(f"{DEFAULT_PERF} is missing: `scripts/conformance` builds it")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO)
    loads: list[str] = []
    kinds = ["brook", "kafka", "tansu"] if a.with_tansu and a.only != "omb" else ["brook", "kafka"]
    single: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    omb: dict[str, list[dict[str, Any]]] = {"brook": [], "kafka": []}
    if a.with_tansu:
        print(f"{tansu.version()} from {tansu.PACKAGE} {tansu.VERSION}, storage {tansu.STORAGE}", flush=True)
    for i in range(a.rounds):
        order = kinds[i % len(kinds) :] + kinds[: i % len(kinds)]  # who goes first rotates
        for kind in order:
            loads.append(f"round {i + 1} {kind}: load {os.getloadavg()[0]:.2f}")
            print(f"round {i + 1}, {kind} ({loads[-1]})", flush=True)
            if a.only in (None, "single"):
                single[kind].append(
                    single_round(kind, Path(tempfile.mkdtemp(prefix=f"sbs-{kind}-")), a.quick)
                )
            if a.only in (None, "omb") and kind != "tansu":
                for n in (int(x) for x in a.omb_partitions.split(",")):
                    omb[kind].append({"partitions": n, **omb_round(kind, a.omb_rate, a.quick, n)})
    machine = (f"{time.strftime('%Y-%m-%d %H:%M')} UTC, commit {commit.stdout.strip()}, {NCPU} cores, "
               f"{a.rounds} rounds, load average at each start: " + "; ".join(loads))  # fmt: skip
    if a.with_tansu:
        machine += f"; {tansu.version()} ({tansu.PACKAGE} {tansu.VERSION}), storage {tansu.STORAGE}"
    print(machine)
    if single["brook"]:
        print("\n".join(median_table(single, [s[0] for s in steps(a.quick)])))
    for kind, runs in omb.items():
        for r in runs:
            print(f"OMB {kind}, {r['partitions']} partitions: {r['achieved_mb_s']:.1f} MB/s, "
                  f"publish p50 {r['publish_ms']['p50']:.1f} "
                  f"p99 {r['publish_ms']['p99']:.1f} ms, e2e p50 {r['e2e_ms']['p50']:.1f} "
                  f"p99 {r['e2e_ms']['p99']:.1f} ms, CPU-s/GB {r['broker_cpu_s_per_gb']}, "
                  f"RSS MiB {r.get('broker_rss_mib')}")  # fmt: skip
    raw.save("side_by_side", machine, {"single": single, "omb": omb})


if __name__ == "__main__":
    main()
