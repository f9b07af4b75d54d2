"""A PySpark data source for Kafka topics on Brook (or any Kafka-compatible broker): format "brook".

`spark.read.format("brook")` finds this module by its name (`pyspark_<format>` exposing
`DefaultSource`) when it is installed in site-packages; `pyspark_brook.register(spark)` registers it
explicitly (needed with an editable install, whose import hook Spark's discovery does not see).
Batch and Structured Streaming reads; batch and streaming writes, exactly once per (sink id, batch id).
Format "brook-iceberg" (iceberg.py) reads an Iceberg topic's table through pyiceberg.
See services/pyspark_brook/README.md.
"""

from typing import Any

from .source import BrookDataSource

DefaultSource = BrookDataSource


def register(spark: Any) -> None:
    """Register formats "brook" and "brook-iceberg" with a SparkSession explicitly.

    Spark's automatic discovery lists top-level modules with `pkgutil.iter_modules()`, which does not
    see packages mapped by an editable install's import hook (setuptools' finder); registering works
    everywhere."""
    spark.dataSource.register(BrookDataSource)
    from .iceberg import BrookIcebergDataSource  # pyiceberg: only where the session registers it

    spark.dataSource.register(BrookIcebergDataSource)


__all__ = ["BrookDataSource", "DefaultSource", "register"]
