#!/usr/bin/env python
"""Broker start-up time over a log of many small batches (figures printed, not a test).

    .venv/bin/python bench/startup_bench.py [--mb 350] [--partitions 10] [--records-per-batch 5]
        [--record-size 100] [--repeats 3] [--kafka]

A single broker creates the topic and stops; then this script writes the log itself (PartitionLog.append
of idempotent batches of `--records-per-batch` records, many batches per call, as a producer with small
batches would leave it) and closes it cleanly, without producer-state snapshots. Measured, from starting
`brook broker` to its `bootstrap:` line:
- first start: no snapshot, every batch header of every partition is read (the broker before snapshots);
- after a clean shutdown of that broker (which writes a snapshot at each log end): only the tail is read;
- after kill -9: the newest snapshot of each partition is the one written at that clean shutdown.
Raw results go to bench/results/startup-<time>.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "services"), str(REPO / "bench")]

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from tests.support.broker import BrokerProcess  # noqa: E402
from tests.support.records import batch  # noqa: E402

import raw  # noqa: E402
from broker_bench import NCPU  # noqa: E402
from brook.config import TopicConfig  # noqa: E402
from brook.log import PartitionLog  # noqa: E402

TOPIC = "startup"


def write_logs(data_dir: Path, partitions: int, total_bytes: int, per_batch: int, size: int) -> int:
    """Fill every partition directory; returns the number of batches written."""
    producers = 50
    chunk = b"".join(
        batch(
            [os.urandom(size) for _ in range(per_batch)],
            producer_id=1000 + i,
            producer_epoch=0,
            base_sequence=0,
        )
        for i in range(producers)
    )  # 50 batches of 50 producers (sequences are not checked by the log itself)
    per_partition = total_bytes // partitions
    batches = 0
    for i in range(partitions):
        directory = data_dir / f"{TOPIC}-{i}"
        log = PartitionLog.open(directory, TopicConfig())
        written = 0
        while written < per_partition:
            log.append(memoryview(chunk))
            written += len(chunk)
            batches += producers
        log.close()
    return batches


def timed_start(b: BrokerProcess) -> float:
    t0 = time.monotonic()
    b.start(timeout=600)
    return time.monotonic() - t0


def brook_rounds(root: Path, a: argparse.Namespace) -> list[dict[str, object]]:
    results: list[dict[str, object]] = []
    b = BrokerProcess(root / "broker")
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(TOPIC, a.partitions, 1)])[TOPIC].result(60)
    b.stop()
    t0 = time.monotonic()
    batches = write_logs(b.data_dir, a.partitions, a.mb * 10**6, a.records_per_batch, a.record_size)
    took = time.monotonic() - t0
    print(f"wrote {a.mb} MB in {batches:,} batches over {a.partitions} partitions in {took:.1f} s")
    for _ in range(a.repeats):
        for f in b.data_dir.rglob("*.snapshot"):
            f.unlink()
        first = timed_start(b)
        b.stop(timeout=120)
        snap = timed_start(b)
        b.kill()
        crashed = timed_start(b)
        b.stop(timeout=120)
        results.append({"no_snapshot_s": first, "clean_shutdown_s": snap, "after_kill_s": crashed})
        print(
            f"Brook start-up to bootstrap: no snapshot {first:.2f} s; after a clean shutdown {snap:.2f} s; "
            f"after kill -9 {crashed:.2f} s",
            flush=True,
        )
    return results


def kafka_rounds(root: Path, a: argparse.Namespace) -> list[dict[str, object]]:
    """The same log under Apache Kafka 4.4 (one KRaft node, -Xmx1g): the topic is created by Kafka, the
    segment files written as for Brook (record batches are the same bytes on both) replace its empty
    ones, and a first, unrecorded start rebuilds their indexes. Each round then starts as Brook's do:
    shut down cleanly without producer snapshots, after a clean shutdown, after kill -9."""
    from tests.support.kafka_peer import KafkaPeer

    peer = KafkaPeer(root / "kafka", nodes=1, heap="1g")
    results: list[dict[str, object]] = []
    try:
        peer.start()
        admin = AdminClient({"bootstrap.servers": peer.bootstrap, "log_level": 0})
        admin.create_topics([NewTopic(TOPIC, a.partitions, 1)])[TOPIC].result(60)
        data = peer.nodes[0].log_dir
        dirs = [data / f"{TOPIC}-{i}" for i in range(a.partitions)]
        deadline = time.monotonic() + 60
        while not all((d / "00000000000000000000.log").exists() for d in dirs):
            assert time.monotonic() < deadline, "Kafka made no partition directories"
            time.sleep(0.2)
        peer.stop()
        staging = root / "staging"
        t0 = time.monotonic()
        batches = write_logs(staging, a.partitions, a.mb * 10**6, a.records_per_batch, a.record_size)
        for i, d in enumerate(dirs):
            for f in d.glob("00000000000000000000.*"):
                f.unlink()
            name = "00000000000000000000.log"
            shutil.move(staging / f"{TOPIC}-{i}" / name, d / name)
        shutil.rmtree(staging)
        took = time.monotonic() - t0
        print(f"wrote {a.mb} MB in {batches:,} batches over {a.partitions} partitions in {took:.1f} s")
        print(f"Kafka's first start on them (indexes rebuilt): {peer.relaunch():.2f} s", flush=True)
        peer.stop(120)
        for _ in range(a.repeats):
            for f in data.rglob("*.snapshot"):
                f.unlink()
            first = peer.relaunch()
            peer.stop(120)
            snap = peer.relaunch()
            peer.kill()
            crashed = peer.relaunch()
            peer.stop(120)
            results.append({"no_snapshot_s": first, "clean_shutdown_s": snap, "after_kill_s": crashed})
            print(
                f"Kafka start-up to serving: no snapshot {first:.2f} s; after a clean shutdown {snap:.2f} s; "
                f"after kill -9 {crashed:.2f} s",
                flush=True,
            )
    finally:
        peer.stop()
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=350)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--records-per-batch", type=int, default=5)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kafka", action="store_true", help="the same log and steps under Apache Kafka 4.4")
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="startup-"))
    try:
        results = kafka_rounds(root, a) if a.kafka else brook_rounds(root, a)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    broker = "Kafka 4.4" if a.kafka else "Brook"
    machine = (
        f"{time.strftime('%Y-%m-%d')} {broker}, {NCPU} cores, {a.mb} MB, {a.partitions} partitions, "
        f"{a.records_per_batch} x {a.record_size} B records per batch, load {os.getloadavg()[0]:.2f}"
    )
    print(machine)
    raw.save("startup-kafka" if a.kafka else "startup", machine, results)


if __name__ == "__main__":
    main()
