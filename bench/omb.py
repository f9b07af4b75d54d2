#!/usr/bin/env python
"""An OpenMessaging-Benchmark-style driver for Brook (or any Kafka bootstrap): figures printed, not a test.

    .venv/bin/python bench/omb.py [--partitions 100] [--rates 5,20,50,max] [--producers 2]
        [--consumers 2] [--size 1024] [--warmup 10] [--duration 30] [--bootstrap HOST:PORT] [--quick]
        [--client python|c|go|aiokafka]

The workload of OMB's Kafka driver: one topic with P partitions, RF=3, min.insync.replicas=2, acks=all,
idempotent producers (linger.ms=1, batch.size=1 MB), 1 KiB records with random keys, several producer
processes splitting a fixed target byte rate (or as fast as they can: `max`), consumer processes in one
group reading everything. For each rate: a warm-up, then the measured period:
- publish latency: produce() -> delivery report (acks=all: the record is in every in-sync replica);
- end-to-end latency: the produce time written into each record -> the time a consumer has it;
- the achieved rate; each broker's CPU-seconds per GB produced (utime+stime from /proc) and the machine's
  other busy time (what shares the cores).
Without --bootstrap it starts etcd and 3 brokers itself (bench/cluster_bench.py's cluster, production
timings); with --kafka, 3 nodes of Apache Kafka 4.4 instead (bench/side_by_side.py runs both).
Raw results go to bench/results/omb-<time>.json (bench/raw.py). MB = 10^6 bytes.

`--client c` runs librdkafka's C clients instead of confluent-kafka Python processes, which on this
2-core machine take more CPU than the brokers: rdkafka_performance (built by scripts/conformance) as the
consumers and the `max` producers, and for a fixed rate bench/c/omb_producer.c (compiled here against
that librdkafka), because rdkafka_performance's -r busy-polls between messages less than 1 ms apart.
Same settings; latencies from their per-record `-A` output.

librdkafka sends one partition per ProduceRequest, and an idempotent producer keeps at most 5 requests
in flight per broker: with many partitions the records wait in the producer for a turn (librdkafka's
int_latency, printed for the paced C producers). Kafka's Java client, which OMB uses, puts all the
partitions a broker leads into one request; `--client aiokafka` does the same in Python, and `--client go`
with little CPU: its producers are bench/go/omb_producer.go (Go's Sarama client, built here with Debian's
packages, which it installs if missing), the consumers rdkafka_performance as for `--client c`. Sarama
keeps one request in flight per broker; `max` runs the same producer with no pace.

All processes share this machine's cores with the brokers: the figures say what Brook does on it, not
what Kafka's own OMB runs (separate client machines) would show.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "services"), str(REPO / "bench")]

import raw  # noqa: E402
from broker_bench import MB, NCPU, machine_busy_seconds, proc_cpu_seconds  # noqa: E402

TOPIC = "omb"
_TS = struct.Struct(">q")  # the first 8 bytes of a value: time.time_ns() at produce()


def producer_proc(bootstrap: str, rate_bps: float, size: int, until: float, out: Any) -> None:
    """Produce at `rate_bps` (0: as fast as possible) until `until`; send back (t, publish latency) pairs."""
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 1,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    pad = os.urandom(max(size - 8, 0))
    lat: list[tuple[float, float]] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            now = time.time_ns()
            sent = _TS.unpack_from(msg.value())[0]
            lat.append((now / 1e9, (now - sent) / 1e6))

    sent_bytes = 0
    start = time.monotonic()
    while time.monotonic() < until:
        if rate_bps > 0:
            ahead = sent_bytes - rate_bps * (time.monotonic() - start)
            if ahead > 0:
                p.poll(min(ahead / rate_bps, 0.01))
                continue
        value = _TS.pack(time.time_ns()) + pad
        try:
            p.produce(TOPIC, value, key=random.randbytes(8), on_delivery=delivered)
        except BufferError:
            p.poll(0.01)
            continue
        sent_bytes += size
        p.poll(0)
    p.flush(60)
    out.put(("p", lat))


def aiokafka_producer_proc(bootstrap: str, rate_bps: float, size: int, until: float, out: Any) -> None:
    """producer_proc with aiokafka (`--client aiokafka`): like Kafka's Java client, and unlike
    librdkafka, it puts the batches of every partition led by a broker into one ProduceRequest."""
    import asyncio

    from aiokafka import AIOKafkaProducer

    lat: list[tuple[float, float]] = []

    def delivered(sent: int, fut: Any) -> None:
        if not fut.cancelled() and fut.exception() is None:
            now = time.time_ns()
            lat.append((now / 1e9, (now - sent) / 1e6))

    async def run() -> None:
        p = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=1,
            max_batch_size=1_000_000,
        )
        await p.start()
        pad = os.urandom(max(size - 8, 0))
        sent_bytes, start = 0, time.monotonic()
        try:
            while time.monotonic() < until:
                due = rate_bps * (time.monotonic() - start) if rate_bps > 0 else sent_bytes + 64 * size
                while sent_bytes < due:  # what is due this millisecond, then a turn of the loop
                    now = time.time_ns()
                    fut = await p.send(TOPIC, _TS.pack(now) + pad, key=random.randbytes(8))
                    fut.add_done_callback(lambda f, now=now: delivered(now, f))
                    sent_bytes += size
                await asyncio.sleep(0.001)
            await p.flush()
        finally:
            await p.stop()

    asyncio.run(run())
    out.put(("p", lat))


def consumer_proc(bootstrap: str, until: float, out: Any) -> None:
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "omb-consumers",
            "auto.offset.reset": "latest",
            "enable.auto.commit": True,
            "fetch.wait.max.ms": 100,
        }
    )
    c.subscribe([TOPIC])
    lat: list[tuple[float, float]] = []
    while time.monotonic() < until:
        for m in c.consume(1000, 0.2):
            value = m.value()
            if m.error() is None and value is not None:
                now = time.time_ns()
                lat.append((now / 1e9, (now - _TS.unpack_from(value)[0]) / 1e6))
    c.close()
    out.put(("c", lat))


DEFAULT_PERF = Path.home() / ".cache/brook-conformance/librdkafka-2.15.0/examples/rdkafka_performance"


def c_clients(
    perf: Path, bootstrap: str, a: argparse.Namespace, rate: float | None, work: Path
) -> tuple[list[subprocess.Popen[bytes]], list[Path], list[Path]]:
    """librdkafka's C load generator as OMB's producers and consumers (`--client c`): the clients then
    take a fraction of the CPU the Python ones take on this machine. `-l` puts "LATENCY:<µs>" at the
    start of each value; `-A` writes each record's publish latency (producer: delivery report) or
    end-to-end latency (consumer), in µs, one per line in arrival order. Keyless records with sticky
    partitioning off go to a random partition each, as OMB's random keys do."""
    common = ["-t", TOPIC, "-b", bootstrap, "-l", "-q"]
    paced: Path | None = go_producer() if a.client == "go" else None
    if a.client == "c" and rate:
        paced = paced_producer(perf)
    procs: list[subprocess.Popen[bytes]] = []
    pub_files: list[Path] = []
    e2e_files: list[Path] = []
    for i in range(a.consumers):
        f = work / f"e2e-{i}.txt"
        e2e_files.append(f)
        cmd = [str(perf), "-C", "-G", "omb-consumers", *common, "-A", str(f),
               "-X", "auto.offset.reset=latest", "-X", "fetch.wait.max.ms=100"]  # fmt: skip
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    per_msgs = int(rate * MB / a.size / a.producers) if rate else 0
    if a.client == "go" and not rate:
        per_msgs = 10**9  # no pace: Sarama's channels hold the producer back
    for i in range(a.producers):
        f = work / f"pub-{i}.txt"
        pub_files.append(f)
        if paced is not None:
            cmd = [str(paced), "-b", bootstrap, "-t", TOPIC, "-s", str(a.size), "-r", str(per_msgs),
                   "-A", str(f)]  # fmt: skip
            if a.client == "c":
                cmd += ["-S", str(work / f"stats-{i}.jsonl")]
            for kv in a.producer_config:
                cmd += ["-X", kv]
            with open(work / f"producer-{i}.err", "wb") as err:  # its last line: produced, delivered
                procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err))
            continue
        cmd = [str(perf), "-P", *common, "-A", str(f), "-s", str(a.size), "-a", "-1",
               "-X", "enable.idempotence=true", "-X", "linger.ms=1", "-X", "batch.size=1000000",
               "-X", "sticky.partitioning.linger.ms=0", "-X", "queue.buffering.max.messages=1000000",
               "-X", "queue.buffering.max.kbytes=1048576"]  # fmt: skip
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return procs, pub_files, e2e_files


