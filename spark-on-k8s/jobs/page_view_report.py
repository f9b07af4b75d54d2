"""The batch report job: totals per page from the page-view-counts topic, as JSON lines.

Reads the whole topic (a batch query), keeps the latest record per key (a window's final count under
output mode update), sums the windows per page and writes one JSON line per page, busiest first, to
`--output` (a local or shared path) and to stdout. `--format kafka` reads with Spark's built-in Kafka
connector instead of Brook's data source (the connector's jars on spark.jars or spark.jars.packages).

    spark-submit page_view_report.py --bootstrap HOST:PORT [--counts page-view-counts] [--output FILE]
        [--format brook|kafka]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any


def report(
    spark: Any, bootstrap: str, counts_topic: str = "page-view-counts", fmt: str = "brook"
) -> list[dict[str, Any]]:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = (
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", counts_topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    latest = (
        df.select(F.col("key").cast("string").alias("k"), "value", "partition", "offset")
        .withColumn("rank", F.row_number().over(Window.partitionBy("k").orderBy(F.col("offset").desc())))
        .where("rank = 1")
        .select(F.from_json(F.col("value").cast("string"),
                            "page string, window_start string, window_end string, count long").alias("c"))
    )
    totals = (
        latest.groupBy("c.page")
        .agg(F.sum("c.count").alias("views"), F.count("*").alias("windows"),
             F.min("c.window_start").alias("first_window"), F.max("c.window_start").alias("last_window"))
        .orderBy(F.col("views").desc(), F.col("page"))
    )
    return [r.asDict() for r in totals.collect()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", default=os.environ.get("BROOK_BOOTSTRAP", "brook:9092"))
    ap.add_argument("--counts", default="page-view-counts")
    ap.add_argument("--output", default=None)
    ap.add_argument("--format", default="brook", choices=["brook", "kafka"])
    a = ap.parse_args(argv)

    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.appName("page-view-report")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    import pyspark_brook

    pyspark_brook.register(spark)
    rows = report(spark, a.bootstrap, a.counts, a.format)
    lines = [json.dumps(r, sort_keys=True) for r in rows]
    if a.output:
        os.makedirs(os.path.dirname(os.path.abspath(a.output)), exist_ok=True)
        with open(a.output, "w") as f:
            f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
