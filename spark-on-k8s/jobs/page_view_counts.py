"""The example pipeline: page-views topic -> counts per page per window -> page-view-counts topic.

A Structured Streaming query, topic to topic, exactly once: each output record is keyed
`<page>|<window start>` and holds the window's count so far (output mode update), so the latest record
per key -- what a compacted page-view-counts topic keeps -- is the window's count.

Python data source sinks take append mode only, so the update-mode output goes through foreachBatch to
the brook batch writer with `sinkId` + `batchId`: the same exactly-once guard as the streaming sink (a
micro-batch replayed after a failure is refused, or completed if it was cut short).

Input records: value = JSON {"page": "/home", "user": "u1", "ts": <epoch ms>} (ts optional: the record's
timestamp is used without it).

    spark-submit page_view_counts.py --bootstrap HOST:PORT [--source page-views]
        [--sink page-view-counts] [--checkpoint DIR] [--window "1 minute"] [--watermark "10 minutes"]
        [--trigger available-now|processing:30s] [--max-offsets-per-trigger N]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from typing import Any

ISO = "yyyy-MM-dd'T'HH:mm:ss'Z'"  # window bounds as UTC ISO-8601 (the session time zone is UTC)


def build_query(
    spark: Any,
    bootstrap: str,
    source: str = "page-views",
    sink: str = "page-view-counts",
    checkpoint: str = "/checkpoints/page-view-counts",
    window: str = "1 minute",
    watermark: str = "10 minutes",
    trigger: str = "processing:30 seconds",
    max_offsets_per_trigger: int | None = None,
    starting_offsets: str = "earliest",
) -> Any:
    """The streaming query, not started: `build_query(...).start()`."""
    from pyspark.sql import functions as F

    reader = (
        spark.readStream.format("brook")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", starting_offsets)
    )
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    views = reader.load()
    parsed = views.select(
        F.from_json(F.col("value").cast("string"), "page string, user string, ts long").alias("v"),
        F.col("timestamp"),
    )
    events = parsed.select(
        F.col("v.page").alias("page"),
        F.coalesce(F.timestamp_millis(F.col("v.ts")), F.col("timestamp")).alias("event_time"),
    ).where(F.col("page").isNotNull())
    counts = (
        events.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", window).alias("w"), F.col("page"))
        .count()
    )
    out = counts.select(
        F.concat_ws("|", F.col("page"), F.date_format(F.col("w.start"), ISO)).alias("key"),
        F.to_json(
            F.struct(
                F.col("page"),
                F.date_format(F.col("w.start"), ISO).alias("window_start"),
                F.date_format(F.col("w.end"), ISO).alias("window_end"),
                F.col("count"),
            )
        ).alias("value"),
    )
    sink_id = "page-view-counts-" + hashlib.sha1(checkpoint.rstrip("/").encode()).hexdigest()[:12]

    def write_batch(batch: Any, batch_id: int) -> None:
        (
            batch.write.format("brook")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink)
            .option("sinkId", sink_id)
            .option("batchId", str(batch_id))
            .mode("append")
            .save()
        )

    writer = (
        out.writeStream.outputMode("update")
        .foreachBatch(write_batch)
        .option("checkpointLocation", checkpoint)
        .queryName("page_view_counts")
    )
    if trigger == "available-now":
        return writer.trigger(availableNow=True)
    return writer.trigger(processingTime=trigger.split(":", 1)[1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", default=os.environ.get("BROOK_BOOTSTRAP", "brook:9092"))
    ap.add_argument("--source", default="page-views")
    ap.add_argument("--sink", default="page-view-counts")
    ap.add_argument("--checkpoint", default=os.environ.get("CHECKPOINT_DIR", "/checkpoints/page-view-counts"))
    ap.add_argument("--window", default="1 minute")
    ap.add_argument("--watermark", default="10 minutes")
    ap.add_argument("--trigger", default="processing:30 seconds")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=None)
    a = ap.parse_args(argv)

    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.appName("page-view-counts")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    import pyspark_brook

    pyspark_brook.register(spark)
    q = build_query(spark, a.bootstrap, a.source, a.sink, a.checkpoint, a.window, a.watermark, a.trigger,
                    a.max_offsets_per_trigger).start()
    q.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