PACED_SOURCE = REPO / "bench" / "c" / "omb_producer.c"


def paced_producer(perf: Path) -> Path:
    """bench/c/omb_producer.c compiled against the librdkafka that built `perf` (its source tree)."""
    src = perf.resolve().parent.parent / "src"
    out = Path.home() / ".cache" / "brook-bench" / "omb_producer"
    if not out.exists() or out.stat().st_mtime < PACED_SOURCE.stat().st_mtime:
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["cc", "-O2", "-Wall", "-o", str(out), str(PACED_SOURCE), f"-I{src}", f"-L{src}", "-lrdkafka",
             f"-Wl,-rpath,{src}"],
            check=True,
        )  # fmt: skip
    return out


GO_SOURCE = REPO / "bench" / "go" / "omb_producer.go"
SARAMA = Path("/usr/share/gocode/src/github.com/Shopify/sarama")
GO_PACKAGES = ["golang-go", "golang-github-shopify-sarama-dev"]


def go_producer() -> Path:
    """bench/go/omb_producer.go compiled (GOPATH mode, offline) against Debian's Sarama 1.22.1, whose
    packages are installed first if `go` or its source is missing."""
    out = Path.home() / ".cache" / "brook-bench" / "omb_producer_go"
    if out.exists() and out.stat().st_mtime >= GO_SOURCE.stat().st_mtime:
        return out
    if shutil.which("go") is None or not SARAMA.is_dir():
        print(f"installing {' '.join(GO_PACKAGES)} (apt-get) for the Go producer", flush=True)
        apt = ["apt-get", "install", "-y", "-q", *GO_PACKAGES]
        subprocess.run(apt, check=True, stdout=subprocess.DEVNULL)
    out.parent.mkdir(parents=True, exist_ok=True)
    cache = str(out.parent / "gocache")
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": "/usr/share/gocode", "GOCACHE": cache}
    built = subprocess.run(
        ["go", "build", "-o", str(out), str(GO_SOURCE)], env=env, cwd=GO_SOURCE.parent, capture_output=True
    )
    if built.returncode != 0:
        sys.exit(f"building {GO_SOURCE} failed:\n{built.stderr.decode()}")
    return out


