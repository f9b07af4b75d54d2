#!/usr/bin/env python
"""Brook throughput benchmark: a real broker process, C clients, figures printed (not a test).

    .venv/bin/python bench/broker_bench.py [--quick] [--repeats N] [--only PART ...] [--cold]

Starts `python -m brook.cli broker` on a free 127.0.0.1 port with a temporary data directory and measures

  (a) confluent-kafka producer: 1,000,000 x 100 B (acks=1 and acks=all) and 100,000 x 1 KiB (acks=1),
      linger.ms=5, batch.size=1 MB: MB/s, records/s, p50/p99 produce latency (produce() -> delivery
      report, librdkafka's per-message latency), broker CPU-s per GB;
  (b) kcat producer (-P from a file, one record per line), same data: MB/s, broker CPU-s per GB;
  (c) confluent-kafka consumer (fetch.queue.backoff.ms=10) reading (a)'s topics back: MB/s;
  (e) raw producer: hand-encoded Produce v7 requests of one ~1 MB batch (4 in flight), building the
      ~1 GiB log that (d) reads: MB/s and broker CPU-s per GB for large batches without client costs;
      then again into cold memory, next to a plain os.write of the same size without a broker (baseline);
  (d) raw fetch: hand-encoded Fetch v11 requests with a 32 MiB partition_max_bytes, one in flight,
      reading the whole ~1 GiB log; the client counts bytes and never parses records. Once with the
      default asyncio loop (sendfile) and once after a restart with --event-loop uvloop (pread).

Every figure is the best of --repeats runs, with the spread (min-max). MB = 10^6 bytes, GB = 10^9 bytes;
producer and consumer figures count record values (payload), raw figures count bytes on the wire.
CPU comes from /proc: the broker's utime+stime (/proc/<pid>/stat), the client's own rusage (this process
with librdkafka's threads, or kcat's), and the machine's busy and softirq time (/proc/stat) to show
contention. Before each produce run a file about twice the run's size is written and deleted, so the
broker's page cache grows into RAM the VM already backs (see warm_memory); --cold skips that.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import platform
import resource
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined, unused-ignore]

import raw  # the sibling module (bench/ is on sys.path when run as a script)

CLK_TCK = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1
MB = 1e6
GB = 1e9
REPO = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------------------------------
# Measuring: broker CPU from /proc/<pid>/stat, client CPU from rusage, machine busy time from /proc/stat


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()  # fields[0] is field 3 (state)
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def machine_busy_seconds() -> tuple[float, float]:
    """(busy, softirq): CPU-seconds all cores spent not idle (user, nice, system, irq, softirq, steal),
    and in softirq alone (loopback TCP's receive side runs there and is not charged to any process)."""
    with open("/proc/stat") as f:
        cpu = f.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in cpu[:8])
    return (user + nice + system + irq + softirq + steal) / CLK_TCK, softirq / CLK_TCK


def self_cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def children_cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


CHUNK = os.urandom(4 << 20)


