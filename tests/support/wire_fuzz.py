"""A raw-socket fuzzer for running brokers: malformed frames over many short connections.

Seeds are every request kafka-python can encode (52 APIs, each of their versions, plus Produce requests
carrying real record batches), encoded by kafka-python, not by Brook. Each frame is a seed bent one way:
bytes flipped, truncated or extended, an int32 or a compact length made huge, a random API key or
version, random bytes; and framed honestly or with a lying size (larger than what follows, negative,
past socket.request.max.bytes). Connections send a few frames each and go, some without reading.

While it runs, a well-behaved client must keep being answered (checked every `check_every` frames).
`python -m tests.support.wire_fuzz --frames 1000000` (or scripts/fuzz) starts 3 brokers and runs
against them; the test suite runs a short version (tests/integration/test_wire_fuzz.py).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import pkgutil
import random
import struct
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import kafka.protocol
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.producer import ProduceRequest

from tests.support.raw import RawClient, api_versions_request
from tests.support.records import batch

MAX_REQUEST_BYTES = 100 * 1024 * 1024  # the broker's socket.request.max.bytes default


def _request_classes() -> list[type[ApiMessage]]:
    found: dict[str, type[ApiMessage]] = {}
    for mod in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        try:
            module = importlib.import_module(mod.name)
        except Exception:  # stubs generators and the like: not request modules
            continue
        for name, cls in vars(module).items():
            if inspect.isclass(cls) and issubclass(cls, ApiMessage) and name.endswith("Request"):
                found[name] = cls
    return [found[n] for n in sorted(found)]


def _produce_seeds() -> list[bytes]:
    """Produce requests with real batches (the fuzzer then bends CRCs, lengths and counts in them)."""
    seeds = []
    records = [batch([b"v" * 40] * 3), batch([b"x"] * 5, compression=1), batch([b"k"], producer_id=7)]
    for version in (3, 9, 12):
        t, p = ProduceRequest.TopicProduceData, ProduceRequest.TopicProduceData.PartitionProduceData
        for r in records:
            part = p(version=version, index=0, records=r)
            req = ProduceRequest(
                version=version,
                transactional_id=None,
                acks=1,
                timeout_ms=5000,
                topic_data=[t(version=version, name="fuzz", partition_data=[part])],
            )
            req.with_header(correlation_id=1, client_id="fuzz")
            seeds.append(req.encode(version=version, header=True))
    return seeds


def seeds() -> list[bytes]:
    """Valid request frames (header and body, no size) for every API and version kafka-python knows."""
    out = _produce_seeds()
    for cls in _request_classes():
        for version in range(cls.min_version, cls.max_version + 1):
            try:
                req = cls()
                req.with_header(correlation_id=version + 1, client_id="fuzz")
                out.append(req.encode(version=version, header=True))
            except Exception:  # a version kafka-python cannot encode with defaults: not a seed
                continue
    return out


def bend(rng: random.Random, seed: bytes) -> bytes:
    """One malformed request from a valid one."""
    data = bytearray(seed)
    how = rng.randrange(8)
    if how == 0 and data:  # a few bytes flipped
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif how == 1 and data:  # truncated
        del data[rng.randrange(len(data)) :]
    elif how == 2:  # trailing garbage
        data += rng.randbytes(rng.randint(1, 64))
    elif how == 3 and len(data) > 12:  # an int32 (an array length, a size) made huge or negative
        pos = rng.randrange(8, len(data) - 3)
        data[pos : pos + 4] = struct.pack(">i", rng.choice([2**31 - 1, -2, -(2**31), 2**24, 65_536]))
    elif how == 4 and len(data) > 10:  # a huge compact length (unsigned varint) inserted
        pos = rng.randrange(8, len(data))
        data[pos:pos] = rng.choice([b"\xff\xff\xff\xff\x0f", b"\xff\xff\x7f", b"\x80\x80\x80\x80\x80\x01"])
    elif how == 5 and len(data) >= 4:  # any API key and version
        data[0:4] = struct.pack(">hh", rng.choice([rng.randrange(100), -1, 32767]), rng.randrange(-1, 40))
    elif how == 6:  # random bytes with a plausible header
        data = bytearray(data[:8] + rng.randbytes(rng.randint(0, 200)))
    else:  # a valid request: the connection must still be served afterwards
        pass
    return bytes(data)


def frame(rng: random.Random, payload: bytes) -> tuple[bytes, bool]:
    """The frame's bytes and whether its size lies (the connection cannot go on after it)."""
    lie = rng.randrange(20)
    if lie == 0:
        return struct.pack(">i", len(payload) + rng.randint(1, 1 << 20)) + payload, True  # short
    if lie == 1:
        return struct.pack(">i", rng.choice([-1, -(2**31)])) + payload, True
    if lie == 2:
        return struct.pack(">i", MAX_REQUEST_BYTES + rng.randint(1, 1000)) + payload, True
    if lie == 3:
        return struct.pack(">i", 0), True
    return struct.pack(">i", len(payload)) + payload, False


