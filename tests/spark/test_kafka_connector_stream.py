"""Structured Streaming with Spark's built-in Kafka connector against a real Brook, the Spark driver
SIGKILLed mid-batch and restarted from its checkpoint (tests/spark/stream_job.py in its own process):
- to a parquet sink: every source record exactly once, and maxOffsetsPerTrigger honoured per batch;
- to a Brook topic with Spark's Kafka sink: every source record at least once (Spark documents the
  sink as at-least-once); the duplicates are counted and printed.

Each run starts two JVMs (~1-2 min per test on 2 cores): run by `scripts/spark-kafka`, skipped in the
suite's quick run unless BROOK_SPARK_KAFKA_FULL=1."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.spark.helpers import (
    SparkJob,
    batch_ids,
    consume_all,
    create_topic,
    produce,
    require_kafka_connector,
    require_spark,
)
from tests.support.broker import BrokerProcess

require_spark()
require_kafka_connector()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),  # two Spark JVMs one after the other; minutes on a loaded machine
    pytest.mark.skipif(
        not os.environ.get("BROOK_SPARK_KAFKA_FULL"), reason="the streaming kill -9 runs: scripts/spark-kafka"
    ),
]

N = 40_000
MAX = 4000  # maxOffsetsPerTrigger


def _source(brook: BrokerProcess, topic: str) -> dict[tuple[int, int], bytes | None]:
    create_topic(brook.bootstrap, topic, 3)
    produce(
        brook.bootstrap, topic, [(str(i).encode(), b"%08d" % i + b"." * 92, None, None) for i in range(N)]
    )
    return {(p, o): v for p, o, _, v, _ in consume_all(brook.bootstrap, topic)}


def _killed_mid_batch_then_finished(
    base: list[str], ck: Path, tmp_path: Path, written: Callable[[], int] | None = None
) -> int:
    """Run 1 is SIGKILLed (with its JVM and Python workers) while a batch is planned but not committed,
    and, given `written` (records in the output now), once the batch has written some of its records;
    run 2 (Trigger.AvailableNow) resumes from the checkpoint and finishes. Returns the killed batch."""
    job = SparkJob([*base, "--trigger", "processing:200"], tmp_path / "run1.log").start()
    try:
        deadline = time.monotonic() + 300
        killed_in_batch = None
        while time.monotonic() < deadline and job.proc is not None and job.proc.poll() is None:
            commits, offsets = batch_ids(ck, "commits"), batch_ids(ck, "offsets")
            mid_batch = len(commits) >= 2 and bool(offsets) and offsets[-1] > commits[-1]
            if mid_batch and written is not None:
                mid_batch = written() > sum(_batch_sizes(ck)[: commits[-1] + 1])
            if mid_batch:
                job.kill()
                killed_in_batch = offsets[-1]
                break
            time.sleep(0.02)
        assert killed_in_batch is not None, "run 1 never was mid-batch:\n" + job.tail()
    finally:
        job.kill()
    assert not job.survivors(), f"processes of the killed job still run: {job.survivors()}"
    assert batch_ids(ck, "commits")[-1] < killed_in_batch  # the batch really was cut short
    job = SparkJob([*base, "--trigger", "available-now"], tmp_path / "run2.log").start()
    try:
        assert job.wait(400) == 0, job.tail()
    finally:
        job.kill()
    return killed_in_batch


def _batch_sizes(ck: Path) -> list[int]:
    """Records per micro-batch, from the offset log (its last line: {"topic": {"partition": end}})."""
    ends = [
        json.loads((ck / "offsets" / str(b)).read_text().splitlines()[-1]) for b in batch_ids(ck, "offsets")
    ]
    sizes, prev = [], {}
    for end in ends:
        (parts,) = end.values()
        sizes.append(sum(o - prev.get(p, 0) for p, o in parts.items()))
        prev = parts
    return sizes


def test_parquet_sink_exactly_once_through_a_sigkill(
    spark: Any, brook: BrokerProcess, tmp_path: Path
) -> None:
    src = _source(brook, "ks.src")
    ck, out = tmp_path / "ck", tmp_path / "out"
    base = ["--format", "kafka", "--bootstrap", brook.bootstrap, "--source", "ks.src",
            "--checkpoint", str(ck), "--sink", f"parquet:{out}", "--max-per-trigger", str(MAX)]  # fmt: skip
    killed = _killed_mid_batch_then_finished(base, ck, tmp_path)

    # Spark's reader follows the sink's _spark_metadata log: files of the killed batch are not in it.
    rows = spark.read.parquet(str(out)).select("partition", "offset", "value").collect()
    positions = Counter((r.partition, r.offset) for r in rows)
    dupes = [k for k, c in positions.items() if c > 1]
    assert not dupes, f"{len(dupes)} records written twice, e.g. {dupes[:5]}"
    assert len(rows) == len(positions) == N, f"{N - len(positions)} records missing"
    assert {(r.partition, r.offset): r.value for r in rows} == src
    sizes = _batch_sizes(ck)
    assert max(sizes) <= MAX and sum(sizes) == N, sizes
    assert len(sizes) >= N // MAX, sizes
    print(f"parquet sink: {N} rows, {len(sizes)} batches (killed in batch {killed}), 0 duplicates")


def test_kafka_sink_at_least_once_through_a_sigkill(brook: BrokerProcess, tmp_path: Path) -> None:
    src = _source(brook, "kt.src")
    create_topic(brook.bootstrap, "kt.out", 3)
    ck = tmp_path / "ck"
    base = ["--format", "kafka", "--bootstrap", brook.bootstrap, "--source", "kt.src",
            "--checkpoint", str(ck), "--sink", "kafka:kt.out", "--max-per-trigger", str(MAX)]  # fmt: skip
    consumer = Consumer({"bootstrap.servers": brook.bootstrap, "group.id": "kt-watermarks"})

    def written() -> int:
        return sum(consumer.get_watermark_offsets(TopicPartition("kt.out", p), 5)[1] for p in range(3))

    try:
        killed = _killed_mid_batch_then_finished(base, ck, tmp_path, written)
    finally:
        consumer.close()

    out = consume_all(brook.bootstrap, "kt.out")
    seen: Counter[tuple[int, int]] = Counter()
    for _, _, _, v, headers in out:
        p, o = dict(headers)["src"].decode().split(":")
        assert src[(int(p), int(o))] == v
        seen[(int(p), int(o))] += 1
    missing = src.keys() - seen.keys()
    assert not missing, f"{len(missing)} source records never written, e.g. {sorted(missing)[:5]}"
    dupes = sum(c - 1 for c in seen.values())
    # At-least-once: the killed batch is replayed whole, so what it had written before the kill (the
    # kill waits for some) is written again: up to one batch.
    assert 0 < dupes <= MAX, dupes
    print(f"kafka sink: {len(out)} records out for {N} in, {dupes} duplicates (killed in batch {killed})")