def write_file(path: Path, nbytes: int) -> None:
    """Write nbytes (4 MiB os.write calls, like a large-batch append) to a new file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        view = memoryview(CHUNK)
        left = nbytes
        while left > 0:
            left -= os.write(fd, view[: min(left, len(view))])
    finally:
        os.close(fd)


def warm_memory(directory: Path, nbytes: int) -> None:
    """Write and delete a file of nbytes so that the broker's next page-cache pages are ones the VM backs.

    On this machine (a Firecracker VM with free-page reporting) RAM that is free for a few seconds is handed
    back to the host, and touching it again costs ~2 CPU-s per GB in the guest: a broker growing its page
    cache into such memory pays that in write(). A long-running broker reuses its own page cache instead, so
    the default measurements start from recycled pages; see the "cold memory" rows for the other case.
    """
    path = directory / "warm-up.tmp"
    write_file(path, nbytes)
    path.unlink()


def write_baseline(directory: Path, nbytes: int) -> Sample:
    """CPU of plain os.write of nbytes into a new file (no broker): what page-cache growth costs here."""
    path = directory / "baseline.tmp"
    t0, c0 = time.perf_counter(), self_cpu_seconds()
    busy0, soft0 = machine_busy_seconds()
    write_file(path, nbytes)
    seconds, cpu = time.perf_counter() - t0, self_cpu_seconds() - c0
    busy, soft = machine_busy_seconds()
    path.unlink()
    return Sample(seconds, nbytes, 0, cpu, 0.0, busy - busy0, soft - soft0)


@dataclass
class Sample:
    """One run of one measurement."""

    seconds: float
    payload_bytes: int
    records: int
    broker_cpu: float
    client_cpu: float
    machine_busy: float
    softirq: float
    p50_ms: float | None = None
    p99_ms: float | None = None

    @property
    def mb_s(self) -> float:
        return self.payload_bytes / MB / self.seconds

    @property
    def records_s(self) -> float:
        return self.records / self.seconds

    @property
    def cpu_per_gb(self) -> float:
        return self.broker_cpu / (self.payload_bytes / GB)

    @property
    def broker_pct(self) -> float:
        return 100 * self.broker_cpu / self.seconds

    @property
    def client_pct(self) -> float:
        return 100 * self.client_cpu / self.seconds

    @property
    def softirq_pct(self) -> float:
        return 100 * self.softirq / self.seconds

    @property
    def other_pct(self) -> float:
        """Busy CPU not accounted to the broker, the client or softirq (other processes), % of a core."""
        other = self.machine_busy - self.broker_cpu - self.client_cpu - self.softirq
        return max(0.0, 100 * other / self.seconds)


@dataclass
class Measurement:
    name: str
    detail: str
    samples: list[Sample] = field(default_factory=list)


class Meter:
    """Brackets one run: wall time, broker CPU, client CPU and machine busy time."""

    def __init__(self, broker_pid: int, client_cpu: Callable[[], float] = self_cpu_seconds) -> None:
        self._pid = broker_pid
        self._client_cpu = client_cpu
        self._t0 = self._b0 = self._c0 = self._m0 = self._s0 = 0.0

    def __enter__(self) -> Meter:
        self._t0 = time.perf_counter()
        self._b0 = proc_cpu_seconds(self._pid)
        self._c0 = self._client_cpu()
        self._m0, self._s0 = machine_busy_seconds()
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def sample(self, payload_bytes: int, records: int, t_end: float | None = None) -> Sample:
        seconds = (t_end if t_end is not None else time.perf_counter()) - self._t0
        busy, softirq = machine_busy_seconds()
        return Sample(
            seconds=seconds,
            payload_bytes=payload_bytes,
            records=records,
            broker_cpu=proc_cpu_seconds(self._pid) - self._b0,
            client_cpu=self._client_cpu() - self._c0,
            machine_busy=busy - self._m0,
            softirq=softirq - self._s0,
        )


# ---------------------------------------------------------------------------------------------------
# The broker process


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BrokerProcess:
    def __init__(self, data_dir: Path, event_loop: str = "asyncio", extra_args: tuple[str, ...] = ()) -> None:
        self.data_dir = data_dir
        self.event_loop = event_loop
        self.extra_args = extra_args  # more `brook broker` options
        self.port = free_port()
        self.log_path = data_dir.parent / f"broker-{event_loop}-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable, "-m", "brook.cli", "--log-level", "WARNING", "broker",
            "--port", str(self.port), "--data-dir", str(self.data_dir), "--event-loop", self.event_loop,
            *self.extra_args,
        ]  # fmt: skip
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, cwd=REPO)
        assert self.proc.stdout is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        deadline = time.monotonic() + timeout
        out = b""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}; see {self.log_path}")
            with contextlib.suppress(BlockingIOError):
                out += os.read(self.proc.stdout.fileno(), 4096)
            if b"bootstrap:" in out:
                return self
            time.sleep(0.02)
        self.stop()
        raise TimeoutError(f"broker did not start within {timeout} s; see {self.log_path}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def create_topics(bootstrap: str, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, num_partitions=1, replication_factor=1) for n in names])
    for f in futures.values():
        f.result(30)


# ---------------------------------------------------------------------------------------------------
# (a) confluent-kafka producer


def delivery_producer(conf: dict[str, Any]) -> tuple[Producer, list[float], list[str]]:
    """A confluent-kafka producer whose delivery reports land in (latencies in s, failures)."""
    latencies: list[float] = []
    failed: list[str] = []
    add = latencies.append

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            add(msg.latency())

    return Producer({**conf, "on_delivery": on_delivery}), latencies, failed


def produce_all(producer: Producer, topic: str, value: bytes, count: int) -> None:
    """`count` records to partition 0 as fast as the producer's queue takes them."""
    produce, poll = producer.produce, producer.poll
    for i in range(count):
        while True:
            try:
                produce(topic, value, partition=0)
                break
            except BufferError:  # queue.buffering.max.messages (100,000) reached: serve deliveries
                poll(0.001)
        if i & 0x3FF == 0:
            poll(0)