@dataclass
class Report:
    frames: int = 0
    connections: int = 0
    refused_connects: int = 0
    seconds: float = 0.0
    checks: int = 0
    unserved: list[str] = field(default_factory=list)  # a healthy client not answered, and when
    rss_mb: dict[str, list[float]] = field(default_factory=dict)  # per pid: before, peak, after


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _connection(rng: random.Random, corpus: list[bytes], addr: tuple[str, int], report: Report) -> None:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(*addr), 5)
    except (TimeoutError, OSError):
        report.refused_connects += 1
        return
    report.connections += 1
    try:
        for _ in range(rng.randint(1, 6)):
            data, lies = frame(rng, bend(rng, rng.choice(corpus)))
            writer.write(data)
            report.frames += 1
            if lies:
                break
        await asyncio.wait_for(writer.drain(), 5)
        if rng.random() < 0.5:  # read some answers (or the close), else go at once
            await asyncio.wait_for(reader.read(65_536), 0.2)
    except (TimeoutError, OSError):
        pass
    finally:
        writer.transport.abort()


def _served(bootstrap: str) -> bool:
    try:
        with RawClient(bootstrap, timeout=5) as c:
            return bool(c.request(api_versions_request(), 3).error_code == 0)
    except OSError:
        return False


async def run(
    bootstraps: list[str], frames: int, pids: list[int], seed: int = 0, concurrency: int = 32,
    check_every: int = 5_000,
) -> Report:  # fmt: skip
    """Send `frames` malformed frames to the brokers, `concurrency` connections at a time."""
    rng = random.Random(seed)
    corpus = seeds()
    report = Report(rss_mb={str(p): [rss_mb(p)] * 2 for p in pids})
    addrs = [(h, int(p)) for h, p in (b.rsplit(":", 1) for b in bootstraps)]
    start = time.monotonic()
    next_check = check_every
    running: set[asyncio.Task[None]] = set()
    while report.frames < frames:
        while len(running) < concurrency:
            sub = random.Random(rng.getrandbits(64))
            running.add(asyncio.create_task(_connection(sub, corpus, rng.choice(addrs), report)))
        _, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
        if report.frames >= next_check:
            next_check += check_every
            report.checks += 1
            for b in bootstraps:
                if not await asyncio.to_thread(_served, b):
                    report.unserved.append(f"{b} after {report.frames} frames")
            for p in pids:
                report.rss_mb[str(p)][1] = max(report.rss_mb[str(p)][1], rss_mb(p))
    await asyncio.gather(*running)
    report.seconds = round(time.monotonic() - start, 1)
    for p in pids:
        report.rss_mb[str(p)].append(rss_mb(p))
    return report


def errors_logged(log_text: str) -> list[str]:
    """Each ERROR line of a broker's log with the last line of its traceback (the exception)."""
    out: list[str] = []
    lines = log_text.splitlines()
    for i, line in enumerate(lines):
        if " ERROR " not in line:
            continue
        j = i + 1
        while j < len(lines) and not lines[j][:4].isdigit():  # a traceback's lines have no timestamp
            j += 1
        out.append(line.split(" ERROR ", 1)[1] + (" | " + lines[j - 1] if j > i + 1 else ""))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=1_000_000)
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--concurrency", type=int, default=32)
    a = ap.parse_args()
    from tests.support.cluster import Cluster

    with tempfile.TemporaryDirectory(prefix="brook-fuzz-") as root:
        cluster = Cluster(Path(root), brokers=a.brokers).start()
        try:
            pids = [b.proc.pid for b in cluster.brokers if b.proc is not None]
            report = asyncio.run(
                run([b.bootstrap for b in cluster.brokers], a.frames, pids, a.seed, a.concurrency)
            )
            errors = {b.bootstrap: errors_logged(b.log_text()) for b in cluster.brokers}
            alive = all(b.proc is not None and b.proc.poll() is None for b in cluster.brokers)
        finally:
            cluster.stop()
    print(json.dumps({**report.__dict__, "errors_logged": errors, "alive": alive}, indent=1))
    raise SystemExit(0 if alive and not report.unserved and not any(errors.values()) else 1)


if __name__ == "__main__":
    main()