def producer_windows(files: list[Path], skip: float) -> dict[str, dict[str, float]] | None:
    """Per broker, the median over producers and 5-second windows of librdkafka's rtt, int_latency and
    outbuf_latency p50/p99 (µs), without the warm-up's windows."""
    import json
    import statistics

    if not files:
        return None
    seen: dict[str, dict[str, list[float]]] = {}
    for f in files:
        docs = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        for doc in docs[int(len(docs) * skip) :]:
            for b in doc.get("brokers", {}).values():
                if b.get("nodeid", -1) < 0 or not b.get("rtt", {}).get("cnt"):
                    continue  # the bootstrap entry, or no request in the window
                per = seen.setdefault(f"b{b['nodeid']}", {})
                for window in ("rtt", "int_latency", "outbuf_latency"):
                    for q in ("p50", "p99"):
                        per.setdefault(f"{window} {q}", []).append(b[window][q])
    return {b: {k: statistics.median(v) for k, v in per.items()} for b, per in sorted(seen.items())}


def measured_part(files: list[Path], skip: float) -> list[float]:
    """Latencies in ms from -A files, without the first `skip` fraction of each (the warm-up: the lines
    carry no time, but arrive in order at a steady rate)."""
    out: list[float] = []
    for f in files:
        values = [int(x) / 1000 for x in f.read_text().split()] if f.exists() else []
        out += values[int(len(values) * skip) :]
    return out


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


