"""Writes: Spark's Kafka sink columns, and exactly once per (sink id, batch id) under replays and crashes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.spark.helpers import ROOT, SparkJob, batch_ids, consume_all, create_topic, produce, require_spark
from tests.support.broker import BrokerProcess

require_spark()
pytestmark = pytest.mark.slow

SINK_HEADERS = ("brook.sink.id", "brook.sink.batch")


def user_headers(h: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    return [(k, v) for k, v in h if k not in SINK_HEADERS]


def test_batch_write_columns_as_spark_kafka_sink(spark: Any, brook: BrokerProcess) -> None:
    from pyspark.sql import Row

    create_topic(brook.bootstrap, "w.cols", 3)
    create_topic(brook.bootstrap, "w.other", 3)
    rows = [
        Row(key=f"k{i % 7}", value=f"v{i}".encode(), topic="w.other" if i % 10 == 0 else None,
            partition=(i % 3) if i % 4 == 0 else None,
            headers=[Row(key="n", value=str(i).encode())] if i % 2 else None)
        for i in range(400)
    ]
    schema = ("key string, value binary, topic string, partition int, "
              "headers array<struct<key: string, value: binary>>")
    df = spark.createDataFrame(rows, schema)
    (df.write.format("brook").option("kafka.bootstrap.servers", brook.bootstrap).option("topic", "w.cols")
     .mode("append").save())
    got = consume_all(brook.bootstrap, "w.cols")
    other = consume_all(brook.bootstrap, "w.other")
    assert len(got) == 360 and len(other) == 40
    want = sorted((f"k{i % 7}".encode(), f"v{i}".encode(), [("n", str(i).encode())] if i % 2 else [])
                  for i in range(400) if i % 10)
    assert sorted((k, v, user_headers(h)) for _, _, k, v, h in got) == want
    for p, _, _, v, _ in got:  # explicit partitions are honoured
        i = int(v[1:])
        if i % 4 == 0:
            assert p == i % 3
    by_key: dict[bytes | None, set[int]] = {}
    for p, _, k, v, _ in got:
        if int(v[1:]) % 4:
            by_key.setdefault(k, set()).add(p)
    assert all(len(ps) == 1 for ps in by_key.values()), "a key's records spread over partitions"


def test_write_requires_value_and_topic(spark: Any, brook: BrokerProcess) -> None:
    df = spark.createDataFrame([("a",)], "key string")
    with pytest.raises(Exception, match="value column"):
        df.write.format("brook").option("kafka.bootstrap.servers", brook.bootstrap).option("topic", "x").mode(
            "append").save()
    df = spark.createDataFrame([(b"a",)], "value binary")
    with pytest.raises(Exception, match="topic"):
        df.write.format("brook").option("kafka.bootstrap.servers", brook.bootstrap).mode("append").save()


def test_replayed_batch_adds_no_duplicates(spark: Any, brook: BrokerProcess) -> None:
    create_topic(brook.bootstrap, "w.replay", 2)
    df = spark.createDataFrame([(str(i), f"value-{i}") for i in range(500)], "key string, value string")

    def write(batch_id: int) -> None:
        (df.write.format("brook").option("kafka.bootstrap.servers", brook.bootstrap)
         .option("topic", "w.replay").option("sinkId", "replay-test").option("batchId", str(batch_id))
         .mode("append").save())

    write(7)
    assert len(consume_all(brook.bootstrap, "w.replay")) == 500
    write(7)  # the same batch again (a replay after a failure): refused
    assert len(consume_all(brook.bootstrap, "w.replay")) == 500
    write(8)
    assert len(consume_all(brook.bootstrap, "w.replay")) == 1000
    with pytest.raises(Exception, match="another query"):
        write(3)  # older than the committed batch: a reused sink id, not a replay
    recs = consume_all(brook.bootstrap, "w.replay")
    assert Counter(dict(h)["brook.sink.batch"] for *_, h in recs) == {b"7": 500, b"8": 500}


CRASHING_COMMIT = textwrap.dedent(
    """
    import sys, pyarrow as pa
    from pyspark_brook.options import parse_write_options
    from pyspark_brook.sink import stage, commit_staged
    bootstrap, topic, crash = sys.argv[1], sys.argv[2], sys.argv[3]
    opts = {"kafka.bootstrap.servers": bootstrap, "topic": topic, "sinkId": "crash-" + topic}
    if crash != "none":
        opts["brook.test.crashAfterRecords"] = crash
    rows = 3000
    keys = pa.array([f"k{i % 13}".encode() for i in range(rows)], pa.binary())
    values = pa.array([b"v%d" % (i % 1000) for i in range(rows)], pa.binary())  # repeats on purpose
    batch = pa.RecordBatch.from_arrays([keys, values], names=["key", "value"])
    messages = [stage([batch.slice(0, 1700)], topic), None, stage([batch.slice(1700)], topic)]
    print(commit_staged(parse_write_options(opts, streaming=True), messages, 0))
    """
)


@pytest.mark.parametrize("crash_after", [1234, 3000])
def test_commit_resumes_after_the_driver_dies_mid_write(brook: BrokerProcess, crash_after: int) -> None:
    """The driver dies after `crash_after` records (3000: all written, no committed marker): the replay
    writes exactly the missing ones, even with identical records in the batch."""
    topic = f"w.crash{crash_after}"
    create_topic(brook.bootstrap, topic, 3)
    env = dict(os.environ, PYTHONPATH=f"{ROOT}:{ROOT / 'services'}")

    def run(crash: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", CRASHING_COMMIT, brook.bootstrap, topic, crash],
                              capture_output=True, text=True, env=env, timeout=120)

    first = run(str(crash_after))
    assert first.returncode == 86, first.stderr[-2000:]
    assert len(consume_all(brook.bootstrap, topic)) == crash_after
    second = run("none")
    assert second.returncode == 0, second.stderr[-2000:]
    assert int(second.stdout.split()[-1]) == 3000 - crash_after
    recs = consume_all(brook.bootstrap, topic)
    want = Counter((f"k{i % 13}".encode(), b"v%d" % (i % 1000)) for i in range(3000))
    assert Counter((k, v) for _, _, k, v, _ in recs) == want
    third = run("none")  # and once committed, the same batch is refused
    assert int(third.stdout.split()[-1]) == 0
    assert len(consume_all(brook.bootstrap, topic)) == 3000


def _marker(bootstrap: str, sink_prefix: str) -> dict[str, Any] | None:
    latest = None
    for _, _, k, v, _ in consume_all(bootstrap, "__brook_sink_commits"):
        if k is not None and k.decode().startswith(sink_prefix) and v is not None:
            latest = json.loads(v)
    return latest


def test_streaming_write_exactly_once_through_a_crash_in_commit_and_a_sigkill(
    brook: BrokerProcess, tmp_path: Path
) -> None:
    """Run 1 dies inside the sink's commit (after some of batch 0's records are out); run 2 is SIGKILLed
    mid-batch; run 3 (Trigger.AvailableNow) finishes. Every source record is in the output exactly once."""
    n = 16_000  # 4 batches: run 2 commits two and is killed in the third, run 3 finishes
    create_topic(brook.bootstrap, "eo.src", 3)
    create_topic(brook.bootstrap, "eo.out", 3)
    records = [(str(i).encode(), b"%08d" % i + b"." * 92, None, None) for i in range(n)]
    produce(brook.bootstrap, "eo.src", records)
    ck = tmp_path / "ck"
    base = ["--bootstrap", brook.bootstrap, "--source", "eo.src", "--checkpoint", str(ck),
            "--sink", "brook:eo.out", "--max-per-trigger", "4000"]

    # Run 1: the commit of batch 0 exits the driver's Python after 1500 records (the test hook).
    job = SparkJob([*base, "--trigger", "processing:200", "--sink-option",
                    "brook.test.crashAfterRecords=1500"], tmp_path / "run1.log").start()
    job.wait(120)
    assert len(consume_all(brook.bootstrap, "eo.out")) == 1500, job.tail()
    marker = _marker(brook.bootstrap, "ckpt-")
    assert marker is not None and marker["batch"] == 0 and marker["state"] == "begin"
    assert batch_ids(ck, "commits") == []

    # Run 2: replays batch 0 (writes the 2500 missing records), goes on, and is killed mid-batch.
    job = SparkJob([*base, "--trigger", "processing:200"], tmp_path / "run2.log").start()
    deadline = time.monotonic() + 150
    killed_in_batch = None
    while time.monotonic() < deadline and job.proc is not None and job.proc.poll() is None:
        commits, offsets = batch_ids(ck, "commits"), batch_ids(ck, "offsets")
        if len(commits) >= 2 and offsets and offsets[-1] > commits[-1]:
            job.kill()
            killed_in_batch = offsets[-1]
            break
        time.sleep(0.02)
    assert killed_in_batch is not None, "run 2 never was mid-batch:\n" + job.tail()
    job.kill()
    # Really interrupted: no process of the job is left to finish the batch's sink commit.
    assert not job.survivors(), f"processes of the killed job still run: {job.survivors()}"
    marker = _marker(brook.bootstrap, "ckpt-")
    assert marker is not None, job.tail()
    done = marker["state"] == "committed" and marker["batch"] >= killed_in_batch
    assert not done, (killed_in_batch, marker)

    # Run 3: finishes from the checkpoint.
    job = SparkJob([*base, "--trigger", "available-now"], tmp_path / "run3.log").start()
    assert job.wait(150) == 0, job.tail()

    out = consume_all(brook.bootstrap, "eo.out")
    src = {(p, o): v for p, o, _, v, _ in consume_all(brook.bootstrap, "eo.src")}
    seen = Counter(dict(user_headers(h))["src"] for *_, h in out)
    dupes = [k for k, c in seen.items() if c > 1]
    assert not dupes, f"{len(dupes)} source records written more than once, e.g. {dupes[:5]}"
    assert len(seen) == n, f"{n - len(seen)} source records missing"
    for _, _, _, v, h in out:
        p, o = dict(user_headers(h))["src"].decode().split(":")
        assert src[(int(p), int(o))] == v