def p50_p99_ms(latencies: list[float], failed: list[str], left: int, count: int) -> tuple[float, float]:
    """Check every record was delivered; the median and 99th percentile latency in ms."""
    if left or failed or len(latencies) != count:
        raise RuntimeError(f"producer: {left} undelivered, {len(failed)} failed {failed[:3]}")
    latencies.sort()
    return 1000 * latencies[len(latencies) // 2], 1000 * latencies[
        min(len(latencies) - 1, int(len(latencies) * 0.99))
    ]


def confluent_produce(
    bootstrap: str, broker_pid: int, topic: str, count: int, size: int, acks: str
) -> Sample:
    producer, latencies, failed = delivery_producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "acks": acks,
            "compression.type": "none",
            "queue.buffering.max.messages": 1_000_000,  # as the kcat rows, so the two compare
        }
    )
    producer.list_topics(topic, timeout=10)  # connected and metadata known before the clock starts
    with Meter(broker_pid) as m:
        produce_all(producer, topic, os.urandom(size), count)
        left = producer.flush(120)
        sample = m.sample(count * size, count)
    sample.p50_ms, sample.p99_ms = p50_p99_ms(latencies, failed, left, count)
    return sample


# ---------------------------------------------------------------------------------------------------
# (b) kcat producer