@dataclass
class Result:
    target_mb_s: float | None
    achieved_mb_s: float
    records: int
    publish_ms: dict[str, float]
    e2e_ms: dict[str, float]
    broker_cpu_s_per_gb: dict[int, float]
    broker_pct: dict[int, float]
    other_pct: float
    # Paced C producers only: librdkafka's window statistics (µs) per broker, medians over the run's
    # 5-second windows after the warm-up: rtt (request sent -> answer), int_latency (record queued
    # in the producer before it goes into a request), outbuf_latency (request waiting to be sent).
    producer_windows: dict[str, dict[str, float]] | None = None
    # Paced C or Go producers: the last line each wrote ("produced N, delivered M, failed F, ...").
    producer_reports: list[str] | None = None
    # Each broker's resident set (VmRSS) at the end of the measured period, MiB.
    broker_rss_mib: dict[int, float] | None = None


def run_rate(bootstrap: str, pids: dict[int, int], a: argparse.Namespace, rate: float | None) -> Result:
    if a.client in ("c", "go"):
        return run_rate_c(bootstrap, pids, a, rate)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    start = time.monotonic() + 3.0  # processes start and connect first
    measure_from = start + a.warmup
    until = measure_from + a.duration
    per = (rate * MB / a.producers) if rate else 0.0
    cons = [ctx.Process(target=consumer_proc, args=(bootstrap, until + 2, q)) for _ in range(a.consumers)]
    prods = [
        ctx.Process(
            target=aiokafka_producer_proc if a.client == "aiokafka" else producer_proc,
            args=(bootstrap, per, a.size, until, q),
        )
        for _ in range(a.producers)
    ]
    for pr in cons + prods:
        pr.start()
    time.sleep(max(0.0, measure_from - time.monotonic()))
    cpu0 = {b: proc_cpu_seconds(pid) for b, pid in pids.items()}
    busy0, _ = machine_busy_seconds()
    t0_wall = time.time()
    time.sleep(max(0.0, until - time.monotonic()))
    cpu1 = {b: proc_cpu_seconds(pid) for b, pid in pids.items()}
    busy1, _ = machine_busy_seconds()
    t1_wall = time.time()
    pub: list[float] = []
    e2e: list[float] = []
    records = 0
    for _ in cons + prods:
        kind, lat = q.get(timeout=180)
        window = [(t, v) for t, v in lat if t0_wall <= t <= t1_wall]
        if kind == "p":
            pub += [v for _, v in window]
            records += len(window)
        else:
            e2e += [v for _, v in window]
    for pr in cons + prods:
        pr.join(30)
    return summarize(rate, a, pub, e2e, records, t1_wall - t0_wall, cpu0, cpu1, busy1 - busy0)


