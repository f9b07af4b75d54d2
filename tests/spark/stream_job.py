"""A streaming query from a Brook topic, run as its own process by the kill-and-restart tests.

stream_job.py --bootstrap B --source T --checkpoint DIR --sink brook:OUT|kafka:OUT|parquet:DIR
              [--format brook|kafka] [--trigger available-now|processing:MS] [--max-per-trigger N]
              [--sink-option k=v ...] [--run-seconds S]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "services")]

from tests.spark.helpers import spark_session  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--sink", required=True)
    ap.add_argument("--format", default="brook", choices=["brook", "kafka"])  # kafka: Spark's connector
    ap.add_argument("--trigger", default="available-now")
    ap.add_argument("--max-per-trigger", type=int, default=0)
    ap.add_argument("--sink-option", action="append", default=[])
    ap.add_argument("--run-seconds", type=float, default=120)
    a = ap.parse_args()

    spark = spark_session(Path(a.checkpoint).parent / "warehouse", app="brook-stream-job")
    reader = (
        spark.readStream.format(a.format)
        .option("kafka.bootstrap.servers", a.bootstrap)
        .option("subscribe", a.source)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
    )
    if a.max_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(a.max_per_trigger))
    df = reader.load()
    kind, _, target = a.sink.partition(":")
    if kind in ("brook", "kafka"):
        # Every source record once, marked with where it came from: the test checks the output against
        # the source record by record.
        out = df.selectExpr(
            "key",
            "value",
            "array(named_struct('key', 'src', 'value', "
            "cast(concat(cast(partition as string), ':', cast(offset as string)) as binary))) as headers",
        )
        writer = (
            out.writeStream.format(kind)
            .option("kafka.bootstrap.servers", a.bootstrap)
            .option("topic", target)
        )
    else:
        out = df.select("partition", "offset", "value")
        writer = out.writeStream.format("parquet").option("path", target)
    for kv in a.sink_option:
        k, _, v = kv.partition("=")
        writer = writer.option(k, v)
    writer = writer.option("checkpointLocation", a.checkpoint)
    if a.trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{int(a.trigger.split(':')[1])} milliseconds")
    q = writer.start()
    print(f"query started pid={os.getpid()}", flush=True)
    if a.trigger == "available-now":
        q.awaitTermination()
    else:
        q.awaitTermination(a.run_seconds)
        q.stop()
    print("query finished", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
