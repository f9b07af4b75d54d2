#!/usr/bin/env python
"""Iceberg topics (figures printed, not a test):

1. the writer's cost: records per CPU-second (one core) from log batches to a committed Iceberg snapshot,
   1 KiB JSON values (`json` mode) and 1 KiB Avro values (`schema` mode), measured in-process (the
   worker process's work, without the pickling of batches to it) on a log a real broker wrote;
2. the table's lag behind the topic while a producer sends 1 KiB JSON values at a fixed rate;
3. produce latency (acks=1, librdkafka delivery reports) at a fixed rate, writer off vs on.

    .venv/bin/python bench/iceberg_bench.py [--records 50000] [--rate-mb 20] [--seconds 30]
"""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "services")]

from bench.raw import save  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from fastavro import parse_schema, schemaless_writer  # noqa: E402
from tests.integration.test_clients import create_topic  # noqa: E402
from tests.integration.test_iceberg import last_stable_offsets, load_table, table_offsets  # noqa: E402
from tests.support.broker import BrokerProcess  # noqa: E402

from brook.config import TopicConfig  # noqa: E402
from brook.iceberg.catalog import open_catalog  # noqa: E402
from brook.iceberg.chunks import Chunk, read_batches  # noqa: E402
from brook.iceberg.ports import IcebergSettings, TableId  # noqa: E402
from brook.iceberg.writer import TableWriter  # noqa: E402
from brook.log import PartitionLog  # noqa: E402

AVRO = {
    "type": "record",
    "name": "Event",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "ok", "type": "boolean"},
        {"name": "pad", "type": "string"},
    ],
}


def json_value(i: int) -> bytes:
    v = {"id": i, "user": f"user-{i % 1000}", "amount": i * 0.5, "ok": i % 2 == 0, "pad": ""}
    v["pad"] = "x" * (1024 - len(json.dumps(v)))
    return json.dumps(v).encode()


def avro_value(i: int, parsed: Any) -> bytes:
    buf = io.BytesIO()
    buf.write(b"\x00" + (1).to_bytes(4, "big"))
    schemaless_writer(
        buf, parsed, {"id": i, "user": f"user-{i % 1000}", "amount": i * 0.5, "ok": True, "pad": "x" * 990}
    )
    return buf.getvalue()


class OneSchema:
    """The registry's answer for id 1 (a SchemaLookup): the benchmark measures the writer, not HTTP."""

    def avro(self, schema_id: int) -> Any | None:
        return AVRO if schema_id == 1 else None


class LogPartition:
    """A closed partition log as a WrittenPartition: everything in it is committed."""

    def __init__(self, log: PartitionLog) -> None:
        self.topic, self.index, self.log = "bench", 0, log
        self.leads_now = True

    @property
    def last_stable_offset(self) -> int:
        return self.log.log_end_offset


def read_all(p: LogPartition, start: int, max_bytes: int) -> Chunk:
    pos, size, batches = start, 0, []
    while pos < p.last_stable_offset and size < max_bytes:
        got, pos, n = read_batches(p, pos, p.last_stable_offset)
        batches += got
        size += n
    return Chunk(start, pos, batches, [])


def writer_cost(root: Path, records: int) -> dict[str, Any]:
    """Records per CPU-second of the writer per value mode, on logs a real broker wrote."""
    parsed = parse_schema(AVRO)
    out: dict[str, Any] = {}
    for mode, make in (("json", json_value), ("schema", lambda i: avro_value(i, parsed))):
        data = root / f"cost-{mode}"
        broker = BrokerProcess(data).start()
        try:
            create_topic(broker.bootstrap, "bench", 1)
            p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "log_level": 2})
            for i in range(records):
                p.produce("bench", make(i), partition=0)
                if i % 10000 == 0:
                    p.poll(0)
            p.flush(60)
        finally:
            broker.stop()
        log = PartitionLog.open(data / "bench-0", TopicConfig())
        config = TopicConfig.from_strings({"brook.iceberg.value.mode": mode})
        catalog = open_catalog(IcebergSettings(), root / f"table-{mode}")
        writer = TableWriter(catalog, TableId("brook", "bench"), 0, config, threading.Lock(), OneSchema())
        start, cpu, wall, n = 0, 0.0, 0.0, 0
        while start < log.log_end_offset:
            chunk = read_all(LogPartition(log), start, 16 * 1024 * 1024)
            c0, w0 = time.process_time(), time.perf_counter()
            start = writer.commit(chunk)
            cpu += time.process_time() - c0
            wall += time.perf_counter() - w0
            n += sum(h.record_count for _, h in chunk.batches)
        log.close()
        out[mode] = {
            "records": n,
            "cpu_s": round(cpu, 2),
            "wall_s": round(wall, 2),
            "per_cpu_s": round(n / cpu),
        }
        print(f"writer, {mode:6}: {n} records of 1 KiB, {cpu:.2f} CPU-s ({wall:.2f} s wall): "
              f"{n / cpu:,.0f} records per CPU-second", flush=True)  # fmt: skip
    return out