def run_rate_c(bootstrap: str, pids: dict[int, int], a: argparse.Namespace, rate: float | None) -> Result:
    work = Path(tempfile.mkdtemp(prefix="omb-c-"))
    try:
        procs, pub_files, e2e_files = c_clients(Path(a.rdkafka_performance), bootstrap, a, rate, work)
        time.sleep(3.0 + a.warmup)  # processes start and connect, then the warm-up
        cpu0 = {b: proc_cpu_seconds(pid) for b, pid in pids.items()}
        busy0, _ = machine_busy_seconds()
        t0 = time.monotonic()
        time.sleep(a.duration)
        cpu1 = {b: proc_cpu_seconds(pid) for b, pid in pids.items()}
        busy1, _ = machine_busy_seconds()
        seconds = time.monotonic() - t0
        for pr in procs:
            pr.send_signal(signal.SIGINT)  # producers stop producing, wait for their deliveries, exit
        for pr in procs:
            try:
                pr.wait(90)
            except subprocess.TimeoutExpired:
                pr.kill()
        skip = (3.0 + a.warmup) / (3.0 + a.warmup + seconds)
        pub = measured_part(pub_files, skip)
        e2e = measured_part(e2e_files, skip)
        r = summarize(rate, a, pub, e2e, len(pub), seconds, cpu0, cpu1, busy1 - busy0)
        r.producer_windows = producer_windows(sorted(work.glob("stats-*.jsonl")), skip)
        reports = [f.read_text().strip().splitlines() for f in sorted(work.glob("producer-*.err"))]
        r.producer_reports = [lines[-1] if lines else "(nothing)" for lines in reports] or None
        return r
    finally:
        shutil.rmtree(work, ignore_errors=True)


