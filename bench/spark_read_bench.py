#!/usr/bin/env python
"""Spark read benchmark: rows/s of a streaming read of a Brook topic into an aggregation (not a test).

    .venv/bin/python bench/spark_read_bench.py [--records N] [--partitions P] [--masters local[1],local[2]]
        [--repeats R] [--max-offsets-per-trigger M] [--bootstrap HOST:PORT] [--formats brook,kafka]

Starts `python -m brook.cli broker` on a free 127.0.0.1 port (unless --bootstrap), produces N records of
100-byte values over P partitions, then for each Spark master runs a streaming query
    readStream.format(F) -> groupBy(partition).agg(count, max(offset), sum(length(value)))
    -> writeStream.format("noop").outputMode("complete").trigger(availableNow=True)
for each format F ("brook": services/pyspark_brook; "kafka": Spark's built-in connector, the jars of
scripts/setup-spark-kafka), and prints rows/s (rows read / wall time of the query, Spark start
excluded), the best micro-batch's processedRowsPerSecond, the same query over 30,000 records (its CPU
is the per-query fixed cost), and rows per CPU-second spent by Spark (the driver JVM, the executor
threads and the Python workers: /proc times of this process tree), i.e. rows/s per fully used core.
The broker runs on the same machine and shares its cores; its CPU is not counted in the per-core figure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import raw  # the sibling module (bench/ is on sys.path when run as a script)

ROOT = Path(__file__).resolve().parents[1]
SMALL = 30_000  # records of the calibration topic


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_broker(data: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "brook.cli", "broker", "--port", str(port), "--data-dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    if "bootstrap:" not in line:
        proc.kill()
        raise RuntimeError(f"broker did not start: {line!r}")
    return proc, f"127.0.0.1:{port}"


def produce(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = os.urandom(100)
    t = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0
    return time.perf_counter() - t


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, user+system CPU seconds) of a live process, from /proc/<pid>/stat."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / tick


def tree_cpu(root: int, by_kind: dict[str, float] | None = None) -> float:
    """CPU seconds of `root` and every live descendant (the JVM and its Python workers)."""
    stats = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = _stat(int(d))
            if st is not None:
                stats[int(d)] = st
    total = 0.0
    for pid, (_, cpu) in stats.items():
        p = pid
        while p in stats and p != root:
            p = stats[p][0]
        if p == root:
            total += cpu
            if by_kind is not None:
                try:
                    exe = os.readlink(f"/proc/{pid}/exe")
                except OSError:
                    exe = "?"
                kind = "jvm" if "java" in exe else ("driver" if pid == root else "python-workers")
                by_kind[kind] = by_kind.get(kind, 0.0) + cpu
    return total


def run_query(
    master: str, fmt: str, bootstrap: str, topic: str, max_per_trigger: int | None, repeats: int
) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    cores = int(master[master.index("[") + 1 : master.index("]")])
    builder = SparkSession.builder
    if fmt == "kafka":
        builder = builder.config("spark.jars", (ROOT / ".venv" / "spark-kafka-jars.txt").read_text().strip())
    spark = (
        builder.master(master)
        .appName("brook-read-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    import pyspark_brook

    pyspark_brook.register(spark)

    def one_run(run_topic: str) -> tuple[float, float, int, float, int, float, str]:
        reader = (
            spark.readStream.format(fmt)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", run_topic)
            .option("startingOffsets", "earliest")
        )
        if max_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(max_per_trigger))
        agg = (
            reader.load()
            .groupBy("partition")
            .agg(
                F.count("*").alias("n"),
                F.max("offset").alias("last"),
                F.sum(F.length("value")).alias("bytes"),
            )
        )
        ck = tempfile.mkdtemp(prefix="brook-bench-ck-")
        kinds0: dict[str, float] = {}
        cpu0 = tree_cpu(os.getpid(), kinds0)
        t = time.perf_counter()
        q = (
            agg.writeStream.format("noop")
            .outputMode("complete")
            .option("checkpointLocation", ck)
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        wall = time.perf_counter() - t
        kinds1: dict[str, float] = {}
        cpu = tree_cpu(os.getpid(), kinds1) - cpu0
        split = ", ".join(f"{k} {kinds1[k] - kinds0.get(k, 0.0):.2f}" for k in sorted(kinds1))
        rows = sum(p["numInputRows"] for p in q.recentProgress)
        best_batch = max((p.get("processedRowsPerSecond") or 0.0) for p in q.recentProgress)
        shutil.rmtree(ck, ignore_errors=True)
        return rows / wall, best_batch, rows, wall, len(q.recentProgress), cpu, split

    one_run(topic)  # warms the JVM and the Python workers up
    results = [one_run(topic) for _ in range(repeats)]
    # The same query over 30,000 records: its CPU is the per-query fixed cost (planning, code
    # generation, task and worker start-up), which the per-row figure below leaves out.
    small = [one_run(topic + "-small") for _ in range(repeats)]
    spark.stop()
    fixed = statistics.median(x[5] for x in small)
    # Every figure of a line comes from one run: the median run by wall-clock rate, with its own CPU.
    ranked = sorted(results)
    run = ranked[len(ranked) // 2]
    rate, best_batch, rows, wall, batches, cpu, split = run
    spread = f"{ranked[0][0]:,.0f}-{ranked[-1][0]:,.0f}"
    marginal = (rows - SMALL) / max(1e-9, cpu - fixed)
    print(
        f"{fmt} {master}: median run {rate:,.0f} rows/s wall (runs {spread}); {rows:,} rows in {wall:.2f} s, "
        f"{batches} micro-batch(es), best batch {best_batch:,.0f} rows/s; Spark CPU {cpu:.2f} s "
        f"({split}) -> {rows / cpu:,.0f} rows per Spark CPU-second; per-query fixed cost "
        f"{fixed:.2f} CPU-s (median), per row {1e6 / marginal:.2f} µs -> {marginal:,.0f} rows per CPU-second",
        flush=True,
    )
    fields = (
        "rows_per_s", "best_batch_rows_per_s", "rows", "wall_s", "micro_batches", "spark_cpu_s", "cpu_split",
    )  # fmt: skip
    raw.save(
        f"spark_read_bench-{fmt}-{master.replace('[', '').replace(']', '')}",
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}",
        {
            "runs": [dict(zip(fields, r, strict=True)) for r in results],
            "small_runs": [dict(zip(fields, r, strict=True)) for r in small],
        },
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=6_000_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--masters", default="local[1],local[2]")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-offsets-per-trigger", type=int, default=None)
    ap.add_argument("--bootstrap", default=None)
    ap.add_argument("--formats", default="brook")  # brook,kafka: Spark's own connector beside it
    ap.add_argument("--format", default="brook", help=argparse.SUPPRESS)  # internal, with --query-only
    ap.add_argument("--query-only", help=argparse.SUPPRESS)  # internal: one master in a fresh process
    ap.add_argument("--topic", default="bench-spark-read")
    a = ap.parse_args()
    if a.query_only:
        run_query(a.query_only, a.format, a.bootstrap, a.topic, a.max_offsets_per_trigger, a.repeats)
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="brook-spark-bench-"))
    broker = None
    try:
        bootstrap = a.bootstrap
        if bootstrap is None:
            broker, bootstrap = start_broker(tmp / "data")
        secs = produce(bootstrap, a.topic, a.records, a.partitions)
        produce(bootstrap, a.topic + "-small", SMALL, a.partitions)
        print(
            f"produced {a.records:,} x 100 B over {a.partitions} partitions in {secs:.1f} s "
            f"({os.cpu_count()} cores on this machine, broker included)",
            flush=True,
        )
        for fmt, master in ((f, m) for f in a.formats.split(",") for m in a.masters.split(",")):
            # One process per master: a SparkContext's master cannot change within a process.
            cmd = [
                sys.executable,
                __file__,
                "--query-only",
                master,
                "--format",
                fmt,
                "--bootstrap",
                bootstrap,
                "--topic",
                a.topic,
                "--repeats",
                str(a.repeats),
            ]
            if a.max_offsets_per_trigger:
                cmd += ["--max-offsets-per-trigger", str(a.max_offsets_per_trigger)]
            subprocess.run(
                cmd,
                check=True,
                env=dict(os.environ, PYTHONPATH=str(ROOT / "services")),
                stderr=subprocess.DEVNULL,
            )
    finally:
        if broker is not None:
            broker.terminate()
            broker.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