def write_lines(path: Path, count: int, size: int) -> None:
    """`count` lines of `size` printable bytes (kcat -P sends one record per line, without the newline)."""
    alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    line = bytes(alphabet[b % len(alphabet)] for b in os.urandom(size)) + b"\n"
    chunk = line * max(1, min(count, (1 << 20) // len(line)))
    per_chunk = len(chunk) // len(line)
    with open(path, "wb") as f:
        left = count
        while left >= per_chunk:
            f.write(chunk)
            left -= per_chunk
        f.write(line * left)


def kcat_produce(
    bootstrap: str, broker_pid: int, topic: str, count: int, size: int, data: Path, acks: str = "1"
) -> Sample:
    cmd = [
        "kcat", "-P", "-b", bootstrap, "-t", topic, "-p", "0",
        "-X", "linger.ms=5", "-X", "batch.size=1000000", "-X", f"acks={acks}",
        "-X", "compression.type=none", "-X", "queue.buffering.max.messages=1000000",
    ]  # fmt: skip
    with open(data, "rb") as stdin, Meter(broker_pid, children_cpu_seconds) as m:
        proc = subprocess.run(cmd, stdin=stdin, capture_output=True, check=False)
        sample = m.sample(count * size, count)
    if proc.returncode != 0:
        raise RuntimeError(f"kcat failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return sample


# ---------------------------------------------------------------------------------------------------
# (c) confluent-kafka consumer


def confluent_consume(
    bootstrap: str, broker_pid: int, topic: str, count: int, size: int, extra: dict[str, Any] | None = None
) -> Sample:
    """`extra`: more client settings (security.protocol, ...; security_bench.py)."""
    consumer = Consumer(
        {
            **(extra or {}),
            "bootstrap.servers": bootstrap,
            "group.id": "brook-bench-unused",  # assign() only: no group coordination
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "fetch.queue.backoff.ms": 10,
        }
    )
    got = 0
    try:
        consumer.list_topics(topic, timeout=10)
        with Meter(broker_pid) as m:
            consumer.assign([TopicPartition(topic, 0, 0)])
            idle_since = time.monotonic()
            while got < count:
                msgs = consumer.consume(num_messages=10_000, timeout=0.5)
                if not msgs:
                    if time.monotonic() - idle_since > 30:
                        raise RuntimeError(f"consumer stalled at {got}/{count} records")
                    continue
                idle_since = time.monotonic()
                for msg in msgs:
                    err = msg.error()
                    if err is None:
                        got += 1
                    elif err.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(err)
            sample = m.sample(got * size, got)
    finally:
        consumer.close()
    return sample


# ---------------------------------------------------------------------------------------------------
# Raw protocol clients: (e) Produce v7 and (d) Fetch v11, hand-encoded, no parsing of records

CLIENT_ID = b"brook-bench"


def request_header(api_key: int, version: int, correlation_id: int) -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, len(CLIENT_ID)) + CLIENT_ID


def string(s: str) -> bytes:
    data = s.encode()
    return struct.pack(">h", len(data)) + data


def build_batch(records: int, size: int) -> bytes:
    """One uncompressed magic-2 record batch of `records` values of `size` bytes (kafka-python's builder)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=2**30,
    )  # fmt: skip
    value = os.urandom(size)
    now = int(time.time() * 1000)
    for i in range(records):
        builder.append(i, timestamp=now, key=None, value=value, headers=[])
    return bytes(builder.build())


class RawConnection:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._scratch = memoryview(bytearray(8 << 20))
        self._cid = 0

    def close(self) -> None:
        self.sock.close()

    def next_cid(self) -> int:
        self._cid += 1
        return self._cid

    def send(self, api_key: int, version: int, body: bytes) -> int:
        cid = self.next_cid()
        header = request_header(api_key, version, cid)
        self.sock.sendall(struct.pack(">i", len(header) + len(body)) + header)
        self.sock.sendall(body)
        return cid

    def read_exact(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            out += chunk
        return bytes(out)

    def discard(self, n: int) -> None:
        """Receive and drop n bytes (counted by the caller, never parsed)."""
        scratch, recv_into = self._scratch, self.sock.recv_into
        size = len(scratch)
        while n > 0:
            got = recv_into(scratch, min(n, size))
            if got == 0:
                raise ConnectionError("connection closed by the broker")
            n -= got

    def read_response(self, head: int) -> tuple[bytes, int]:
        """The first `head` bytes of the next response (after its size), and the response's size."""
        size = struct.unpack(">i", self.read_exact(4))[0]
        first = self.read_exact(min(head, size))
        self.discard(size - len(first))
        return first, size


def raw_produce(
    bootstrap: str, broker_pid: int, topic: str, total_bytes: int, batch: bytes, batch_records: int
) -> tuple[Sample, int]:
    """Produce v7, acks=1, one batch per request (Kafka refuses more: INVALID_RECORD), 4 requests in
    flight (the 4 MB in flight of the former 4 batches x 2 requests). Returns (sample, records)."""
    per_request = 1
    records_blob = batch * per_request
    body = (
        struct.pack(">hhi", -1, 1, 30_000)  # null transactional_id, acks=1, timeout
        + struct.pack(">i", 1) + string(topic)
        + struct.pack(">iii", 1, 0, len(records_blob))
    )  # fmt: skip
    requests = max(1, total_bytes // len(records_blob))
    head = 4 + 4 + 2 + len(topic.encode()) + 4 + 4 + 2  # cid, topics, name, partitions, index, error
    conn = RawConnection(bootstrap)
    in_flight = 0
    try:
        with Meter(broker_pid) as m:
            sent = 0
            while sent < requests or in_flight:
                while sent < requests and in_flight < 4:
                    cid = conn.next_cid()
                    header = request_header(0, 7, cid)
                    conn.sock.sendall(struct.pack(">i", len(header) + len(body) + len(records_blob)) + header)
                    conn.sock.sendall(body)
                    conn.sock.sendall(records_blob)
                    sent += 1
                    in_flight += 1
                first, _ = conn.read_response(head)
                error = struct.unpack_from(">h", first, head - 2)[0]
                if error:
                    raise RuntimeError(f"Produce error {error}")
                in_flight -= 1
            sample = m.sample(requests * len(records_blob), requests * per_request * batch_records)
    finally:
        conn.close()
    return sample, requests * per_request * batch_records


def raw_fetch(
    bootstrap: str,
    broker_pid: int,
    topic: str,
    end_offset: int,
    batch_size: int,
    batch_records: int,
    partition_max_bytes: int,
    passes: int,
) -> Sample:
    """Read [0, end_offset) `passes` times with Fetch v11, one request in flight; count the bytes received.

    The log holds only equal batches of `batch_size` bytes and `batch_records` records, and
    partition_max_bytes is a multiple of batch_size, so the next offset follows from the records length
    alone (the one field read from each response).
    """
    pmb = max(1, partition_max_bytes // batch_size) * batch_size
    name = string(topic)
    # Response v11 up to the records length: cid, throttle, error, session, topics, name, partitions,
    # index, error, high watermark, last stable offset, log start offset, aborted (-1/0),
    # preferred replica, records length.
    head = 4 + 4 + 2 + 4 + 4 + len(name) + 4 + 4 + 2 + 8 + 8 + 8 + 4 + 4 + 4
    conn = RawConnection(bootstrap)
    received = 0
    records = 0
    try:
        with Meter(broker_pid) as m:
            for _pass in range(passes):
                offset = 0
                while offset < end_offset:
                    body = (
                        struct.pack(">iiiibii", -1, 500, 1, 2 * pmb, 0, 0, -1)
                        + struct.pack(">i", 1) + name
                        + struct.pack(">iiiqqi", 1, 0, -1, offset, -1, pmb)
                        + struct.pack(">i", 0) + string("")
                    )  # fmt: skip
                    conn.send(1, 11, body)
                    first, size = conn.read_response(head)
                    received += 4 + size
                    top_error = struct.unpack_from(">h", first, 8)[0]
                    part_error = struct.unpack_from(">h", first, head - 38)[0]
                    records_len = struct.unpack_from(">i", first, head - 4)[0]
                    if top_error or part_error or records_len < batch_size:
                        raise RuntimeError(
                            f"fetch at {offset}: errors {top_error}/{part_error}, {records_len} record bytes"
                        )
                    offset += (records_len // batch_size) * batch_records
                records += offset
            sample = m.sample(received, records)
    finally:
        conn.close()
    return sample


# ---------------------------------------------------------------------------------------------------
# Report


def fmt_range(values: list[float], digits: int) -> str:
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{min(values):.{digits}f}-{max(values):.{digits}f}"


def print_table(results: list[Measurement]) -> None:
    cols = [
        "measurement", "MB/s best", "MB/s median", "MB/s spread", "records/s best", "p50 ms", "p99 ms",
        "broker CPU-s/GB", "broker %", "client %", "softirq %", "other %",
    ]  # fmt: skip
    rows = [cols]
    for r in results:
        if not r.samples:
            continue
        best = max(r.samples, key=lambda s: s.mb_s)
        cpu = [s.cpu_per_gb for s in r.samples]
        rows.append(
            [
                f"{r.name} ({r.detail})",
                f"{best.mb_s:.1f}",
                f"{statistics.median(s.mb_s for s in r.samples):.1f}",
                fmt_range([s.mb_s for s in r.samples], 1),
                f"{best.records_s:,.0f}" if best.records else "-",
                fmt_range([s.p50_ms for s in r.samples if s.p50_ms is not None], 1) if best.p50_ms else "-",
                fmt_range([s.p99_ms for s in r.samples if s.p99_ms is not None], 1) if best.p99_ms else "-",
                f"{min(cpu):.2f} ({fmt_range(cpu, 2)})",
                fmt_range([s.broker_pct for s in r.samples], 0),
                fmt_range([s.client_pct for s in r.samples], 0),
                fmt_range([s.softirq_pct for s in r.samples], 0),
                fmt_range([s.other_pct for s in r.samples], 0),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]
    print()
    print("| " + " | ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows[1:]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
    print()
    print(
        f"%: CPU time over wall time (100 % = one core of {NCPU}). softirq: the machine's (loopback TCP "
        "receive work, charged to no process); other: the rest of the machine's busy time (other processes)."
    )
    print(
        "CPU-s/GB: best (spread); for the baselines, the writer's own CPU. Producer/consumer bytes are "
        "record values; raw bytes are bytes on the wire."
    )


def machine_info() -> str:
    model = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    import confluent_kafka

    kcat = subprocess.run(["kcat", "-V"], capture_output=True, text=True, check=False).stdout
    kcat_line = next((ln.strip() for ln in kcat.splitlines() if "librdkafka" in ln), "kcat ?")
    return (
        f"{datetime.date.today()}  {NCPU} cores  {model}  Python {platform.python_version()}  "
        f"confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})  "
        f"{kcat_line}  load average {os.getloadavg()[0]:.2f}"
    )


# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    small_count: int
    small_size: int
    large_count: int
    large_size: int
    raw_bytes: int  # the raw log: ~1 GiB of ~1 MB batches
    raw_batch_records: int
    raw_record_size: int
    partition_max_bytes: int
    fetch_passes: int  # reads of the whole raw log per fetch sample


FULL = Sizes(1_000_000, 100, 100_000, 1024, 1 << 30, 1000, 1024, 32 << 20, 3)
QUICK = Sizes(300_000, 100, 30_000, 1024, 256 << 20, 1000, 1024, 32 << 20, 1)


def run_baselines(data_dir: Path, nbytes: int, repeats: int, settle: float) -> list[Measurement]:
    """What growing the page cache costs on this machine, without a broker: into RAM untouched for a
    while (freed RAM goes back to the VM's host after ~15 s), then into just-freed RAM."""
    base = f"os.write of {nbytes >> 20} MiB in 4 MiB calls, no broker"
    cold = Measurement("baseline", f"{base}, first-touch memory")
    warm_base = Measurement("baseline", f"{base}, recycled memory")
    print(f"baseline: waiting {settle:.0f} s for freed memory to go back to the host", flush=True)
    time.sleep(settle)
    cold.samples.append(write_baseline(data_dir, nbytes))
    for _r in range(repeats):
        warm_base.samples.append(write_baseline(data_dir, nbytes))
    for m in (cold, warm_base):
        for smp in m.samples:
            print(f"  {m.name} ({m.detail}): {smp.mb_s:.0f} MB/s, {smp.cpu_per_gb:.2f} CPU-s/GB", flush=True)
    return [cold, warm_base]


def run(args: argparse.Namespace) -> list[Measurement]:
    sz = QUICK if args.quick else FULL
    repeats: int = args.repeats if args.repeats else (1 if args.quick else 3)
    only: set[str] = set(args.only or [])
    settle = 1.0 if args.quick else 20.0  # seconds for freed RAM to go back to the VM's host

    def wanted(name: str) -> bool:
        return not only or name in only

    work = Path(tempfile.mkdtemp(prefix="brook-bench-", dir=args.tmp))
    data_dir = work / "data"
    results: list[Measurement] = []
    broker = BrokerProcess(data_dir)

    def note(m: Measurement, s: Sample) -> None:
        m.samples.append(s)
        lat = f", p50 {s.p50_ms:.1f} ms, p99 {s.p99_ms:.1f} ms" if s.p50_ms is not None else ""
        print(
            f"  {m.name} ({m.detail}) run {len(m.samples)}: {s.mb_s:.1f} MB/s, {s.records_s:,.0f} rec/s"
            f"{lat}, {s.seconds:.2f} s, broker {s.broker_cpu:.2f} CPU-s = {s.cpu_per_gb:.2f} CPU-s/GB, "
            f"client {s.client_cpu:.2f} CPU-s, softirq {s.softirq_pct:.0f} %, other {s.other_pct:.0f} %",
            flush=True,
        )

    def label(count: int, size: int) -> str:
        return f"{count:,} x {size} B"

    def warm(nbytes: int) -> None:
        if not args.cold:
            warm_memory(work, max(64 << 20, nbytes))

    try:
        data_dir.mkdir(parents=True)
        if wanted("baseline"):
            results += run_baselines(data_dir, sz.raw_bytes, repeats, settle)
        broker.start()
        print(f"broker pid {broker.pid} on {broker.bootstrap} (asyncio), data in {data_dir}", flush=True)
        specs = [
            ("p-small-a1", sz.small_count, sz.small_size, "1"),
            ("p-small-aall", sz.small_count, sz.small_size, "all"),
            ("p-large-a1", sz.large_count, sz.large_size, "1"),
        ]
        topics = [f"{t}-{r}" for t, *_ in specs for r in range(repeats)]
        topics += [f"k-{s}-{r}" for s in ("small", "large") for r in range(repeats)]
        topics += [f"raw-{r}" for r in range(repeats)]
        create_topics(broker.bootstrap, topics)

        # (a) confluent-kafka producer
        if wanted("produce"):
            for tag, count, size, acks in specs:
                m = Measurement("confluent produce", f"{label(count, size)}, acks={acks}")
                results.append(m)
                for r in range(repeats):
                    warm(2 * count * size)
                    note(m, confluent_produce(broker.bootstrap, broker.pid, f"{tag}-{r}", count, size, acks))

        # (b) kcat producer
        if wanted("kcat"):
            for tag, count, size in (
                ("small", sz.small_count, sz.small_size),
                ("large", sz.large_count, sz.large_size),
            ):
                data = work / f"lines-{tag}.txt"
                write_lines(data, count, size)
                m = Measurement("kcat produce", f"{label(count, size)}, acks=1")
                results.append(m)
                for r in range(repeats):
                    warm(2 * count * size)
                    note(m, kcat_produce(broker.bootstrap, broker.pid, f"k-{tag}-{r}", count, size, data))
                data.unlink()

        # (c) confluent-kafka consumer, reading (a)'s first topics back
        if wanted("consume") and wanted("produce"):
            for tag, count, size, _ in (specs[0], specs[2]):
                m = Measurement("confluent consume", label(count, size))
                results.append(m)
                for _r in range(repeats):
                    note(m, confluent_consume(broker.bootstrap, broker.pid, f"{tag}-0", count, size))

        # (e) raw large-batch produce, building the log that (d) reads
        batch = build_batch(sz.raw_batch_records, sz.raw_record_size)
        end_offset = 0
        if wanted("raw-produce") or wanted("fetch"):
            raw_detail = f"v7, one {len(batch):,} B batch/request, 4 in flight, acks=1"
            m = Measurement(
                "raw produce", f"{raw_detail}, {'first-touch' if args.cold else 'recycled'} memory"
            )
            results.append(m)
            for r in range(repeats if wanted("raw-produce") else 1):
                if args.cold:
                    time.sleep(settle)  # let freed RAM (other runs, tests) go back to the host first
                warm(sz.raw_bytes * 3 // 2)
                s, n = raw_produce(
                    broker.bootstrap, broker.pid, f"raw-{r}", sz.raw_bytes, batch, sz.raw_batch_records
                )
                if r == 0:
                    end_offset = n
                note(m, s)

        # (d) raw fetch: sendfile (asyncio), then pread (uvloop) on the same log
        if wanted("fetch"):
            for loop_name in ("asyncio", "uvloop"):
                if loop_name == "uvloop":
                    broker.stop()
                    broker = BrokerProcess(data_dir, "uvloop")
                    broker.start()
                    print(f"broker pid {broker.pid} on {broker.bootstrap} (uvloop)", flush=True)
                how = "sendfile" if loop_name == "asyncio" else "pread"
                m = Measurement(
                    "raw fetch",
                    f"v11, {sz.partition_max_bytes >> 20} MiB/partition, {loop_name} ({how}), "
                    f"{sz.fetch_passes} x {end_offset // sz.raw_batch_records * len(batch) / GB:.2f} GB",
                )
                results.append(m)
                for _r in range(repeats):
                    note(
                        m,
                        raw_fetch(
                            broker.bootstrap,
                            broker.pid,
                            "raw-0",
                            end_offset,
                            len(batch),
                            sz.raw_batch_records,
                            sz.partition_max_bytes,
                            sz.fetch_passes,
                        ),
                    )
    finally:
        broker.stop()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="reduced sizes, one run each (a smoke check, < 30 s)")
    p.add_argument(
        "--repeats", type=int, default=0, help="runs per measurement (default 3, or 1 with --quick)"
    )
    p.add_argument(
        "--only",
        action="append",
        choices=("baseline", "produce", "kcat", "consume", "raw-produce", "fetch"),
        help="run only these parts (repeatable); consume needs produce",
    )
    p.add_argument(
        "--cold",
        action="store_true",
        help="no page-cache warm-up before produce runs (see warm_memory)",
    )
    p.add_argument("--tmp", default=None, help="parent of the temporary data directory")
    p.add_argument("--keep", action="store_true", help="keep the data directory and broker logs")
    args = p.parse_args(argv)
    machine = machine_info()
    print(machine, flush=True)
    started = time.monotonic()
    results = run(args)
    print_table(results)
    raw.save("broker_bench", machine, results)
    print(f"total {time.monotonic() - started:.0f} s; load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