def summarize(
    rate: float | None,
    a: argparse.Namespace,
    pub: list[float],
    e2e: list[float],
    records: int,
    seconds: float,
    cpu0: dict[int, float],
    cpu1: dict[int, float],
    busy: float,
) -> Result:
    gb = records * a.size / 1e9
    broker_cpu = {b: cpu1[b] - cpu0[b] for b in cpu0}
    summary = {
        "p50": pct(pub, 0.5),
        "p99": pct(pub, 0.99),
        "p99.9": pct(pub, 0.999),
        "max": max(pub, default=float("nan")),
    }
    e2e_summary = {
        "p50": pct(e2e, 0.5),
        "p99": pct(e2e, 0.99),
        "p99.9": pct(e2e, 0.999),
        "max": max(e2e, default=float("nan")),
    }
    return Result(
        target_mb_s=rate,
        achieved_mb_s=records * a.size / MB / seconds,
        records=records,
        publish_ms=summary,
        e2e_ms=e2e_summary,
        broker_cpu_s_per_gb={b: (c / gb if gb else float("nan")) for b, c in broker_cpu.items()},
        broker_pct={b: 100 * c / seconds for b, c in broker_cpu.items()},
        other_pct=max(0.0, 100 * (busy - sum(broker_cpu.values())) / seconds),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--rf", type=int, default=3)
    ap.add_argument("--rates", default=None, help="MB/s targets; max: as fast as the producers go")
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--consumers", type=int, default=2)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--bootstrap", default=None, help="an existing cluster (broker CPU is then not measured)")
    ap.add_argument(
        "--kafka",
        action="store_true",
        help="Apache Kafka 4.4 instead of Brook: 3 KRaft nodes (broker and controller each), -Xmx1g -Xms1g "
        "(tests/support/kafka_peer.py), Kafka's default settings",
    )
    ap.add_argument("--quick", action="store_true", help="10 partitions, 3 s warm-up, 8 s runs")
    ap.add_argument(
        "--client",
        choices=["python", "c", "go", "aiokafka"],
        default="python",
        help="python: confluent-kafka processes; c: librdkafka's C clients (far less client CPU); go: Sarama "
        "producers (one ProduceRequest per broker for all its partitions, as Java's client; `max`: the same "
        "producer unpaced) and librdkafka's C consumers; aiokafka: aiokafka producers (as Java's), "
        "confluent-kafka consumers",
    )
    ap.add_argument(
        "--rdkafka-performance", default=str(DEFAULT_PERF), help="its binary, for --client c and go"
    )
    ap.add_argument(
        "--producer-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="settings for the paced C producers on top of OMB's (librdkafka's, e.g. "
        "enable.idempotence=false), or the Go ones (linger.ms, batch.size, enable.idempotence, "
        "max.in.flight.requests.per.connection, acks)",
    )
    a = ap.parse_args()
    a.rates = a.rates or "5,20,50,max"
    if a.quick:
        a.partitions, a.rates, a.warmup, a.duration = 10, "5,max", 3.0, 8.0
    if a.client in ("c", "go") and not Path(a.rdkafka_performance).exists():
        sys.exit(f"{a.rdkafka_performance} is missing: `scripts/conformance` builds it (see its README)")
    rates = [None if r.strip() == "max" else float(r) for r in a.rates.split(",")]

    from confluent_kafka.admin import AdminClient, NewTopic

    bc = None
    kafka = None
    pids: dict[int, int] = {}
    bootstrap = a.bootstrap
    if a.kafka:
        from tests.support.kafka_peer import KafkaPeer

        kafka = KafkaPeer(Path(tempfile.mkdtemp(prefix="omb-kafka-")), nodes=3, heap="1g").start()
        bootstrap, pids = kafka.bootstrap, kafka.pids()
    elif bootstrap is None:
        from cluster_bench import BenchCluster

        bc = BenchCluster(Path(tempfile.mkdtemp(prefix="omb-")), lease_ttl=6).start()
        bootstrap, pids = bc.bootstrap, bc.pids()
    results: list[Result] = []
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = NewTopic(TOPIC, a.partitions, a.rf, config={"min.insync.replicas": str(min(2, a.rf))})
        admin.create_topics([topic])[TOPIC].result(120)
        time.sleep(2)
        for rate in rates:
            r = run_rate(bootstrap, pids, a, rate)
            r.broker_rss_mib = {b: rss_mib(pid) for b, pid in pids.items()}
            results.append(r)
            target = "max" if rate is None else f"{rate:g}"
            cpu = " ".join(f"b{b}:{v:.2f}" for b, v in sorted(r.broker_cpu_s_per_gb.items()))
            pct_s = " ".join(f"b{b}:{v:.0f}%" for b, v in sorted(r.broker_pct.items()))
            rss = " ".join(f"b{b}:{v:.0f}" for b, v in sorted((r.broker_rss_mib or {}).items()))
            print(
                f"target {target} MB/s: achieved {r.achieved_mb_s:.1f} MB/s ({r.records:,} records); "
                f"publish ms p50 {r.publish_ms['p50']:.1f} p99 {r.publish_ms['p99']:.1f} "
                f"p99.9 {r.publish_ms['p99.9']:.1f} max {r.publish_ms['max']:.1f}; "
                f"end-to-end ms p50 {r.e2e_ms['p50']:.1f} p99 {r.e2e_ms['p99']:.1f} "
                f"p99.9 {r.e2e_ms['p99.9']:.1f} max {r.e2e_ms['max']:.1f}; "
                f"broker CPU-s/GB {cpu}; broker {pct_s}; other {r.other_pct:.0f}%; RSS MiB {rss}",
                flush=True,
            )
            for b, w in (r.producer_windows or {}).items():
                print(f"  producers -> {b}, median of 5 s windows, ms: " + ", ".join(
                    f"{k} {v / 1000:.1f}" for k, v in w.items()), flush=True)  # fmt: skip
            for i, line in enumerate(r.producer_reports or []):
                print(f"  producer {i}: {line}", flush=True)
    finally:
        if kafka is not None:
            kafka.stop()
            shutil.rmtree(kafka.root, ignore_errors=True)
        if bc is not None:
            bc.stop()
            shutil.rmtree(bc.root, ignore_errors=True)  # a max-rate run leaves tens of GB of logs
    machine = (
        f"{time.strftime('%Y-%m-%d')} {NCPU} cores, {a.partitions} partitions RF={a.rf}, "
        f"{a.producers} {a.client} producers, {a.consumers} consumers, {a.size} B records, "
        f"load {os.getloadavg()[0]:.2f}"
        + (f", producer config {','.join(a.producer_config)}" if a.producer_config else "")
    )
    print(machine)
    raw.save("omb", machine, [r.__dict__ for r in results])
    if any(r.records == 0 for r in results):
        sys.exit("a run acknowledged no record: see the brokers' logs")


if __name__ == "__main__":
    main()