def produce_at(bootstrap: str, topic: str, rate_mb: float, seconds: float, report: Any) -> None:
    """A separate process: 1 KiB JSON values at rate_mb MB/s; delivery latencies (ms) into `report`."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "acks": 1, "log_level": 2})
    latencies: list[float] = []
    per_s = rate_mb * 1e6 / 1024
    values = [json_value(i) for i in range(1000)]  # made up front: the producer's CPU goes to sending
    t0 = time.perf_counter()
    i = 0

    def done(err: Any, _msg: Any, sent: float) -> None:
        if err is None:
            latencies.append((time.perf_counter() - sent) * 1000)

    while (now := time.perf_counter()) - t0 < seconds:
        due = int((now - t0) * per_s)
        while i < due:
            sent = time.perf_counter()
            try:
                report_ = lambda e, m, s=sent: done(e, m, s)  # noqa: E731
                p.produce(topic, values[i % len(values)], partition=i % 2, on_delivery=report_)
            except BufferError:  # librdkafka's queue is full: the broker is behind the asked rate
                p.poll(0.01)
                continue
            i += 1
        p.poll(0.001)
    p.flush(60)
    report.put((i, latencies))


def run_load(root: Path, name: str, iceberg: bool, rate_mb: float, seconds: float) -> dict[str, Any]:
    broker = BrokerProcess(root / name).start()
    try:
        config = {"brook.iceberg.enabled": "true", "brook.iceberg.value.mode": "json",
                  "brook.iceberg.commit.interval.ms": "1000"} if iceberg else {}  # fmt: skip
        create_topic(broker.bootstrap, "load", 2, config)
        time.sleep(3)  # the writers started (pyiceberg's import) before the load
        report: Any = multiprocessing.Queue()
        proc = multiprocessing.Process(
            target=produce_at, args=(broker.bootstrap, "load", rate_mb, seconds, report)
        )
        proc.start()
        lags: list[int] = []
        t0 = time.perf_counter()
        while proc.is_alive() and time.perf_counter() - t0 < seconds + 60:
            if iceberg:
                ends = last_stable_offsets(broker.bootstrap, "load", 2)
                at = table_offsets(load_table(broker.data_dir, "load"))
                lags.append(sum(ends.values()) - sum(at.get(p, 0) for p in ends))
            time.sleep(1)
            if not report.empty():
                break
        sent, latencies = report.get(timeout=120)
        proc.join(30)
        drain = 0.0
        if iceberg:
            ends = last_stable_offsets(broker.bootstrap, "load", 2)
            d0 = time.perf_counter()
            while sum(table_offsets(load_table(broker.data_dir, "load")).get(p, 0) for p in ends) < sum(
                ends.values()
            ):
                time.sleep(0.5)
            drain = time.perf_counter() - d0
        q = statistics.quantiles(latencies, n=100)
        out = {"sent": sent, "p50_ms": round(q[49], 2), "p99_ms": round(q[98], 2), "lag_records": lags,
               "drain_s": round(drain, 1)}  # fmt: skip
        line = (
            f"{name}: {sent} records at {rate_mb} MB/s, produce latency p50 {q[49]:.2f} ms p99 {q[98]:.2f} ms"
        )
        if iceberg:
            line += f"; table lag max {max(lags or [0])} records, median {statistics.median(lags or [0]):.0f}"
            line += f", drained {drain:.1f} s after the load"
        print(line, flush=True)
        return out
    finally:
        broker.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--rate-mb", type=float, default=20.0)
    ap.add_argument("--latency-rate-mb", type=float, default=5.0)
    ap.add_argument("--seconds", type=float, default=30.0)
    a = ap.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="iceberg-bench-") as tmp:
        root = Path(tmp)
        results["writer_cost"] = writer_cost(root, a.records)
        results["lag"] = run_load(root, f"lag-{a.rate_mb:g}MBps", True, a.rate_mb, a.seconds)
        results["latency_off"] = run_load(root, "writer-off", False, a.latency_rate_mb, a.seconds)
        results["latency_on"] = run_load(root, "writer-on", True, a.latency_rate_mb, a.seconds)
    save("iceberg", f"load {os.getloadavg()[0]:.1f}", results)


if __name__ == "__main__":
    main()
